//! `ic-bench sweep` on the emulated cluster with one node's cable pulled: its pairs measure
//! nothing (errors, not slowness), so that node is named and failed by the second pass, its
//! partners are not blamed for the pairs they shared with it, and the headline says what the
//! table says.

use crate::pair_kube_support as support;

use icb_testcluster::{ClusterConfig, NodeConfig};
use serde_json::Value;
use std::time::Duration;
use support::*;

#[test]
fn a_node_that_lost_its_link_is_the_only_one_named() {
    if !icb_isolate::privileged_tests_enabled("sweep_link_loss") {
        return;
    }
    let config = (1..=4).fold(ClusterConfig::new(), |c, i| {
        c.node(NodeConfig::new(format!("node-{i}")))
    });
    let cluster = cluster_with(config);
    cluster.cut_node_network("node-4").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("sweep")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args([
            "--tests",
            "put_bw,get_bw,tag_lat",
            "--sizes",
            "1MiB",
            "--max-time",
            "0.3",
        ])
        .args(["--allow-tcp", "--min-host-bw", "0.001", "--pair-timeout", "20s"])
        .arg("--results")
        .arg(&results)
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_output(cmd.spawn().unwrap(), Duration::from_secs(400));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let dump = serde_json::to_string_pretty(&r["node_verdicts"]).unwrap();
    let verdicts = r["node_verdicts"].as_array().unwrap();
    let four = verdicts.iter().find(|v| v["node"] == "node-4").unwrap();
    assert_eq!(four["status"], "fail", "{dump}");
    assert_eq!(four["error_pairs"], 3, "its pairs measured nothing: {dump}");
    let headline = stdout.lines().next().unwrap_or_default();
    assert!(headline.starts_with("FAIL: node-4 ("), "{stdout}");
    for v in verdicts.iter().filter(|v| v["node"] != "node-4") {
        // Not blamed for the pairs with node-4. (This loaded 2-core machine can still make a
        // healthy node's own TCP pairs a bandwidth or latency outlier: then it is a suspect, by
        // its own pairs, never failed.)
        let node = v["node"].as_str().unwrap();
        assert_eq!(v["error_pairs"], 0, "{dump}");
        assert_ne!(v["status"], "fail", "{dump}");
        assert!(
            v["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| !e.as_str().unwrap().contains("measured nothing (errors")),
            "{dump}"
        );
        // The headline says what the table says: a suspect is named as one, a pass is not named.
        let named = headline.contains(&format!("{node},"))
            || headline.ends_with(node)
            || headline.contains(&format!("{node} "));
        assert_eq!(named, v["status"] == "suspect", "{node}: {headline}\n{dump}");
    }
    assert!(leftover_via_api(&cluster).is_empty());
}
