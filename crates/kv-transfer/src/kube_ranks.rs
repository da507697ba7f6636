//! The per-rank model on Kubernetes (`pair --prefill node/A --decode node/B --kv-shape …`): the
//! whole-node mode's two bench pods ([`KubeRails`]: one idle pod per node holding all of its GPUs
//! and RDMA devices, as a TP worker pod does), every rank exec'd into its side's pod the way the
//! rails ranks are ([`RankExec`]: pinned, stopped when its exec's stdin ends, the run's token on
//! stdin), `a` in the prefill pod and `b` in the decode pod, all at once. Each rank runs the
//! engine its plan names (NIXL, or the UCX engine's RMA block lists) with the engine's flags, as
//! local ranks do; its CPUs are chosen as local ranks' are ([`icb_rails::cpus::place_ranks`]), from
//! the node's NUMA topology and the pod's allowed CPUs as the pod sees them (`ic-bench rail-info
//! --cpus` exec'd in it once), and the rank pins itself to them.
//!
//! The coordinator runs in the decode pod (`ic-bench kv-coordinate`, [`Coordinator::There`]):
//! on a real cluster the `pair` process may sit behind a NAT or a bastion no pod can reach, while
//! every rank can reach the decode pod (its own decode ranks over loopback, the prefill ranks as
//! they reach a decode worker). It announces its port, the ranks are told the decode pod's IP and
//! that port, and it prints what it gathered as one line that `pair` reads back. It admits only
//! ranks that prove the run's token (challenge and HMAC, `kv_rank::proof`), which every exec
//! gets on its stdin.
//!
//! Every wait has a deadline (pod start, each exec's opening and start line, the coordinator's
//! port, the run's limit); the pods are deleted by the run's label on every path (the rank and
//! coordinator processes die with their exec, and with the pods).

use super::coordinator::{CoordinatorJob, LISTENING};
use super::ranks::{Coordinator, RankSeam};
use super::{KvPlan, KvProgress, KvSeam};
use icb_core::MemoryType;
use icb_core::model::{Endpoint, Locality, Placement};
use icb_core::protocol::kv_rank::{self, RankPlan};
use icb_core::protocol::kv_rank::{CpuPlacement, RankId};
use icb_kube::devices::DeviceRequest;
use icb_kube::target::Target;
use icb_kube::{Cluster, PodOptions};
use icb_pair::SideRole;
use icb_pair::inplace::InPlaceSide;
use icb_pair::launcher::{LaunchError, LaunchFailure, Side};
use icb_pair::{PairError, PairOutcome};
use icb_rails::cpus::{RankDevice, place_ranks};
use icb_rails::info::HostCpus;
use icb_rails::kube::{EnvVars, KubeRails, KubeRailsPlan, PodDevices, PodPinning, RankExec};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The pods of `kv`'s ranks for the two targets, as the command's pod options say: `pair` and
/// `gate` both build them here. Both targets nodes (two, or one for both sides): the pods'
/// devices are [`pod_devices`], the host namespaces the options', and every rank of a side runs
/// under `side_env` (a gate's recipe env). Worker-shaped targets (`pod/…`, `deployment/…`): a
/// plan the caller models on the workers' bench pods once the cluster is read ([`modelled`]).
/// `times`: (the pods' start deadline, the API's request timeout).
pub fn ranks_plan(
    targets: (&Target, &Target),
    run_id: &str,
    options: &PodOptions,
    kv: &KvPlan,
    times: (Duration, Duration),
    side_env: (EnvVars, EnvVars),
) -> KubeRailsPlan {
    let (Target::Node(prefill), Target::Node(decode)) = targets else {
        let pods = KubeRailsPlan::new(("", ""), run_id.to_string(), options, times, &kv.pair);
        return ranks_pods(pods, kv);
    };
    let mut pods = KubeRailsPlan::new((prefill, decode), run_id.to_string(), options, times, &kv.pair);
    pods.side_env = side_env;
    pods.host_ipc = options.host_ipc;
    pods.host_pid = options.host_pid;
    pods.devices = pod_devices(kv, prefill == decode, &options.devices);
    ranks_pods(pods, kv)
}

