//! `ic-bench sweep --label-nodes` on the emulated cluster: the judged nodes get
//! `ic-bench.dev/fabric=pass|fail` and the annotations (time, sweep id, reason), a node without a
//! verdict keeps what it had; without the flag nothing is written to any node; a 403 on node
//! patch stops the sweep before any bench pod with one line naming the ClusterRole (exit 2).
//! With `--node-conditions` too, the same sweep sets the `ICBenchFabric` condition (False on the
//! culprit, Unknown on the unschedulable node; tests/sweep_conditions.rs has the rest).

use crate::pair_kube_support as support;

use icb_kube::k8s_openapi::api::core::v1::Node;
use icb_kube::kube::Api;
use icb_kube::kube::api::{Patch, PatchParams};
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RequestMatch, TestCluster};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use support::*;

type Meta = (BTreeMap<String, String>, BTreeMap<String, String>);

/// Every node's (labels, annotations) as the API serves them.
fn node_meta(cluster: &TestCluster) -> BTreeMap<String, Meta> {
    block_on(async {
        let api: Api<Node> = Api::all(cluster.client().unwrap());
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|n| {
                (
                    n.metadata.name.unwrap(),
                    (
                        n.metadata.labels.unwrap_or_default(),
                        n.metadata.annotations.unwrap_or_default(),
                    ),
                )
            })
            .collect()
    })
}

