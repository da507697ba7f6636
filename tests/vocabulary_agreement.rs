//! `probe env` (the recipe reader, `icb_recipe`) and `pair`'s spec cloner
//! (`icb_kube::spec::TransportSpec::from_pod`) must judge one pod the same way: the same RDMA and
//! GPU resources, the same transport environment, the same privileges and /dev/shm. Both read
//! through `icb_core::fabric`; this feeds them the same Kubernetes Pod objects and compares.

use icb_core::fabric;
use icb_kube::k8s_openapi::api::core::v1::Pod;
use icb_kube::spec::TransportSpec;
use icb_recipe::{Input, RoleEnv};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// One container `main`, with `env` (literal values), resource `limits` (= requests), a security
/// context and pod-level fields merged in.
fn pod(name: &str, env: &[(&str, &str)], limits: Value, security: Value, pod_fields: Value) -> Value {
    let env: Vec<Value> = env.iter().map(|(n, v)| json!({"name": n, "value": v})).collect();
    let mut spec = json!({
        "containers": [{
            "name": "main",
            "image": "vllm/vllm-openai:v0.10",
            "env": env,
            "resources": {"limits": limits.clone(), "requests": limits},
            "securityContext": security,
        }]
    });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), pod_fields.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn shm_volume(medium: &str, size: &str) -> Value {
    json!({
        "volumes": [{"name": "dshm", "emptyDir": {"medium": medium, "sizeLimit": size}}],
    })
}

