//! The transport-relevant part of a reference pod: what decides which UCX transports a process
//! in it can use (env, devices, capabilities, namespaces, /dev/shm, network attachments).
//!
//! Copying only this, not the whole pod, keeps the bench pods small and least-privileged while
//! reproducing what matters: seed 002's 365 MB/s came from GPU visibility and namespaces alone.

use icb_core::fabric::shm;
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodResourceClaim, PodSpec, PodTemplateSpec, ResourceClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use std::collections::BTreeMap;

/// Pod annotations that attach extra networks (SR-IOV / RDMA NICs through Multus): without them a
/// requested VF is allocated but never plumbed into the pod.
const NETWORK_ANNOTATIONS: &[&str] = &["k8s.v1.cni.cncf.io/networks", "v1.multus-cni.io/default-network"];

/// What is copied from a reference pod into a bench pod.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TransportSpec {
    /// `pod/NAME` it came from.
    pub source: String,
    /// The container it was read from (the one with device requests, else the first).
    pub container: String,
    pub env: Vec<EnvVar>,
    /// Extended resources (any `domain/name`: nvidia.com/gpu, rdma/*, SR-IOV, EFA …), requests = limits.
    pub devices: BTreeMap<String, Quantity>,
    pub capabilities_add: Vec<String>,
    pub capabilities_drop: Vec<String>,
    pub privileged: bool,
    pub host_ipc: bool,
    pub host_pid: bool,
    pub host_network: bool,
    /// `/dev/shm` is a memory-backed emptyDir; `Some(size)` when it has a size limit.
    pub shm: Option<Option<Quantity>>,
    pub runtime_class: Option<String>,
    pub network_annotations: BTreeMap<String, String>,
    /// A template's nodeSelector (the recipe's placement): a bench pod pinned to a node the
    /// workers would never land on cannot be scheduled, and says so. Empty for a running pod,
    /// which is on its node already.
    pub node_selector: BTreeMap<String, String>,
    /// The pod's DRA claims (`spec.resourceClaims`) its container uses: a template entry gives the
    /// bench pod a fresh claim of the same devices, a claim name shares the worker's own claim.
    pub resource_claims: Vec<PodResourceClaim>,
    /// The container's `resources.claims` naming them (a request of a claim included).
    pub container_claims: Vec<ResourceClaim>,
    /// What could not be copied, said in the report so nobody assumes it was.
    pub not_copied: Vec<String>,
}

impl TransportSpec {
    /// RDMA-capable NICs among the device requests (IPC_LOCK is needed to pin memory for them).
    pub fn requests_rdma(&self) -> bool {
        self.devices.keys().any(|k| is_rdma_resource(k))
    }

    /// What the copied DRA claims give the bench pod, for the report; `None` without claims.
    pub fn claims_note(&self) -> Option<String> {
        if self.resource_claims.is_empty() {
            return None;
        }
        let each: Vec<String> = self
            .resource_claims
            .iter()
            .map(|c| match (&c.resource_claim_name, &c.resource_claim_template_name) {
                (Some(claim), _) => format!("{} (shares the claim {claim})", c.name),
                (None, Some(template)) => format!("{} (a fresh claim from template {template})", c.name),
                (None, None) => c.name.clone(),
            })
            .collect();
        Some(format!(
            "resource claims (DRA) copied from {}: {}; they resolve in the bench pod's namespace",
            self.source,
            each.join(", ")
        ))
    }

    /// Reads the transport-relevant spec of `pod`.
    pub fn from_pod(pod: &Pod) -> TransportSpec {
        let name = pod.metadata.name.clone().unwrap_or_default();
        Self::read(format!("pod/{name}"), &pod.metadata, pod.spec.as_ref())
    }

    /// Reads the transport-relevant spec of a pod template (a recipe's prefill/decode workers
    /// that are not running yet), with exactly the sanitizing of [`Self::from_pod`]; `source`
    /// names it in the report (`recipe deploy.yaml decode (Deployment/decode)`).
    pub fn from_template(template: &PodTemplateSpec, source: &str) -> TransportSpec {
        let meta = template.metadata.clone().unwrap_or_default();
        let mut out = Self::read(source.to_string(), &meta, template.spec.as_ref());
        out.node_selector = template
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default();
        out
    }

