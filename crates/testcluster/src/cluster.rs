//! The cluster's shared state and the control-plane verbs on it: admit and store a pod, bind
//! pending pods to nodes (the scheduler loop), delete pods (stopping their processes first).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateWaiting, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::{ClusterConfig, NodeConfig};
use crate::fabric::NodeFabric;
use crate::faults::Faults;
use crate::logbuf::LogBuf;
use crate::record::RecordedRequest;
use crate::scheduler::{self, Resources};
use crate::status::ApiError;
use crate::store::{PodKey, Store, key_of, now};

/// Locks a mutex, carrying on after a panic elsewhere (the data stays usable for cleanup).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A node's metadata as it is now: node PATCH changes labels and annotations (what
/// `sweep --label-nodes` writes), and the scheduler places pods by the current labels.
#[derive(Debug, Clone, Default)]
pub struct NodeMeta {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Conditions written through the `status` subresource (`api::node_status`), besides the
    /// kubelet's `Ready`, in the order they were added.
    pub conditions: Vec<serde_json::Value>,
    /// The version of the node object: bumped by every change (from the store's counter).
    pub resource_version: u64,
}

/// One emulated node as the agents see it.
pub struct NodeRt {
    pub config: NodeConfig,
    pub ip: Ipv4Addr,
    /// The emulated node (network namespace, init); `None` in host isolation.
    pub net: Option<icb_isolate::Node>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    Deleted,
    Deadline,
    Shutdown,
}

/// What one container of a running pod exposes to logs and exec.
#[derive(Default)]
pub struct ContainerSlot {
    pub logs: Option<Arc<LogBuf>>,
    pub previous: Option<Arc<LogBuf>>,
    /// The process owning the container's namespaces, while it runs.
    pub main_pid: Option<u32>,
    pub pgid: Option<i32>,
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    /// The container's image has no shell (see `ImageConfig::shell`).
    pub no_shell: bool,
}

/// The node agent's handle on one pod it runs.
pub struct PodHandle {
    pub key: PodKey,
    pub uid: String,
    pub kill: CancellationToken,
    kill_info: Mutex<Option<(KillReason, Duration)>>,
    pub containers: Mutex<BTreeMap<String, ContainerSlot>>,
    done: watch::Sender<bool>,
}

impl PodHandle {
    pub fn new(key: PodKey, uid: String) -> Self {
        let (done, _) = watch::channel(false);
        PodHandle {
            key,
            uid,
            kill: CancellationToken::new(),
            kill_info: Mutex::new(None),
            containers: Mutex::new(BTreeMap::new()),
            done,
        }
    }

    /// Asks the agent to stop the pod; a shorter grace or a later reason of higher priority wins.
    pub fn request_kill(&self, reason: KillReason, grace: Duration) {
        let mut info = lock(&self.kill_info);
        match &mut *info {
            Some((_, g)) if *g <= grace => {}
            Some((r, g)) => {
                *g = grace;
                if *r != KillReason::Deadline {
                    *r = reason;
                }
            }
            None => *info = Some((reason, grace)),
        }
        drop(info);
        self.kill.cancel();
    }

    pub fn kill_reason(&self) -> Option<KillReason> {
        lock(&self.kill_info).map(|(r, _)| r)
    }

    pub fn grace(&self) -> Duration {
        lock(&self.kill_info).map(|(_, g)| g).unwrap_or_default()
    }

    pub fn mark_done(&self) {
        self.done.send_replace(true);
    }

    pub fn is_done(&self) -> bool {
        *self.done.borrow()
    }

    /// Waits until the agent finished with the pod; false on timeout.
    pub async fn wait_done(&self, limit: Duration) -> bool {
        let mut rx = self.done.subscribe();
        tokio::time::timeout(limit, rx.wait_for(|d| *d)).await.is_ok()
    }
}