/// The pods both sides read. Names say the role, so the recipe treats each as an engine role.
fn pods() -> Vec<Value> {
    let mut pods = vec![
        pod(
            "ib-prefill-0",
            &[
                ("UCX_TLS", "rc_x,rc,cuda_copy,cuda_ipc"),
                ("UCX_NET_DEVICES", "mlx5_0:1"),
                ("NCCL_IB_HCA", "=mlx5_0"),
                ("HOME", "/root"),
            ],
            json!({"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8", "rdma/ib": "1"}),
            json!({"capabilities": {"add": ["IPC_LOCK"]}}),
            json!({}),
        ),
        pod(
            "roce-sriov-decode-0",
            &[
                ("NCCL_IB_GID_INDEX", "3"),
                ("NVSHMEM_IB_GID_INDEX", "3"),
                ("UCX_IB_GID_INDEX", "3"),
                ("NCCL_DEBUG", "INFO"),
            ],
            json!({"nvidia.com/gpu": "4", "openshift.io/mlnx_sriov_rdma": "1", "intel.com/sriov_netdevice": "1"}),
            json!({"capabilities": {"add": ["IPC_LOCK", "NET_RAW"]}}),
            json!({}),
        ),
        pod(
            "efa-decode-0",
            &[
                ("FI_PROVIDER", "efa"),
                ("FI_EFA_USE_DEVICE_RDMA", "1"),
                ("DYN_KVBM_NIXL_BACKEND_LIBFABRIC", "true"),
                ("UCX_TLS", "srd,cuda_copy,tcp"),
                ("SGL_LOGURU_PATH", "/tmp/log"),
            ],
            json!({"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4", "hugepages-2Mi": "5Gi"}),
            json!({"capabilities": {"add": ["IPC_LOCK"]}}),
            json!({}),
        ),
        pod(
            "hostdev-prefill-0",
            &[("NIXL_PLUGIN_DIR", "/opt/nixl/plugins"), ("GLOO_SOCKET_IFNAME", "eth0")],
            json!({"nvidia.com/gpu": "2", "nvidia.com/hostdev": "1", "mellanox.com/cx6": "1", "example.com/fpga": "1"}),
            json!({"capabilities": {"add": ["IPC_LOCK"]}}),
            json!({}),
        ),
        pod(
            "gpu-only-decode-0",
            &[
                ("CUDA_VISIBLE_DEVICES", "0,1"),
                ("NVIDIA_VISIBLE_DEVICES", "all"),
                ("UCX_TLS", "cuda_ipc,cuda_copy,tcp"),
                ("PATH", "/usr/bin"),
            ],
            json!({"cpu": "4", "nvidia.com/mig-3g.40gb": "1"}),
            json!({}),
            json!({}),
        ),
        pod(
            "amd-prefill-0",
            &[
                ("HIP_VISIBLE_DEVICES", "0"),
                ("ROCR_VISIBLE_DEVICES", "0"),
                ("UCX_TLS", "rocm,rc"),
            ],
            json!({"amd.com/gpu": "1", "rdma/rdma_shared_device_a": "1"}),
            json!({"capabilities": {"add": ["IPC_LOCK"]}}),
            json!({}),
        ),
        pod(
            "hostipc-prefill-0",
            &[("UCX_TLS", "cuda_ipc,cuda_copy,sm"), ("UCX_LOG_LEVEL", "info")],
            json!({"nvidia.com/gpu": "8"}),
            json!({"privileged": true}),
            json!({"hostIPC": true, "hostPID": true, "hostNetwork": true}),
        ),
    ];
    // /dev/shm: a memory emptyDir with a size, and one whose medium the kubelet would refuse.
    for (name, medium) in [("shm-decode-0", "Memory"), ("shm-lowercase-decode-0", "memory")] {
        let mut p = pod(
            name,
            &[("UCX_TLS", "sm,cuda_copy")],
            json!({"nvidia.com/gpu": "1"}),
            json!({}),
            shm_volume(medium, "16Gi"),
        );
        p["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "dshm", "mountPath": "/dev/shm/"}]);
        pods.push(p);
    }
    // A sidecar first, the engine second (seed 002's shape): both sides model the engine.
    let mut p = pod(
        "sidecar-decode-0",
        &[("UCX_TLS", "rc,cuda_copy")],
        json!({"nvidia.com/gpu": "2", "rdma/hca_shared_devices_a": "1"}),
        json!({"capabilities": {"add": ["IPC_LOCK"]}}),
        json!({}),
    );
    let main = p["spec"]["containers"][0].clone();
    p["spec"]["containers"] =
        json!([{"name": "log-shipper", "image": "fluent:1", "env": [{"name": "UCX_TLS", "value": "tcp"}]}, main]);
    pods.push(p);
    pods
}

/// What one side made of a pod, in the terms both can state.
#[derive(Debug, PartialEq)]
struct Judgement {
    rdma: BTreeMap<String, String>,
    gpus: BTreeMap<String, String>,
    env: BTreeMap<String, String>,
    privileged: bool,
    capabilities: BTreeSet<String>,
    host_ipc: bool,
    host_pid: bool,
    host_network: bool,
    /// Bytes of a memory-backed /dev/shm (`None` when there is none).
    shm_bytes: Option<u64>,
}

fn from_pair(pod: &Pod) -> Judgement {
    let spec = TransportSpec::from_pod(pod);
    let devices = |keep: fn(&str) -> bool| -> BTreeMap<String, String> {
        spec.devices
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect()
    };
    assert_eq!(
        spec.requests_rdma(),
        spec.devices.keys().any(|k| icb_kube::spec::is_rdma_resource(k)),
        "{}",
        spec.source
    );
    Judgement {
        rdma: devices(icb_kube::spec::is_rdma_resource),
        gpus: devices(fabric::is_gpu_resource),
        env: spec
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect(),
        privileged: spec.privileged,
        capabilities: spec.capabilities_add.iter().cloned().collect(),
        host_ipc: spec.host_ipc,
        host_pid: spec.host_pid,
        host_network: spec.host_network,
        shm_bytes: spec.shm.as_ref().map(|size| {
            size.as_ref()
                .and_then(|q| fabric::quantity::parse_bytes(&q.0))
                .unwrap_or(u64::MAX)
        }),
    }
}

fn from_probe_env(name: &str, role: &RoleEnv, vars: &BTreeMap<String, String>, limits: &Value) -> Judgement {
    // The recipe keeps one GPU count per role; name it with the pod's GPU resource.
    let gpus = limits
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| fabric::is_gpu_resource(k))
        .filter_map(|(k, _)| Some((k.clone(), role.resources.gpus.clone()?)))
        .collect();
    assert!(role.resources.gpus.is_some(), "{name}: every pod here asks for a GPU");
    Judgement {
        rdma: role.resources.rdma.clone(),
        gpus,
        env: vars.clone(),
        privileged: role.privileged,
        capabilities: role.capabilities.iter().cloned().collect(),
        host_ipc: role.host_ipc,
        host_pid: role.host_pid,
        host_network: role.host_network,
        shm_bytes: role.shm.as_ref().and_then(|(_, bytes)| *bytes),
    }
}