    fn read(source: String, meta: &ObjectMeta, spec: Option<&PodSpec>) -> TransportSpec {
        let mut out = TransportSpec {
            source: source.clone(),
            ..Default::default()
        };
        let Some(spec) = spec else {
            out.not_copied.push(format!("{source} has no spec"));
            return out;
        };
        out.host_ipc = spec.host_ipc.unwrap_or(false);
        out.host_pid = spec.host_pid.unwrap_or(false);
        out.host_network = spec.host_network.unwrap_or(false);
        out.runtime_class = spec.runtime_class_name.clone();
        if let Some(ann) = &meta.annotations {
            for key in NETWORK_ANNOTATIONS {
                if let Some(v) = ann.get(*key) {
                    out.network_annotations.insert((*key).to_string(), v.clone());
                }
            }
        }
        let Some(c) = pick_container(spec) else {
            out.not_copied.push(format!("{source} has no containers"));
            return out;
        };
        out.container = c.name.clone();
        if spec.containers.len() > 1 {
            out.not_copied.push(format!(
                "only container '{}' of {source} was modelled ({} containers)",
                c.name,
                spec.containers.len()
            ));
        }
        for e in c.env.iter().flatten() {
            if is_transport_env(&e.name) {
                out.env.push(e.clone());
            }
        }
        if c.env_from.as_ref().is_some_and(|v| !v.is_empty()) {
            out.not_copied.push(format!(
                "envFrom of container '{}' (ConfigMap/Secret contents are not read; set UCX_*/NCCL_* explicitly to have them copied)",
                c.name
            ));
        }
        if c.command
            .iter()
            .chain(c.args.iter())
            .flatten()
            .any(|a| a.contains("CUDA_VISIBLE_DEVICES="))
        {
            out.not_copied.push(
                "CUDA_VISIBLE_DEVICES computed in the container's command line (as in seed 002) is not reproduced; set it in env to have it copied"
                    .into(),
            );
        }
        if let Some(res) = &c.resources {
            for (k, v) in res.limits.iter().flatten().chain(res.requests.iter().flatten()) {
                if is_device_resource(k) {
                    out.devices.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        if let Some(sc) = &c.security_context {
            out.privileged = sc.privileged.unwrap_or(false);
            if let Some(caps) = &sc.capabilities {
                out.capabilities_add = caps.add.clone().unwrap_or_default();
                out.capabilities_drop = caps.drop.clone().unwrap_or_default();
            }
        }
        out.shm = shm_of(spec, c, &mut out.not_copied);
        claims_of(spec, c, &mut out);
        out
    }
}

/// Copies the claims container `c` uses with the pod's entries defining them; a claim the pod
/// does not define (or defines with no source) is said, not copied.
fn claims_of(spec: &PodSpec, c: &Container, out: &mut TransportSpec) {
    let defined = spec.resource_claims.as_deref().unwrap_or_default();
    for used in c.resources.iter().flat_map(|r| r.claims.iter().flatten()) {
        let entry = defined
            .iter()
            .find(|p| p.name == used.name)
            .filter(|p| p.resource_claim_name.is_some() || p.resource_claim_template_name.is_some());
        let Some(entry) = entry else {
            out.not_copied.push(format!(
                "claim '{}' of container '{}' is not defined with a template or claim in the pod: not copied",
                used.name, c.name
            ));
            continue;
        };
        if !out.resource_claims.contains(entry) {
            out.resource_claims.push(entry.clone());
        }
        out.container_claims.push(used.clone());
    }
}

/// The container holding device requests or DRA claims (most of them), else the first.
fn pick_container(spec: &PodSpec) -> Option<&Container> {
    let devices = |c: &Container| {
        let resources = c.resources.as_ref();
        let limits = resources
            .and_then(|r| r.limits.as_ref())
            .map(|l| l.keys().filter(|k| is_device_resource(k)).count())
            .unwrap_or(0);
        limits + resources.and_then(|r| r.claims.as_ref()).map_or(0, Vec::len)
    };
    let best = spec.containers.iter().max_by_key(|c| devices(c))?;
    if devices(best) > 0 {
        Some(best)
    } else {
        spec.containers.first()
    }
}

fn shm_of(spec: &PodSpec, c: &Container, notes: &mut Vec<String>) -> Option<Option<Quantity>> {
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| shm::is_dev_shm_mount(&m.mount_path))?;
    let vol = spec.volumes.iter().flatten().find(|v| v.name == mount.name)?;
    match &vol.empty_dir {
        Some(ed) if shm::is_memory_medium(ed.medium.as_deref()) => Some(ed.size_limit.clone()),
        _ => {
            notes.push(format!(
                "/dev/shm volume '{}' is not a memory emptyDir (hostPath/other volumes are not copied)",
                vol.name
            ));
            None
        }
    }
}

/// What a bench pod copies: the transport libraries' variables and GPU visibility (the fabric
/// vocabulary's pod set, the one `probe env` lists). Any extended (device-plugin) resource is
/// copied; RDMA NICs among them also bring IPC_LOCK.
pub use icb_core::fabric::{is_device_resource, is_pod_transport_env as is_transport_env, is_rdma_resource};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_selection() {
        for yes in [
            "UCX_TLS",
            "NCCL_IB_HCA",
            "NIXL_PLUGIN_DIR",
            "FI_PROVIDER",
            "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES",
        ] {
            assert!(is_transport_env(yes), "{yes}");
        }
        for no in ["PATH", "HOME", "SGL_LOGURU_PATH", "UCXX", "LD_LIBRARY_PATH"] {
            assert!(!is_transport_env(no), "{no}");
        }
    }
    #[test]
    fn a_template_is_read_like_a_running_pod() {
        let template: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "rdma-net", "other": "x"}},
            "spec": {
                "hostIPC": true,
                "nodeSelector": {"pool": "decode"},
                "containers": [{"name": "engine", "image": "vllm:1",
                    "env": [{"name": "UCX_TLS", "value": "tcp"}, {"name": "HF_TOKEN", "value": "secret"}],
                    "resources": {"limits": {"nvidia.com/gpu": "2", "rdma/ib": "1", "cpu": "8"}},
                    "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                    "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}],
                "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
            }
        }))
        .unwrap();
        let spec = TransportSpec::from_template(&template, "recipe d.yaml decode (Deployment/decode)");
        assert_eq!(spec.source, "recipe d.yaml decode (Deployment/decode)");
        assert_eq!(spec.container, "engine");
        let env: Vec<&str> = spec.env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(env, ["UCX_TLS"], "only transport variables, never a token");
        assert_eq!(spec.devices.keys().collect::<Vec<_>>(), ["nvidia.com/gpu", "rdma/ib"]);
        assert!(spec.host_ipc && spec.requests_rdma());
        assert_eq!(spec.shm, Some(Some(Quantity("16Gi".into()))));
        assert_eq!(spec.network_annotations.len(), 1);
        assert_eq!(spec.node_selector["pool"], "decode");
        let empty = TransportSpec::from_template(&PodTemplateSpec::default(), "recipe x");
        assert_eq!(empty.not_copied, ["recipe x has no spec"]);
    }

    /// Seed 002's fixed prefill pod: privileged, IPC_LOCK, GPUs, CUDA_VISIBLE_DEVICES computed in
    /// the shell command, UCX env, plus an envFrom and a sidecar.
    #[test]
    fn seed_002_prefill_pod() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pd-sglang-prefill-0"},
            "spec": {
                "runtimeClassName": "nvidia",
                "containers": [
                    {"name": "log-shipper", "image": "fluent:1"},
                    {"name": "pd-sglang-prefill", "image": "sglang:0.4.10",
                     "command": ["bash", "-c", "CUDA_VISIBLE_DEVICES=$(find /proc/driver/nvidia/gpus/ ...) python3 -m sglang.launch_server"],
                     "securityContext": {"privileged": true, "capabilities": {"add": ["IPC_LOCK"]}},
                     "resources": {"limits": {"cpu": "24", "memory": "150Gi", "nvidia.com/gpu": "2"},
                                   "requests": {"cpu": "24", "memory": "150Gi", "nvidia.com/gpu": "2"}},
                     "envFrom": [{"configMapRef": {"name": "ucx-settings"}}],
                     "env": [{"name": "UCX_TLS", "value": "cuda_ipc,cuda_copy,tcp"},
                             {"name": "UCX_MEMTYPE_CACHE", "value": "n"},
                             {"name": "SGL_LOGURU_PATH", "value": "/home/finance/Logs/prefill.log"},
                             {"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['gpus']"}}}]}
                ]
            }
        }))
        .unwrap();
        let spec = TransportSpec::from_pod(&pod);
        assert_eq!(spec.source, "pod/pd-sglang-prefill-0");
        assert_eq!(
            spec.container, "pd-sglang-prefill",
            "the container with the GPUs, not the first"
        );
        assert!(spec.privileged);
        assert_eq!(spec.capabilities_add, vec!["IPC_LOCK".to_string()]);
        assert_eq!(spec.devices.keys().collect::<Vec<_>>(), ["nvidia.com/gpu"]);
        assert!(!spec.requests_rdma());
        assert_eq!(spec.runtime_class.as_deref(), Some("nvidia"));
        let names: Vec<&str> = spec.env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["UCX_TLS", "UCX_MEMTYPE_CACHE", "NVIDIA_VISIBLE_DEVICES"]);
        assert!(spec.env[2].value_from.is_some(), "valueFrom is copied as-is");
        let notes = spec.not_copied.join("\n");
        assert!(notes.contains("only container 'pd-sglang-prefill'"), "{notes}");
        assert!(notes.contains("envFrom"), "{notes}");
        assert!(
            notes.contains("CUDA_VISIBLE_DEVICES computed in the container's command line"),
            "{notes}"
        );
        assert!(!spec.host_ipc && !spec.host_pid && !spec.host_network);
        assert_eq!(spec.shm, None);
    }
}
