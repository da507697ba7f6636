//! The rails seam on Kubernetes (`pair --prefill node/A --decode node/B --rails …`): one idle
//! bench pod per node that holds ALL of the node's GPUs and RDMA devices (so no other pod's
//! traffic shares the rails while they are measured, and every device is visible to the ranks),
//! and every rank runs inside it through the exec API, as TP ranks run in one worker pod.
//!
//! - The node's rails come from `ic-bench rail-info` exec'd in its pod: the probe's rail-map code
//!   over the pod's `/sys`, exactly as `probe node` sees it (on the emulated cluster over the
//!   node's recorded tree, which its runtime names in `IC_BENCH_RAIL_TREE`).
//! - Each row's two sides are `ic-bench serve` / `ic-bench connect --plan` exec'd in those pods
//!   with the row's pinning (`UCX_NET_DEVICES`, `CUDA_VISIBLE_DEVICES`, `taskset -c` to the NUMA
//!   node's CPUs as the pod's own sysfs lists them, where taskset exists and the pod may use
//!   them). A side's whole life is one exec whose wrapper stops the rank when its stdin ends (the
//!   run stopped, was interrupted or died), as the in-place launcher's does ([`RankExec`], in
//!   `kube_rank`); its output is read as an `InPlaceSide`. The bench image has ic-bench: nothing
//!   is copied.
//! - The counters are `ic-bench rail-info --counters` exec'd in each pod: the node's own sysfs.
//!
//! Every wait has a deadline (pod start, each exec); both pods are deleted by the run's label on
//! every path by [`KubeRails::cleanup`] (and a pod outlives a lost ic-bench by at most its
//! `activeDeadlineSeconds`, its idle command ends then too).

use super::info::{HostCpus, InfoKind, RailInfoLine};
pub use super::kube_devices::whole_node_devices;
use super::kube_devices::{devices_of, gpu_count, pod_devices};
use super::kube_dra::DraRoots;
use super::kube_rank::rank_pinning;
pub use super::kube_rank::{KubeRailLauncher, PodPinning, RankExec, rank_command};
use super::plan::NodeRailInfo;
use super::{RailRow, RailSeam};
use icb_core::fabric::quantity::parse_milli;
use icb_core::rails::CounterSnapshot;
use icb_core::rails::nic_health::HealthSnapshot;
use icb_kube::devices::{DeviceChoice, DeviceRequest};
use icb_kube::k8s_openapi::api::core::v1::{Pod, Toleration};
use icb_kube::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use icb_kube::podspec::{self, BenchPod, Role};
use icb_kube::{Cluster, KubeError, lifecycle};
use icb_pair::SideRole;
use icb_pair::inplace::Worker;
use icb_pair::launcher::{LaunchError, LaunchFailure};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Environment variables in the order they are exported.
pub type EnvVars = Vec<(String, String)>;

/// What a Kubernetes rails run is asked to do (decided by the CLI).
#[derive(Debug, Clone)]
pub struct KubeRailsPlan {
    /// The nodes (`--prefill node/A`, `--decode node/B`).
    pub prefill_node: String,
    pub decode_node: String,
    /// Names the pods (`ic-bench-<id>-client`/`-server`) and labels them for cleanup.
    pub run_id: String,
    pub image: String,
    pub image_pull_policy: Option<String>,
    pub privileged: bool,
    pub service_account: Option<String>,
    /// Scheduling, image pull and start of both pods.
    pub start_timeout: Duration,
    /// Each short exec (`rail-info`), and opening a side's exec.
    pub exec_timeout: Duration,
    /// Deleting the pods at the end.
    pub cleanup_timeout: Duration,
    /// The longest a pod may live (its `activeDeadlineSeconds` and idle command): a backstop.
    pub lifetime: Duration,
    /// How long a row's decode side waits for its client (`serve --idle-timeout`).
    pub side_timeout: Duration,
    /// The engine selection both sides get (`--engine nixl`, `--ucx-profile`, …).
    pub side_args: Vec<String>,
    /// Labels on top of the standard ones (a sweep's id).
    pub extra_labels: BTreeMap<String, String>,
    /// Pods modelled on worker pods (`pod/…`, `deployment/…`), as `icb_kube::pair::prepare`
    /// decided them: (prefill, decode). `None`: pods for the nodes, as `devices` says.
    pub modelled: Option<Box<(BenchPod, BenchPod)>>,
    /// Environment every rank of a side runs with under its row's pinning (a gate's recipe
    /// transport env): (prefill, decode).
    pub side_env: (EnvVars, EnvVars),
    /// cpu/memory of one rank (a pod holds one rank per device: see [`KubeRails::start`]).
    pub rank_resources: icb_kube::hardening::BenchResources,
    /// `--memlock-unlimited`: RDMA pods stay non-root without IPC_LOCK.
    pub memlock_unlimited: bool,
    /// What each pod requests: all of its node's devices (rails), or what was asked per side.
    pub devices: PodDevices,
    /// `--host-ipc` / `--host-pid` on both pods (the KV ranks' flags; rails refuses them).
    pub host_ipc: bool,
    pub host_pid: bool,
}

