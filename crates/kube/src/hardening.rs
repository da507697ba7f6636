//! Least privilege for the bench pods: who they run as, what they may do, where they may write,
//! which taints they tolerate and what they reserve.
//!
//! A bench pod that needs nothing special (no RDMA, no host IPC/PID namespace, no privilege or
//! capability copied from a modelled pod) meets the Pod Security Standard `restricted`: it runs
//! as the bench image's `icbench` user (uid/gid 65532), drops every capability, cannot gain
//! privileges, runs under the runtime's default seccomp profile, and has a read-only root
//! filesystem; it writes only to an emptyDir at `/tmp` (`TMPDIR` and `HOME` point there: NIXL's
//! UCX log, CUDA's caches) and to `/dev/shm` (the runtime's tmpfs, or the modelled memory
//! emptyDir; UCX's shared memory), both writable whatever the root filesystem.
//!
//! With RDMA, pinning memory (`ibv_reg_mr`) needs CAP_IPC_LOCK or an RLIMIT_MEMLOCK as large as
//! the buffers, not root. But Kubernetes sets no ambient capabilities, so an added capability
//! survives the container's `execve` only for uid 0: an RDMA bench pod adds IPC_LOCK and runs as
//! root (every other capability dropped, no privilege escalation, RuntimeDefault seccomp,
//! read-only root), which is the `privileged` level (baseline allows no IPC_LOCK). Where the
//! container runtime already gives pods an unlimited memlock limit, `--memlock-unlimited` keeps
//! RDMA bench pods non-root without IPC_LOCK: `restricted` again.

