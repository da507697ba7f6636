//! `probe env dgd/NAME -n NS` through the emulated cluster (issue 25): the applied
//! DynamoGraphDeployment is read back (GET only) and judged like the file it was applied from.

use icb_kube::kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, TestCluster};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ic-bench");

/// A v1alpha1 DGD (deploy/operator/api/v1alpha1 shape) whose decode worker is on TCP only.
const DGD: &str = r#"{
  "apiVersion": "nvidia.com/v1alpha1",
  "kind": "DynamoGraphDeployment",
  "metadata": {"name": "llama"},
  "spec": {"services": {
    "prefill": {"componentType": "worker", "subComponentType": "prefill",
      "resources": {"limits": {"gpu": "1", "custom": {"rdma/ib": "1"}}},
      "extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0",
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "env": [{"name": "UCX_TLS", "value": "rc,cuda_copy"}]}}},
    "decode": {"componentType": "worker", "subComponentType": "decode",
      "resources": {"limits": {"gpu": "1", "custom": {"rdma/ib": "1"}}},
      "extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0",
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "env": [{"name": "UCX_TLS", "value": "tcp"}]}}}
  }}
}"#;

fn apply(cluster: &TestCluster) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let gvk = GroupVersionKind::gvk("nvidia.com", "v1alpha1", "DynamoGraphDeployment");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "dynamographdeployments");
        let api: Api<DynamicObject> = Api::namespaced_with(cluster.client().unwrap(), cluster.namespace(), &ar);
        let obj: DynamicObject = serde_json::from_str(DGD).unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap();
    });
}

fn probe_env(cluster: &TestCluster, target: &str) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(["probe", "env", target, "-o", "json", "-n", cluster.namespace()])
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--request-timeout", "10s"])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_applied_dgd_is_read_back_and_judged_read_only() {
    let config = ClusterConfig::new()
        .node(NodeConfig::gpu("gpu-1", 1))
        .isolation(Isolation::Host);
    let cluster = TestCluster::start_blocking(config).expect("the emulated cluster starts");
    apply(&cluster);
    let before = cluster.requests().len();
    let (code, out, err) = probe_env(&cluster, "dgd/llama");
    assert_eq!(code, 1, "{err}\n{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let tls: Vec<&serde_json::Value> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"] == "env.ucx_tls.tcp_only")
        .collect();
    assert_eq!(tls.len(), 2, "{v}");
    assert!(
        tls.iter()
            .any(|c| c["status"] == "fail" && c["scope"].as_str().unwrap().contains("decode"))
    );
    assert!(
        tls.iter()
            .any(|c| c["status"] == "ok" && c["scope"].as_str().unwrap().contains("prefill"))
    );
    // Read-only: every request the probe made was a GET.
    let made = &cluster.requests()[before..];
    assert!(!made.is_empty());
    assert!(
        made.iter().all(|r| r.method == "GET"),
        "{:?}",
        made.iter().map(|r| r.line()).collect::<Vec<_>>()
    );
    // A name that is not there: one line, exit 2.
    let (code, _, err) = probe_env(&cluster, "dgd/missing");
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("no DynamoGraphDeployment missing in namespace"), "{err}");
}
