//! `probe serving --recipe FILE` through the emulated cluster (issue 42): the recipe's decode
//! worker pod serves a recorded vLLM scrape on a container port named `metrics` and is found and
//! read (its figures those of `--metrics FILE` on the same file); the prefill pod has no metrics
//! port and is named "not read"; the API is only read.

use crate::pair_kube_support::create_reference_pod;
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, TestCluster};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ic-bench");

/// Two Deployments whose pods the probe finds by their selectors.
const RECIPE: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-prefill}
spec:
  selector: {matchLabels: {app: vllm-prefill}}
  template:
    metadata: {labels: {app: vllm-prefill}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          env: [{name: UCX_TLS, value: "rc,cuda_copy"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-decode}
spec:
  selector: {matchLabels: {app: vllm-decode}}
  template:
    metadata: {labels: {app: vllm-decode}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          env: [{name: UCX_TLS, value: "rc,cuda_copy"}]
"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the pod's metrics server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn serving(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(["probe", "serving"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A pod on gpu-1 named `name` with `labels`, serving the recorded vLLM scrape (copied into `dir`
/// as `metrics`) over HTTP on a free port, its container port named `port_name`; returns the port
/// once it listens.
fn scrape_pod(cluster: &TestCluster, dir: &Path, name: &str, labels: serde_json::Value, port_name: &str) -> u16 {
    std::fs::copy(scrape(), dir.join("metrics")).unwrap();
    let port = free_port();
    create_reference_pod(
        cluster,
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": "gpu-1", "containers": [{"name": "main", "image": "vllm/vllm-openai:v0.11.0",
                "command": ["/usr/bin/python3", "-m", "http.server", port.to_string(), "--bind", "127.0.0.1",
                    "--directory", dir.to_str().unwrap()],
                "ports": [{"name": port_name, "containerPort": port}]}]}
        }),
    );
    wait_listening(port);
    port
}

fn scrape() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/serving/vllm_tp1.prom")
}

/// One GPU node whose pods share the host's network (the test reaches them at 127.0.0.1).
fn one_gpu_node() -> TestCluster {
    let config = ClusterConfig::new()
        .node(NodeConfig::gpu("gpu-1", 1))
        .isolation(Isolation::Host);
    TestCluster::start_blocking(config).expect("the emulated cluster starts")
}

/// `probe serving --recipe RECIPE -o json` against the cluster's namespace.
fn serving_recipe(cluster: &TestCluster, recipe: &Path) -> (i32, String, String) {
    let kubeconfig = cluster.kubeconfig_path().to_str().unwrap().to_string();
    serving(&[
        "--recipe",
        recipe.to_str().unwrap(),
        "--kubeconfig",
        &kubeconfig,
        "-n",
        cluster.namespace(),
        "--timeout",
        "5s",
        "-o",
        "json",
    ])
}

#[test]
fn recipe_pods_are_found_and_read_and_a_pod_without_a_port_is_named() {
    let cluster = one_gpu_node();
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("recipe.yaml");
    std::fs::write(&recipe, RECIPE).unwrap();
    let port = scrape_pod(
        &cluster,
        dir.path(),
        "vllm-decode-0",
        serde_json::json!({"app": "vllm-decode"}),
        "metrics",
    );
    create_reference_pod(
        &cluster,
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "vllm-prefill-0", "labels": {"app": "vllm-prefill"}},
            "spec": {"nodeName": "gpu-1", "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                "command": ["sleep", "600"], "ports": [{"name": "http", "containerPort": 8000}]}]}
        }),
    );
    let before = cluster.requests().len();
    let (code, out, err) = serving_recipe(&cluster, &recipe);
    assert_eq!(code, 0, "{err}\n{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (fcode, fout, ferr) = serving(&["--metrics", scrape().to_str().unwrap(), "-o", "json"]);
    assert_eq!(fcode, 0, "{ferr}");
    let file: serde_json::Value = serde_json::from_str(&fout).unwrap();
    assert_eq!(v["serving"]["engines"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["serving"]["engines"], file["serving"]["engines"], "{v}");
    assert!(
        v["serving"]["sources"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(format!(
                "pod:vllm-decode-0 (http://127.0.0.1:{port}/metrics)"
            ))),
        "{v}"
    );
    let source = |pod: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "serving.source" && c["scope"].as_str().is_some_and(|s| s.starts_with(pod)))
            .cloned()
            .unwrap_or_else(|| panic!("no serving.source check for {pod}: {v}"))
    };
    assert_eq!(source("pod:vllm-decode-0")["status"], "ok");
    let prefill = source("pod:vllm-prefill-0");
    assert_eq!(prefill["status"], "warn", "{prefill}");
    let detail = prefill["detail"].as_str().unwrap();
    assert!(
        detail.contains("pod vllm-prefill-0: not read: no container port named `metrics`"),
        "{detail}"
    );
    // Read-only: every request the probe made was a GET.
    let made = &cluster.requests()[before..];
    assert!(!made.is_empty());
    assert!(
        made.iter().all(|r| r.method == "GET"),
        "{:?}",
        made.iter().map(|r| r.line()).collect::<Vec<_>>()
    );
}

#[test]
fn a_recipe_whose_pods_are_not_there_exits_2_naming_what_to_fix() {
    let cluster = one_gpu_node();
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("recipe.yaml");
    std::fs::write(&recipe, RECIPE).unwrap();
    let kubeconfig = cluster.kubeconfig_path().to_str().unwrap().to_string();
    let (code, out, err) = serving(&[
        "--recipe",
        recipe.to_str().unwrap(),
        "--kubeconfig",
        &kubeconfig,
        "-n",
        cluster.namespace(),
    ]);
    assert_eq!(code, 2, "{err}\n{out}");
    assert!(
        err.contains("no pod of its prefill/decode workers in namespace"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A Dynamo graph: the operator's pods are labelled with the graph's and the service's names, and
/// a worker's status server listens on the container port named `system`; the probe finds the
/// decode service's pod by those labels and reads it.
#[test]
fn a_dynamo_graphs_worker_pod_is_found_by_the_operators_labels_and_read() {
    const DGD: &str = r#"
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: llama}
spec:
  backendFramework: vllm
  services:
    VllmDecodeWorker:
      subComponentType: decode
      envs: [{name: UCX_TLS, value: "rc,cuda_copy"}]
"#;
    let cluster = one_gpu_node();
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("dgd.yaml");
    std::fs::write(&recipe, DGD).unwrap();
    let labels = serde_json::json!({
        "nvidia.com/dynamo-graph-deployment-name": "llama",
        "nvidia.com/dynamo-component": "VllmDecodeWorker"
    });
    let port = scrape_pod(&cluster, dir.path(), "llama-vllmdecodeworker-0", labels, "system");
    let (code, out, err) = serving_recipe(&cluster, &recipe);
    assert_eq!(code, 0, "{err}\n{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["serving"]["engines"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(
        v["serving"]["sources"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(format!(
                "pod:llama-vllmdecodeworker-0 (http://127.0.0.1:{port}/metrics)"
            ))),
        "{v}"
    );
}