/// The devices the two pods request.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum PodDevices {
    /// Every GPU and RDMA device its node advertises ([`whole_node_devices`]): one pod per node.
    #[default]
    WholeNode,
    /// Per side (prefill, decode): what [`icb_kube::devices::decide`] gives for the request on
    /// the node (`--gpus`, `--rdma`, `--resource`; two pods sharing one node).
    Requested(DeviceRequest, DeviceRequest),
}

/// Most row runs of one rails run (16 rails, the cross pattern's 16 rounds, each row maybe alone
/// again): the pods' lifetime backstop is this many row deadlines.
const MAX_ROW_RUNS: u32 = 16 * 16 * 2;

impl KubeRailsPlan {
    /// A plan with the command's pod options (image, privileges, the sides' engine flags; the
    /// host namespaces and devices are the KV ranks' to decide per node pair, see
    /// `icb_kv_transfer::kube_ranks::ranks_plan`, and whole nodes for rails) and the deadlines that
    /// follow from the pair plan each row runs (`pair`): the pods start within `start_timeout`,
    /// each exec opens within a minute (or the request timeout), each row's decode side waits
    /// for its client as long as the row may take.
    pub fn new(
        nodes: (&str, &str),
        run_id: String,
        options: &icb_kube::PodOptions,
        (start_timeout, request_timeout): (Duration, Duration),
        pair: &icb_pair::PairPlan,
    ) -> KubeRailsPlan {
        let row = icb_pair::PairPlan::deadline_for(&pair.settings);
        let lifetime = start_timeout + row.saturating_mul(MAX_ROW_RUNS).min(Duration::from_secs(24 * 3600));
        KubeRailsPlan {
            prefill_node: nodes.0.to_string(),
            decode_node: nodes.1.to_string(),
            run_id,
            image: options.image.clone(),
            image_pull_policy: options.image_pull_policy.clone(),
            privileged: options.privileged,
            service_account: options.service_account.clone(),
            start_timeout,
            exec_timeout: Duration::from_secs(60).max(request_timeout),
            cleanup_timeout: icb_kube::pair::cleanup_timeout(request_timeout),
            lifetime,
            side_timeout: pair.startup_timeout + row,
            side_args: options.side_flags.clone(),
            extra_labels: BTreeMap::new(),
            side_env: (Vec::new(), Vec::new()),
            rank_resources: icb_kube::hardening::BenchResources::for_settings(&pair.settings),
            memlock_unlimited: options.memlock_unlimited,
            devices: PodDevices::WholeNode,
            modelled: None,
            host_ipc: false,
            host_pid: false,
        }
    }
}

/// The two bench pods of a rails run, shared by every row.
pub struct KubeRails {
    cluster: Cluster,
    plan: KubeRailsPlan,
    /// Set once a create may have reached the API server: only then is there anything to delete.
    maybe_created: AtomicBool,
    /// (prefill, decode), once both run.
    pods: Option<(Worker, Worker)>,
    /// The devices each pod requested, for the user.
    notes: Vec<String>,
    /// How many GPUs each pod holds: (prefill, decode).
    gpus: (u32, u32),
    /// The ResourceClaimTemplates of pods on DRA nodes (`super::kube_dra`), and what their
    /// slices publish, checked against each node's PCI tree.
    templates: Vec<icb_kube::k8s_openapi::api::resource::v1::ResourceClaimTemplate>,
    dra: DraRoots,
    /// Each side's health counters, printed with its last byte counters: (prefill, decode).
    health: (Option<HealthSnapshot>, Option<HealthSnapshot>),
}

