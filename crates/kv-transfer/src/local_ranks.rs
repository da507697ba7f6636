//! The per-rank model on one machine: every rank is this binary (`ic-bench kv-rank`) started on
//! the prefill or decode side of a local pair (`icb_isolate`: plain processes, pods in their own
//! IPC+PID namespaces, or two emulated nodes with their own network namespaces and a veth), with
//! its GPU in its environment and its CPUs in its plan ([`rank_pinner`]: the NUMA node of its
//! GPU or NIC, [`super::cpus`]), which it pins itself to. The coordinator's socket is made
//! inside the decode side's network namespace, on the address the decode side is reachable at,
//! so every rank reaches it as it would a peer.

use super::control::KvRuns;
use super::ranks::RankSeam;
use super::{KvPlan, KvProgress, KvSeam};
use icb_core::model::{Endpoint, Locality, Placement};
use icb_core::protocol::kv_rank::{CpuPlacement, RankId, RankPlan, RankSide};
use icb_isolate::{DEFAULT_PREFIX, LocalPair, PairSide};
use icb_pair::launcher::LaunchError;
use icb_pair::local::{LocalLauncher, LocalOptions, LocalSide};
use icb_pair::{PairError, PairOutcome};
use icb_probe::numa::CpuTopology;
use icb_rails::cpus::{RankDevice, place_ranks};
use std::net::{SocketAddr, TcpListener};
use tokio_util::sync::CancellationToken;

/// How one rank runs, from its identity: its environment and its CPUs.
pub type RankPinner = Box<dyn Fn(RankId) -> RankPin>;

/// One rank's environment (`CUDA_VISIBLE_DEVICES`) and CPU placement (it pins itself).
#[derive(Debug, Clone, Default)]
pub struct RankPin {
    pub env: Vec<(String, String)>,
    pub cpus: Option<CpuPlacement>,
}

pub struct LocalRanks {
    opts: LocalOptions,
    pair: Option<LocalPair>,
    pin: RankPinner,
    /// Ranks started, for the message when one fails to start.
    started: usize,
}

impl LocalRanks {
    /// Builds the pair the ranks run on.
    pub fn create(opts: LocalOptions, pin: RankPinner) -> Result<LocalRanks, LaunchError> {
        let pair = LocalPair::create(opts.isolation, DEFAULT_PREFIX).map_err(|e| LaunchError::new(e.to_string()))?;
        Ok(LocalRanks {
            opts,
            pair: Some(pair),
            pin,
            started: 0,
        })
    }

    fn pair(&self) -> Result<&LocalPair, LaunchError> {
        self.pair
            .as_ref()
            .ok_or_else(|| LaunchError::new("the local ranks were already cleaned up"))
    }
}

/// The descriptor sweep's local pair: two plain processes (or isolated ones, `--isolation`).
pub struct LocalSweep(pub LocalOptions);

impl KvSeam for LocalSweep {
    type L = LocalLauncher;

    async fn launcher(&mut self) -> Result<LocalLauncher, LaunchError> {
        LocalLauncher::create(self.0.clone())
    }
}

/// Local ranks: each run (the main one, then a control) on a local pair of its own, every rank
/// pinned from this host's topology ([`rank_pinner`]); the descriptor sweep, when asked, on one
/// more pair ([`LocalSweep`]).
pub struct LocalRuns {
    pub opts: LocalOptions,
    /// This host's GPUs the ranks take round robin (0: the transfer uses host memory only).
    pub gpus: u32,
    /// This build, for the per-rank report.
    pub tool: icb_core::ToolInfo,
}

impl KvRuns for LocalRuns {
    async fn run(
        &mut self,
        plan: &KvPlan,
        _run: u32,
        cancel: &CancellationToken,
        progress: &mut KvProgress<'_>,
    ) -> Result<PairOutcome, PairError> {
        let topology = icb_probe::numa::cpu_topology(&icb_probe::LocalSource::default());
        let allowed = icb_rails::cpus::allowed_cpus();
        let mut ranks = LocalRanks::create(self.opts.clone(), rank_pinner(self.gpus, topology, allowed))?;
        let mut sweep = LocalSweep(self.opts.clone());
        super::run_kv_ranks(plan, &mut ranks, &mut sweep, &self.tool, cancel, progress).await
    }
}

