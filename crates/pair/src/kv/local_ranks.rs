//! The per-rank model on one machine: every rank is this binary (`ic-bench kv-rank`) started on
//! the prefill or decode side of a local pair (`icb_isolate`: plain processes, pods in their own
//! IPC+PID namespaces, or two emulated nodes with their own network namespaces and a veth), pinned
//! the way the whole-node mode pins its ranks ([`crate::local::SidePinning`]: environment and
//! CPUs). The coordinator's socket is made inside the decode side's network namespace, on the
//! address the decode side is reachable at, so every rank reaches it as it would a peer.

use super::ranks::RankSeam;
use crate::launcher::LaunchError;
use crate::local::{LocalOptions, LocalSide, SidePinning};
use icb_core::model::{Endpoint, Locality, Placement};
use icb_core::protocol::kv_rank::{RankId, RankPlan, RankSide};
use icb_isolate::{DEFAULT_PREFIX, LocalPair, PairSide};
use std::net::{SocketAddr, TcpListener};

/// How one rank is pinned, from its identity.
pub type RankPinner = Box<dyn Fn(RankId) -> SidePinning>;

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

/// A GPU per rank, round robin over `gpus` devices (bus order, as the whole-node mode names
/// them), when the transfer uses GPU memory; nothing otherwise.
pub fn gpu_pinner(gpus: u32) -> RankPinner {
    Box::new(move |id: RankId| {
        let mut env = Vec::new();
        if gpus > 0 {
            env.push(("CUDA_DEVICE_ORDER".to_string(), "PCI_BUS_ID".to_string()));
            env.push(("CUDA_VISIBLE_DEVICES".to_string(), (id.rank % gpus).to_string()));
        }
        SidePinning { env, cpus: None }
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
        let mut spec = match &pinning.cpus {
            Some(cpus) => pair.pod(side, "taskset").arg("-c").arg(cpus).arg(&self.opts.exe),
            None => pair.pod(side, &self.opts.exe),
        }
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

    fn locality(&self) -> Locality {
        if self.opts.isolation.different_hosts() {
            Locality::DifferentHosts
        } else {
            Locality::SameHost
        }
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