impl KubeRails {
    /// Nothing is created until [`KubeRails::start`].
    pub fn new(cluster: Cluster, plan: KubeRailsPlan) -> KubeRails {
        KubeRails {
            cluster,
            plan,
            maybe_created: AtomicBool::new(false),
            pods: None,
            notes: Vec::new(),
            gpus: (0, 0),
            templates: Vec::new(),
            dra: DraRoots::default(),
            health: (None, None),
        }
    }

    /// The cluster the pods run in.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    pub fn plan(&self) -> &KubeRailsPlan {
        &self.plan
    }

    /// How many GPUs one side's pod holds (its node's, all of them).
    pub fn gpus(&self, role: SideRole) -> u32 {
        match role {
            SideRole::Prefill => self.gpus.0,
            SideRole::Decode => self.gpus.1,
        }
    }

    /// What the pods requested, one line per node.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    fn pod(
        &self,
        node: &str,
        role: Role,
        devices: BTreeMap<String, Quantity>,
        claim: Option<icb_kube::k8s_openapi::api::resource::v1::ResourceClaimSpec>,
        tolerations: Vec<Toleration>,
    ) -> Pod {
        self.idle(BenchPod {
            run_id: self.plan.run_id.clone(),
            role,
            namespace: self.cluster.namespace().to_string(),
            node: node.to_string(),
            image: self.plan.image.clone(),
            image_pull_policy: self.plan.image_pull_policy.clone(),
            args: Vec::new(),
            env: Vec::new(),
            model: None,
            devices: DeviceChoice {
                requests: devices,
                claim,
                ..Default::default()
            },
            active_deadline_s: 0,
            privileged: self.plan.privileged,
            host_ipc: self.plan.host_ipc,
            host_pid: self.plan.host_pid,
            service_account: self.plan.service_account.clone(),
            extra_labels: self.plan.extra_labels.clone(),
            tolerations,
            resources: Default::default(),
            memlock_unlimited: self.plan.memlock_unlimited,
        })
    }

    /// The pod of `bench` as an idle holder of its devices for the plan's lifetime, with cpu and
    /// memory for one rank per device; the ranks are exec'd into it.
    fn idle(&self, mut bench: BenchPod) -> Pod {
        // One rank per device at most: cpu and memory for that many.
        let ranks = pod_devices(&bench)
            .values()
            .filter_map(|q| parse_milli(&q.0))
            .map(|m| (m / 1000).max(1))
            .max()
            .unwrap_or(1) as u64;
        // Claimed devices are not in the requests: one rank per claimed GPU.
        let claimed = match bench.role {
            Role::Client => self.gpus.0,
            Role::Server => self.gpus.1,
        };
        let ranks = if bench.devices.claim.is_some() {
            ranks.max(u64::from(claimed))
        } else {
            ranks
        };
        let per_rank = &self.plan.rank_resources;
        let times = |q: &Quantity| parse_milli(&q.0).unwrap_or(0).saturating_mul(i128::from(ranks));
        bench.resources = icb_kube::hardening::BenchResources {
            cpu: Quantity(format!("{}m", times(&per_rank.cpu))),
            memory: Quantity(format!("{}Mi", (times(&per_rank.memory) / 1000) >> 20)),
        };
        let secs = self.plan.lifetime.as_secs().max(1);
        bench.active_deadline_s = secs as i64;
        bench.run_id = self.plan.run_id.clone();
        bench.args.clear();
        // Exec'd ranks get the run's token on stdin: no token Secret exists to read it from.
        bench.env.retain(|e| e.name != icb_core::protocol::TOKEN_ENV);
        let mut pod = bench.build();
        if let Some(c) = pod.spec.as_mut().and_then(|s| s.containers.first_mut()) {
            c.command = Some(vec!["sleep".into(), secs.to_string()]);
            c.args = None;
        }
        pod
    }

    /// One side's pod modelled on a worker pod (as `icb_kube::pair::prepare` decided it).
    fn modelled_pod(&mut self, bench: BenchPod) -> (String, Pod) {
        let devices = pod_devices(&bench);
        let gpus = gpu_count(&devices);
        let side = if bench.role == Role::Client {
            "prefill"
        } else {
            "decode"
        };
        match bench.role {
            Role::Client => self.gpus.0 = gpus,
            Role::Server => self.gpus.1 = gpus,
        }
        let source = bench.model.as_ref().map_or("its node", |m| m.source.as_str());
        let list: Vec<String> = devices.iter().map(|(n, q)| format!("{} {n}", q.0)).collect();
        self.notes.push(format!(
            "the {side} pod on node {} is modelled on {source} and requests {}",
            bench.node,
            if list.is_empty() {
                "no device".to_string()
            } else {
                list.join(", ")
            }
        ));
        (bench.node.clone(), self.idle(bench))
    }

    /// One side's pod for a node target: read the node, request what the plan's devices say.
    async fn node_pod(&mut self, node: String, role: Role) -> Result<(String, Pod), LaunchError> {
        let read = icb_kube::nodes::get_node(&self.cluster, &node)
            .await
            .map_err(|e| match e {
                e if e.is_not_found() => LaunchError::new(format!("there is no node {node}: fix node/{node}")),
                e => launch_error(e),
            })?;
        let tolerations = icb_kube::hardening::tolerations_for(&read);
        let status = read.status.unwrap_or_default();
        let advertised = status.allocatable.or(status.capacity).unwrap_or_default();
        let request = self.plan.devices.for_role(role);
        let mut devices = devices_of(request, &advertised);
        let mut gpus = gpu_count(&devices);
        // A node that offers its GPUs only through DRA: the same devices, claimed there.
        let claimed = match request {
            None if gpus == 0 => self.dra.claim(&self.cluster, &node, &mut self.notes).await?,
            None => None,
            Some(request) => {
                let asked = (request, &advertised, &mut devices);
                self.dra
                    .claim_requested(&self.cluster, &node, asked, &mut self.notes)
                    .await?
            }
        };
        let mut claim = None;
        if let Some((spec, held)) = claimed {
            gpus = held;
            claim = Some(spec);
        }
        match role {
            Role::Client => self.gpus.0 = gpus,
            Role::Server => self.gpus.1 = gpus,
        }
        let list: Vec<String> = devices.iter().map(|(n, q)| format!("{} {n}", q.0)).collect();
        let side = if role == Role::Client { "prefill" } else { "decode" };
        if let Some(spec) = claim {
            let pod = self.pod(&node, role, devices, Some(spec.clone()), tolerations);
            self.templates.push(icb_kube::dra::template(
                self.cluster.namespace(),
                pod.metadata.name.as_deref().unwrap_or_default(),
                pod.metadata.labels.clone().unwrap_or_default(),
                &spec,
            ));
            return Ok((node, pod));
        }
        self.notes.push(match (&self.plan.devices, devices.is_empty()) {
            (PodDevices::WholeNode, true) => {
                format!("node {node} advertises no GPU or RDMA device: its pod requests none")
            }
            (PodDevices::WholeNode, false) => format!(
                "the pod on node {node} requests all of its devices: {}",
                list.join(", ")
            ),
            (PodDevices::Requested(..), true) => format!("the {side} pod on node {node} requests no device"),
            (PodDevices::Requested(..), false) => {
                format!("the {side} pod on node {node} requests {}", list.join(", "))
            }
        });
        let pod = self.pod(&node, role, devices, None, tolerations);
        Ok((node, pod))
    }

    /// Creates both pods (on the nodes holding what the plan's devices say, or modelled on
    /// worker pods) and waits until both run (within the start deadline). On an error the caller
    /// still calls [`KubeRails::cleanup`].
    pub async fn start(&mut self) -> Result<(), LaunchError> {
        let until = Instant::now() + self.plan.start_timeout;
        let mut pods = Vec::new();
        for (node, role) in [
            (self.plan.prefill_node.clone(), Role::Client),
            (self.plan.decode_node.clone(), Role::Server),
        ] {
            let modelled = self.plan.modelled.as_deref().map(|(p, d)| match role {
                Role::Client => p.clone(),
                Role::Server => d.clone(),
            });
            pods.push(match modelled {
                Some(bench) => self.modelled_pod(bench),
                None => self.node_pod(node, role).await?,
            });
        }
        if !self.templates.is_empty() {
            // Cleanup has something to delete from here on, even if no pod is created.
            self.maybe_created.store(true, Ordering::SeqCst);
            super::kube_dra::create_templates(&self.cluster, &self.templates).await?;
        }
        for (_, pod) in &pods {
            lifecycle::create_pod_tracked(&self.cluster, pod, &self.maybe_created)
                .await
                .map_err(launch_error)?;
        }
        let mut workers = Vec::new();
        for (node, pod) in &pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let (_, ip) = match lifecycle::wait_running(&self.cluster, &name, until).await {
                Ok(running) => running,
                Err(e) => return Err(self.not_running(&name, node, e).await),
            };
            workers.push(Worker {
                pod: name,
                node: node.clone(),
                ip: Some(ip).filter(|ip| !ip.is_empty()),
                container: Some(podspec::CONTAINER.into()),
                note: None,
            });
        }
        let decode = workers.pop();
        let prefill = workers.pop();
        self.pods = prefill.zip(decode);
        Ok(())
    }

    /// Why a pod did not run: by its status when it is one the scheduler cannot place (then a
    /// sweep records it as such, not as a fabric failure), else the wait's error.
    async fn not_running(&self, name: &str, node: &str, e: KubeError) -> LaunchError {
        let pods = self.cluster.pods();
        let seen = self.cluster.call(&format!("get pod {name}"), || pods.get(name)).await;
        match seen {
            Ok(pod) if lifecycle::unschedulable(&pod) => LaunchError::of(
                LaunchFailure::Unschedulable {
                    pod: name.to_string(),
                    node: Some(node.to_string()),
                },
                e.to_string(),
            ),
            _ => launch_error(e),
        }
    }

    /// The running pod of one side.
    pub fn worker(&self, role: SideRole) -> Result<&Worker, LaunchError> {
        let (prefill, decode) = self
            .pods
            .as_ref()
            .ok_or_else(|| LaunchError::new("the rails' bench pods are not running"))?;
        Ok(match role {
            SideRole::Prefill => prefill,
            SideRole::Decode => decode,
        })
    }

    /// `ic-bench rail-info ARGS` in one side's pod, its one JSON line read.
    async fn rail_info(&self, role: SideRole, kind: InfoKind) -> Result<RailInfoLine, String> {
        let w = self.worker(role).map_err(|e| e.to_string())?;
        let mut command = vec![
            "ic-bench".to_string(),
            "rail-info".into(),
            "--node".into(),
            w.node.clone(),
        ];
        match kind {
            InfoKind::Rails => {}
            InfoKind::Counters => command.push("--counters".into()),
            InfoKind::Cpus => command.push("--cpus".into()),
        }
        let out = self
            .cluster
            .exec(&w.pod, w.container.as_deref(), &command, self.plan.exec_timeout)
            .await
            .map_err(|e| e.to_string())?;
        if out.exit_code != 0 {
            let words = icb_pair::launcher::summarize(out.stderr_lossy().lines());
            return Err(format!(
                "`ic-bench rail-info` in pod {} exited {}: {words} (does the image's ic-bench have rail-info? use this version's image)",
                w.pod, out.exit_code
            ));
        }
        let stdout = out.stdout_lossy();
        let line = stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or_default();
        serde_json::from_str(line)
            .map_err(|e| format!("`ic-bench rail-info` in pod {} printed no rail info: {e}", w.pod))
    }

    /// One side's node for the planner, from its pod.
    pub async fn node_info(&self, role: SideRole) -> Result<NodeRailInfo, LaunchError> {
        let line = self.rail_info(role, InfoKind::Rails).await.map_err(LaunchError::new)?;
        let mut info = line
            .info
            .ok_or_else(|| LaunchError::new("`ic-bench rail-info` printed no rail map"))?;
        info.node = self.worker(role)?.node.clone();
        self.dra.check(&info);
        Ok(info)
    }

    /// One side's node topology and the CPUs a process in its pod may use, from the pod.
    pub async fn host_cpus(&self, role: SideRole) -> Result<HostCpus, String> {
        let line = self.rail_info(role, InfoKind::Cpus).await?;
        line.cpus
            .ok_or_else(|| "`ic-bench rail-info --cpus` printed no CPUs (use this version's image)".to_string())
    }

    /// The pods' names: (prefill, decode).
    pub fn pod_names(&self) -> Option<(String, String)> {
        self.pods.as_ref().map(|(p, d)| (p.pod.clone(), d.pod.clone()))
    }

    /// Deletes both pods (by the run's label, also one whose create was in flight). Every row's
    /// launcher must be done.
    pub async fn cleanup(&mut self) -> Result<String, LaunchError> {
        if !self.maybe_created.swap(false, Ordering::SeqCst) {
            return Ok(String::new());
        }
        self.pods = None;
        let pods = lifecycle::delete_run(&self.cluster, &self.plan.run_id, self.plan.cleanup_timeout)
            .await
            .map_err(launch_error)?;
        if self.templates.is_empty() {
            return Ok(pods);
        }
        let templates = super::kube_dra::delete_templates(&self.cluster, &self.templates).await?;
        Ok(format!("{pods} and {templates} resource claim template(s)"))
    }
}