/// A GPU per rank, round robin over `gpus` devices (bus order, as the whole-node mode names
/// them), when the transfer uses GPU memory; and the CPUs of the rank's GPU's or NIC's NUMA node
/// in `topology`, within `allowed` ([`icb_rails::cpus::place_ranks`]).
pub fn rank_pinner(gpus: u32, topology: CpuTopology, allowed: Vec<u32>) -> RankPinner {
    Box::new(move |id: RankId| {
        let mut env = Vec::new();
        let gpu = (gpus > 0).then(|| id.rank % gpus);
        if let Some(g) = gpu {
            env.push(("CUDA_DEVICE_ORDER".to_string(), "PCI_BUS_ID".to_string()));
            env.push(("CUDA_VISIBLE_DEVICES".to_string(), g.to_string()));
        }
        let device = RankDevice {
            id,
            gpu: gpu.map(|g| g as usize),
        };
        let cpus = place_ranks(&topology, &allowed, &[device]).pop();
        RankPin { env, cpus }
    })
}

impl RankSeam for LocalRanks {
    type S = LocalSide;

    fn listener(&self) -> Result<TcpListener, LaunchError> {
        let decode = self.pair()?.decode();
        let addr = SocketAddr::new(decode.ip, 0);
        let bind = move || TcpListener::bind(addr);
        let bound = match &decode.netns {
            Some(ns) => icb_isolate::run_in_netns(ns, bind).map_err(|e| LaunchError::new(e.to_string()))?,
            None => bind(),
        };
        bound.map_err(|e| LaunchError::new(format!("the KV coordinator cannot listen on {addr}: {e}")))
    }

    async fn start(&mut self, plan: &RankPlan) -> Result<LocalSide, LaunchError> {
        let pair = self.pair()?;
        let (side, label): (&PairSide, &'static str) = match plan.id.side {
            RankSide::Prefill => (pair.prefill(), "prefill"),
            RankSide::Decode => (pair.decode(), "decode"),
        };
        let pinning = (self.pin)(plan.id);
        let json = serde_json::to_string(plan).map_err(|e| LaunchError::new(format!("internal: rank plan: {e}")))?;
        // The rank pins itself to `plan.cpus` (set from `cpus` below) before it allocates.
        let mut spec = pair
            .pod(side, &self.opts.exe)
            .arg("kv-rank")
            .arg("--plan")
            .arg(json)
            .args(&self.opts.verbosity)
            .args(&self.opts.side_args)
            .envs(pinning.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if let Some(dir) = &self.opts.ucx_lib {
            spec = spec.arg("--ucx-lib").arg(dir);
        }
        let pod = spec
            .spawn()
            .map_err(|e| LaunchError::new(format!("starting {} (after {} ranks): {e}", plan.id, self.started)))?;
        self.started += 1;
        Ok(LocalSide::start(
            label,
            "ic-bench kv-rank",
            pod,
            self.opts.forward_stderr,
        ))
    }

    fn cpus(&self, id: RankId) -> Option<CpuPlacement> {
        (self.pin)(id).cpus
    }

    fn locality(&self) -> Locality {
        Locality::of_same_host(!self.opts.isolation.different_hosts())
    }

    fn placement(&self) -> Placement {
        let endpoint = |side: Option<&PairSide>| Endpoint {
            host: side.map(|s| s.host.clone()).unwrap_or_default(),
            pod: side.and_then(|s| s.pod.clone()),
            namespace: None,
            address: None,
            modelled_on: None,
        };
        Placement {
            locality: self.locality(),
            mode: format!("local (isolation={})", self.opts.isolation),
            prefill: endpoint(self.pair.as_ref().map(|p| p.prefill())),
            decode: endpoint(self.pair.as_ref().map(|p| p.decode())),
        }
    }

    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        let Some(pair) = self.pair.take() else {
            return Ok(String::new());
        };
        let what = format!("{} rank processes (isolation {})", self.started, pair.isolation());
        pair.teardown().map_err(|e| LaunchError::new(e.to_string()))?;
        Ok(what)
    }
}