fn label(cluster: &TestCluster, node: &str, labels: Value, annotations: Value) {
    block_on(async {
        let api: Api<Node> = Api::all(cluster.client().unwrap());
        let patch = serde_json::json!({"metadata": {"labels": labels, "annotations": annotations}});
        api.patch(node, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    });
}

fn node_patches(cluster: &TestCluster) -> Vec<String> {
    cluster
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/api/v1/nodes") && !matches!(r.method.as_str(), "GET"))
        .map(|r| r.line())
        .collect()
}

#[test]
fn judged_nodes_are_labelled_and_a_node_without_a_verdict_keeps_its_label() {
    if !icb_isolate::privileged_tests_enabled("sweep_label_nodes") {
        return;
    }
    // node-2's link is slow (the culprit); node-5 has no GPU while bench pods ask for one
    // (unschedulable: no verdict), and carries last night's pass, which must stay.
    let cluster = slow_and_gpuless_cluster();
    let old = serde_json::json!({"ic-bench.dev/fabric-checked-at": "2026-01-01T02:00:00Z",
                                 "ic-bench.dev/fabric-run": "swold", "ic-bench.dev/fabric-reason": "pass: earlier"});
    label(
        &cluster,
        "node-5",
        serde_json::json!({"ic-bench.dev/fabric": "pass"}),
        old.clone(),
    );
    let before = node_meta(&cluster);
    cluster.clear_requests();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, out, err) = run_sweep(
        &cluster,
        &[
            "--gpus",
            "1",
            "--rdma",
            "none",
            "--label-nodes",
            "--node-conditions",
            "--results",
            results.to_str().unwrap(),
        ],
        Duration::from_secs(600),
    );
    assert_eq!(code, 1, "{out}\n{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let sweep_id = r["sweep_id"].as_str().unwrap();
    let verdict = |n: &str| {
        r["node_verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["node"] == n)
            .unwrap()["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(verdict("node-2"), "fail", "{}", r["node_verdicts"]);
    assert_eq!(verdict("node-5"), "unschedulable");
    let after = node_meta(&cluster);
    for (node, want) in [
        ("node-1", "pass"),
        ("node-2", "fail"),
        ("node-3", "pass"),
        ("node-4", "pass"),
    ] {
        assert_eq!(verdict(node), want, "{}", r["node_verdicts"]);
        let (labels, ann) = &after[node];
        assert_eq!(labels["ic-bench.dev/fabric"], want, "{node}");
        assert_eq!(ann["ic-bench.dev/fabric-run"], sweep_id, "{node}");
        assert_eq!(ann["ic-bench.dev/fabric-checked-at"], r["updated_at"].as_str().unwrap());
        let reason = &ann["ic-bench.dev/fabric-reason"];
        // The sweep ran with --allow-tcp (SWEEP_FAST): a pass says it was given under it.
        let head = match want {
            "pass" => "pass (--allow-tcp): ",
            _ => "fail: ",
        };
        assert!(reason.starts_with(head), "{node}: {reason}");
        // Everything else on the node is as it was.
        let mut others = labels.clone();
        others.remove("ic-bench.dev/fabric");
        assert_eq!(others, before[node].0, "{node}");
    }
    assert!(
        after["node-2"].1["ic-bench.dev/fabric-reason"].contains("node-2"),
        "the culprit's reason names its pairs: {}",
        after["node-2"].1["ic-bench.dev/fabric-reason"]
    );
    assert_eq!(after["node-5"], before["node-5"], "no verdict: left exactly as it was");
    assert!(err.contains("labelled 4 node(s)"), "{err}");
    assert!(err.contains("node-5 (unschedulable)"), "{err}");
    // Merge patches of metadata only: one dry-run access check, then one per judged node (the
    // status patches are --node-conditions').
    let patches = node_patches(&cluster);
    assert!(patches.iter().all(|p| p.starts_with("PATCH")), "{patches:#?}");
    assert!(
        !patches
            .iter()
            .any(|p| p.contains("node-5") && !p.contains("dryRun") && !p.contains("/status")),
        "{patches:#?}"
    );
    // --node-conditions: every node gets the condition; the unschedulable one is Unknown.
    let conditions: BTreeMap<String, (String, String)> = block_on(async {
        let api: Api<Node> = Api::all(cluster.client().unwrap());
        let nodes = api.list(&Default::default()).await.unwrap().items;
        nodes
            .into_iter()
            .map(|n| {
                let c = n.status.unwrap().conditions.unwrap();
                let c = c
                    .into_iter()
                    .find(|c| c.type_ == "ICBenchFabric")
                    .expect("the condition");
                (n.metadata.name.unwrap(), (c.status, c.reason.unwrap_or_default()))
            })
            .collect()
    });
    let want = |s: &str, r: &str| (s.to_string(), r.to_string());
    assert_eq!(conditions["node-1"], want("True", "FabricPass"));
    assert_eq!(conditions["node-2"], want("False", "FabricFail"));
    assert_eq!(conditions["node-5"], want("Unknown", "Unschedulable"));
    assert!(err.contains("on 5 node(s): 3 True, 1 False, 1 Unknown"), "{err}");
    assert!(leftover_via_api(&cluster).is_empty());
}

/// Two nodes as plain processes: API behaviour, not transports.
fn host_nodes() -> TestCluster {
    let config = ClusterConfig::new()
        .node(NodeConfig::new("node-1"))
        .node(NodeConfig::new("node-2"))
        .program(BIN)
        .isolation(Isolation::Host);
    TestCluster::start_blocking(config).unwrap()
}

#[test]
fn without_the_flag_no_node_is_written() {
    let cluster = host_nodes();
    let before = node_meta(&cluster);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, out, err) = run_sweep(
        &cluster,
        &["--host-ipc", "--results", results.to_str().unwrap()],
        Duration::from_secs(300),
    );
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    assert_eq!(r["complete"], true, "the sweep ran to the end");
    assert_eq!(node_patches(&cluster), Vec::<String>::new());
    assert_eq!(node_meta(&cluster), before);
    assert!(!err.contains("labelled"), "{err}");
}

#[test]
fn a_forbidden_node_patch_stops_the_sweep_before_any_pod_with_the_cluster_role_named() {
    let cluster = host_nodes();
    cluster.fail_requests_always(RequestMatch::new("PATCH", "/api/v1/nodes/*"), 403);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, out, err) = run_sweep(
        &cluster,
        &["--label-nodes", "--results", results.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(code, 2, "{out}\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    assert!(
        lines[0].contains("manifests/clusterrole-label-nodes.yaml")
            && lines[0].contains("ic-bench-label-nodes")
            && lines[0].contains("`patch` on nodes"),
        "{err}"
    );
    let pods_created = cluster
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pods"))
        .count();
    assert_eq!(pods_created, 0, "stopped before any bench pod");
    assert!(!results.exists(), "no results file for a sweep that never started");
}

/// Issue 35, the blocker: `sweep --memory cuda-cuda` where the bench pods see no CUDA driver (the
/// seed-002 class of misconfiguration) measured nothing. That is no pass: every pair is an error,
/// no node is `pass` or labelled pass, and the sweep exits 2 ("nothing measured").
#[test]
fn a_cuda_sweep_that_measured_nothing_passes_no_node_and_labels_none() {
    let config = ClusterConfig::new()
        .node(NodeConfig::new("node-1"))
        .node(NodeConfig::new("node-2"))
        .node(NodeConfig::new("node-3"))
        .program(BIN)
        .isolation(Isolation::Host);
    let cluster = TestCluster::start_blocking(config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, out, err) = run_sweep(
        &cluster,
        &[
            "--memory",
            "cuda-cuda",
            "--label-nodes",
            "--results",
            results.to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    assert_eq!(code, 2, "nothing measured: {out}\n{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let pairs = r["pairs"].as_array().unwrap();
    assert!(!pairs.is_empty(), "{r}");
    for p in pairs {
        let outcome = &p["outcome"];
        assert_eq!(outcome["status"], "error", "{outcome}");
        assert!(
            outcome["reason"].as_str().unwrap().contains("no CUDA driver"),
            "the reason names what was missing: {outcome}"
        );
    }
    let verdicts = r["node_verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 3, "{r}");
    for v in verdicts {
        assert_ne!(v["status"], "pass", "{v}");
    }
    for (node, (labels, _)) in node_meta(&cluster) {
        assert_ne!(
            labels.get("ic-bench.dev/fabric").map(String::as_str),
            Some("pass"),
            "{node} labelled pass on nothing measured"
        );
    }
    assert!(leftover_via_api(&cluster).is_empty());
}
