//! `ic-bench sweep --matrix-configmap` on the emulated cluster, read back with the real kubectl
//! (issue 41 item 4): the node-pair matrix lands in a ConfigMap of the bench namespace with one
//! entry per ordered pair that ran, carrying the same figures as the results file; a second sweep
//! replaces it; the only writes are one dry-run create, then a create or a replace (the verbs of
//! manifests/role-fabric-matrix.yaml); a 403 stops the sweep before any bench pod, naming the Role.

use crate::pair_kube_support as support;

use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RequestMatch, TestCluster};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;
use support::*;

const NAME: &str = "ic-bench-fabric-matrix";

fn host_nodes() -> TestCluster {
    let config = ClusterConfig::new()
        .node(NodeConfig::new("node-1"))
        .node(NodeConfig::new("node-2"))
        .program(BIN)
        .isolation(Isolation::Host);
    TestCluster::start_blocking(config).unwrap()
}

/// The matrix as `kubectl get configmap -o json` shows it, parsed from its `matrix.json` key.
fn matrix_via_kubectl(cluster: &TestCluster, cache: &std::path::Path) -> (Value, Value) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .arg("--cache-dir")
        .arg(cache)
        .args(["--request-timeout", "20s", "-n", cluster.namespace()])
        .args(["get", "configmap", NAME, "-o", "json"])
        .output()
        .expect("kubectl is installed (scripts/setup)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cm: Value = serde_json::from_str(&text).unwrap();
    let matrix = serde_json::from_str(cm["data"]["matrix.json"].as_str().expect("key matrix.json")).unwrap();
    (cm, matrix)
}

fn sweep(cluster: &TestCluster, results: &std::path::Path) -> (i32, Value, String) {
    let args = [
        "--host-ipc",
        "--matrix-configmap",
        NAME,
        "--results",
        results.to_str().unwrap(),
    ];
    let (code, out, err) = run_sweep(cluster, &args, Duration::from_secs(300));
    let r = serde_json::from_str(&std::fs::read_to_string(results).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no results ({e}): {out}\n{err}"));
    (code, r, err)
}

#[test]
fn the_matrix_is_written_read_back_with_kubectl_and_replaced_by_the_next_sweep() {
    let cluster = host_nodes();
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    cluster.clear_requests();
    let (code, first, err) = sweep(&cluster, &dir.path().join("first.json"));
    assert!(code == 0 || code == 1, "{err}");
    assert_eq!(first["complete"], true, "{err}");
    assert!(
        err.contains(&format!("to ConfigMap {}/{NAME}", cluster.namespace())),
        "{err}"
    );

    let (cm, matrix) = matrix_via_kubectl(&cluster, cache.path());
    assert_eq!(cm["metadata"]["labels"]["app.kubernetes.io/managed-by"], "ic-bench");
    assert_eq!(matrix["schema"], "ic-bench.fabric-matrix/v1");
    assert_eq!(matrix["sweep_id"], first["sweep_id"]);
    let pairs = matrix["pairs"].as_array().unwrap();
    let ran = first["pairs"].as_array().unwrap();
    assert!(!ran.is_empty());
    for p in ran {
        let entry = pairs
            .iter()
            .find(|e| e["prefill_node"] == p["prefill"] && e["decode_node"] == p["decode"] && e["pass"] == p["pass"])
            .unwrap_or_else(|| panic!("no matrix entry for {p}: {matrix}"));
        let outcome = &p["outcome"];
        assert_eq!(entry["state"], outcome["status"], "{entry}");
        assert_eq!(entry["run_id"], p["run_id"]);
        assert_eq!(entry["measured_at"], p["finished_at"], "when it was measured: {entry}");
        assert!(p["finished_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{p}");
        if outcome["status"] == "measured" {
            assert_eq!(entry["bandwidth_bps"], outcome["bandwidth_bps"], "{entry}");
            assert_eq!(entry["transports"], outcome["data_paths"], "{entry}");
            assert!(!entry["transports"].as_array().unwrap().is_empty(), "{entry}");
        }
    }
    let nodes: Vec<&str> = matrix["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["node-1", "node-2"]);

    // Only the verbs of the Role: one dry-run create, then the create; a second sweep replaces.
    let (_, second, err) = sweep(&cluster, &dir.path().join("second.json"));
    let (cm2, matrix2) = matrix_via_kubectl(&cluster, cache.path());
    assert_eq!(matrix2["sweep_id"], second["sweep_id"], "{err}");
    assert_ne!(matrix2["sweep_id"], matrix["sweep_id"]);
    assert_eq!(
        cm2["metadata"]["uid"], cm["metadata"]["uid"],
        "replaced, not deleted and recreated"
    );
    let writes: Vec<String> = cluster
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/configmaps") && r.method != "GET")
        .map(|r| r.line())
        .collect();
    let dry_runs = writes
        .iter()
        .filter(|w| w.starts_with("POST") && w.contains("dryRun=All"))
        .count();
    let creates = writes
        .iter()
        .filter(|w| w.starts_with("POST") && !w.contains("dryRun"))
        .count();
    let replaces = writes.iter().filter(|w| w.starts_with("PUT")).count();
    assert_eq!((dry_runs, creates, replaces), (2, 1, 1), "{writes:#?}");
    assert_eq!(writes.len(), 4, "no other verb (no delete, no patch): {writes:#?}");
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn a_forbidden_config_map_stops_the_sweep_before_any_pod_with_the_role_named() {
    let cluster = host_nodes();
    cluster.fail_requests_always(RequestMatch::new("POST", "/api/v1/namespaces/*/configmaps"), 403);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, out, err) = run_sweep(
        &cluster,
        &["--matrix-configmap", NAME, "--results", results.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(code, 2, "{out}\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    assert!(
        lines[0].contains("manifests/role-fabric-matrix.yaml") && lines[0].contains("ic-bench-fabric-matrix"),
        "{err}"
    );
    let pods_created = cluster
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pods"))
        .count();
    assert_eq!(pods_created, 0, "stopped before any bench pod");
}

#[test]
fn a_bad_config_map_name_is_one_line_and_exit_2() {
    let out = Command::new(BIN)
        .args(["sweep", "--matrix-configmap", "Fabric_Matrix", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'Fabric_Matrix' is not a valid object name"), "{err}");
}
