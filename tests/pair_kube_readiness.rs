//! Issue 40 item 3: `pair` compares both sides' RDMA readiness before the transfer. Each bench pod
//! reads its own node's (the reader `probe node` uses; on an emulated node with rails, the node's
//! recorded tree in `IC_BENCH_RAIL_TREE`, whose netdev `mtu` files follow the veths' real MTU)
//! and sends it in its hello; the report's `readiness` names every value the two differ on.

use crate::pair_kube_support as support;

use icb_testcluster::ClusterConfig;
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

const LIMIT: Duration = Duration::from_secs(120);

/// Both sides read their two emulated NIC ports (`mlx5_0:1`, `mlx5_1:1`), each with the netdev
/// MTU its node's tree says.
fn assert_both_read(r: &Value, decode_rail1_mtu: u32) {
    let rd = &r["readiness"];
    for (side, rail1) in [("prefill", 1500), ("decode", decode_rail1_mtu)] {
        let ports = rd[side]["ports"].as_array().unwrap_or_else(|| panic!("{side}: {rd}"));
        let names: Vec<&str> = ports.iter().filter_map(|p| p["port"].as_str()).collect();
        assert_eq!(names, ["mlx5_0:1", "mlx5_1:1"], "{side}: {rd}");
        assert_eq!(ports[0]["netdev_mtu"], 1500, "{side}: {rd}");
        assert_eq!(ports[1]["netdev_mtu"], rail1, "{side}: {rd}");
        assert_eq!(ports[1]["link_layer"], "Ethernet", "{side}: {rd}");
    }
    let unread: Vec<&Value> = rd["not_compared"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l.as_str().is_some_and(|l| l.starts_with("not read on")))
        .collect();
    assert!(unread.is_empty(), "{rd}");
}

/// The "done when": two emulated nodes with two rails each. While every rail runs at
/// MTU 1500 the pair has nothing to say about readiness; with gpu-2's rail 1 at 1280 (its veth
/// and its tree's `mtu` file) the next pair names that one difference with both values, in the
/// JSON and in the table with its fix. The fabric is TCP over veths either way (exit 1: no RDMA).
#[test]
fn a_pair_between_nodes_whose_mtus_differ_names_both_values_and_agreeing_nodes_say_nothing() {
    if !icb_isolate::privileged_tests_enabled("a_pair_between_nodes_whose_mtus_differ_names_both_values") {
        return;
    }
    let cluster = cluster_with(ClusterConfig::two_gpu_nodes().rails(2));
    let mut args = vec!["--prefill", "node/gpu-1", "--decode", "node/gpu-2", "-o", "json"];
    args.extend_from_slice(FAST);
    let agree = run_pair(&cluster, &args, LIMIT);
    assert_eq!(agree.code, 1, "{agree:#?}");
    let r = agree.report();
    assert_both_read(&r, 1500);
    assert_eq!(r["readiness"]["mismatches"], json!([]), "{}", r["readiness"]);

    cluster.set_rail_mtu("gpu-2", 1, 1280).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pair.json");
    let mut args = vec!["--prefill", "node/gpu-1", "--decode", "node/gpu-2", "--export-json"];
    let file_arg = file.display().to_string();
    args.push(&file_arg);
    args.extend_from_slice(FAST);
    let differ = run_pair(&cluster, &args, LIMIT);
    assert_eq!(differ.code, 1, "{differ:#?}");
    let r: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_both_read(&r, 1280);
    let mismatch = json!({
        "field": "netdev_mtu", "port": "mlx5_1:1", "a": ["prefill", "1500"], "b": ["decode", "1280"]
    });
    assert_eq!(r["readiness"]["mismatches"], json!([mismatch]), "{}", r["readiness"]);
    let line = "readiness: prefill mlx5_1:1 netdev MTU 1500, decode mlx5_1:1 netdev MTU 1280; fix: set one MTU";
    // The table wraps at 100 columns, continuing a line two spaces in.
    assert!(differ.stdout.replace("\n  ", " ").contains(line), "{}", differ.stdout);
    assert!(
        differ.stdout.lines().all(|l| l.chars().count() <= 100),
        "{}",
        differ.stdout
    );
    assert!(leftover_via_api(&cluster).is_empty());
}

/// `gate` between the same two nodes compares their `probe node` readiness (the probe pods read
/// each node's sysfs through a hostPath `/sys`, on an emulated node with rails its recorded tree):
/// gpu-2's rail 1 at MTU 1280 is one `readiness.mismatch` warning naming both nodes' values and
/// the fix; the rail that agrees has none, and the warning alone fails nothing.
#[test]
fn the_gate_warns_of_the_nodes_mtu_difference_from_their_probes() {
    if !icb_isolate::privileged_tests_enabled("the_gate_warns_of_the_nodes_mtu_difference_from_their_probes") {
        return;
    }
    let cluster = cluster_with(ClusterConfig::two_gpu_nodes().rails(2).rail_mtu("gpu-2", 1, 1280));
    let recipe = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate/good.yaml");
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("gate")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--recipe", recipe, "--prefill", "node/gpu-1", "--decode", "node/gpu-2"])
        .args(["--allow-tcp", "--min-host-bw", "0.001", "--sizes", "1MiB", "-o", "json"])
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_output(cmd.spawn().unwrap(), Duration::from_secs(180));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let r: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let mismatches: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "readiness.mismatch")
        .collect();
    let want = "prefill gpu-1 mlx5_1:1 netdev MTU 1500, decode gpu-2 mlx5_1:1 netdev MTU 1280";
    assert_eq!(mismatches.len(), 1, "{}", r["findings"]);
    assert_eq!(mismatches[0]["detail"], want, "{}", r["findings"]);
    assert_eq!(mismatches[0]["status"], "warn");
    let hint = mismatches[0]["hint"].as_str().unwrap_or_default();
    assert!(hint.starts_with("set one MTU on both ports"), "{hint}");
    // The pair's own comparison (its sides' hellos) says the same of its two sides.
    let pair = &r["pair"]["readiness"]["mismatches"];
    assert_eq!(pair.as_array().map(Vec::len), Some(1), "{}", r["pair"]["readiness"]);
    assert!(leftover_via_api(&cluster).is_empty());
}
