//! Devices and workload targets on the emulated cluster, seen through `--dry-run=client`: bench
//! pods on node targets request what the node advertises (one GPU, one RDMA resource, IPC_LOCK),
//! flags override it, and statefulset/LWS/Dynamo targets resolve to their Ready pods.

use crate::pair_kube_support as support;

use icb_kube::k8s_openapi::api::core::v1::Pod;
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, TestCluster};
use serde_json::json;
use std::time::Duration;
use support::*;

fn cluster() -> TestCluster {
    let config = ClusterConfig::new()
        .node(NodeConfig::gpu("gpu-1", 8))
        .node(NodeConfig::new("efa-1").capacity("vpc.amazonaws.com/efa", "4"))
        .node(NodeConfig::new("cpu-1"))
        .program(BIN)
        .isolation(Isolation::Host);
    TestCluster::start_blocking(config).expect("the emulated cluster starts")
}

fn dry_run(cluster: &TestCluster, prefill: &str, decode: &str, extra: &[&str]) -> (Vec<Pod>, String) {
    let mut args = vec!["--prefill", prefill, "--decode", decode, "--dry-run", "-o", "yaml"];
    args.extend_from_slice(extra);
    let run = run_pair(cluster, &args, Duration::from_secs(60));
    assert_eq!(run.code, 0, "{run:#?}");
    (
        icb_kube::yaml::pods(&run.stdout).expect("dry run YAML parses"),
        run.stderr,
    )
}

/// The device requests (cpu and memory, which every bench pod reserves, checked apart).
fn requests(pod: &Pod) -> Vec<(String, String)> {
    let c = &pod.spec.as_ref().unwrap().containers[0];
    let all = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone())
        .unwrap_or_default();
    assert!(
        all.contains_key("cpu") && all.contains_key("memory"),
        "every bench pod reserves cpu and memory: {all:?}"
    );
    all.into_iter()
        .filter(|(k, _)| k != "cpu" && k != "memory")
        .map(|(k, v)| (k, v.0))
        .collect()
}

fn caps(pod: &Pod) -> Vec<String> {
    let c = &pod.spec.as_ref().unwrap().containers[0];
    c.security_context
        .as_ref()
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.add.clone())
        .unwrap_or_default()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[test]
fn node_targets_request_what_the_node_advertises_and_flags_override() {
    let cluster = cluster();
    let (pods, _) = dry_run(&cluster, "node/gpu-1", "node/efa-1", &[]);
    // Server (decode) first: the EFA node.
    assert_eq!(requests(&pods[0]), vec![pair("vpc.amazonaws.com/efa", "1")]);
    assert_eq!(caps(&pods[0]), vec!["IPC_LOCK".to_string()]);
    assert_eq!(
        requests(&pods[1]),
        vec![pair("nvidia.com/gpu", "1"), pair("rdma/ib", "1")]
    );
    assert_eq!(caps(&pods[1]), vec!["IPC_LOCK".to_string()]);

    let (pods, _) = dry_run(
        &cluster,
        "node/gpu-1",
        "node/cpu-1",
        &["--gpus", "2", "--rdma", "none", "--resource", "example.com/fpga=1"],
    );
    assert_eq!(
        requests(&pods[0]),
        vec![pair("example.com/fpga", "1"), pair("nvidia.com/gpu", "2")],
        "explicit flags apply to a node without devices too"
    );
    assert!(caps(&pods[0]).is_empty(), "no RDMA, no IPC_LOCK");
    assert_eq!(
        requests(&pods[1]),
        vec![pair("example.com/fpga", "1"), pair("nvidia.com/gpu", "2")]
    );

    let (pods, _) = dry_run(&cluster, "node/cpu-1", "node/cpu-1", &[]);
    assert!(requests(&pods[0]).is_empty() && requests(&pods[1]).is_empty());
    assert!(leftover_bench_pods(&cluster).is_empty(), "a dry run creates nothing");
}

fn workload_pod(name: &str, node: &str, labels: serde_json::Value, owner: Option<(&str, &str)>) -> serde_json::Value {
    let mut meta = json!({"name": name, "labels": labels});
    if let Some((kind, owner)) = owner {
        meta["ownerReferences"] =
            json!([{"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": "u-1", "controller": true}]);
    }
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "serving:1", "command": ["sleep", "600"],
            "env": [{"name": "UCX_TLS", "value": "rc,cuda_copy"}]}]}
    });
    if node == "gpu-1" {
        pod["spec"]["containers"][0]["resources"] =
            json!({"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}});
    }
    pod
}

#[test]
fn statefulset_lws_and_dynamo_targets_resolve_to_their_pods() {
    let cluster = cluster();
    create_reference_pod(
        &cluster,
        workload_pod("db-0", "gpu-1", json!({"app": "db"}), Some(("StatefulSet", "db"))),
    );
    create_reference_pod(
        &cluster,
        workload_pod(
            "vllm-0",
            "efa-1",
            json!({"leaderworkerset.sigs.k8s.io/name": "vllm"}),
            None,
        ),
    );
    create_reference_pod(
        &cluster,
        workload_pod(
            "llama-decode-abc",
            "cpu-1",
            json!({"nvidia.com/dynamo-graph-deployment-name": "llama", "nvidia.com/dynamo-component": "VllmDecodeWorker"}),
            None,
        ),
    );
    // Ready takes a moment after Running in the emulated kubelet.
    std::thread::sleep(Duration::from_millis(500));
    let (pods, err) = dry_run(&cluster, "statefulset/db", "dgd/llama/VllmDecodeWorker", &[]);
    assert_eq!(
        icb_kube::podspec::pinned_node(&pods[0]).as_deref(),
        Some("cpu-1"),
        "{err}"
    );
    assert_eq!(
        icb_kube::podspec::pinned_node(&pods[1]).as_deref(),
        Some("gpu-1"),
        "{err}"
    );
    let modelled = |p: &Pod| p.metadata.annotations.as_ref().unwrap()["ic-bench.dev/modelled-on"].clone();
    assert_eq!(modelled(&pods[0]), "pod/llama-decode-abc");
    assert_eq!(modelled(&pods[1]), "pod/db-0");
    // Modelled pods keep the reference's devices; no node defaults are added.
    assert_eq!(requests(&pods[1]), vec![pair("nvidia.com/gpu", "2")]);

    let (pods, _) = dry_run(&cluster, "lws/vllm", "lws/vllm", &[]);
    assert_eq!(icb_kube::podspec::pinned_node(&pods[0]).as_deref(), Some("efa-1"));

    let run = run_pair(
        &cluster,
        &["--prefill", "lws/nope", "--decode", "dgd/llama/Other", "--dry-run"],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.last_err_line().contains("has no pods in namespace"),
        "{}",
        run.stderr
    );
}
