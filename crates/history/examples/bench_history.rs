//! The history at fleet scale (scripts/bench-history, BENCHMARKS.md): NODES nodes × NIGHTS
//! nightly sweeps of simulated rows (the linear schedule's ring + 2 matchings: 3 pairs per node
//! and night, each with put/get bandwidth at 64 KiB and 1 MiB and a tag_lat p50), written one
//! night per transaction as `sweep --history` does; then the baseline of one more night against
//! the last 7, and the database's size. Usage: bench_history [NODES] [NIGHTS] [DB].

use icb_core::model::{CaseKey, EnvKey, Metric};
use icb_history::baseline::{Judge, Thresholds};
use icb_history::record::{NodeRow, Row, RunKind, RunRecord};
use icb_history::{Acks, History};
use std::time::{Duration, Instant};

fn night(nodes: usize, n: usize) -> RunRecord {
    let name = |i: usize| format!("gpu-{:04}", i % nodes);
    let mut rows = vec![];
    for i in 0..nodes {
        // Ring, and two fixed "matchings" (offsets), as the linear schedule pairs nodes.
        for off in [1, nodes / 3 + 1, nodes / 2 + 1] {
            let case = |test: &str, size: u64, direction: Option<&str>| CaseKey {
                prefill: name(i),
                decode: name(i + off),
                rail: None,
                test: test.into(),
                memory: "cuda-cuda".into(),
                size,
                blocks: None,
                direction: direction.map(String::from),
                engine: "ucx".into(),
            };
            let noise = 1.0 + ((i * 7 + n * 13 + off) % 10) as f64 / 100.0;
            for (test, dir) in [("put_bw", "write"), ("get_bw", "read")] {
                for size in [64 << 10, 1 << 20] {
                    rows.push(row(case(test, size, Some(dir)), Metric::BandwidthBps, 40e9 * noise));
                }
            }
            rows.push(row(case("tag_lat", 8, None), Metric::LatencyP50Us, 2.5 * noise));
        }
    }
    RunRecord {
        run_id: format!("sw{n:04}"),
        kind: RunKind::Sweep,
        started_at: format!("2026-10-{:02}T02:00:00Z", n + 1),
        tool_version: "bench".into(),
        verdict: icb_history::RunVerdict::Pass,
        rows,
        nodes: (0..nodes)
            .map(|i| NodeRow {
                node: name(i),
                status: "pass".into(),
                median_bps: Some(40e9),
                median_latency_us: Some(2.5),
            })
            .collect(),
    }
}

fn row(case: CaseKey, metric: Metric, value: f64) -> Row {
    Row {
        case,
        env: EnvKey {
            ucx: Some("1.22.0".into()),
            ..EnvKey::default()
        },
        metric,
        value,
        status: "pass".into(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let nights: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let path = args.get(3).map_or_else(|| dir.path().join("history.db"), Into::into);
    let mut h = History::open(&path, Duration::from_secs(30)).unwrap();
    let mut inserts = vec![];
    for n in 0..nights {
        let run = night(nodes, n);
        let t = Instant::now();
        h.record(&run, None).unwrap();
        inserts.push((t.elapsed().as_secs_f64(), run.rows.len()));
    }
    let next = night(nodes, nights);
    let acks = Acks::default();
    let judge = Judge {
        last: 7,
        thresholds: Thresholds::default(),
        acks: &acks,
        today: "2026-11-01".parse().unwrap(),
        run_id: &next.run_id,
        started_at: &next.started_at,
        source: "last:7".into(),
    };
    let t = Instant::now();
    let report = h.compare(&next.rows, &judge).unwrap();
    let nodes_checked = h.compare_nodes(&next.nodes, &judge).unwrap();
    let baseline_s = t.elapsed().as_secs_f64();
    drop(h);
    let size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let wal = path.with_extension("db-wal");
    let mut times: Vec<f64> = inserts.iter().map(|i| i.0).collect();
    times.sort_by(f64::total_cmp);
    println!(
        "{nodes} nodes × {nights} nights: {} rows per night ({} in all)",
        inserts[0].1,
        inserts.iter().map(|i| i.1).sum::<usize>()
    );
    println!(
        "insert one night: median {:.3} s, max {:.3} s ({:.1} µs per row)",
        times[times.len() / 2],
        times[times.len() - 1],
        times[times.len() / 2] / inserts[0].1 as f64 * 1e6
    );
    println!(
        "baseline of one night against the last 7: {:.3} s ({} figure checks, {} node checks, {} regressed)",
        baseline_s,
        report.checks.len(),
        nodes_checked.len(),
        report.regressed
    );
    println!(
        "database: {:.1} MiB (+ {:.1} MiB WAL until the next checkpoint)",
        size(&path) as f64 / (1 << 20) as f64,
        size(&wal) as f64 / (1 << 20) as f64
    );
}