/// The two whole-node pods of `kv`'s ranks, from a whole-node plan on the two nodes: named
/// after the run (`<id>-kr`) and sized for the larger rank buffer (per rank: a pod holds one
/// rank per device).
fn ranks_pods(mut pods: KubeRailsPlan, kv: &KvPlan) -> KubeRailsPlan {
    pods.run_id = format!("{}-kr", pods.run_id);
    let g = kv.request.geometry();
    pods.rank_resources =
        icb_kube::hardening::BenchResources::for_buffer(g.prefill_rank_bytes.max(g.decode_rank_bytes));
    pods
}

/// The ranks' pods modelled on worker pods (`pod/…`, `deployment/…`, or a node on one side):
/// exactly the bench pods `icb_kube::pair::prepare` decided for them (the workers' nodes,
/// transport env, devices, capabilities, shared memory), idle, with the ranks exec'd in.
pub fn modelled(mut pods: KubeRailsPlan, prepared: &icb_kube::pair::Prepared) -> KubeRailsPlan {
    pods.prefill_node = prepared.prefill.node.clone();
    pods.decode_node = prepared.decode.node.clone();
    pods.modelled = Some(Box::new((prepared.client.clone(), prepared.server.clone())));
    pods
}

/// What the ranks' two pods request. Two nodes, no device flag: each pod all of its node's GPUs
/// and RDMA devices (a TP worker's dedicated node). Otherwise, and always when both pods share
/// ONE node (they cannot both hold every device), each requests what was asked (`--gpus`,
/// `--rdma`, `--resource`, as per-pair bench pods do) and, without `--gpus`, one GPU per rank of
/// its side when the transfer uses GPU memory (a TP `a` worker pod holds `a` GPUs); a host-memory
/// transfer gets the bench pods' defaults (one GPU and one RDMA device where the node has them).
pub fn pod_devices(kv: &KvPlan, same_node: bool, request: &DeviceRequest) -> PodDevices {
    if !same_node && *request == DeviceRequest::default() {
        return PodDevices::WholeNode;
    }
    let memory = kv.memory();
    let cuda = memory.initiator == MemoryType::Cuda || memory.target == MemoryType::Cuda;
    let g = kv.request.geometry();
    let side = |tp: u32| {
        let mut r = request.clone();
        if r.gpus.is_none() && cuda {
            r.gpus = Some(tp);
        }
        r
    };
    PodDevices::Requested(side(g.prefill_tp), side(g.decode_tp))
}

/// The ranks of one `--kv-shape` run in the two bench pods of its nodes.
pub struct KubeRanks {
    pods: KubeRails,
    /// Pin each rank to one GPU of its pod (the transfer uses GPU memory).
    pin_gpus: bool,
    /// Sent to every exec on stdin; never printed.
    token: String,
    /// Rank processes started, for the cleanup's line.
    started: usize,
    /// Each side's node topology and allowed CPUs as its pod sees them (`Err`: why unread):
    /// (prefill, decode), read once both pods run.
    cpus: (Result<HostCpus, String>, Result<HostCpus, String>),
}

/// Where one rank exec'd into a pod runs: [`icb_rails::cpus::place_ranks`] on the node's topology
/// and the pod's allowed CPUs as the pod reported them (`gpu`: the rank's GPU, where its ordinal
/// is the node's), or unpinned with the reason the pod's view could not be read.
pub fn pod_placement(cpus: &Result<HostCpus, String>, id: RankId, gpu: Option<usize>) -> CpuPlacement {
    let unpinned = |why: &str| CpuPlacement {
        cpus: Vec::new(),
        numa_node: None,
        reason: format!("unpinned: the pod's CPUs are unknown ({why})"),
    };
    match cpus {
        // One placement per rank given: `pop` always has one.
        Ok(c) => place_ranks(&c.topology, &c.allowed, &[RankDevice { id, gpu }])
            .pop()
            .unwrap_or_else(|| unpinned("no placement")),
        Err(why) => unpinned(why),
    }
}

