//! `probe node --pod`, `probe node --node` and `probe nixl --pod` through the emulated cluster:
//! the report comes back, and the API server's request log shows nothing written beyond the
//! exec session (for --pod) or the one probe pod, which is deleted (for --node).

use icb_kube::k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec};
use icb_kube::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RecordedRequest, TestCluster};
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_ic-bench");

fn cluster() -> TestCluster {
    // Host isolation: pods are plain local processes (no root needed); unknown images run their
    // command as given, so `sh -c` works with any image name.
    let config = ClusterConfig::new()
        .node(NodeConfig::gpu("gpu-1", 8))
        .isolation(Isolation::Host);
    TestCluster::start_blocking(config).expect("the emulated cluster starts")
}

fn ic_bench(cluster: &TestCluster, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars() {
        if icb_probe::envspec::is_transport_var(&k) {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .args(args)
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

/// Requests that change cluster state (anything but reads, watches and the exec upgrade).
fn writes(reqs: &[RecordedRequest]) -> Vec<String> {
    reqs.iter().filter(|r| r.method != "GET").map(|r| r.line()).collect()
}

fn start_worker(cluster: &TestCluster, name: &str, env: &[(&str, &str)]) {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("gpu-1".into()),
            containers: vec![Container {
                name: "main".into(),
                image: Some("worker:1".into()),
                command: Some(vec!["sleep".into(), "300".into()]),
                env: Some(
                    env.iter()
                        .map(|(k, v)| EnvVar {
                            name: k.to_string(),
                            value: Some(v.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = icb_kube::Cluster::from_client(cluster.client().unwrap(), cluster.namespace(), Duration::from_secs(10));
        icb_kube::lifecycle::create_pod(&c, &pod).await.unwrap();
        icb_kube::lifecycle::wait_running(&c, name, tokio::time::Instant::now() + Duration::from_secs(30))
            .await
            .unwrap();
    });
}

#[test]
fn probe_node_in_a_pod_only_execs() {
    let cluster = cluster();
    start_worker(
        &cluster,
        "worker-0",
        &[("UCX_NET_DEVICES", "mlx5_9:1"), ("API_TOKEN", "hunter2")],
    );
    cluster.clear_requests();
    let (code, out, err) = ic_bench(
        &cluster,
        &[
            "probe",
            "node",
            "--pod",
            "worker-0",
            "-o",
            "json",
            "--counter-interval",
            "0s",
        ],
    );
    let reqs = cluster.requests();
    // This machine has no mlx5_9: the pod's own UCX_NET_DEVICES is checked and fails.
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["target"], "pod/worker-0");
    let net = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "node.net_devices")
        .unwrap()
        .clone();
    assert_eq!(net["status"], "fail");
    assert_eq!(net["scope"], "pod/worker-0 env");
    assert!(!out.contains("hunter2"));
    // Read-only: one exec upgrade, no create/update/delete of anything.
    assert_eq!(writes(&reqs), Vec::<String>::new());
    let execs: Vec<&RecordedRequest> = reqs
        .iter()
        .filter(|r| r.path.ends_with("/pods/worker-0/exec"))
        .collect();
    assert_eq!(
        execs.len(),
        1,
        "{:#?}",
        reqs.iter().map(|r| r.line()).collect::<Vec<_>>()
    );
    assert_eq!(
        execs[0]
            .params
            .iter()
            .filter(|(k, _)| k == "command")
            .map(|(_, v)| v.as_str())
            .take(2)
            .collect::<Vec<_>>(),
        ["sh", "-c"]
    );
    assert_eq!(cluster.pods().len(), 1);
}

#[test]
fn probe_nixl_in_a_pod_prints_the_pair_command() {
    let cluster = cluster();
    start_worker(&cluster, "prefill-0", &[("NIXL_PLUGIN_DIR", "/nonexistent/plugins")]);
    cluster.clear_requests();
    let (code, out, err) = ic_bench(&cluster, &["probe", "nixl", "--pod", "prefill-0", "-o", "json"]);
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let plugins = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "nixl.plugins")
        .unwrap()
        .clone();
    assert_eq!(plugins["status"], "fail");
    assert_eq!(
        v["next_steps"][0],
        "ic-bench pair --prefill pod/prefill-0 --decode pod/DECODE_POD"
    );
    assert_eq!(writes(&cluster.requests()), Vec::<String>::new());
}

#[test]
fn probe_node_via_a_probe_pod_creates_one_pod_and_deletes_it() {
    let cluster = cluster();
    cluster.clear_requests();
    let (code, out, err) = ic_bench(
        &cluster,
        &[
            "probe",
            "node",
            "--node",
            "gpu-1",
            "--image",
            "busybox:1.36",
            "-o",
            "json",
            "--counter-interval",
            "0s",
        ],
    );
    let reqs = cluster.requests();
    assert!(code == 0 || code == 1, "stdout: {out}\nstderr: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["target"], "node/gpu-1");
    let memlock = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "node.memlock")
        .unwrap()
        .clone();
    assert_eq!(memlock["status"], "skipped");
    // Exactly one create (the probe pod, read-only and pinned) and its deletion.
    let w = writes(&reqs);
    let creates: Vec<Pod> = reqs
        .iter()
        .filter(|r| r.method == "POST" && r.status < 300)
        .filter_map(|r| r.pod())
        .collect();
    assert_eq!(creates.len(), 1, "{w:?}");
    let spec = creates[0].spec.clone().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("gpu-1"));
    let c = &spec.containers[0];
    assert!(c.volume_mounts.iter().flatten().all(|m| m.read_only == Some(true)));
    assert_ne!(c.security_context.as_ref().and_then(|s| s.privileged), Some(true));
    assert!(
        w.iter().all(|l| l.starts_with("POST ") || l.starts_with("DELETE ")),
        "{w:?}"
    );
    assert!(w.iter().any(|l| l.starts_with("DELETE ")), "{w:?}");
    assert!(cluster.pods().is_empty(), "probe pod left behind");
}

#[test]
fn unreachable_pod_is_a_one_line_usage_error() {
    let cluster = cluster();
    let (code, _out, err) = ic_bench(&cluster, &["probe", "node", "--pod", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("nope"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_probe_pod_that_cannot_start_is_still_deleted() {
    let cluster = cluster();
    cluster.fail_image_pull("busybox");
    let (code, _out, err) = ic_bench(
        &cluster,
        &[
            "probe",
            "node",
            "--node",
            "gpu-1",
            "--image",
            "busybox:1.36",
            "--timeout",
            "20s",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.to_lowercase().contains("pull") || err.contains("busybox"), "{err}");
    assert!(cluster.pods().is_empty(), "probe pod left behind");
}
