//! Issue 40 item 1: a plain `pair` reads both sides' NIC error and congestion counters around each
//! case. Three emulated nodes with two rails each, every container told `UCX_NET_DEVICES=rail1`
//! (a node runtime's env) so the pair's bytes cross rail 1; gpu-2's rail 1 is congested (a real
//! `tc tbf` whose held-back packets the emulation writes as CNP/ECN counters, kept current while
//! the cluster runs). The pair with gpu-2 names the congestion per case on gpu-2's port with its
//! fix; the pair with gpu-3 reads the same counters and finds nothing. Over veths the data path is
//! TCP, so every case fails (exit 1), which is what makes the congestion rule judge it. A plain
//! sweep of gpu-1 and gpu-2 on the same cluster names the congested port in gpu-2's node evidence
//! and the HTML heatmap's tooltip, and nothing in gpu-1's.

use crate::pair_kube_support as support;

use icb_testcluster::{ClusterConfig, NodeConfig};
use serde_json::Value;
use std::time::Duration;
use support::*;

/// [`FAST`]'s cases at its former 1 s each: a congested or lossy port is found from the NIC
/// counters' deltas over the case, so these runs keep the bytes they were tuned with.
fn counted() -> Vec<&'static str> {
    with_max_time(FAST, "1")
}

const LIMIT: Duration = Duration::from_secs(120);

/// `(side, kind, device)` of every counter finding of the report's measured cases.
fn findings(r: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for case in r["cases"].as_array().unwrap() {
        let h = &case["nic_health"];
        for side in ["prefill", "decode"] {
            for port in h[side]["ports"].as_array().into_iter().flatten() {
                for f in port["findings"].as_array().into_iter().flatten() {
                    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
                    out.push((side.to_string(), s(&f["kind"]), s(&f["device"])));
                }
            }
        }
    }
    out
}

/// Every measured case read both ports on both sides.
fn assert_every_case_read(r: &Value) {
    for case in r["cases"].as_array().unwrap() {
        let h = &case["nic_health"];
        for side in ["prefill", "decode"] {
            let ports: Vec<&str> = h[side]["ports"]
                .as_array()
                .unwrap_or_else(|| panic!("{side} of {case}"))
                .iter()
                .filter_map(|p| p["device"].as_str())
                .collect();
            assert_eq!(ports, ["mlx5_0:1", "mlx5_1:1"], "{side}: {h}");
        }
    }
}

#[test]
fn a_pair_over_a_congested_rail_names_it_per_case_and_a_healthy_pair_has_no_counter_finding() {
    if !icb_isolate::privileged_tests_enabled("a_pair_over_a_congested_rail_names_it_per_case") {
        return;
    }
    let node = |name: &str| NodeConfig::gpu(name, 8).runtime_env("UCX_NET_DEVICES", "rail1");
    let config = ClusterConfig::new()
        .node(node("gpu-1"))
        .node(node("gpu-2"))
        .node(node("gpu-3"))
        .rails(2)
        .congested_rail("gpu-2", 1, "100mbit");
    let cluster = cluster_with(config);

    let mut args = vec!["--prefill", "node/gpu-1", "--decode", "node/gpu-3", "-o", "json"];
    args.extend(counted());
    let healthy = run_pair(&cluster, &args, LIMIT);
    assert_eq!(healthy.code, 1, "{healthy:#?}");
    let r = healthy.report();
    assert_every_case_read(&r);
    assert_eq!(findings(&r), [], "{}", r["cases"]);

    let mut args = vec!["--prefill", "node/gpu-1", "--decode", "node/gpu-2", "--export-json"];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pair.json");
    let file_arg = file.display().to_string();
    args.push(&file_arg);
    args.extend(counted());
    let congested = run_pair(&cluster, &args, LIMIT);
    assert_eq!(congested.code, 1, "{congested:#?}");
    let r: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_every_case_read(&r);
    let found = findings(&r);
    let want = ("decode".to_string(), "congested".to_string(), "mlx5_1:1".to_string());
    assert!(found.contains(&want), "{found:?}: {}", r["cases"]);
    // Only gpu-2's rail 1 is faulted: nothing on the prefill side, nothing lossy.
    assert!(found.iter().all(|f| *f == want), "{found:?}");
    // The table: the NIC column's word and the finding with its fix, within 100 columns.
    let table = congested.stdout.replace("\n  ", " ");
    assert!(table.contains("decode congested: "), "{}", congested.stdout);
    assert!(
        table.contains("on mlx5_1:1; fix: check the switch's ECN marking"),
        "{}",
        congested.stdout
    );
    assert!(
        congested.stdout.lines().all(|l| l.chars().count() <= 100),
        "{}",
        congested.stdout
    );
    assert!(leftover_via_api(&cluster).is_empty());

    sweep_names_the_congested_port_in_its_node_evidence(&cluster);
}

/// A plain sweep of gpu-1 and gpu-2 on the same cluster (one pair, tcp not allowed, so its cases
/// fail and the congestion rule judges them): gpu-2's node evidence names its congested port
/// with the counters and fix, gpu-1's names none, and the HTML heatmap's tooltip says it too.
fn sweep_names_the_congested_port_in_its_node_evidence(cluster: &icb_testcluster::TestCluster) {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let html = dir.path().join("sweep.html");
    let started = std::time::Instant::now();
    let child = std::process::Command::new(BIN)
        .arg("sweep")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args([
            "--nodes",
            "gpu-1,gpu-2",
            "--tests",
            "tag_bw,tag_lat",
            "--sizes",
            "8,1MiB",
        ])
        .args([
            "--max-time",
            "0.3",
            "--min-host-bw",
            "0.001",
            "--pair-timeout",
            "60s",
            "-o",
            "wide",
        ])
        .arg("--results")
        .arg(&results)
        .arg("--export-html")
        .arg(&html)
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_output(child, LIMIT);
    eprintln!("sweep took {:.1}s", started.elapsed().as_secs_f64());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let evidence = |node: &str| -> Vec<String> {
        let v = r["node_verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["node"] == node);
        let lines = v
            .and_then(|v| v["evidence"].as_array())
            .unwrap_or_else(|| panic!("{node}: {r}"));
        lines
            .iter()
            .filter_map(|l| l.as_str())
            .filter(|l| l.starts_with("nic"))
            .map(String::from)
            .collect()
    };
    let two = evidence("gpu-2");
    let named: Vec<&String> = two
        .iter()
        .filter(|l| l.contains(": gpu-2 (") && l.contains(") mlx5_1:1 congested in "))
        .collect();
    assert_eq!(named.len(), 1, "{two:#?}");
    assert!(
        named[0].contains("; fix: check the switch's ECN marking"),
        "{}",
        named[0]
    );
    assert!(two.iter().all(|l| !l.contains("not read")), "{two:#?}");
    assert_eq!(evidence("gpu-1"), Vec::<String>::new(), "only gpu-2's rail is faulted");
    // `-o wide` prints every evidence line whole (its table is not fitted to a width), the NIC
    // finding too.
    assert!(
        stdout.contains("nic gpu-1→gpu-2: gpu-2 (decode) mlx5_1:1 congested in "),
        "{stdout}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("NIC counters: gpu-2 ("),
        "the pair's tooltip names the node"
    );
    assert!(leftover_via_api(cluster).is_empty());
}
