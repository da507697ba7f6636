//! `ic-bench sweep --node-conditions` on the emulated cluster, read back with the real kubectl:
//! every node of the sweep gets the `ICBenchFabric` condition (True only for a pass; a node that
//! measured nothing is Unknown, never True), merged beside the node's other conditions, with
//! its transition time moved only when the status changes; only the `status` subresource is
//! patched; a 403 there stops the sweep before any bench pod with one line naming the ClusterRole.

use crate::pair_kube_support as support;

use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RequestMatch, TestCluster};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;
use support::*;

const CONDITION: &str = "ICBenchFabric";

/// `kubectl --kubeconfig … ARGS`, which must succeed; its stdout.
pub(crate) fn kubectl(cluster: &TestCluster, cache: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .arg("--cache-dir")
        .arg(cache)
        .args(["--request-timeout", "20s"])
        .args(args)
        .output()
        .expect("kubectl is installed (scripts/setup)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Every node's conditions by type, as `kubectl get nodes -o json` shows them.
pub(crate) fn conditions(cluster: &TestCluster, cache: &std::path::Path) -> BTreeMap<String, BTreeMap<String, Value>> {
    let list: Value = serde_json::from_str(&kubectl(cluster, cache, &["get", "nodes", "-o", "json"])).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let by_type = n["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (c["type"].as_str().unwrap().to_string(), c.clone()))
                .collect();
            (n["metadata"]["name"].as_str().unwrap().to_string(), by_type)
        })
        .collect()
}

fn sweep(cluster: &TestCluster, dir: &std::path::Path, extra: &[&str]) -> (i32, Value, String) {
    let results = dir.join(format!("sweep-{}.json", extra.len()));
    let mut args = vec![
        "--host-ipc",
        "--node-conditions",
        "--results",
        results.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = run_sweep(cluster, &args, Duration::from_secs(300));
    let r = serde_json::from_str(&std::fs::read_to_string(&results).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no results ({e}): {out}\n{err}"));
    (code, r, err)
}

fn verdict(r: &Value, node: &str) -> String {
    let verdicts = r["node_verdicts"].as_array().unwrap();
    let v = verdicts.iter().find(|v| v["node"] == node);
    v.map(|v| v["status"].as_str().unwrap().to_string()).unwrap_or_default()
}

fn host_nodes() -> TestCluster {
    let config = ClusterConfig::new()
        .node(NodeConfig::new("node-1"))
        .node(NodeConfig::new("node-2"))
        .program(BIN)
        .isolation(Isolation::Host);
    TestCluster::start_blocking(config).unwrap()
}

#[test]
fn the_condition_is_written_on_every_node_and_read_back_with_kubectl() {
    let cluster = host_nodes();
    let cache = tempfile::tempdir().unwrap();
    // Someone else's condition, written with kubectl's own strategic merge patch: it must stay.
    kubectl(
        &cluster,
        cache.path(),
        &[
            "patch",
            "node",
            "node-1",
            "--subresource=status",
            "--type=strategic",
            "-p",
            r#"{"status":{"conditions":[{"type":"NicHealthy","status":"True","reason":"Checked"}]}}"#,
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    cluster.clear_requests();
    let (code, first, err) = sweep(&cluster, dir.path(), &[]);
    assert_eq!(first["complete"], true, "{err}");
    assert!(code == 0 || code == 1, "{err}");
    let at = first["updated_at"].as_str().unwrap().to_string();
    let seen = conditions(&cluster, cache.path());
    for node in ["node-1", "node-2"] {
        let c = &seen[node][CONDITION];
        let want = match verdict(&first, node).as_str() {
            "pass" => ("True", "FabricPass"),
            "fail" => ("False", "FabricFail"),
            other => panic!("a two-node host sweep judged {node} {other}: {first}"),
        };
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some(want.0), Some(want.1)),
            "{c}"
        );
        let message = c["message"].as_str().unwrap();
        assert!(message.contains(first["sweep_id"].as_str().unwrap()), "{message}");
        assert_eq!(c["lastHeartbeatTime"], at.as_str());
        assert_eq!(c["lastTransitionTime"], at.as_str());
        assert_eq!(seen[node]["Ready"]["status"], "True", "the kubelet's condition stays");
    }
    assert_eq!(
        seen["node-1"]["NicHealthy"]["reason"], "Checked",
        "merged by type, not replaced"
    );
    assert!(
        err.contains(&format!("set condition {CONDITION} on 2 node(s)")),
        "{err}"
    );
    // Only the status subresource: one dry-run access check, then one patch per node.
    let writes: Vec<String> = cluster
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/api/v1/nodes") && r.method != "GET")
        .map(|r| r.line())
        .collect();
    assert_eq!(writes.len(), 3, "{writes:#?}");
    assert!(
        writes
            .iter()
            .all(|w| w.starts_with("PATCH /api/v1/nodes/node-") && w.contains("/status")),
        "{writes:#?}"
    );

    // A night that measured nothing (no CUDA driver in the pods): Unknown, never True, and the
    // transition is stamped with that night's time.
    let (code, second, err) = sweep(&cluster, dir.path(), &["--memory", "cuda-cuda"]);
    assert_eq!(code, 2, "nothing measured: {err}");
    let at2 = second["updated_at"].as_str().unwrap();
    let jsonpath = format!("jsonpath={{.status.conditions[?(@.type==\"{CONDITION}\")].status}}");
    for node in ["node-1", "node-2"] {
        assert_ne!(verdict(&second, node), "pass");
        let status = kubectl(&cluster, cache.path(), &["get", "node", node, "-o", &jsonpath]);
        assert_eq!(status, "Unknown", "{node}");
        let c = &conditions(&cluster, cache.path())[node][CONDITION];
        assert_eq!(c["lastTransitionTime"], at2, "{c}");
        assert_eq!(c["lastHeartbeatTime"], at2, "{c}");
        assert_ne!(c["reason"], "FabricPass", "{c}");
    }
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn a_forbidden_status_patch_stops_the_sweep_before_any_pod_with_the_cluster_role_named() {
    let cluster = host_nodes();
    cluster.fail_requests_always(RequestMatch::new("PATCH", "/api/v1/nodes/*/status"), 403);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, out, err) = run_sweep(
        &cluster,
        &["--node-conditions", "--results", results.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(code, 2, "{out}\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    assert!(
        lines[0].contains("manifests/clusterrole-node-conditions.yaml")
            && lines[0].contains("ic-bench-node-conditions")
            && lines[0].contains("`patch` on nodes/status"),
        "{err}"
    );
    let pods_created = cluster
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pods"))
        .count();
    assert_eq!(pods_created, 0, "stopped before any bench pod");
}
