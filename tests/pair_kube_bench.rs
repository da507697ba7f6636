//! Orchestration overhead of `ic-bench pair` on the emulated cluster: create → verdict → cleanup,
//! minus the transfer itself. A benchmark, not a test: `scripts/bench-orchestration` runs it.

use crate::pair_kube_support as support;

use std::time::Duration;
use support::*;

/// The target from issue 3: under 3 s for one pair.
const TARGET_S: f64 = 3.0;

#[test]
#[ignore = "benchmark: run by scripts/bench-orchestration (prints the overhead, asserts nothing about speed)"]
fn orchestration_overhead() {
    let Some(cluster) = cluster("orchestration_overhead") else {
        return;
    };
    let runs: usize = std::env::var("IC_BENCH_ORCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let mut args = vec!["--prefill", "node/gpu-1", "--decode", "node/gpu-2", "-o", "json"];
    args.extend([
        "--tests",
        "tag_lat",
        "--sizes",
        "8",
        "--memory",
        "host-host",
        "--warmup",
        "2",
    ]);
    args.extend(["--min-iterations", "4", "--min-time", "0.01", "--max-time", "1"]);
    let mut overheads = Vec::new();
    for i in 0..runs {
        let run = run_pair(&cluster, &args, Duration::from_secs(120));
        assert!(run.code == 0 || run.code == 1, "{run:#?}");
        let transfer = run.report()["duration_s"].as_f64().unwrap();
        let overhead = run.elapsed.as_secs_f64() - transfer;
        println!(
            "run {}: wall {:.3} s, transfer (client's own run) {:.3} s, orchestration {:.3} s, {} API requests",
            i + 1,
            run.elapsed.as_secs_f64(),
            transfer,
            overhead,
            run.requests.len()
        );
        overheads.push(overhead);
        assert!(leftover_bench_pods(&cluster).is_empty());
    }
    overheads.sort_by(f64::total_cmp);
    let median = overheads[overheads.len() / 2];
    println!(
        "orchestration overhead (create → verdict → cleanup, minus transfer), median of {runs}: {median:.3} s; min {:.3} s, max {:.3} s; target < {TARGET_S} s ({:.2}× the target)",
        overheads[0],
        overheads[overheads.len() - 1],
        median / TARGET_S
    );
}
