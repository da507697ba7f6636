//! icb-testcluster: an emulated Kubernetes cluster for ic-bench's tests (never shipped in the
//! binary). kube-rs talks to it unchanged through a kubeconfig: an HTTP API server speaking the part
//! of the Kubernetes API ic-bench uses (nodes; pods create/get/list/watch/delete/deletecollection,
//! logs, status, exec; secrets create/get/list/delete, resolved into `secretKeyRef` environment
//! variables by the node agent and collected with the pods that own them), a scheduler (nodeName, nodeSelector, required node affinity, taints,
//! extended-resource capacity such as `nvidia.com/gpu` and `rdma/ib`), and one node agent per
//! node that runs each pod's containers as real local processes, with their securityContext
//! applied as a kubelet applies it when the cluster runs as root (user, groups, capabilities,
//! `no_new_privs`: `agent/security.rs`).
//!
//! With [`Isolation::Namespaces`] (root) the nodes and pods come from icb-isolate, the one
//! namespace layer `pair --local` uses too: every node is a Linux network namespace with an init
//! process holding the node's own IPC, PID and mount namespaces, cabled to the others by a veth on
//! a private bridge (10.99.0.N/24, all inside namespaces that layer creates); each pod gets its own
//! IPC and PID namespaces unless `hostIPC`/`hostPID`, which join the node's. **A pod's IP is its
//! node's IP** (pods on one node share the node's network namespace, as with `hostNetwork`); that
//! keeps "same node → loopback-like TCP, other node → veth" true, which is what ic-bench's verdicts
//! care about.
//!
//! Tests start a cluster, point ic-bench (or an in-test `kube::Client`) at it, and assert on the
//! pods, their logs and the recorded requests; fault knobs inject API errors (counted or at random),
//! latency, image pull failures, crashes, network cuts and API server restarts (same address,
//! same store, open connections dropped: `server.rs`). Dropping the cluster (also while a test panics) kills every
//! pod process and removes every namespace and temp file; processes are also started with a parent
//! death signal that reaches the real program, so even a SIGKILLed test leaves no pod running, and
//! stale namespaces of dead test processes are removed by the next cluster start
//! (`icb_isolate::cleanup_stale`, the same scheme `ic-bench gc --local` uses).
//!
//! `README.md` in this crate lists the whole public API and what is (and is not) emulated.
//!
//! ```no_run
//! # async fn demo() -> Result<(), icb_testcluster::Error> {
//! use icb_testcluster::{ClusterConfig, NodeConfig, TestCluster};
//! let cluster = TestCluster::start(
//!     ClusterConfig::new().node(NodeConfig::gpu("gpu-1", 8)).node(NodeConfig::gpu("gpu-2", 8))
//!         .program("/path/to/ic-bench"),
//! ).await?;
//! let _kubeconfig = cluster.kubeconfig_path(); // pass with --kubeconfig
//! let _client = cluster.client()?;             // or use kube-rs in the test
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod agent;
mod api;
mod claims;
mod cluster;
mod config;
mod dra;
mod error;
mod fabric;
mod faults;
mod field;
mod knobs;
mod logbuf;
mod network;
mod probe;
mod process;
mod record;
mod scheduler;
mod selector;
mod server;
mod status;
mod store;

