//! `ic-bench sweep --rails auto` on the emulated cluster (root): every node pair runs every rail
//! at once through the Kubernetes rails seam; a node with one slow rail fails its pairs and is
//! named, the others pass, and no pod is left.

use crate::pair_kube_support as support;

use icb_testcluster::{ClusterConfig, NodeConfig};
use serde_json::Value;
use std::time::{Duration, Instant};
use support::*;

#[test]
fn a_six_node_rails_sweep_names_the_node_with_a_slow_rail() {
    if !icb_isolate::privileged_tests_enabled("a_six_node_rails_sweep_names_the_node_with_a_slow_rail") {
        return;
    }
    let config = (1..=6)
        .fold(ClusterConfig::new(), |c, i| {
            c.node(NodeConfig::new(format!("node-{i}")))
        })
        .rails(3)
        .slow_rail("node-3", 1, "30mbit");
    let cluster = cluster_with(config);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let started = Instant::now();
    let (code, out, err) = run_sweep(
        &cluster,
        &["--rails", "auto", "--results", results.to_str().unwrap()],
        Duration::from_secs(600),
    );
    eprintln!("sweep took {:.1}s\n{err}", started.elapsed().as_secs_f64());
    assert_eq!(code, 1, "{out}\n{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    assert_eq!(r["complete"], true);
    let verdicts: Vec<(String, String)> = r["node_verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["node"].as_str().unwrap().into(), v["status"].as_str().unwrap().into()))
        .collect();
    let pretty = serde_json::to_string_pretty(&r["node_verdicts"]).unwrap();
    for (node, status) in &verdicts {
        let want = if node == "node-3" { "fail" } else { "pass" };
        assert_eq!(status, want, "{node}: {pretty}");
    }
    assert_eq!(verdicts.len(), 6);
    // The score blames node-3's rail 1 by name (bad with every partner), nothing else.
    for v in r["node_verdicts"].as_array().unwrap() {
        let bad: Vec<(u64, &str)> = v["bad_rails"]
            .as_array()
            .map(|b| {
                b.iter()
                    .map(|x| (x["nic"]["rail"].as_u64().unwrap(), x["status"].as_str().unwrap()))
                    .collect()
            })
            .unwrap_or_default();
        if v["node"] == "node-3" {
            assert_eq!(bad, vec![(1, "fail")], "{pretty}");
        } else {
            assert!(bad.is_empty(), "{pretty}");
        }
    }
    // Every pair of the first pass ran its three rails (put_bw and get_bw each); each failed
    // pair names node-3's rail 1 first.
    let first: Vec<&Value> = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pass"] == 1)
        .collect();
    assert_eq!(first.len(), 15, "all pairs of six nodes");
    for p in &first {
        let measured = &p["outcome"];
        assert_eq!(measured["status"], "measured", "{p}");
        assert_eq!(measured["series"].as_array().map(Vec::len), Some(6), "{p}");
        if measured["verdict"] == "fail" {
            let reason = measured["reason"].as_str().unwrap();
            // node-3's rail 1 is slow both ways: it is named whichever side it was on.
            assert!(
                reason.starts_with("rail 1: ") && reason.contains("node-3:mlx5_1"),
                "{reason}"
            );
        }
    }
    assert!(out.contains("FAIL: node-3"), "{out}");
    assert!(leftover_bench_pods(&cluster).is_empty());
}

#[test]
fn bad_sweep_rail_flags_are_one_line_and_exit_2() {
    // Refused before anything connects: no root, no cluster.
    for (args, want) in [
        (vec!["--rails", "mlx5_0"], "write `auto` or `gpu0=mlx5_0"),
        (
            vec!["--rails", "auto", "--schedule", "intra-node"],
            "not with --schedule intra-node",
        ),
        (vec!["--rail-margin", "10%"], "--rails"),
    ] {
        let out = std::process::Command::new(BIN)
            .args(["sweep", "--nodes", "a,b"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

/// Issue 40 item 3 in a `--rails` sweep: each node's readiness as its rails pod read it feeds the
/// fleet view, so the node whose rail 1 runs at MTU 1280 (its veth and its tree's `mtu` file)
/// is named as the odd one out with its value, in the results file and in the table.
#[test]
fn a_rails_sweep_names_the_node_whose_mtu_differs_from_the_fleet() {
    if !icb_isolate::privileged_tests_enabled("a_rails_sweep_names_the_node_whose_mtu_differs_from_the_fleet") {
        return;
    }
    let config = (1..=3)
        .fold(ClusterConfig::new(), |c, i| {
            c.node(NodeConfig::new(format!("node-{i}")))
        })
        .rails(2)
        .rail_mtu("node-2", 1, 1280);
    let cluster = cluster_with(config);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let started = Instant::now();
    let args = ["--rails", "auto", "--results", results.to_str().unwrap()];
    let (code, out, err) = run_sweep(&cluster, &args, Duration::from_secs(300));
    eprintln!("sweep took {:.1}s", started.elapsed().as_secs_f64());
    assert!(code == 0 || code == 1, "{code}: {out}\n{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let read: Vec<&str> = r["node_readiness"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(read, ["node-1", "node-2", "node-3"], "{}", r["node_readiness"]);
    let values = r["fleet"]["values"].as_array().unwrap();
    let odd: Vec<(&Value, &Value, &Value)> = values
        .iter()
        .filter(|v| v["odd_ones_out"].as_array().is_some_and(|o| !o.is_empty()))
        .map(|v| (&v["field"], &v["port"], &v["odd_ones_out"]))
        .collect();
    let want = serde_json::json!([["node-2", "1280"]]);
    assert_eq!(
        odd,
        [(&"netdev_mtu".into(), &"mlx5_1:1".into(), &want)],
        "{}",
        r["fleet"]
    );
    assert!(out.replace("\n  ", " ").contains("odd one out: node-2 1280"), "{out}");
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    assert!(leftover_bench_pods(&cluster).is_empty());
}
