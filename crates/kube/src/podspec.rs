//! The two bench pods, built by one function for both real runs and `--dry-run=client -o yaml`.
//!
//! Least privilege by default (see [`crate::hardening`]): no service-account token, the
//! unprivileged user, no capabilities, no privilege escalation, RuntimeDefault seccomp, a read-only
//! root with an emptyDir for scratch (Pod Security `restricted`); IPC_LOCK as root only with RDMA
//! devices (memory registration pins pages) unless `--memlock-unlimited`, privileged only when the
//! modelled pod is privileged or the user asks. cpu/memory requests = limits on every pod, and
//! only the target node's own NoSchedule taints tolerated. Pods are pinned to their node with a
//! `metadata.name` node-affinity term rather than `nodeName`, so the scheduler still checks device
//! capacity and says why a pod does not fit instead of the kubelet rejecting it silently.

use crate::devices::DeviceChoice;
use crate::error::InvalidName;
use crate::hardening::{BenchResources, Privilege};
use crate::spec::TransportSpec;
use icb_core::fabric::privilege::{IPC_LOCK, grants_capability};
use icb_core::fabric::resource::is_rdma_resource;
use icb_core::fabric::shm;
use k8s_openapi::api::core::v1::{
    Affinity, Container, EmptyDirVolumeSource, EnvVar, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, Pod, PodResourceClaim, PodSpec, ResourceClaim, ResourceRequirements, Toleration, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const APP: &str = "ic-bench";
/// Selector for everything ic-bench ever created (what `ic-bench gc` deletes).
pub const MANAGED_SELECTOR: &str = "app.kubernetes.io/managed-by=ic-bench";
/// The sweep a bench pod belongs to (`ic-bench sweep`): how `--resume` finds a killed run's pods.
pub const LABEL_SWEEP_ID: &str = "ic-bench.dev/sweep-id";
/// Annotation naming the reference a bench pod was modelled on.
pub const ANNOTATION_MODELLED_ON: &str = "ic-bench.dev/modelled-on";
/// The container name in every bench pod.
pub const CONTAINER: &str = "bench";
/// Env var through which the client learns the server's address (`$(IC_BENCH_SERVER)` in its args).
pub const SERVER_ENV: &str = "IC_BENCH_SERVER";
/// What `--dry-run` shows for the server address, which only exists once the server runs.
pub const SERVER_PLACEHOLDER: &str = "<server-pod-ip>:<port>";

/// The published bench image for this version (see bench-image/README.md).
pub fn default_image() -> String {
    format!("ghcr.io/ic-bench/ic-bench:{}", env!("CARGO_PKG_VERSION"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Decode side: `ic-bench serve`.
    Server,
    /// Prefill side: `ic-bench connect`.
    Client,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
        }
    }
}

/// Everything that decides one bench pod.
#[derive(Debug, Clone)]
pub struct BenchPod {
    pub run_id: String,
    pub role: Role,
    pub namespace: String,
    pub node: String,
    pub image: String,
    pub image_pull_policy: Option<String>,
    /// The command line after `ic-bench` (e.g. `serve --listen 0.0.0.0:0 --once`).
    pub args: Vec<String>,
    /// Extra env (the client's server address).
    pub env: Vec<EnvVar>,
    pub model: Option<TransportSpec>,
    /// Devices decided for this pod (`--gpus`, `--rdma`, `--resource`, node defaults), applied on
    /// top of the model's.
    pub devices: DeviceChoice,
    pub active_deadline_s: i64,
    /// `--privileged`.
    pub privileged: bool,
    /// `--host-ipc`.
    pub host_ipc: bool,
    /// `--host-pid`.
    pub host_pid: bool,
    pub service_account: Option<String>,
    /// Labels on top of the standard ones (which they never replace), e.g. the sweep id.
    pub extra_labels: BTreeMap<String, String>,
    /// The target node's taints this pod tolerates ([`crate::hardening::tolerations_for`]).
    pub tolerations: Vec<Toleration>,
    /// cpu/memory requests = limits.
    pub resources: BenchResources,
    /// `--memlock-unlimited`: the runtime gives pods unlimited memlock; RDMA needs no IPC_LOCK.
    pub memlock_unlimited: bool,
}

pub fn pod_name(run_id: &str, role: Role) -> String {
    format!("ic-bench-{run_id}-{}", role.as_str())
}

pub fn labels(run_id: &str, role: Role) -> BTreeMap<String, String> {
    [
        (LABEL_NAME, APP),
        (LABEL_INSTANCE, run_id),
        (LABEL_COMPONENT, role.as_str()),
        (LABEL_MANAGED_BY, APP),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Selector for the pods of one run (what Ctrl-C cleanup deletes).
pub fn instance_selector(run_id: &str) -> String {
    format!("{LABEL_INSTANCE}={run_id},{MANAGED_SELECTOR}")
}

/// A fresh run id: short, lowercase, valid in names and label values.
pub fn new_run_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    id[..10].to_string()
}

/// The run id a user gave (checked), or a new one.
pub fn run_id_or_new(given: Option<&str>) -> Result<String, InvalidName> {
    match given {
        Some(id) => check_run_id(id).map(|()| id.to_string()),
        None => Ok(new_run_id()),
    }
}

/// Checks a user-given run id: it ends up in pod names and label values.
pub fn check_run_id(id: &str) -> Result<(), InvalidName> {
    let ok = !id.is_empty()
        && id.len() <= 40
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(InvalidName::RunId(id.to_string()))
    }
}

impl BenchPod {
    /// The standard labels, then the extra ones that do not collide with them.
    fn labels(&self) -> BTreeMap<String, String> {
        let mut all = labels(&self.run_id, self.role);
        for (k, v) in &self.extra_labels {
            all.entry(k.clone()).or_insert_with(|| v.clone());
        }
        all
    }

    /// The ResourceClaimTemplate this pod's DRA claim is made from (named like the pod), when
    /// it claims devices through DRA: created before the pod, deleted with the run.
    pub fn claim_template(&self) -> Option<k8s_openapi::api::resource::v1::ResourceClaimTemplate> {
        let spec = self.devices.claim.as_ref()?;
        Some(crate::dra::template(
            &self.namespace,
            &pod_name(&self.run_id, self.role),
            self.labels(),
            spec,
        ))
    }

    /// The pod's DRA claims and its container's: the model's (a worker's claims, copied) and
    /// the claim made from this pod's own template (`Self::claim_template`). A modelled side
    /// gets no template of its own (`crate::pair` reads no node offer for it), so the names
    /// never meet.
    fn claims(&self) -> (Vec<PodResourceClaim>, Vec<ResourceClaim>) {
        let model = self.model.as_ref();
        let mut pod = model.map(|m| m.resource_claims.clone()).unwrap_or_default();
        let mut container = model.map(|m| m.container_claims.clone()).unwrap_or_default();
        if self.devices.claim.is_some() {
            pod.push(PodResourceClaim {
                name: crate::dra::POD_CLAIM.into(),
                resource_claim_name: None,
                resource_claim_template_name: Some(pod_name(&self.run_id, self.role)),
            });
            container.push(ResourceClaim {
                name: crate::dra::POD_CLAIM.into(),
                request: None,
            });
        }
        (pod, container)
    }

    pub fn build(&self) -> Pod {
        let model = self.model.as_ref();
        let privileged = self.privileged || model.is_some_and(|m| m.privileged);
        let mut devices = model.map(|m| m.devices.clone()).unwrap_or_default();
        self.devices.apply(&mut devices);
        let mut caps_add: Vec<String> = model.map(|m| m.capabilities_add.clone()).unwrap_or_default();
        let claims_nic = self
            .devices
            .claim
            .as_ref()
            .is_some_and(|c| crate::dra::claims_nic(c, Some(crate::dra::GPU_DRIVER)));
        if (devices.keys().any(|k| is_rdma_resource(k)) || claims_nic)
            && !self.memlock_unlimited
            && !grants_capability(&caps_add, IPC_LOCK)
        {
            caps_add.push(IPC_LOCK.into());
        }
        let caps_drop: Vec<String> = model.map(|m| m.capabilities_drop.clone()).unwrap_or_default();
        let sys_admin = grants_capability(&caps_add, "SYS_ADMIN");
        let host_ipc = self.host_ipc || model.is_some_and(|m| m.host_ipc);
        let host_pid = self.host_pid || model.is_some_and(|m| m.host_pid);
        let privilege = Privilege {
            privileged,
            host_ipc,
            host_pid,
            add: caps_add,
            drop: caps_drop,
            // no_new_privs changes nothing UCX does; the API rejects it with privileged or SYS_ADMIN.
            may_forbid_escalation: !privileged && !sys_admin,
        };
        let security = privilege.container_context();

        let mut env: Vec<EnvVar> = model.map(|m| m.env.clone()).unwrap_or_default();
        env.retain(|e| !self.env.iter().any(|x| x.name == e.name));
        env.extend(self.env.iter().cloned());
        for scratch in crate::hardening::scratch_env() {
            if !env.iter().any(|e| e.name == scratch.name) {
                env.push(scratch);
            }
        }

        let (pod_claims, container_claims) = self.claims();
        let mut reserved = devices;
        reserved.extend(self.resources.entries());
        let resources = Some(ResourceRequirements {
            // Extended resources must have requests equal to limits; cpu/memory too (Guaranteed).
            limits: Some(reserved.clone()),
            requests: Some(reserved),
            claims: (!container_claims.is_empty()).then_some(container_claims),
        });

        let mut volumes = Vec::new();
        let mut mounts = Vec::new();
        if let Some(size) = model.and_then(|m| m.shm.clone()) {
            let (volume, mount) = dshm(size);
            volumes.push(volume);
            mounts.push(mount);
        }
        let (scratch_volume, scratch_mount) = crate::hardening::scratch();
        volumes.push(scratch_volume);
        mounts.push(scratch_mount);

        let host_network = model.is_some_and(|m| m.host_network);
        let mut annotations: BTreeMap<String, String> =
            model.map(|m| m.network_annotations.clone()).unwrap_or_default();
        if let Some(m) = model {
            annotations.insert(ANNOTATION_MODELLED_ON.into(), m.source.clone());
        }

        let mut command = vec!["ic-bench".to_string()];
        command.extend(self.args.iter().cloned());

        Pod {
            metadata: ObjectMeta {
                name: Some(pod_name(&self.run_id, self.role)),
                namespace: Some(self.namespace.clone()),
                labels: Some(self.labels()),
                annotations: (!annotations.is_empty()).then_some(annotations),
                ..Default::default()
            },
            spec: Some(PodSpec {
                restart_policy: Some("Never".into()),
                active_deadline_seconds: Some(self.active_deadline_s),
                termination_grace_period_seconds: Some(5),
                automount_service_account_token: Some(false),
                service_account_name: self.service_account.clone(),
                enable_service_links: Some(false),
                affinity: Some(pin_to(&self.node)),
                resource_claims: (!pod_claims.is_empty()).then_some(pod_claims),
                // Only the chosen node's own NoSchedule taints: never a cordon or NoExecute.
                tolerations: (!self.tolerations.is_empty()).then(|| self.tolerations.clone()),
                security_context: privilege.pod_context(),
                host_ipc: host_ipc.then_some(true),
                host_pid: host_pid.then_some(true),
                host_network: host_network.then_some(true),
                dns_policy: host_network.then(|| "ClusterFirstWithHostNet".to_string()),
                runtime_class_name: model.and_then(|m| m.runtime_class.clone()),
                node_selector: model
                    .filter(|m| !m.node_selector.is_empty())
                    .map(|m| m.node_selector.clone()),
                containers: vec![Container {
                    name: CONTAINER.into(),
                    image: Some(self.image.clone()),
                    image_pull_policy: self.image_pull_policy.clone(),
                    command: Some(command),
                    env: (!env.is_empty()).then_some(env),
                    resources,
                    security_context: Some(security),
                    volume_mounts: (!mounts.is_empty()).then_some(mounts),
                    ..Default::default()
                }],
                volumes: (!volumes.is_empty()).then_some(volumes),
                ..Default::default()
            }),
            status: None,
        }
    }
}

/// Required node affinity on the node's name (what the DaemonSet controller uses).
fn pin_to(node: &str) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node.to_string()]),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Reads back the node a bench pod is pinned to (for tests and the dry-run round trip).
pub fn pinned_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = &spec.node_name {
        return Some(n.clone());
    }
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