pub struct Shared {
    pub config: ClusterConfig,
    pub store: Mutex<Store>,
    pub faults: Mutex<Faults>,
    pub requests: Mutex<Vec<RecordedRequest>>,
    pub nodes: Vec<NodeRt>,
    /// Current labels/annotations of `nodes`, same order.
    pub node_meta: Mutex<Vec<NodeMeta>>,
    pub fabric: Mutex<Option<NodeFabric>>,
    /// Carried by every process the cluster starts, so leak checks and stale cleanup find them.
    pub run_tag: icb_isolate::RunTag,
    pub runtimes: Mutex<HashMap<PodKey, Arc<PodHandle>>>,
    /// Process groups alive right now, for the last-resort synchronous kill on drop.
    pub groups: Mutex<BTreeSet<i32>>,
    pub shutdown: CancellationToken,
    pub work_dir: PathBuf,
    /// Deployments by (namespace, name); their pods live in the pod store.
    pub deployments: Mutex<BTreeMap<PodKey, k8s_openapi::api::apps::v1::Deployment>>,
    /// Secrets by (namespace, name) (`api::secrets`).
    pub secrets: Mutex<BTreeMap<PodKey, k8s_openapi::api::core::v1::Secret>>,
    /// ConfigMaps by (namespace, name) (`api::configmaps`).
    pub config_maps: Mutex<BTreeMap<PodKey, k8s_openapi::api::core::v1::ConfigMap>>,
    /// Custom resources as created, by (group, version, plural, namespace, name).
    pub custom: Mutex<BTreeMap<CustomKey, serde_json::Value>>,
    /// ResourceClaims and ResourceClaimTemplates (`crate::claims`); slices and device classes
    /// come from the node configs.
    pub dra: Mutex<crate::claims::DraState>,
    /// Pod Security `audit` verdicts (`ns/name: would violate …`), the audit log's annotations.
    pub audit: Mutex<Vec<String>>,
    /// The HTTP front, set once it listens (stopped and resumed by `restart_api_server`); taken
    /// at shutdown, which breaks the cycle through its router's state.
    pub api: Mutex<Option<Arc<crate::server::ApiFront>>>,
}

/// Where a pod goes: the node's index, the pod's claims, their allocation on that node.
type Placement = (usize, Option<Vec<PodKey>>, Option<crate::claims::NodePlan>);

/// (group, version, plural, namespace, name) of a custom resource.
pub type CustomKey = (String, String, String, String, String);

pub fn set_condition(status: &mut PodStatus, kind: &str, value: &str, reason: Option<&str>, message: Option<&str>) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let fresh = PodCondition {
        type_: kind.to_string(),
        status: value.to_string(),
        reason: reason.map(str::to_string),
        message: message.map(str::to_string),
        last_transition_time: Some(now()),
        ..Default::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == kind) {
        Some(existing) => {
            if existing.status == value {
                // Same state: keep the transition time so an unchanged pod is not re-announced.
                let ltt = existing.last_transition_time.clone();
                *existing = PodCondition {
                    last_transition_time: ltt,
                    ..fresh
                };
            } else {
                *existing = fresh;
            }
        }
        None => conditions.push(fresh),
    }
}

pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

pub fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message,
        }),
        ..Default::default()
    }
}

impl Shared {
    pub fn node(&self, name: &str) -> Option<(usize, &NodeRt)> {
        self.nodes.iter().enumerate().find(|(_, n)| n.config.name == name)
    }

    /// The node's configuration with its current labels (the scheduler's view).
    pub fn current_config(&self, idx: usize) -> NodeConfig {
        let mut config = self.nodes[idx].config.clone();
        if let Some(meta) = lock(&self.node_meta).get(idx) {
            config.labels = meta.labels.clone();
        }
        config
    }

    pub fn handle(&self, key: &PodKey) -> Option<Arc<PodHandle>> {
        lock(&self.runtimes).get(key).cloned()
    }

    /// Applies a change to a stored pod (only the incarnation with `uid`).
    pub fn update_pod(&self, key: &PodKey, uid: &str, change: impl FnOnce(&mut Pod)) -> Option<Pod> {
        lock(&self.store).modify(key, Some(uid), change)
    }