/// A Kubernetes error as a launch failure, by its type.
fn launch_error(e: KubeError) -> LaunchError {
    let kind = match &e {
        e if e.cluster_level() => LaunchFailure::Cluster,
        KubeError::Deadline { .. } => LaunchFailure::Deadline,
        _ => LaunchFailure::Other,
    };
    LaunchError::of(kind, e.to_string())
}

impl RailSeam for KubeRails {
    type L = KubeRailLauncher;

    fn launcher(&mut self, row: &RailRow) -> Result<KubeRailLauncher, LaunchError> {
        Ok(KubeRailLauncher {
            cluster: self.cluster.clone(),
            row: row.index,
            prefill: (
                self.worker(SideRole::Prefill)?.clone(),
                rank_pinning(&self.plan.side_env.0, &row.prefill),
            ),
            decode: (
                self.worker(SideRole::Decode)?.clone(),
                rank_pinning(&self.plan.side_env.1, &row.decode),
            ),
            open_timeout: self.plan.exec_timeout,
            side_timeout: self.plan.side_timeout,
            side_args: self.plan.side_args.clone(),
            token: icb_kube::secret::new_token(),
        })
    }

    async fn counters(&mut self, side: SideRole) -> CounterSnapshot {
        let (snapshot, health) = match self.rail_info(side, InfoKind::Counters).await {
            Ok(line) => {
                let health = line.health.unwrap_or_else(|| {
                    HealthSnapshot::unread("`ic-bench rail-info --counters` printed no health counters")
                });
                let counters = line
                    .counters
                    .unwrap_or_else(|| unreadable("`ic-bench rail-info --counters` printed no counters".into()));
                (counters, health)
            }
            Err(why) => (unreadable(why.clone()), HealthSnapshot::unread(why)),
        };
        *self.health_of(side) = Some(health);
        snapshot
    }

    /// As the pod printed them with the byte counters just read (the pipeline reads health right
    /// after counters).
    fn node_findings(&self) -> Vec<icb_core::rails::RailFinding> {
        self.dra.findings()
    }

    async fn health(&mut self, side: SideRole) -> HealthSnapshot {
        self.health_of(side)
            .take()
            .unwrap_or_else(|| HealthSnapshot::unread("the node's counters were not read just before"))
    }
}

impl KubeRails {
    fn health_of(&mut self, side: SideRole) -> &mut Option<HealthSnapshot> {
        match side {
            SideRole::Prefill => &mut self.health.0,
            SideRole::Decode => &mut self.health.1,
        }
    }
}

fn unreadable(why: String) -> CounterSnapshot {
    CounterSnapshot {
        counters: Vec::new(),
        unreadable: vec![icb_core::rails::Unreadable::all(why)],
    }
}