use icb_core::model::RunSettings;
use k8s_openapi::api::core::v1::{
    Capabilities, EmptyDirVolumeSource, EnvVar, Node, PodSecurityContext, SeccompProfile, SecurityContext, Toleration,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// The bench image's unprivileged user and group (`icbench`, bench-image/Dockerfile).
pub const BENCH_UID: i64 = 65532;
/// Where a bench pod may write besides `/dev/shm`: an emptyDir.
pub const SCRATCH_DIR: &str = "/tmp";
const SCRATCH_VOLUME: &str = "scratch";
/// cpu for each bench pod (requests = limits): the caller thread and UCX's progress, never
/// throttled; a whole number so a static CPU manager can pin them.
pub const BENCH_CPU: &str = "2";
/// What a bench process holds besides its buffers: UCX, NIXL, the CUDA driver's host side.
const BASE_MEMORY: u64 = 1 << 30;

/// What a bench pod reserves (requests = limits: Guaranteed QoS, admitted by a ResourceQuota).
#[derive(Debug, Clone, PartialEq)]
pub struct BenchResources {
    pub cpu: Quantity,
    pub memory: Quantity,
}

impl Default for BenchResources {
    /// Sized for the full default curve (64 MiB cases at most).
    fn default() -> Self {
        BenchResources::for_settings(&RunSettings::full_curve())
    }
}

impl BenchResources {
    /// Sized from the run's largest case: one side holds one buffer per case (the span of a
    /// multi-block or KV case); twice that covers UCX's bounce and shared-memory copies
    /// (`/dev/shm` is memory the pod is charged for), on top of a fixed base.
    pub fn for_settings(settings: &RunSettings) -> BenchResources {
        let largest = settings
            .case_list()
            .iter()
            .map(|(shape, _)| match &shape.kv {
                Some(kv) => kv.initiator.buffer_bytes.max(kv.target.buffer_bytes),
                None => shape.size.saturating_mul(u64::from(shape.blocks.unwrap_or(1).max(1))),
            })
            .max()
            .unwrap_or(0);
        BenchResources::for_buffer(largest)
    }

    /// `BASE + 2 × largest`, in whole MiB.
    pub fn for_buffer(largest: u64) -> BenchResources {
        let bytes = BASE_MEMORY.saturating_add(largest.saturating_mul(2));
        let mib = bytes.div_ceil(1 << 20);
        BenchResources {
            cpu: Quantity(BENCH_CPU.into()),
            memory: Quantity(format!("{mib}Mi")),
        }
    }

    /// cpu and memory entries for a container's requests and limits.
    pub fn entries(&self) -> BTreeMap<String, Quantity> {
        [
            ("cpu".to_string(), self.cpu.clone()),
            ("memory".to_string(), self.memory.clone()),
        ]
        .into()
    }
}

/// What decides a bench pod's security context.
#[derive(Debug, Clone, Default)]
pub struct Privilege {
    pub privileged: bool,
    pub host_ipc: bool,
    pub host_pid: bool,
    /// Capabilities to add (the model's, IPC_LOCK for RDMA).
    pub add: Vec<String>,
    /// The model's own drops.
    pub drop: Vec<String>,
    /// `allowPrivilegeEscalation` may be set false (not with privileged or SYS_ADMIN).
    pub may_forbid_escalation: bool,
}

impl Privilege {
    /// Runs as the unprivileged user: nothing needs root. Added capabilities are lost by a
    /// non-root process at `execve`, and host namespaces model root workers.
    pub fn non_root(&self) -> bool {
        !self.privileged && !self.host_ipc && !self.host_pid && self.add.is_empty()
    }

    /// The pod-level context: the unprivileged user when possible, RuntimeDefault seccomp
    /// unless privileged (where the runtime ignores it).
    pub fn pod_context(&self) -> Option<PodSecurityContext> {
        let non_root = self.non_root();
        let seccomp = (!self.privileged).then(|| SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        });
        (non_root || seccomp.is_some()).then(|| PodSecurityContext {
            run_as_non_root: non_root.then_some(true),
            run_as_user: non_root.then_some(BENCH_UID),
            run_as_group: non_root.then_some(BENCH_UID),
            fs_group: non_root.then_some(BENCH_UID),
            seccomp_profile: seccomp,
            ..Default::default()
        })
    }

    /// The container's context: every capability dropped but those added (unless privileged,
    /// which has them all), no privilege escalation where the API allows it, read-only root.
    pub fn container_context(&self) -> SecurityContext {
        let mut drop = self.drop.clone();
        if !self.privileged && !drop.iter().any(|d| d == "ALL") {
            drop.insert(0, "ALL".into());
        }
        SecurityContext {
            privileged: self.privileged.then_some(true),
            allow_privilege_escalation: self.may_forbid_escalation.then_some(false),
            capabilities: (!self.add.is_empty() || !drop.is_empty()).then(|| Capabilities {
                add: (!self.add.is_empty()).then(|| self.add.clone()),
                drop: (!drop.is_empty()).then_some(drop),
            }),
            read_only_root_filesystem: Some(true),
            ..Default::default()
        }
    }
}