    fn node_usage(store: &Store, node: &str, except: &PodKey) -> Resources {
        let mut used = Resources::new();
        for pod in store.pods() {
            let on_node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node);
            if !on_node || is_terminal(pod) || key_of(pod) == *except {
                continue;
            }
            if let Some(spec) = &pod.spec {
                for (name, v) in scheduler::pod_requests(spec) {
                    *used.entry(name).or_default() += v;
                }
            }
        }
        used
    }

    /// Binds every pending pod that fits to a node and starts it there; marks the rest
    /// Unschedulable with the scheduler's message. Called after every change that frees or needs room.
    pub fn schedule_pending(self: &Arc<Self>) {
        if self.shutdown.is_cancelled() {
            return;
        }
        let mut to_start: Vec<(Arc<PodHandle>, Pod, usize)> = Vec::new();
        {
            let mut store = lock(&self.store);
            let mut pending: Vec<Pod> = store
                .pods()
                .filter(|p| phase(p) == "Pending" && p.metadata.deletion_timestamp.is_none())
                .cloned()
                .collect();
            pending.sort_by(|a, b| {
                let ts = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
                ts(a).cmp(&ts(b)).then_with(|| key_of(a).cmp(&key_of(b)))
            });
            let mut runtimes = lock(&self.runtimes);
            for pod in pending {
                let key = key_of(&pod);
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if runtimes.get(&key).is_some_and(|h| h.uid == uid) {
                    continue;
                }
                let Some((target, claims, plan)) = self.place(&mut store, &pod) else {
                    continue;
                };
                let node = &self.nodes[target];
                let Some(bound) = store.modify(&key, Some(&uid), |p| bind(p, &node.config.name, node.ip)) else {
                    continue;
                };
                if let (Some(keys), Some(plan)) = (&claims, plan) {
                    crate::claims::commit(&bound, &node.config.name, keys, plan, &mut lock(&self.dra));
                }
                let handle = Arc::new(PodHandle::new(key.clone(), uid));
                runtimes.insert(key, handle.clone());
                to_start.push((handle, bound, target));
            }
        }
        for (handle, pod, node) in to_start {
            crate::agent::start(self.clone(), handle, pod, node);
        }
    }

    /// Where a pending pod goes, with its claims and their allocation there; `None` when it
    /// stays (marked Unschedulable with the scheduler's message, or Failed by the kubelet's
    /// admission for a pod bound by name).
    fn place(&self, store: &mut Store, pod: &Pod) -> Option<Placement> {
        let key = key_of(pod);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let unschedulable = |store: &mut Store, message: &str| {
            store.modify(&key, Some(&uid), |p| {
                let st = p.status.get_or_insert_with(Default::default);
                set_condition(st, "PodScheduled", "False", Some("Unschedulable"), Some(message));
            });
        };
        let spec = pod.spec.clone().unwrap_or_default();
        let claims = match self.pod_claims(store, pod) {
            Ok(claims) => claims,
            Err(message) => {
                unschedulable(store, &message);
                return None;
            }
        };
        let Some(name) = spec.node_name.as_deref() else {
            return match self.pick_node(store, &spec, &key, claims.as_deref()) {
                Ok((idx, plan)) => Some((idx, claims, plan)),
                Err(message) => {
                    unschedulable(store, &message);
                    None
                }
            };
        };
        // Bound by the client: the kubelet admits or rejects, no scheduler involved.
        let (idx, _) = self.node(name)?;
        let mut plan = None;
        if let Some(keys) = &claims {
            // No scheduler allocates for a pod bound by name: it waits, saying why.
            match self.claim_plan(idx, keys) {
                Ok(Some(p)) => plan = Some(p),
                Ok(None) => {
                    unschedulable(store, &format!("node {name} cannot allocate all claims"));
                    return None;
                }
                Err(message) => {
                    unschedulable(store, &message);
                    return None;
                }
            }
        }
        let used = Self::node_usage(store, name, &key);
        if let Some((reason, message)) = scheduler::admission_failure(&spec, &self.current_config(idx), &used) {
            store.modify(&key, Some(&uid), |p| {
                let st = p.status.get_or_insert_with(Default::default);
                st.phase = Some("Failed".into());
                st.reason = Some(reason);
                st.message = Some(message);
            });
            return None;
        }
        Some((idx, claims, plan))
    }

    /// The least busy node that passes every filter (with the allocation of the pod's claims
    /// there), or the scheduler's message.
    fn pick_node(
        &self,
        store: &Store,
        spec: &PodSpec,
        key: &PodKey,
        claims: Option<&[PodKey]>,
    ) -> Result<(usize, Option<crate::claims::NodePlan>), String> {
        let mut rejections = Vec::new();
        let mut best: Option<(usize, i128, Option<crate::claims::NodePlan>)> = None;
        for (idx, node) in self.nodes.iter().enumerate() {
            let used = Self::node_usage(store, &node.config.name, key);
            let mut reasons = scheduler::node_rejections(spec, &self.current_config(idx), &used);
            let mut plan = None;
            if let (true, Some(keys)) = (reasons.is_empty(), claims) {
                // The DynamicResources plugin's filter, after the resource fit as in kube-scheduler.
                match self.claim_plan(idx, keys)? {
                    Some(p) => plan = Some(p),
                    None => reasons.push("cannot allocate all claims".to_string()),
                }
            }
            if reasons.is_empty() {
                let load = used.get("pods").copied().unwrap_or(0);
                if best.as_ref().is_none_or(|(_, l, _)| load < *l) {
                    best = Some((idx, load, plan));
                }
            } else {
                rejections.push(reasons);
            }
        }
        best.map(|(idx, _, plan)| (idx, plan))
            .ok_or_else(|| scheduler::unschedulable_message(self.nodes.len(), &rejections))
    }

    /// The pod's claims (made from its templates where needed, recorded in its status), or
    /// `None` for a pod without claims; `Err` is the scheduler's message for a missing claim or
    /// template (the pod waits, and is retried when one is created).
    fn pod_claims(&self, store: &mut Store, pod: &Pod) -> Result<Option<Vec<PodKey>>, String> {
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_ref())
            .is_none_or(Vec::is_empty)
        {
            return Ok(None);
        }
        let (keys, made) = crate::claims::resolve(pod, &mut lock(&self.dra))
            .map_err(|why| format!("0/{} nodes are available: {why}.", self.nodes.len()))?;
        if !made.is_empty() {
            store.modify(&key_of(pod), pod.metadata.uid.as_deref(), |p| {
                let st = p.status.get_or_insert_with(Default::default);
                st.resource_claim_statuses.get_or_insert_with(Vec::new).extend(made);
            });
        }
        Ok(Some(keys))
    }

    /// Allocation of `keys` on node `idx`; `Err` for a claim naming a class that does not exist.
    fn claim_plan(&self, idx: usize, keys: &[PodKey]) -> Result<Option<crate::claims::NodePlan>, String> {
        let classes = crate::claims::classes(&self.config.nodes);
        crate::claims::plan_on(&self.nodes[idx].config, keys, &lock(&self.dra), &classes)
            .map_err(|why| format!("0/{} nodes are available: {why}.", self.nodes.len()))
    }

    /// The garbage collector and the resourceclaim controller after pods went (`crate::claims`).
    pub fn release_claims(&self) {
        let live: BTreeSet<String> = lock(&self.store)
            .pods()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        crate::claims::release(&live, &mut lock(&self.dra));
    }

    /// Deletes a pod: stops its processes (SIGTERM, then SIGKILL after the grace period, capped by
    /// `max_grace`), then removes the object. With grace 0 the answer waits for the removal.
    pub async fn delete_pod(
        self: &Arc<Self>,
        key: &PodKey,
        grace: Option<i64>,
        precondition_uid: Option<String>,
    ) -> Result<Pod, ApiError> {
        let (pod, handle) = {
            let store = lock(&self.store);
            let pod = store
                .get(key)
                .cloned()
                .ok_or_else(|| ApiError::not_found("pods", &key.1))?;
            if let Some(uid) = precondition_uid
                && pod.metadata.uid.as_deref() != Some(uid.as_str())
            {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        pod.metadata.uid.clone().unwrap_or_default()
                    ),
                ));
            }
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let handle = lock(&self.runtimes)
                .get(key)
                .filter(|h| h.uid == uid && !h.is_done())
                .cloned();
            (pod, handle)
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let grace = grace
            .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
            .unwrap_or(30)
            .max(0);
        let Some(handle) = handle else {
            return self
                .remove_pod(key, &uid)
                .ok_or_else(|| ApiError::not_found("pods", &key.1));
        };
        let marked = self.update_pod(key, &uid, |p| {
            if p.metadata.deletion_timestamp.is_none() {
                p.metadata.deletion_timestamp = Some(now());
                p.metadata.deletion_grace_period_seconds = Some(grace);
            }
        });
        let wait_limit = self.config.max_grace + Duration::from_secs(5);
        handle.request_kill(
            KillReason::Deleted,
            Duration::from_secs(grace as u64).min(self.config.max_grace),
        );
        if grace == 0 {
            handle.wait_done(wait_limit).await;
            return self
                .remove_pod(key, &uid)
                .ok_or_else(|| ApiError::not_found("pods", &key.1));
        }
        let shared = self.clone();
        let key2 = key.clone();
        tokio::spawn(async move {
            handle.wait_done(wait_limit).await;
            shared.remove_pod(&key2, &uid);
        });
        marked.ok_or_else(|| ApiError::not_found("pods", &key.1))
    }

    /// Removes the object (DELETED), forgets its runtime and lets waiting pods use the room.
    pub fn remove_pod(self: &Arc<Self>, key: &PodKey, uid: &str) -> Option<Pod> {
        let removed = lock(&self.store).remove(key, Some(uid));
        {
            let mut runtimes = lock(&self.runtimes);
            if runtimes.get(key).is_some_and(|h| h.uid == uid) {
                runtimes.remove(key);
            }
        }
        if removed.is_some() {
            // The garbage collector: Secrets this pod owned go with it.
            crate::api::secrets::collect_orphans(self);
            self.release_claims();
            self.schedule_pending();
        }
        removed
    }
}