/// A memory-backed `/dev/shm` (`emptyDir` with medium `Memory`, `size_limit` or none) and its
/// mount: the one way every pod this crate builds gets shared memory.
pub fn dshm(size_limit: Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> (Volume, VolumeMount) {
    (
        Volume {
            name: "dshm".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some(shm::MEMORY_MEDIUM.into()),
                size_limit,
                ..Default::default()
            }),
            ..Default::default()
        },
        VolumeMount {
            name: "dshm".into(),
            mount_path: shm::DEV_SHM.into(),
            ..Default::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn extra_labels_are_added_and_never_replace_the_standard_ones() {
        let mut p = base(Role::Server);
        p.extra_labels.insert(LABEL_SWEEP_ID.into(), "sw1".into());
        p.extra_labels.insert(LABEL_INSTANCE.into(), "not-the-run".into());
        let labels = p.build().metadata.labels.unwrap();
        assert_eq!(labels[LABEL_SWEEP_ID], "sw1");
        assert_eq!(labels[LABEL_INSTANCE], "abc123", "cleanup selects on it");
    }

    fn base(role: Role) -> BenchPod {
        BenchPod {
            run_id: "abc123".into(),
            role,
            namespace: "bench".into(),
            node: "gpu-1".into(),
            image: "img:1".into(),
            image_pull_policy: None,
            args: vec!["serve".into(), "--listen".into(), "0.0.0.0:0".into(), "--once".into()],
            env: vec![],
            model: None,
            devices: DeviceChoice::default(),
            active_deadline_s: 120,
            extra_labels: BTreeMap::new(),
            privileged: false,
            host_ipc: false,
            host_pid: false,
            service_account: None,
            tolerations: Vec::new(),
            resources: BenchResources::default(),
            memlock_unlimited: false,
        }
    }

    #[test]
    fn plain_pod_is_least_privileged_and_labelled() {
        let pod = base(Role::Server).build();
        assert_eq!(pod.metadata.name.as_deref(), Some("ic-bench-abc123-server"));
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(labels[LABEL_COMPONENT], "server");
        assert_eq!(labels[LABEL_INSTANCE], "abc123");
        assert_eq!(labels[LABEL_MANAGED_BY], "ic-bench");
        assert_eq!(labels[LABEL_NAME], "ic-bench");
        let spec = pod.spec.clone().unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.active_deadline_seconds, Some(120));
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.host_ipc, None);
        let c = &spec.containers[0];
        let sc = c.security_context.clone().unwrap();
        assert_eq!(sc.privileged, None);
        assert_eq!(sc.capabilities.clone().unwrap().drop.unwrap(), ["ALL"]);
        assert_eq!(sc.capabilities.unwrap().add, None);
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        let pod_sc = spec.security_context.clone().unwrap();
        assert_eq!((pod_sc.run_as_non_root, pod_sc.run_as_user), (Some(true), Some(65532)));
        assert_eq!(
            icb_pss::required_level(&pod.metadata, &spec),
            icb_pss::Level::Restricted
        );
        let res = c.resources.clone().unwrap();
        assert_eq!(res.limits, res.requests);
        assert_eq!(res.limits.unwrap()["memory"], BenchResources::default().memory);
        assert_eq!(spec.tolerations, None, "no taint of an untainted node, never a cordon");
        let mounts = c.volume_mounts.clone().unwrap();
        assert_eq!(mounts[0].mount_path, "/tmp", "scratch on the read-only root");
        let env = c.env.clone().unwrap();
        assert!(
            env.iter()
                .any(|e| e.name == "TMPDIR" && e.value.as_deref() == Some("/tmp"))
        );
        assert_eq!(
            c.command.clone().unwrap()[..2],
            ["ic-bench".to_string(), "serve".to_string()]
        );
        assert_eq!(pinned_node(&pod).as_deref(), Some("gpu-1"));
    }

    #[test]
    fn rdma_devices_bring_ipc_lock_and_privilege_only_when_modelled() {
        let mut m = TransportSpec {
            source: "pod/ref".into(),
            ..Default::default()
        };
        m.devices
            .insert("rdma/hca_shared_devices_a".into(), Quantity("1".into()));
        m.devices.insert("nvidia.com/gpu".into(), Quantity("2".into()));
        let mut p = base(Role::Client);
        p.model = Some(m.clone());
        let pod = p.build();
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let sc = c.security_context.clone().unwrap();
        assert_eq!(sc.capabilities.unwrap().add.unwrap(), vec!["IPC_LOCK".to_string()]);
        assert_eq!(sc.privileged, None);
        let res = c.resources.clone().unwrap();
        assert_eq!(res.limits, res.requests);
        assert_eq!(res.limits.unwrap()["nvidia.com/gpu"], Quantity("2".into()));
        assert_eq!(pod.metadata.annotations.unwrap()[ANNOTATION_MODELLED_ON], "pod/ref");

        m.devices.remove("rdma/hca_shared_devices_a");
        m.privileged = true;
        p.model = Some(m);
        let sc = p.build().spec.unwrap().containers[0].security_context.clone().unwrap();
        assert_eq!(sc.capabilities, None, "no RDMA → no IPC_LOCK");
        assert_eq!(sc.privileged, Some(true));
        assert_eq!(sc.allow_privilege_escalation, None);
    }

    #[test]
    fn rdma_runs_as_root_with_only_ipc_lock_unless_memlock_is_unlimited() {
        let mut p = base(Role::Server);
        p.devices.requests.insert("rdma/ib".into(), Quantity("1".into()));
        let pod = p.build();
        let spec = pod.spec.clone().unwrap();
        let caps = spec.containers[0]
            .security_context
            .clone()
            .unwrap()
            .capabilities
            .unwrap();
        assert_eq!(
            (caps.add.unwrap(), caps.drop.unwrap()),
            (vec!["IPC_LOCK".into()], vec!["ALL".into()])
        );
        let pod_sc = spec.security_context.clone().unwrap();
        assert_eq!(pod_sc.run_as_non_root, None, "an added capability works only for root");
        assert_eq!(pod_sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
        assert_eq!(
            icb_pss::required_level(&pod.metadata, &spec),
            icb_pss::Level::Privileged
        );

        p.memlock_unlimited = true;
        let pod = p.build();
        let spec = pod.spec.clone().unwrap();
        let caps = spec.containers[0]
            .security_context
            .clone()
            .unwrap()
            .capabilities
            .unwrap();
        assert_eq!(caps.add, None);
        assert_eq!(
            icb_pss::required_level(&pod.metadata, &spec),
            icb_pss::Level::Restricted
        );
    }

    #[test]
    fn node_target_devices_bring_resources_and_ipc_lock() {
        let mut p = base(Role::Server);
        p.devices.requests.insert("nvidia.com/gpu".into(), Quantity("1".into()));
        p.devices.requests.insert("rdma/ib".into(), Quantity("1".into()));
        let pod = p.build();
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let res = c.resources.clone().unwrap();
        assert_eq!(res.limits, res.requests);
        assert_eq!(res.limits.unwrap()["rdma/ib"], Quantity("1".into()));
        let caps = c.security_context.clone().unwrap().capabilities.unwrap();
        assert_eq!(caps.add.unwrap(), vec!["IPC_LOCK".to_string()]);
        assert!(
            pod.metadata.annotations.is_none(),
            "a node target is modelled on nothing"
        );
    }

    #[test]
    fn dra_devices_are_claimed_from_the_pods_own_template_and_a_nic_brings_ipc_lock() {
        let offer = crate::dra::DraOffer {
            gpus: 2,
            gpu_class: Some(crate::dra::GPU_DRIVER.into()),
            nic_driver: Some("nic.example.com".into()),
            nics: 2,
            nic_class: Some("nic.example.com".into()),
            rooted: true,
        };
        let mut p = base(Role::Client);
        p.devices.claim = Some(crate::dra::rail_claim(&offer, 1, true).unwrap());
        let pod = p.build();
        let spec = pod.spec.as_ref().unwrap();
        let claims = spec.resource_claims.as_ref().unwrap();
        assert_eq!(
            claims[0].resource_claim_template_name.as_deref(),
            pod.metadata.name.as_deref()
        );
        let c = &spec.containers[0];
        assert_eq!(
            c.resources.as_ref().unwrap().claims.as_ref().unwrap()[0].name,
            claims[0].name
        );
        let caps = c.security_context.clone().unwrap().capabilities.unwrap();
        assert_eq!(caps.add.unwrap(), vec!["IPC_LOCK".to_string()]);
        let template = p.claim_template().unwrap();
        assert_eq!(template.metadata.name, pod.metadata.name);
        assert_eq!(template.metadata.labels, pod.metadata.labels, "found as the run's");
        p.devices.claim = Some(crate::dra::rail_claim(&offer, 1, false).unwrap());
        let gpu_only = p.build();
        assert!(
            gpu_only.spec.unwrap().containers[0]
                .security_context
                .clone()
                .unwrap()
                .capabilities
                .and_then(|c| c.add)
                .is_none(),
            "a GPU alone needs no IPC_LOCK"
        );
        assert!(base(Role::Server).claim_template().is_none());
    }

    #[test]
    fn run_ids() {
        let id = new_run_id();
        assert!(check_run_id(&id).is_ok(), "{id}");
        assert!(check_run_id("Bad_id").is_err());
        assert!(check_run_id("").is_err());
    }
}