impl KubeRanks {
    /// Nothing is created until [`KubeRanks::start_pods`]. Each rank is pinned to one GPU of
    /// its pod when `kv`'s memory pair uses GPU memory.
    pub fn new(cluster: Cluster, plan: KubeRailsPlan, kv: &KvPlan) -> KubeRanks {
        let memory = kv.memory();
        KubeRanks {
            pods: KubeRails::new(cluster, plan),
            pin_gpus: memory.initiator == MemoryType::Cuda || memory.target == MemoryType::Cuda,
            token: icb_kube::secret::new_token(),
            started: 0,
            cpus: (Err("not read yet".into()), Err("not read yet".into())),
        }
    }

    /// Creates both pods and waits until they run (within the plan's start deadline). On an
    /// error the caller still calls [`KubeRanks::delete_pods`].
    pub async fn start_pods(&mut self) -> Result<(), LaunchError> {
        self.pods.start().await?;
        // Each pod's view of its node, for the ranks' CPUs. Unreadable (an older image) leaves
        // the ranks unpinned, and their report says why: not a reason to stop the transfer.
        self.cpus = (
            self.pods.host_cpus(SideRole::Prefill).await,
            self.pods.host_cpus(SideRole::Decode).await,
        );
        Ok(())
    }

    /// What the pods requested, one line per node.
    pub fn notes(&self) -> &[String] {
        self.pods.notes()
    }

    /// Deletes both pods (nothing when they are gone already).
    pub async fn delete_pods(&mut self) -> Result<String, LaunchError> {
        self.pods.cleanup().await
    }

    fn exec(&self, role: SideRole) -> Result<RankExec<'_>, LaunchError> {
        Ok(RankExec {
            cluster: self.pods.cluster(),
            worker: self.pods.worker(role)?,
            token: &self.token,
            open_timeout: self.pods.plan().exec_timeout,
        })
    }

    /// A rank's pinning in its pod: the side's environment (`side_env`), and one GPU, round robin
    /// over the pod's (bus order, as the whole-node mode names them), when the transfer uses GPU
    /// memory.
    fn pinning(&self, role: SideRole, rank: u32) -> PodPinning {
        let gpus = self.pods.gpus(role);
        // The side's environment first (a gate's recipe transport env), as its workers run.
        let side_env = &self.pods.plan().side_env;
        let mut env = match role {
            SideRole::Prefill => side_env.0.clone(),
            SideRole::Decode => side_env.1.clone(),
        };
        if self.pin_gpus && gpus > 0 {
            env.push(("CUDA_DEVICE_ORDER".to_string(), "PCI_BUS_ID".to_string()));
            env.push(("CUDA_VISIBLE_DEVICES".to_string(), (rank % gpus).to_string()));
        }
        PodPinning { env, numa: None }
    }

    fn endpoint(&self, role: SideRole) -> Endpoint {
        let w = self.pods.worker(role).ok();
        // The worker pod the side's pod was modelled on, where it was.
        let modelled_on = self.pods.plan().modelled.as_deref().and_then(|(p, d)| {
            let bench = if role == SideRole::Prefill { p } else { d };
            bench.model.as_ref().map(|m| m.source.clone())
        });
        Endpoint {
            host: w.map(|w| w.node.clone()).unwrap_or_default(),
            pod: w.map(|w| w.pod.clone()),
            namespace: Some(self.pods.cluster().namespace().to_string()),
            address: w.and_then(|w| w.ip.clone()),
            modelled_on,
        }
    }
}

/// One rank (or the coordinator) exec'd into a pod: its exec, read as the in-place sides are,
/// and told apart by its exit code when it was killed from outside (SIGKILL, SIGTERM, the OOM
/// killer: `128 + n`), the root cause a run names first.
pub struct RankSide(InPlaceSide);

impl Side for RankSide {
    fn name(&self) -> String {
        self.0.name()
    }

    async fn next_line(&mut self) -> Option<String> {
        self.0.next_line().await
    }

    async fn exit_note(&mut self) -> Option<String> {
        self.0.exit_note().await
    }

    fn last_words(&self) -> String {
        self.0.last_words()
    }