/// Marks a pod bound to `node` and its containers as being created.
fn bind(pod: &mut Pod, node: &str, host_ip: Ipv4Addr) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node.to_string());
    // With init containers, everything waits for them (the kubelet's `PodInitializing`).
    let init = spec.init_containers.as_ref().filter(|i| !i.is_empty());
    let reason = if init.is_some() {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };
    let status = |c: &Container| ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        image_id: String::new(),
        ready: false,
        restart_count: 0,
        started: Some(false),
        state: Some(waiting(reason, None)),
        ..Default::default()
    };
    let containers: Vec<ContainerStatus> = spec.containers.iter().map(status).collect();
    let init_statuses: Option<Vec<ContainerStatus>> = init.map(|i| i.iter().map(status).collect());
    let st = pod.status.get_or_insert_with(Default::default);
    st.phase = Some("Pending".into());
    st.host_ip = Some(host_ip.to_string());
    st.start_time = Some(now());
    st.container_statuses = Some(containers);
    set_condition(st, "PodScheduled", "True", None, None);
    match init_statuses {
        Some(statuses) => {
            st.init_container_statuses = Some(statuses);
            set_condition(st, "Initialized", "False", Some("ContainersNotInitialized"), None);
        }
        None => set_condition(st, "Initialized", "True", None, None),
    }
    set_condition(st, "ContainersReady", "False", Some("ContainersNotReady"), None);
    set_condition(st, "Ready", "False", Some("ContainersNotReady"), None);
}