/// The scratch emptyDir and its mount at [`SCRATCH_DIR`].
pub fn scratch() -> (Volume, VolumeMount) {
    (
        Volume {
            name: SCRATCH_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
        VolumeMount {
            name: SCRATCH_VOLUME.into(),
            mount_path: SCRATCH_DIR.into(),
            ..Default::default()
        },
    )
}

/// `TMPDIR` and `HOME` in the scratch dir (the root filesystem is read-only, and the
/// unprivileged user's home does not exist in the image).
pub fn scratch_env() -> Vec<EnvVar> {
    ["TMPDIR", "HOME"]
        .into_iter()
        .map(|name| EnvVar {
            name: name.into(),
            value: Some(SCRATCH_DIR.into()),
            ..Default::default()
        })
        .collect()
}

/// Taints that say a node is unwell or cordoned (`node.kubernetes.io/unschedulable`, not-ready,
/// memory-pressure …): a benchmark must not run there, so they are never tolerated.
fn node_condition_taint(key: &str) -> bool {
    key.starts_with("node.kubernetes.io/") || key.starts_with("node.cloudprovider.kubernetes.io/")
}

/// What a bench pod pinned to `node` tolerates: exactly the node's own `NoSchedule` taints
/// (e.g. `nvidia.com/gpu=present:NoSchedule` on dedicated GPU nodes, which the workers there
/// tolerate too), never a node-condition taint or a cordon, never `NoExecute` (a node that evicts
/// its pods gives no result to trust).
pub fn tolerations_for(node: &Node) -> Vec<Toleration> {
    node.spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .filter(|t| t.effect == "NoSchedule" && !node_condition_taint(&t.key))
        .map(|t| Toleration {
            key: Some(t.key.clone()),
            operator: Some(if t.value.as_deref().is_some_and(|v| !v.is_empty()) {
                "Equal".into()
            } else {
                "Exists".into()
            }),
            value: t.value.clone().filter(|v| !v.is_empty()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_covers_twice_the_largest_buffer_over_a_base() {
        let r = BenchResources::for_buffer(64 << 20);
        assert_eq!(r.memory, Quantity("1152Mi".into()));
        assert_eq!(r.cpu, Quantity("2".into()));
        let mut s = RunSettings {
            sizes: vec![8, 1 << 30],
            ..RunSettings::full_curve()
        };
        assert_eq!(BenchResources::for_settings(&s).memory, Quantity("3072Mi".into()));
        s.sizes = vec![1 << 20];
        s.blocks = Some(4);
        s.tests = vec![icb_core::model::TestKind::PutBw];
        assert_eq!(BenchResources::for_settings(&s).memory, Quantity("1032Mi".into()));
        assert_eq!(BenchResources::default(), BenchResources::for_buffer(64 << 20));
    }

    #[test]
    fn nothing_special_runs_as_the_unprivileged_user() {
        let p = Privilege {
            may_forbid_escalation: true,
            ..Default::default()
        };
        let pod = p.pod_context().unwrap();
        assert_eq!(pod.run_as_non_root, Some(true));
        assert_eq!(pod.run_as_user, Some(BENCH_UID));
        assert_eq!(pod.seccomp_profile.unwrap().type_, "RuntimeDefault");
        let c = p.container_context();
        assert_eq!(c.capabilities.unwrap().drop.unwrap(), ["ALL"]);
        assert_eq!(c.allow_privilege_escalation, Some(false));
        assert_eq!(c.read_only_root_filesystem, Some(true));
    }

    #[test]
    fn an_added_capability_keeps_root_and_drops_the_rest() {
        let p = Privilege {
            add: vec!["IPC_LOCK".into()],
            may_forbid_escalation: true,
            ..Default::default()
        };
        assert!(!p.non_root());
        let pod = p.pod_context().unwrap();
        assert_eq!(pod.run_as_non_root, None);
        assert!(pod.seccomp_profile.is_some());
        let caps = p.container_context().capabilities.unwrap();
        assert_eq!(
            (caps.add.unwrap(), caps.drop.unwrap()),
            (vec!["IPC_LOCK".into()], vec!["ALL".into()])
        );
        let privileged = Privilege {
            privileged: true,
            ..Default::default()
        };
        assert!(
            privileged.pod_context().is_none(),
            "seccomp is ignored for privileged containers"
        );
        assert_eq!(privileged.container_context().capabilities, None);
    }

    #[test]
    fn only_the_nodes_own_no_schedule_taints_are_tolerated() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gpu-1"},
            "spec": {"taints": [
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "dedicated", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"},
                {"key": "maintenance", "effect": "NoExecute"},
                {"key": "soft", "effect": "PreferNoSchedule"}
            ]}
        }))
        .unwrap();
        let t = tolerations_for(&node);
        let keys: Vec<(&str, &str, Option<&str>)> = t
            .iter()
            .map(|t| {
                (
                    t.key.as_deref().unwrap(),
                    t.operator.as_deref().unwrap(),
                    t.value.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            keys,
            [
                ("nvidia.com/gpu", "Equal", Some("present")),
                ("dedicated", "Exists", None)
            ]
        );
        assert!(t.iter().all(|t| t.effect.as_deref() == Some("NoSchedule")));
    }
}
