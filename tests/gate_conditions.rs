//! `ic-bench gate --node-conditions` on the emulated cluster, read back with the real kubectl:
//! the gate's verdict lands as the `ICBenchFabric` condition of the two nodes it measured (True
//! on a pass; False on both when their pair fails, with the transition time moved; Unknown when
//! the gate could not finish), merged beside the node's other conditions through the status
//! subresource only; a 403 there stops the gate before any pod with one line naming the
//! ClusterRole (exit 2).

use crate::pair_kube_support as support;
use crate::sweep_conditions::{conditions, kubectl};

use icb_testcluster::RequestMatch;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::*;

const CONDITION: &str = "ICBenchFabric";
const GOOD_RECIPE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate/good.yaml");

/// `ic-bench gate --node-conditions` between gpu-1 and gpu-2 with the good recipe, no node
/// probes (the emulated nodes truthfully have no RDMA device); (exit code, report, stderr).
fn gate(cluster: &icb_testcluster::TestCluster, extra: &[&str]) -> (i32, Value, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("gate")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--recipe", GOOD_RECIPE, "--no-node-probe", "--node-conditions"])
        .args(["--prefill", "node/gpu-1", "--decode", "node/gpu-2"])
        .args(["--allow-tcp", "--no-controls", "--sizes", "1MiB", "-o", "json"])
        .args(extra)
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_output(cmd.spawn().unwrap(), Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("no report ({e}): {stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), report, stderr)
}

/// The condition on each of the two nodes, as `kubectl get nodes -o json` shows it.
fn both(cluster: &icb_testcluster::TestCluster, cache: &std::path::Path) -> [Value; 2] {
    let seen = conditions(cluster, cache);
    ["gpu-1", "gpu-2"].map(|n| {
        seen[n]
            .get(CONDITION)
            .cloned()
            .unwrap_or_else(|| panic!("{n}: {seen:?}"))
    })
}

#[test]
fn the_gate_verdict_is_written_on_its_two_nodes_and_read_back_with_kubectl() {
    let Some(cluster) = cluster("gate_node_conditions") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    // Someone else's condition, written with kubectl's own strategic merge patch: it must stay.
    kubectl(
        &cluster,
        cache.path(),
        &[
            "patch",
            "node",
            "gpu-1",
            "--subresource=status",
            "--type=strategic",
            "-p",
            r#"{"status":{"conditions":[{"type":"NicHealthy","status":"True","reason":"Checked"}]}}"#,
        ],
    );
    cluster.clear_requests();
    let (code, r, err) = gate(&cluster, &["--min-host-bw", "0.001"]);
    assert_eq!((code, r["verdict"].as_str()), (0, Some("pass")), "{r}\n{err}");
    for c in both(&cluster, cache.path()) {
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("True"), Some("FabricPass")),
            "{c}"
        );
        let message = c["message"].as_str().unwrap();
        assert!(message.starts_with("gate pass on gpu-1 and gpu-2: "), "{message}");
        assert_eq!(c["lastHeartbeatTime"], c["lastTransitionTime"], "{c}");
    }
    let seen = conditions(&cluster, cache.path());
    assert_eq!(
        seen["gpu-1"]["NicHealthy"]["reason"], "Checked",
        "merged by type, not replaced"
    );
    assert_eq!(
        seen["gpu-1"]["Ready"]["status"], "True",
        "the kubelet's condition stays"
    );
    assert!(
        err.contains("set condition ICBenchFabric on 2 node(s): gpu-1 True (FabricPass), gpu-2 True (FabricPass)"),
        "{err}"
    );
    // Only the status subresource: one dry-run access check before the pods, one patch per node.
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
            .all(|w| w.starts_with("PATCH /api/v1/nodes/gpu-") && w.contains("/status")),
        "{writes:#?}"
    );
    assert!(writes[0].contains("dryRun"), "{writes:#?}");
    let passed_at = both(&cluster, cache.path())[0]["lastTransitionTime"].clone();

    // A floor no emulated link reaches: the pair fails between the two nodes, so both are False,
    // and the transition is stamped anew.
    let (code, r, err) = gate(&cluster, &["--min-host-bw", "100000"]);
    assert_eq!((code, r["verdict"].as_str()), (1, Some("fail")), "{r}\n{err}");
    for c in both(&cluster, cache.path()) {
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some("FabricFail")),
            "{c}"
        );
        assert_ne!(c["lastTransitionTime"], passed_at, "{c}");
        assert!(
            c["message"]
                .as_str()
                .unwrap()
                .starts_with("gate fail on gpu-1 and gpu-2: pair: "),
            "{c}"
        );
    }
    let jsonpath = format!("jsonpath={{.status.conditions[?(@.type==\"{CONDITION}\")].reason}}");
    assert_eq!(
        kubectl(&cluster, cache.path(), &["get", "node", "gpu-2", "-o", &jsonpath]),
        "FabricFail"
    );

    // Over its budget: no verdict, so Unknown on both, never True.
    let (code, r, err) = gate(
        &cluster,
        &[
            "--budget",
            "2s",
            "--min-host-bw",
            "0.001",
            "--tests",
            "put_bw,get_bw,tag_lat,tag_bw",
            "--sizes",
            "8,64KiB,4MiB",
        ],
    );
    assert_eq!((code, r["verdict"].as_str()), (2, Some("error")), "{r}\n{err}");
    for c in both(&cluster, cache.path()) {
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("Unknown"), Some("Inconclusive")),
            "{c}"
        );
    }
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn a_forbidden_status_patch_stops_the_gate_before_any_pod_with_the_cluster_role_named() {
    // Pod objects and API calls only: pods as plain processes, no root needed.
    let cluster = host_cluster();
    cluster.fail_requests_always(RequestMatch::new("PATCH", "/api/v1/nodes/*/status"), 403);
    let (code, r, err) = gate(&cluster, &["--min-host-bw", "0.001"]);
    assert_eq!((code, r["verdict"].as_str()), (2, Some("error")), "{r}\n{err}");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("manifests/clusterrole-node-conditions.yaml")
            && reason.contains("ic-bench-node-conditions")
            && reason.contains("`patch` on nodes/status")
            && !reason.contains('\n'),
        "{reason}"
    );
    let pods_created = cluster
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pods"))
        .count();
    assert_eq!(pods_created, 0, "stopped before any bench pod");
    assert!(err.contains("condition ICBenchFabric not written"), "{err}");
}
