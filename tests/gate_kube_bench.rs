//! The gate's own time with its default controls (a TCP control, and knobs-off where the recipe
//! sets UCX knobs) against `--no-controls`, on the emulated cluster (issue 35: "gate's time with
//! its default controls is recorded in BENCHMARKS.md"). Ignored: a benchmark, run by
//! `scripts/bench-gate`, which passes a release binary (`IC_BENCH_BENCH_BIN`, else this build's)
//! and the number of runs (`IC_BENCH_GATE_RUNS`, default 5). The two modes run interleaved
//! (controls, none, controls, none …) so the machine's load falls on both alike.

use crate::pair_kube_support::{leftover_via_api, wait_output};

use icb_testcluster::{ClusterConfig, Isolation, TestCluster};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RECIPE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate/good.yaml");

/// One gate run, as `gate_kube` runs it (TCP allowed: the emulated fabric is TCP over veths):
/// wall seconds and the report's steps.
fn timed_gate(bin: &str, cluster: &TestCluster, extra: &[&str]) -> (f64, serde_json::Value) {
    let started = Instant::now();
    let mut cmd = Command::new(bin);
    cmd.arg("gate")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--recipe", RECIPE, "--no-node-probe"])
        .args(["--prefill", "node/gpu-1", "--decode", "node/gpu-2"])
        .args(["--allow-tcp", "--min-host-bw", "0.001", "-o", "json"])
        .args(extra)
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_output(cmd.spawn().unwrap(), Duration::from_secs(300));
    let wall = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{extra:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(leftover_via_api(cluster).is_empty(), "{extra:?} left pods behind");
    (wall, r["steps"].clone())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

#[test]
#[ignore = "benchmark: scripts/bench-gate"]
fn gate_time_with_default_controls_and_without() {
    let bin = std::env::var("IC_BENCH_BENCH_BIN").unwrap_or_else(|_| crate::pair_kube_support::BIN.to_string());
    let runs: usize = std::env::var("IC_BENCH_GATE_RUNS")
        .ok()
        .map(|r| r.parse().expect("IC_BENCH_GATE_RUNS is a whole number"))
        .unwrap_or(5);
    assert!(runs >= 1, "IC_BENCH_GATE_RUNS must be at least 1");
    let config = ClusterConfig::two_gpu_nodes()
        .program(&bin)
        .isolation(Isolation::Namespaces);
    let cluster = TestCluster::start_blocking(config).expect("the emulated cluster starts (as root)");
    let modes: [(&str, &[&str]); 2] = [("default controls", &[]), ("--no-controls", &["--no-controls"])];
    let mut walls = [Vec::new(), Vec::new()];
    for i in 0..runs {
        for (m, (name, extra)) in modes.iter().enumerate() {
            let (wall, steps) = timed_gate(&bin, &cluster, extra);
            println!("run {} {name:<17} wall {wall:6.2} s  steps {steps}", i + 1);
            walls[m].push(wall);
        }
    }
    println!("\n| gate on the emulated cluster ({bin}) | runs (s) | median (s) |");
    println!("|---|---|---:|");
    for (m, (name, _)) in modes.iter().enumerate() {
        let each: Vec<String> = walls[m].iter().map(|w| format!("{w:.2}")).collect();
        println!("| {name} | {} | {:.2} |", each.join(", "), median(&walls[m]));
    }
    println!(
        "\ncontrols cost: median {:.2} s more ({:.2}x the gate without them)",
        median(&walls[0]) - median(&walls[1]),
        median(&walls[0]) / median(&walls[1])
    );
}
