//! Why a namespace refused one of our pods (HTTP 403 Forbidden on create), decided on types: the
//! Status code and reason, the namespace's `pod-security.kubernetes.io/enforce` label and the Pod
//! Security level our own pod needs ([`icb_pss::required_level`]); never on the server's text.
//! The result is one line naming the label or flag that fixes it.

use crate::access::Cluster;
use crate::error::KubeError;
use icb_core::fabric::privilege::{IPC_LOCK, grants_capability};
use icb_pss::{ENFORCE_LABEL, Level, NamespacePolicy};
use k8s_openapi::api::core::v1::{Namespace, Pod};

/// A create refused by the API server with 403 Forbidden (RBAC or an admission plugin).
pub fn is_forbidden(e: &KubeError) -> bool {
    matches!(e, KubeError::Api { code: 403, reason, .. } if reason == "Forbidden")
}

/// The namespace's Pod Security policy, when the account may read the namespace.
async fn policy(cluster: &Cluster) -> Option<NamespacePolicy> {
    let api: kube::Api<Namespace> = kube::Api::all(cluster.client().clone());
    let ns = cluster.namespace().to_string();
    let read = cluster
        .call(&format!("get namespace {ns}"), || api.get(&ns))
        .await
        .ok()?;
    Some(NamespacePolicy::from_labels(&read.metadata.labels.unwrap_or_default()))
}

/// What would let `pod` in without a `privileged` namespace, from what makes it need more.
fn remedy(pod: &Pod) -> &'static str {
    let spec = pod.spec.clone().unwrap_or_default();
    let host_fs = spec.volumes.iter().flatten().any(|v| v.host_path.is_some());
    let container = spec.containers.first();
    let sc = container.and_then(|c| c.security_context.as_ref());
    let privileged = sc.and_then(|s| s.privileged).unwrap_or(false);
    let adds: Vec<String> = sc
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.add.clone())
        .unwrap_or_default();
    let host_ns = [spec.host_ipc, spec.host_pid, spec.host_network].contains(&Some(true));
    if host_fs {
        "or run the probe inside an existing pod with `probe node --pod POD` (the probe pod reads the host's /sys and /dev)"
    } else if privileged {
        "or leave out --privileged (and model a pod that is not privileged)"
    } else if host_ns {
        "or leave out --host-ipc/--host-pid (and model a pod without host namespaces)"
    } else if grants_capability(&adds, IPC_LOCK) && adds.len() == 1 {
        "or pass --memlock-unlimited where the container runtime gives pods an unlimited memlock limit (the RDMA bench pods then need only \"restricted\")"
    } else {
        "or model a pod that adds no capabilities"
    }
}

/// The one line for a pod the namespace refused: by Pod Security when the namespace enforces a
/// level above the pod's (or when the namespace cannot be read, the level it needs is said
/// anyway), else the API's own error (RBAC, a ResourceQuota, another admission policy).
pub async fn explain_forbidden(cluster: &Cluster, pod: &Pod, err: KubeError) -> KubeError {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = cluster.namespace();
    let spec = pod.spec.clone().unwrap_or_default();
    let needs = icb_pss::required_level(&pod.metadata, &spec);
    match policy(cluster).await {
        Some(p) if p.enforce.level > needs => {
            let why: Vec<String> = icb_pss::evaluate(p.enforce.level, &pod.metadata, &spec)
                .into_iter()
                .map(|v| v.reason)
                .collect();
            KubeError::Refused(format!(
                "namespace {ns} enforces Pod Security \"{}\" ({ENFORCE_LABEL}={}) and refused pod {name} ({}): it needs \"{needs}\": label the namespace {ENFORCE_LABEL}={needs}, {}",
                p.enforce.level,
                p.enforce.level,
                why.join(", "),
                remedy(pod)
            ))
        }
        Some(_) => err,
        None if needs < Level::Restricted => KubeError::Refused(format!(
            "{err}; if namespace {ns} enforces Pod Security, pod {name} needs \"{needs}\": label it {ENFORCE_LABEL}={needs}, {}",
            remedy(pod)
        )),
        None => err,
    }
}