    fn failure(&self) -> Option<LaunchFailure> {
        match self.0.exit_code_seen()? {
            0 => None,
            code if code > 128 => Some(LaunchFailure::SideKilled),
            code => Some(LaunchFailure::SideExited { code: Some(code) }),
        }
    }

    async fn stop(&mut self, grace: Duration) {
        self.0.stop(grace).await
    }
}

impl RankSeam for KubeRanks {
    type S = RankSide;

    fn listener(&self) -> Result<std::net::TcpListener, LaunchError> {
        Err(LaunchError::new(
            "internal: on Kubernetes the KV coordinator runs in the decode pod, not in this process",
        ))
    }

    async fn coordinator(&mut self, job: &CoordinatorJob) -> Result<Coordinator<RankSide>, LaunchError> {
        let exec = self.exec(SideRole::Decode)?;
        let ip = exec.worker.pod_ip()?;
        let ip: IpAddr = ip
            .parse()
            .map_err(|_| LaunchError::new(format!("pod/{}: its pod IP {ip:?} is not an address", exec.worker.pod)))?;
        // Reachable from the whole pod network: it admits only ranks holding the run's token.
        let job = CoordinatorJob {
            authenticate: true,
            ..job.clone()
        };
        let json = serde_json::to_string(&job).map_err(|e| LaunchError::new(format!("internal: KV job: {e}")))?;
        let args = ["kv-coordinate".to_string(), "--job".into(), json];
        let mut side = exec
            .start(
                "decode",
                "the KV coordinator",
                &PodPinning {
                    env: Vec::new(),
                    numa: None,
                },
                &args,
            )
            .await?;
        let open = exec.open_timeout;
        let port = match tokio::time::timeout(open, side.read_marked(LISTENING)).await {
            Ok(Some(port)) => port.trim().parse::<u16>().ok(),
            _ => None,
        };
        match port {
            Some(port) => Ok(Coordinator::There {
                side: RankSide(side),
                addr: SocketAddr::new(ip, port),
            }),
            None => {
                let why = side.last_words();
                side.stop(Duration::ZERO).await;
                Err(LaunchError::new(format!(
                    "the KV coordinator in pod/{} announced no port within {} s: {why}",
                    exec.worker.pod,
                    open.as_secs()
                )))
            }
        }
    }

    async fn start(&mut self, plan: &RankPlan) -> Result<RankSide, LaunchError> {
        let (role, label) = match plan.id.side {
            kv_rank::RankSide::Prefill => (SideRole::Prefill, "prefill"),
            kv_rank::RankSide::Decode => (SideRole::Decode, "decode"),
        };
        let plan = RankPlan {
            authenticate: true,
            ..plan.clone()
        };
        let json = serde_json::to_string(&plan).map_err(|e| LaunchError::new(format!("internal: rank plan: {e}")))?;
        let mut args = vec!["kv-rank".to_string(), "--plan".into(), json];
        args.extend(self.pods.plan().side_args.iter().cloned());
        let pinning = self.pinning(role, plan.id.rank);
        let side = self
            .exec(role)?
            .start(
                label,
                &format!("{} (after {} ranks)", plan.id, self.started),
                &pinning,
                &args,
            )
            .await?;
        self.started += 1;
        Ok(RankSide(side))
    }

    fn cpus(&self, id: RankId) -> Option<CpuPlacement> {
        let role = match id.side {
            kv_rank::RankSide::Prefill => SideRole::Prefill,
            kv_rank::RankSide::Decode => SideRole::Decode,
        };
        // The GPU's NUMA node decides only where the pod holds every GPU of its node: then the
        // pod's ordinal is the node's (sysfs lists them all); a pod holding some of them does not
        // know which.
        let plan = self.pods.plan();
        let whole = plan.devices == PodDevices::WholeNode && plan.modelled.is_none();
        let gpus = self.pods.gpus(role);
        let gpu = (self.pin_gpus && whole && gpus > 0).then(|| (id.rank % gpus) as usize);
        let cpus = match role {
            SideRole::Prefill => &self.cpus.0,
            SideRole::Decode => &self.cpus.1,
        };
        Some(pod_placement(cpus, id, gpu))
    }

