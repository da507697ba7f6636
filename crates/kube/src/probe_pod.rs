//! The node-probe pod: one short-lived pod pinned to a node, with the host's `/sys` and `/dev`
//! mounted read-only and no privileges, that runs a read-only script once. Its host network and
//! hostPath volumes make it Pod Security level `privileged` (baseline forbids both): a namespace
//! enforcing more refuses it, and the refusal names the label to set (or `probe node --pod`).
//! It tolerates only the node's own NoSchedule taints and reserves a little cpu and memory. [`run_probe_pod`]
//! creates it, follows its output with [`PodRun`] to the end, and deletes it on every path (an
//! interrupt included). What the script prints is parsed by `icb_probe`, which knows nothing of
//! Kubernetes.

use crate::podrun::PodRun;
use crate::podspec::{
    APP, CONTAINER, LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, instance_selector,
};
use crate::{Cluster, KubeError, lifecycle};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, HostPathVolumeSource, Pod, PodSecurityContext, PodSpec, ResourceRequirements,
    SeccompProfile, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// What the `--node` probe pod looks like.
#[derive(Debug, Clone)]
pub struct ProbePodOptions {
    pub image: String,
    pub image_pull_policy: Option<String>,
    /// The run id in the pod's name and labels (what `ic-bench gc` matches).
    pub run_id: String,
    /// From creation to deletion.
    pub deadline: Duration,
}

pub fn probe_pod_name(run_id: &str) -> String {
    format!("ic-bench-{run_id}-probe")
}

/// cpu and memory of the probe pod (requests = limits): a shell script reading /sys.
const PROBE_CPU: &str = "500m";
const PROBE_MEMORY: &str = "128Mi";