use std::collections::{BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio_util::sync::CancellationToken;

use crate::cluster::{KillReason, NodeRt, Shared, lock};
use crate::fabric::NodeFabric;
use crate::store::Store;

pub use crate::claims::DraAllocation;
pub use crate::config::{
    ClusterConfig, DRA_GPU_DRIVER, DRA_NIC_DRIVER, DraDevice, ImageConfig, Isolation, NodeConfig, RAIL_TREE_ENV,
};
pub use crate::dra::PCIE_ROOT;
pub use crate::error::{Error, Result};
pub use crate::fabric::NAME_PREFIX;
pub use crate::faults::RequestMatch;
pub use crate::record::RecordedRequest;

/// How long drop waits for the cluster to stop its pods before killing them by force.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// A running emulated cluster. Dropping it stops everything.
pub struct TestCluster {
    shared: Arc<Shared>,
    addr: SocketAddr,
    kubeconfig: PathBuf,
    namespace: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<std::sync::mpsc::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    // Last: removed after the pods that used it as their working directory are gone.
    dir: Option<tempfile::TempDir>,
}

type Ready = std::result::Result<(SocketAddr, Arc<Shared>), Error>;

/// The start of a cluster's work directory's name in the temp dir, then its owner's pid and `-`:
/// the next cluster start removes the directory of an owner that died without its cleanup (a
/// SIGKILLed test), as [`icb_isolate::cleanup_stale`] removes its namespaces.
const DIR_PREFIX: &str = "icb-testcluster-";

/// Removes the work directories of clusters whose owning process is gone. Best effort: a
/// directory that cannot be read or removed is left for the next start.
fn remove_dead_owners_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name
            .to_str()
            .and_then(|n| n.strip_prefix(DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        if let Some(owner) = owner
            && owner != std::process::id()
            && !icb_isolate::pid_alive(owner)
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn validate(config: &ClusterConfig) -> Result<()> {
    let mut names = BTreeSet::new();
    for node in &config.nodes {
        if node.name.is_empty() || !names.insert(node.name.clone()) {
            return Err(Error::Config(format!(
                "node names must be unique and non-empty (got {:?})",
                node.name
            )));
        }
        for (resource, q) in node.capacity.iter().chain(node.allocatable.iter()) {
            if icb_core::fabric::quantity::parse_milli(q).is_none() {
                return Err(Error::Config(format!(
                    "node {}: {resource} = {q:?} is not a quantity",
                    node.name
                )));
            }
        }
    }
    if config.namespaces.is_empty() {
        return Err(Error::Config("at least one namespace is needed".into()));
    }
    let faulted_rails: Vec<(&String, usize)> = config
        .slow_rails
        .iter()
        .map(|(n, k, _)| (n, *k))
        .chain(config.dead_rails.iter().map(|(n, k)| (n, *k)))
        .chain(config.congested_rails.iter().map(|(n, k, _)| (n, *k)))
        .chain(config.lossy_rails.iter().map(|(n, k, _)| (n, *k)))
        .chain(config.rail_mtus.iter().map(|(n, k, _)| (n, *k)))
        .collect();
    let rails_asked = config.rails > 0 || !faulted_rails.is_empty();
    if rails_asked && config.isolation != Isolation::Namespaces {
        return Err(Error::Config("rails need Isolation::Namespaces".into()));
    }
    for (node, k) in faulted_rails {
        if !names.contains(node) {
            return Err(Error::Config(format!(
                "a slow, dead, congested, lossy or MTU-set rail names no node: {node:?}"
            )));
        }
        if k >= config.rails {
            return Err(Error::Config(format!(
                "rail {k} of {node}: the cluster has {} rails per node (0 to K-1)",
                config.rails
            )));
        }
    }
    if config.isolation == Isolation::Namespaces && !nix::unistd::geteuid().is_root() {
        return Err(Error::Namespace("not running as root".into()));
    }
    Ok(())
}

impl TestCluster {
    /// Starts the API server on 127.0.0.1 (random port), the nodes and their agents, on a runtime
    /// of the cluster's own (so a test may block its thread on ic-bench while the cluster serves).
    pub async fn start(config: ClusterConfig) -> Result<TestCluster> {
        let (ready_rx, partial) = Self::launch(config)?;
        let ready = ready_rx
            .await
            .map_err(|_| Error::Other("the cluster thread ended during start".into()))?;
        partial.finish(ready)
    }

    /// [`Self::start`] for tests without an async runtime.
    pub fn start_blocking(config: ClusterConfig) -> Result<TestCluster> {
        let (ready_rx, partial) = Self::launch(config)?;
        let ready = ready_rx
            .blocking_recv()
            .map_err(|_| Error::Other("the cluster thread ended during start".into()))?;
        partial.finish(ready)
    }

    fn launch(config: ClusterConfig) -> Result<(tokio::sync::oneshot::Receiver<Ready>, Partial)> {
        validate(&config)?;
        remove_dead_owners_dirs();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
            .tempdir()?;
        let id = format!("{}-{:08x}", std::process::id(), rand::random::<u32>());
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Ready>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let work_dir = dir.path().to_path_buf();
        // Pods that run as another user (securityContext) reach their programs and volumes
        // below it: traversable, not listable.
        std::fs::set_permissions(&work_dir, std::os::unix::fs::PermissionsExt::from_mode(0o711))?;
        let namespace = config.namespaces[0].clone();
        let thread = std::thread::Builder::new()
            .name(format!("icb-testcluster-{id}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .thread_name("icb-testcluster-rt")
                    .build();
                match runtime {
                    Ok(rt) => rt.block_on(run(config, work_dir, ready_tx, stop_rx)),
                    Err(e) => {
                        let _ = ready_tx.send(Err(Error::Io(e)));
                    }
                }
                let _ = done_tx.send(());
            })?;
        Ok((
            ready_rx,
            Partial {
                dir,
                namespace,
                stop: stop_tx,
                done: done_rx,
                thread,
            },
        ))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (context `icb-test`, namespace = the first configured) for `--kubeconfig`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The context's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A client config for this cluster (no proxy; kube's default retry on 429/503/504 stays on:
    /// set `default_retry = false` when a test injects those).
    pub fn client_config(&self) -> Result<kube::Config> {
        let url = self
            .url()
            .parse()
            .map_err(|e| Error::Kube(format!("cluster url: {e}")))?;
        let mut config = kube::Config::new(url);
        config.default_namespace = self.namespace.clone();
        config.proxy_url = None;
        Ok(config)
    }

    /// A kube client for in-test use. Call it inside the test's tokio runtime (kube spawns its
    /// connection task there).
    pub fn client(&self) -> Result<kube::Client> {
        kube::Client::try_from(self.client_config()?).map_err(|e| Error::Kube(e.to_string()))
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Pod Security `audit` verdicts so far (`ns/name: would violate PodSecurity …`).
    pub fn audit_log(&self) -> Vec<String> {
        lock(&self.shared.audit).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    /// The stored ResourceClaims (every namespace), with their allocations.
    pub fn resource_claims(&self) -> Vec<k8s_openapi::api::resource::v1::ResourceClaim> {
        lock(&self.shared.dra).claims.values().cloned().collect()
    }

    /// The stored ResourceClaimTemplates (every namespace).
    pub fn resource_claim_templates(&self) -> Vec<k8s_openapi::api::resource::v1::ResourceClaimTemplate> {
        lock(&self.shared.dra).templates.values().cloned().collect()
    }

    /// Every allocation the scheduler made so far, in order (also of claims since deleted).
    pub fn dra_allocations(&self) -> Vec<DraAllocation> {
        lock(&self.shared.dra).history.clone()
    }

    /// The stored pods (every namespace), straight from the store.
    pub fn pods(&self) -> Vec<Pod> {
        lock(&self.shared.store).pods().cloned().collect()
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        lock(&self.shared.store)
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// A container's log so far (`None` if the pod or container never started).
    pub fn pod_log(&self, namespace: &str, name: &str, container: &str) -> Option<String> {
        let handle = self.shared.handle(&(namespace.to_string(), name.to_string()))?;
        let slots = lock(&handle.containers);
        let log = slots.get(container)?.logs.clone()?;
        Some(String::from_utf8_lossy(&log.contents()).into_owned())
    }

    /// The node's (and its pods') IP address.
    pub fn node_ip(&self, node: &str) -> Option<Ipv4Addr> {
        self.shared.node(node).map(|(_, n)| n.ip)
    }

    /// The Linux network namespaces this cluster made (empty in host isolation).
    pub fn netns_names(&self) -> Vec<String> {
        let fabric = lock(&self.shared.fabric);
        fabric.iter().flat_map(|f| f.namespaces()).collect()
    }

    /// The run tag every process this cluster starts carries in its environment
    /// (`ICB_ISOLATE_RUN`): `icb_isolate::live_processes(&cluster.run_tag())` lists what still runs.
    pub fn run_tag(&self) -> String {
        self.shared.run_tag.to_string()
    }

    /// Stops every pod, removes namespaces and files, and waits for it.
    pub async fn shutdown(self) {
        let _ = tokio::task::spawn_blocking(move || drop(self)).await;
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let finished = self
            .done
            .take()
            .is_some_and(|done| done.recv_timeout(STOP_WAIT).is_ok());
        if finished && let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // Last resort (and a no-op after a clean stop): nothing may outlive the cluster.
        for pgid in lock(&self.shared.groups).iter() {
            process::signal_group(*pgid, nix::sys::signal::Signal::SIGKILL);
        }
        destroy_fabric(&self.shared);
    }
}

/// Deletes the cluster's namespaces and whatever still runs in them (a no-op once done).
fn destroy_fabric(shared: &Shared) {
    let fabric = lock(&shared.fabric).take();
    if let Some(fabric) = fabric
        && let Err(e) = fabric.destroy()
    {
        eprintln!("icb-testcluster: cleaning up the emulated nodes: {e}");
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.stop_now();
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
    }
}

/// A cluster whose thread runs but has not reported ready yet.
struct Partial {
    dir: tempfile::TempDir,
    namespace: String,
    stop: tokio::sync::oneshot::Sender<()>,
    done: std::sync::mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Partial {
    fn finish(self, ready: Ready) -> Result<TestCluster> {
        let (addr, shared) = match ready {
            Ok(r) => r,
            Err(e) => {
                let _ = self.thread.join();
                return Err(e);
            }
        };
        let kubeconfig = self.dir.path().join("kubeconfig");
        let mut cluster = TestCluster {
            shared,
            addr,
            kubeconfig: kubeconfig.clone(),
            namespace: self.namespace,
            stop: Some(self.stop),
            done: Some(self.done),
            thread: Some(self.thread),
            dir: Some(self.dir),
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: icb-test\n  cluster:\n    server: http://{addr}\n\
             contexts:\n- name: icb-test\n  context:\n    cluster: icb-test\n    user: icb-test\n    namespace: {ns}\n\
             current-context: icb-test\nusers:\n- name: icb-test\n  user:\n    token: icb-test-token\n",
            ns = cluster.namespace
        );
        if let Err(e) = std::fs::write(&kubeconfig, text) {
            cluster.stop_now();
            return Err(Error::Io(e));
        }
        Ok(cluster)
    }
}

/// How often the emulated NIC counters of faulted rails are brought up to date while the
/// cluster runs.
const COUNTER_TICK: Duration = Duration::from_millis(200);

/// Keeps the emulated NIC counters of every node's congested and lossy rails current while the
/// cluster runs, as a real NIC's are: a plain pair's sides read them around each case from the
/// node's tree, with no exec that would drive them (issue 40). A node without a faulted rail
/// costs a lock and a filter per tick. A failure is printed on stderr, and the exec path still refuses to
/// run on stale counters.
async fn drive_counters_while_running(shared: Arc<Shared>) {
    let names: Vec<String> = shared.nodes.iter().map(|n| n.config.name.clone()).collect();
    while !shared.shutdown.is_cancelled() {
        for name in &names {
            if let Err(e) = api::exec::drive_rail_counters(&shared, Some(name.clone())).await {
                eprintln!("icb-testcluster: the emulated counters of {name}: {e:?}");
            }
        }
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = tokio::time::sleep(COUNTER_TICK) => {}
        }
    }
}

/// The cluster thread's life: build nodes, serve, and on stop tear everything down.
async fn run(
    config: ClusterConfig,
    work_dir: PathBuf,
    ready: tokio::sync::oneshot::Sender<Ready>,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let names: Vec<String> = config.nodes.iter().map(|n| n.name.clone()).collect();
    // Built on this thread, which lives as long as the cluster: the node inits die with it.
    let fabric = match config.isolation {
        Isolation::Host => None,
        Isolation::Namespaces => {
            match NodeFabric::create(&names, config.rails)
                .and_then(|f| f.with_rail_faults(&config))
                .and_then(|f| f.with_dra_gpus(&config))
            {
                Ok(f) => Some(f),
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            }
        }
    };
    let run_tag = match &fabric {
        Some(f) => f.tag().clone(),
        None => match icb_isolate::RunTag::new(fabric::NAME_PREFIX) {
            Ok(tag) => tag,
            Err(e) => {
                let _ = ready.send(Err(Error::Other(e.to_string())));
                return;
            }
        },
    };
    let nodes = config
        .nodes
        .iter()
        .map(|n| {
            let net = fabric.as_ref().and_then(|f| f.node(&n.name)).cloned();
            let mut config = n.clone();
            if let Some(tree) = fabric.as_ref().and_then(|f| f.rail_tree(&n.name)) {
                config
                    .runtime_env
                    .insert(RAIL_TREE_ENV.to_string(), tree.display().to_string());
            }
            NodeRt {
                config,
                ip: net.as_ref().map(|x| x.ip).unwrap_or(Ipv4Addr::LOCALHOST),
                net,
            }
        })
        .collect();
    let store = Store::new(config.watch_history);
    let node_meta = config
        .nodes
        .iter()
        .map(|n| cluster::NodeMeta {
            labels: n.labels.clone(),
            annotations: Default::default(),
            conditions: Vec::new(),
            resource_version: store.resource_version(),
        })
        .collect();
    let shared = Arc::new(Shared {
        config,
        store: Mutex::new(store),
        faults: Mutex::new(faults::Faults::default()),
        requests: Mutex::new(Vec::new()),
        nodes,
        node_meta: Mutex::new(node_meta),
        fabric: Mutex::new(fabric),
        run_tag,
        runtimes: Mutex::new(HashMap::new()),
        groups: Mutex::new(BTreeSet::new()),
        shutdown: CancellationToken::new(),
        work_dir,
        deployments: Mutex::new(std::collections::BTreeMap::new()),
        secrets: Mutex::new(std::collections::BTreeMap::new()),
        config_maps: Mutex::new(std::collections::BTreeMap::new()),
        custom: Mutex::new(std::collections::BTreeMap::new()),
        dra: Mutex::new(Default::default()),
        audit: Mutex::new(Vec::new()),
        api: Mutex::new(None),
    });
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .and_then(|l| Ok((l.local_addr()?, l)))
    {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(Error::Io(e)));
            return;
        }
    };
    let (addr, listener) = listener;
    let app = api::router(shared.clone());
    let front = match server::ApiFront::start(app, listener, shared.shutdown.clone()) {
        Ok(f) => f,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    *lock(&shared.api) = Some(Arc::new(front));
    if ready.send(Ok((addr, shared.clone()))).is_err() {
        shared.shutdown.cancel();
    }
    let driver = tokio::spawn(drive_counters_while_running(shared.clone()));
    // Either a stop request or the TestCluster vanished: both mean stop.
    let _ = stop.await;
    driver.abort();
    shared.shutdown.cancel();
    let handles: Vec<_> = lock(&shared.runtimes).values().cloned().collect();
    for h in &handles {
        h.request_kill(KillReason::Shutdown, Duration::ZERO);
    }
    futures::future::join_all(handles.iter().map(|h| h.wait_done(Duration::from_secs(10)))).await;
    for pgid in lock(&shared.groups).iter() {
        process::signal_group(*pgid, nix::sys::signal::Signal::SIGKILL);
    }
    // The shutdown token stopped the API server's accept loop and dropped its connections.
    lock(&shared.api).take();
    destroy_fabric(&shared);
}