    fn locality(&self) -> Locality {
        let plan = self.pods.plan();
        Locality::of_same_host(plan.prefill_node == plan.decode_node)
    }

    fn placement(&self) -> Placement {
        Placement {
            locality: self.locality(),
            mode: "kubernetes (ranks)".into(),
            prefill: self.endpoint(SideRole::Prefill),
            decode: self.endpoint(SideRole::Decode),
        }
    }

    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        let pods = self.pods.pod_names();
        let deleted = self.pods.cleanup().await?;
        Ok(match pods {
            Some((p, d)) => format!("{} rank processes and pods {p}, {d} ({deleted})", self.started),
            None => deleted,
        })
    }
}

/// The per-rank model in `ranks`' two pods, then the sweep (when asked) through `seam`: the pods
/// start (a cancel stops the wait), the ranks run, and the pods are deleted on every path
/// (`run_kv_ranks` deletes them already; again here after a start that failed or was
/// interrupted).
pub async fn run<S: KvSeam>(
    plan: &KvPlan,
    mut ranks: KubeRanks,
    seam: &mut S,
    tool: &icb_core::ToolInfo,
    cancel: &CancellationToken,
    progress: &mut KvProgress<'_>,
) -> Result<PairOutcome, PairError> {
    let started = tokio::select! {
        r = ranks.start_pods() => r.map_err(PairError::from),
        _ = cancel.cancelled() => Err(PairError::Interrupted(Default::default())),
    };
    let result = match started {
        Ok(()) => super::run_kv_ranks(plan, &mut ranks, seam, tool, cancel, progress).await,
        Err(e) => Err(e),
    };
    for note in ranks.notes() {
        tracing::info!("{note}");
    }
    match (result, ranks.delete_pods().await) {
        (Err(PairError::Interrupted(mut i)), Ok(what)) => {
            let parts = [i.cleanup.as_str(), what.as_str()];
            i.cleanup = parts
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            Err(PairError::Interrupted(i))
        }
        (r, Ok(_)) => r,
        (r, Err(c)) => Err(PairError::Cleanup {
            outcome: r.err().map_or_else(|| "the run finished".into(), |e| e.to_string()),
            cleanup: c.message,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::protocol::kv_rank::RankSide;
    use icb_probe::numa::{CpuTopology, NumaNode};

    /// Llama-3.1-8B at 32 tokens, TP2 → TP1, planned as `options` say.
    fn kv_plan(options: &super::super::KvOptions) -> KvPlan {
        let shape = icb_kv::KvShape {
            isl: 32,
            page_size: 16,
            kv_dtype: icb_kv::KvDtype::Bf16,
            prefill_tp: 2,
            decode_tp: 1,
            max_rank_bytes: None,
        };
        let request = icb_kv::KvRequest::new(icb_kv::builtin("llama-3.1-8b").unwrap(), shape).unwrap();
        let pair = icb_pair::PairPlan::new(icb_core::RunSettings::full_curve(), Default::default());
        KvPlan::with_options(pair, request, options)
    }

    /// `pair` and `gate` build the ranks' pods here. Two nodes: whole-node pods with the
    /// options' image, privileges and engine flags, each side's env and the host namespaces;
    /// one node: per-side devices; worker targets: a plan to model on the workers, without the
    /// env or the namespaces (the modelled pods bring theirs). Rails' node pods (the same
    /// constructor) take no host namespace.
    #[test]
    fn the_ranks_pods_follow_the_pod_options_and_the_targets() {
        let options = PodOptions {
            image_pull_policy: Some("Never".into()),
            privileged: true,
            host_ipc: true,
            memlock_unlimited: true,
            service_account: Some("sa".into()),
            ..PodOptions::new("img:1".into(), vec!["--engine".into(), "nixl".into()])
        };
        let kv_options = super::super::KvOptions {
            op: super::super::KvOp::Read,
            engine: super::super::KvEngine::Chosen(icb_core::EngineKind::Nixl),
            max_kv_ms: Some(5.0),
            sweep_max: Some(100),
            sweep_rank_bytes: super::super::MAX_RANK_BYTES,
            extra: super::super::KvExtraRuns::ALL,
        };
        let kv = kv_plan(&kv_options);
        assert_eq!((kv.max_kv_ms, kv.engine), (Some(5.0), icb_core::EngineKind::Nixl));
        let sweep = super::super::sweep_counts(100, kv.sweep_block, super::super::MAX_RANK_BYTES);
        assert!(!sweep.is_empty());
        assert_eq!(kv.sweep, sweep);
        let times = (Duration::from_secs(90), Duration::from_secs(30));
        let env = vec![("UCX_TLS".to_string(), "rc".to_string())];
        let (a, b) = (Target::Node("a".into()), Target::Node("b".into()));
        let two = ranks_plan((&a, &b), "r1", &options, &kv, times, (env.clone(), env.clone()));
        assert_eq!(
            (two.prefill_node.as_str(), two.decode_node.as_str(), two.run_id.as_str()),
            ("a", "b", "r1-kr")
        );
        assert_eq!(
            (
                two.image.as_str(),
                two.image_pull_policy.as_deref(),
                two.service_account.as_deref()
            ),
            ("img:1", Some("Never"), Some("sa"))
        );
        assert!(two.privileged && two.memlock_unlimited && two.host_ipc && !two.host_pid);
        assert_eq!(two.side_args, ["--engine", "nixl"]);
        assert_eq!((two.side_env.0.clone(), two.start_timeout), (env.clone(), times.0));
        assert_eq!(two.devices, PodDevices::WholeNode);
        let one = ranks_plan((&a, &a), "r1", &options, &kv, times, (env.clone(), env.clone()));
        assert!(matches!(one.devices, PodDevices::Requested(..)));
        let (p, d): (Target, Target) = ("pod/p".parse().unwrap(), "pod/d".parse().unwrap());
        let workers = ranks_plan((&p, &d), "r1", &options, &kv, times, (env.clone(), env));
        assert!(workers.side_env.0.is_empty() && !workers.host_ipc);
        assert_eq!((workers.run_id.as_str(), workers.side_args.len()), ("r1-kr", 2));
        let rails = KubeRailsPlan::new(("a", "b"), "r2".into(), &options, times, &kv.pair);
        assert!(rails.privileged && !rails.host_ipc && rails.devices == PodDevices::WholeNode);
    }

    /// A two-socket node whose pod may use CPUs 2-5 (a cpuset across both sockets), GPU0 on
    /// node 0 and GPU1 on node 1: a rank sits on its GPU's node within the pod's CPUs; with no
    /// GPU known, ranks spread over the nodes; a pod that could not be read leaves it unpinned
    /// and says why.
    #[test]
    fn a_pods_rank_runs_on_its_gpus_node_within_the_pods_cpus() {
        let view = Ok(HostCpus {
            topology: CpuTopology {
                nodes: vec![
                    NumaNode {
                        id: 0,
                        cpus: (0..4).collect(),
                    },
                    NumaNode {
                        id: 1,
                        cpus: (4..8).collect(),
                    },
                ],
                gpus: vec![Some(0), Some(1)],
                nics: Vec::new(),
            },
            allowed: (2..6).collect(),
        });
        let id = |rank| RankId {
            side: RankSide::Decode,
            rank,
        };
        let p = pod_placement(&view, id(1), Some(1));
        assert_eq!(
            (p.cpus, p.numa_node, p.reason.as_str()),
            (vec![4, 5], Some(1), "NUMA node 1 of GPU1")
        );
        let p = pod_placement(&view, id(0), Some(0));
        assert_eq!((p.cpus, p.numa_node), (vec![2, 3], Some(0)));
        let p = pod_placement(&view, id(1), None);
        assert_eq!(p.numa_node, Some(1));
        assert!(p.reason.contains("spread over 2 nodes"), "{}", p.reason);
        let p = pod_placement(&Err("exec failed".into()), id(0), Some(0));
        assert!(p.cpus.is_empty() && p.numa_node.is_none());
        assert_eq!(p.reason, "unpinned: the pod's CPUs are unknown (exec failed)");
    }
}
