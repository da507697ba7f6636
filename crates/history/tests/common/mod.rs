//! Fixtures: pair reports of simulated nights (the core crate's fixture report, its start time
//! and figures changed) and a temporary history.
#![allow(dead_code)]

use icb_core::model::{CaseStatus, PairReport};
use icb_history::History;
use std::path::PathBuf;
use std::time::Duration;

pub const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../core/tests/fixtures/pair_report.json");

/// The fixture report on night `night` (2026-11-01 + night, 02:00 UTC) between `a` and `b`, every
/// bandwidth multiplied by `bw` and every latency by `lat`.
pub fn night(night: u32, a: &str, b: &str, bw: f64, lat: f64) -> PairReport {
    let mut r: PairReport = serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    r.started_at = format!("2026-11-{:02}T02:00:00Z", night + 1);
    r.placement.prefill.host = a.into();
    r.placement.decode.host = b.into();
    for c in r.cases.iter_mut().filter(|c| c.status == CaseStatus::Measured) {
        let m = c.measurement.as_mut().unwrap();
        if let Some(v) = m.bandwidth_bps.as_mut() {
            *v = 40e9 * bw;
        }
        if let Some(l) = m.latency_us.as_mut() {
            l.p50 = 2.0 * lat;
        }
    }
    r
}

pub struct TempHistory {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl TempHistory {
    pub fn new() -> TempHistory {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.db");
        TempHistory { dir, path }
    }

    pub fn open(&self) -> History {
        History::open(&self.path, Duration::from_secs(10)).unwrap()
    }
}

/// A 3-node ring sweep on night `night`: every pair at `bw` GB/s, except pairs with `slow` at
/// `slow_bw` (its node verdicts say pass, with the medians).
pub fn sweep_night(night: u32, slow: Option<(&str, f64)>) -> icb_sweep::SweepResults {
    use icb_sweep::results::{LatencyPoint, Outcome, PairResult, SizePoint};
    use icb_sweep::{NodeStatus, NodeVerdict, Pair, Schedule};
    let nodes: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
    let rounds = Schedule::Ring.rounds(&nodes, 0).unwrap();
    let mut r = icb_sweep::SweepResults::new(
        format!("sw{night:04}"),
        Schedule::Ring,
        nodes.clone(),
        60.0,
        rounds.clone(),
    );
    r.started_at = format!("2026-11-{:02}T02:00:00Z", night + 1);
    r.tool_version = "0.1.0".into();
    let bw_of = |p: &Pair| match slow {
        Some((n, bw)) if p.involves(n) => bw,
        _ => 40e9,
    };
    for (i, p) in rounds.iter().flatten().enumerate() {
        let bw = bw_of(p);
        r.pairs.push(PairResult {
            pair: p.clone(),
            pass: 1,
            run_id: format!("x{i}"),
            duration_s: 1.0,
            finished_at: None,
            outcome: Outcome::Measured {
                verdict: icb_core::VerdictStatus::Pass,
                reason: "ok".into(),
                data_paths: vec!["rdma".into()],
                bandwidth_bps: Some(bw),
                latency_us: Some(3.0),
                series: vec![SizePoint {
                    test: icb_core::model::TestKind::PutBw,
                    size: 1 << 20,
                    bandwidth_bps: bw,
                    memory: Some("host-host".into()),
                    direction: Some(icb_core::model::Direction::Write),
                }],
                latency: vec![LatencyPoint {
                    test: icb_core::model::TestKind::TagLat,
                    size: 8,
                    memory: Some("host-host".into()),
                    p50_us: 3.0,
                    p99_us: 4.0,
                    quality: vec![],
                }],
                warnings: vec![],
                rails: vec![],
                controls: vec![],
                nic: None,
            },
        });
    }
    r.node_verdicts = nodes
        .iter()
        .map(|n| NodeVerdict {
            node: n.clone(),
            status: NodeStatus::Pass,
            // The node's own speed: a partner of the slow node keeps its median (its other pairs).
            median_bps: Some(match slow {
                Some((s, bw)) if s == n => bw,
                _ => 40e9,
            }),
            median_latency_us: Some(3.0),
            pairs: 2,
            failed_pairs: 0,
            error_pairs: 0,
            data_paths: vec!["rdma".into()],
            evidence: vec![],
            bad_rails: vec![],
        })
        .collect();
    r.complete = true;
    r
}