#[test]
fn probe_env_and_pair_judge_the_same_pods_alike() {
    let pods = pods();
    let inputs: Vec<Input> = pods
        .iter()
        .map(|p| Input::Text {
            name: format!("{}.yaml", p["metadata"]["name"].as_str().unwrap_or("pod")),
            content: serde_json::to_string_pretty(p).unwrap_or_default(),
        })
        .collect();
    let docs = icb_recipe::load_inputs(&inputs).expect("the pods load as recipes");
    let resolution = icb_recipe::resolve(&docs);
    let listed = icb_recipe::transport_env(&resolution);
    assert_eq!(listed.len(), pods.len(), "probe env lists one engine role per pod");

    for value in &pods {
        let name = value["metadata"]["name"].as_str().unwrap_or_default();
        let pod: Pod = serde_json::from_value(value.clone()).expect("a valid Pod");
        let role = resolution
            .roles
            .iter()
            .find(|r| r.sources.iter().any(|s| s.starts_with(name)))
            .unwrap_or_else(|| panic!("{name}: no role resolved"));
        let vars = &listed
            .iter()
            .find(|t| t.scope.contains(name))
            .unwrap_or_else(|| panic!("{name}: not listed by probe env"))
            .vars;
        let limits = &value["spec"]["containers"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "main"))
            .map(|c| c["resources"]["limits"].clone())
            .unwrap_or_default();
        let pair = from_pair(&pod);
        let probe = from_probe_env(name, role, vars, limits);
        assert_eq!(probe, pair, "{name}: probe env (left) and pair (right) disagree");
    }
}

/// The agreement above must not be an agreement on nothing: pin what both sides found.
#[test]
fn the_pods_exercise_the_whole_vocabulary() {
    let judged: BTreeMap<String, Judgement> = pods()
        .iter()
        .map(|v| {
            let pod: Pod = serde_json::from_value(v.clone()).expect("a valid Pod");
            (
                v["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                from_pair(&pod),
            )
        })
        .collect();
    let rdma = |n: &str| judged[n].rdma.keys().cloned().collect::<Vec<_>>();
    assert_eq!(rdma("ib-prefill-0"), ["rdma/ib"]);
    assert_eq!(
        rdma("roce-sriov-decode-0"),
        ["intel.com/sriov_netdevice", "openshift.io/mlnx_sriov_rdma"]
    );
    assert_eq!(rdma("efa-decode-0"), ["vpc.amazonaws.com/efa"]);
    assert_eq!(rdma("hostdev-prefill-0"), ["mellanox.com/cx6", "nvidia.com/hostdev"]);
    assert!(rdma("gpu-only-decode-0").is_empty());
    assert_eq!(rdma("amd-prefill-0"), ["rdma/rdma_shared_device_a"]);
    assert_eq!(
        judged["gpu-only-decode-0"].gpus.keys().collect::<Vec<_>>(),
        ["nvidia.com/mig-3g.40gb"]
    );
    assert_eq!(judged["amd-prefill-0"].gpus.keys().collect::<Vec<_>>(), ["amd.com/gpu"]);
    let env = |n: &str| judged[n].env.keys().cloned().collect::<Vec<_>>();
    assert_eq!(env("ib-prefill-0"), ["NCCL_IB_HCA", "UCX_NET_DEVICES", "UCX_TLS"]);
    assert_eq!(
        env("efa-decode-0"),
        [
            "DYN_KVBM_NIXL_BACKEND_LIBFABRIC",
            "FI_EFA_USE_DEVICE_RDMA",
            "FI_PROVIDER",
            "UCX_TLS"
        ]
    );
    assert_eq!(env("hostdev-prefill-0"), ["GLOO_SOCKET_IFNAME", "NIXL_PLUGIN_DIR"]);
    assert_eq!(
        env("gpu-only-decode-0"),
        ["CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "UCX_TLS"]
    );
    assert_eq!(env("hostipc-prefill-0"), ["UCX_LOG_LEVEL", "UCX_TLS"]);
    assert_eq!(
        judged["sidecar-decode-0"].env["UCX_TLS"], "rc,cuda_copy",
        "the engine container"
    );
    let h = &judged["hostipc-prefill-0"];
    assert!(h.privileged && h.host_ipc && h.host_pid && h.host_network);
    assert!(judged["ib-prefill-0"].capabilities.contains("IPC_LOCK"));
    assert_eq!(judged["shm-decode-0"].shm_bytes, Some(16 << 30));
    assert_eq!(
        judged["shm-lowercase-decode-0"].shm_bytes, None,
        "medium: memory is refused by the kubelet"
    );
}