/// The probe pod for `node`: runs `script` once and exits; host `/sys` and `/dev` read-only.
/// `tolerations`: the node's own NoSchedule taints ([`crate::hardening::tolerations_for`]).
pub fn probe_pod(
    namespace: &str,
    node: &str,
    script: &str,
    opts: &ProbePodOptions,
    tolerations: Vec<Toleration>,
) -> Pod {
    let labels: BTreeMap<String, String> = [
        (LABEL_NAME, APP),
        (LABEL_INSTANCE, opts.run_id.as_str()),
        (LABEL_COMPONENT, "probe"),
        (LABEL_MANAGED_BY, APP),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let host = |name: &str, path: &str| Volume {
        name: name.into(),
        host_path: Some(HostPathVolumeSource {
            path: path.into(),
            type_: Some("Directory".into()),
        }),
        ..Default::default()
    };
    let mount = |name: &str, at: &str| VolumeMount {
        name: name.into(),
        mount_path: at.into(),
        read_only: Some(true),
        ..Default::default()
    };
    let reserved: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), Quantity(PROBE_CPU.into())),
        ("memory".to_string(), Quantity(PROBE_MEMORY.into())),
    ]
    .into();
    let env = |k: &str, v: &str| EnvVar {
        name: k.into(),
        value: Some(v.into()),
        ..Default::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(probe_pod_name(&opts.run_id)),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            restart_policy: Some("Never".into()),
            // The host network namespace shows every RDMA netdev and GID of the node.
            host_network: Some(true),
            active_deadline_seconds: Some(opts.deadline.as_secs().max(1) as i64),
            automount_service_account_token: Some(false),
            tolerations: (!tolerations.is_empty()).then_some(tolerations),
            security_context: Some(PodSecurityContext {
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            containers: vec![Container {
                name: CONTAINER.into(),
                image: Some(opts.image.clone()),
                image_pull_policy: opts.image_pull_policy.clone(),
                command: Some(vec!["sh".into(), "-c".into(), script.into()]),
                env: Some(vec![env("ICB_SYS", "/host/sys"), env("ICB_DEV", "/host/dev")]),
                volume_mounts: Some(vec![mount("host-sys", "/host/sys"), mount("host-dev", "/host/dev")]),
                resources: Some(ResourceRequirements {
                    limits: Some(reserved.clone()),
                    requests: Some(reserved),
                    ..Default::default()
                }),
                security_context: Some(SecurityContext {
                    read_only_root_filesystem: Some(true),
                    allow_privilege_escalation: Some(false),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".into()]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            volumes: Some(vec![host("host-sys", "/sys"), host("host-dev", "/dev")]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates the probe pod on `node`, follows its output to the end, and deletes it whatever
/// happened. `interrupt` resolving (Ctrl-C) stops it: [`KubeError::Interrupted`].
pub async fn run_probe_pod(
    cluster: &Cluster,
    node: &str,
    script: &str,
    opts: &ProbePodOptions,
    interrupt: impl Future<Output = ()>,
) -> Result<String, KubeError> {
    let name = probe_pod_name(&opts.run_id);
    // The node's own NoSchedule taints; an unreadable node (no RBAC for nodes) gets none, and a
    // missing one is named by the pod's failure.
    let tolerations = match crate::nodes::get_node(cluster, node).await {
        Ok(n) => crate::hardening::tolerations_for(&n),
        Err(e) if e.is_unreachable() => return Err(e),
        Err(_) => Vec::new(),
    };
    let pod = probe_pod(cluster.namespace(), node, script, opts, tolerations);
    let until = Instant::now() + opts.deadline;
    // Cleared only when no create ever reached the API: then there is nothing to delete, and no
    // "cleanup failed" to report on top of an unreachable server.
    let maybe_created = AtomicBool::new(false);
    let work = async {
        lifecycle::create_pod_tracked(cluster, &pod, &maybe_created).await?;
        let mut run = PodRun::follow(cluster, &name, until);
        let mut out = String::new();
        while let Some(line) = run.next_line().await {
            out.push_str(&line);
            out.push('\n');
        }
        match run.exit_note().await {
            None => Ok(out),
            Some(why) => Err(KubeError::Pod(format!("the probe pod on node {node} failed: {why}"))),
        }
    };
    let result = tokio::select! {
        r = work => r,
        _ = interrupt => Err(KubeError::Interrupted(format!("probe pod {name} deleted"))),
    };
    if result.is_err() && !maybe_created.load(Ordering::SeqCst) {
        return result;
    }
    // Cleanup gets its own deadline: the work's may already have passed.
    let cleanup = lifecycle::delete_matching(
        cluster,
        &instance_selector(&opts.run_id),
        Instant::now() + cluster.request_timeout() * 2,
    )
    .await;
    match (result, cleanup) {
        (Ok(s), Ok(_)) => Ok(s),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), Ok(_)) => Err(e),
        (Err(e), Err(c)) => Err(KubeError::Pod(format!("{e}; and {c}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_pod_is_read_only_and_pinned() {
        let opts = ProbePodOptions {
            image: "img".into(),
            image_pull_policy: None,
            run_id: "abc123".into(),
            deadline: Duration::from_secs(120),
        };
        let p = probe_pod("ns", "gpu-node-1", "echo", &opts, Vec::new());
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("gpu-node-1"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        let c = &spec.containers[0];
        assert!(
            c.volume_mounts
                .as_ref()
                .unwrap()
                .iter()
                .all(|m| m.read_only == Some(true))
        );
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.privileged, None);
        assert_eq!(
            p.metadata
                .labels
                .as_ref()
                .unwrap()
                .get(LABEL_INSTANCE)
                .map(String::as_str),
            Some("abc123")
        );
        assert_eq!(spec.active_deadline_seconds, Some(120));
        assert_eq!(spec.tolerations, None);
        let res = c.resources.clone().unwrap();
        assert_eq!(res.limits, res.requests);
        assert_eq!(res.limits.unwrap()["memory"], Quantity(PROBE_MEMORY.into()));
        assert_eq!(
            icb_pss::required_level(&p.metadata, spec),
            icb_pss::Level::Privileged,
            "host network and hostPath volumes"
        );
    }
}
