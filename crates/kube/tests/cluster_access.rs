//! icb-kube against the emulated API server: the kubeconfig path product code uses, per-call
//! deadlines and retries, exec (for `probe node --pod`), and gc.
//! Host isolation: pods are plain local processes, so no root is needed.

use icb_kube::k8s_openapi::api::core::v1::Pod;
use icb_kube::{Cluster, ClusterOptions, KubeError};
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RequestMatch, TestCluster};
use std::time::{Duration, Instant};

async fn start() -> TestCluster {
    TestCluster::start(
        ClusterConfig::new()
            .node(NodeConfig::new("n1"))
            .isolation(Isolation::Host),
    )
    .await
    .unwrap()
}

async fn connect(tc: &TestCluster, timeout: Duration) -> Cluster {
    icb_kube::connect(&ClusterOptions {
        kubeconfig: Some(tc.kubeconfig_path().to_path_buf()),
        request_timeout: timeout,
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn sleeper(cluster: &Cluster, name: &str) {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "ic-bench", "app.kubernetes.io/instance": "t1"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "bench", "image": "busybox", "command": ["sleep", "600"]}]}
    }))
    .unwrap();
    icb_kube::lifecycle::create_pod(cluster, &pod).await.unwrap();
    icb_kube::lifecycle::wait_running(cluster, name, tokio::time::Instant::now() + Duration::from_secs(30))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_returns_output_and_exit_code() {
    let tc = start().await;
    let cluster = connect(&tc, Duration::from_secs(10)).await;
    assert_eq!(cluster.namespace(), tc.namespace());
    sleeper(&cluster, "p1").await;
    let cmd: Vec<String> = ["sh", "-c", "echo out; echo err >&2; exit 3"]
        .map(String::from)
        .to_vec();
    let out = cluster
        .exec("p1", Some("bench"), &cmd, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(out.stdout_lossy(), "out\n");
    assert_eq!(out.stderr_lossy(), "err\n");
    assert_eq!(out.exit_code, 3);
    let ok = cluster
        .exec("p1", None, &["true".to_string()], Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(ok.exit_code, 0);
    let missing = cluster
        .exec("nope", None, &["true".to_string()], Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    // A command that outlives its deadline is cut off with a clear error.
    let started = Instant::now();
    let slow = cluster
        .exec(
            "p1",
            None,
            &["sleep".to_string(), "30".to_string()],
            Duration::from_millis(500),
        )
        .await;
    assert!(matches!(slow, Err(KubeError::Timeout { .. })), "{slow:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_retry_transient_errors_within_the_deadline_and_then_give_up() {
    let tc = start().await;
    let cluster = connect(&tc, Duration::from_secs(3)).await;
    sleeper(&cluster, "p1").await;
    let api = cluster.pods();
    tc.fail_requests(RequestMatch::new("GET", "/api/v1/namespaces/*/pods/p1"), 500, 3);
    let pod = cluster.call("get pod p1", || api.get("p1")).await.unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("p1"));

    // 503 is retried by kube itself (up to 15 times): the deadline bounds that too.
    tc.fail_requests_always(RequestMatch::new("GET", "/api/v1/namespaces/*/pods/p1"), 503);
    let started = Instant::now();
    let err = cluster.call("get pod p1", || api.get("p1")).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    let msg = err.to_string();
    assert!(msg.starts_with("get pod p1: "), "{msg}");
    tc.clear_faults();

    // Permission errors are not retried and say what to do. Every request gets the 403 (a one-shot
    // fault was once taken by a request the abandoned 503 call left in flight, under load), so a
    // retrying call would run to its 3 s deadline: under 1 s proves none was retried.
    tc.fail_requests_always(RequestMatch::new("GET", "/api/v1/namespaces/*/pods/p1"), 403);
    let started = Instant::now();
    let err = cluster
        .call("get pod p1", || api.get("p1"))
        .await
        .unwrap_err()
        .to_string();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(err.contains("HTTP 403") && err.contains("manifests/rbac.yaml"), "{err}");
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_deletes_only_ic_bench_pods_older_than_asked() {
    let tc = start().await;
    let cluster = connect(&tc, Duration::from_secs(10)).await;
    sleeper(&cluster, "left-over").await;
    let other: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "workload"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x", "command": ["sleep", "600"]}]}
    }))
    .unwrap();
    icb_kube::lifecycle::create_pod(&cluster, &other).await.unwrap();

    let young = icb_kube::gc::GcOptions {
        older_than: Some(Duration::from_secs(3600)),
        ..Default::default()
    };
    assert!(icb_kube::gc::collect(&cluster, &young).await.unwrap().is_empty());
    let dry = icb_kube::gc::GcOptions {
        dry_run: true,
        ..Default::default()
    };
    let listed = icb_kube::gc::collect(&cluster, &dry).await.unwrap();
    assert_eq!(
        listed.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["left-over"]
    );
    assert!(tc.pod(tc.namespace(), "left-over").is_some(), "dry run deleted");
    let taken = icb_kube::gc::collect(&cluster, &Default::default()).await.unwrap();
    assert_eq!(taken.len(), 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tc.pod(tc.namespace(), "left-over").is_some() {
        assert!(Instant::now() < deadline, "gc did not delete the pod");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        tc.pod(tc.namespace(), "workload").is_some(),
        "gc touched a pod that is not ic-bench's"
    );
    tc.shutdown().await;
}
