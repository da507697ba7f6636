//! A finished 4-node all-pairs sweep with every field fixed (ids, times, durations): node-4's
//! pairs went over TCP at 1 GB/s, the other links over RDMA at ~22 GB/s; the second pass re-paired
//! node-4 with two nodes that passed. Node verdicts come from the real scoring.
#![allow(dead_code)]

use icb_core::model::Direction;
use icb_sweep::results::{LatencyPoint, Outcome, PairResult, SWEEP_SCHEMA, SizePoint, SweepResults};
use icb_sweep::schedule::{Pair, Schedule};

const KIB64: u64 = 64 << 10;
const MIB: u64 = 1 << 20;

fn point(direction: Direction, size: u64, gbps: f64) -> SizePoint {
    SizePoint {
        test: direction.test_kind(),
        size,
        bandwidth_bps: gbps * 1e9,
        memory: Some("host-host".into()),
        direction: Some(direction),
    }
}

fn healthy() -> Outcome {
    Outcome::Measured {
        verdict: icb_core::VerdictStatus::Pass,
        reason: "every case met its floor over rdma".into(),
        data_paths: vec!["rdma".into()],
        bandwidth_bps: Some(22.0e9),
        latency_us: Some(2.5),
        series: vec![
            point(Direction::Write, KIB64, 19.75),
            point(Direction::Write, MIB, 23.5),
            point(Direction::Read, KIB64, 17.25),
            point(Direction::Read, MIB, 22.0),
        ],
        latency: vec![LatencyPoint {
            test: icb_core::model::TestKind::TagLat,
            size: 8,
            memory: Some("host-host".into()),
            p50_us: 2.5,
            p99_us: 4.25,
            quality: vec![],
        }],
        warnings: vec![],
        rails: vec![],
        controls: vec![],
        nic: None,
    }
}

fn over_tcp() -> Outcome {
    Outcome::Measured {
        verdict: icb_core::VerdictStatus::Fail,
        reason: "the data went over tcp, not rdma".into(),
        data_paths: vec!["tcp".into()],
        bandwidth_bps: Some(1.0e9),
        latency_us: Some(45.0),
        series: vec![
            point(Direction::Write, KIB64, 0.75),
            point(Direction::Write, MIB, 1.0),
            point(Direction::Read, KIB64, 0.75),
            point(Direction::Read, MIB, 1.0),
        ],
        latency: vec![LatencyPoint {
            test: icb_core::model::TestKind::TagLat,
            size: 8,
            memory: Some("host-host".into()),
            p50_us: 45.0,
            p99_us: 90.0,
            quality: vec![],
        }],
        warnings: vec![],
        rails: vec![],
        controls: vec![],
        nic: None,
    }
}

pub fn fixture() -> SweepResults {
    let nodes: Vec<String> = (1..=4).map(|i| format!("node-{i}")).collect();
    let rounds = vec![
        vec![Pair::new("node-1", "node-2"), Pair::new("node-3", "node-4")],
        vec![Pair::new("node-1", "node-3"), Pair::new("node-4", "node-2")],
        vec![Pair::new("node-1", "node-4"), Pair::new("node-2", "node-3")],
    ];
    let mut pairs = Vec::new();
    for (i, round) in rounds.iter().enumerate() {
        for (j, pair) in round.iter().enumerate() {
            pairs.push(PairResult {
                pair: pair.clone(),
                pass: 1,
                run_id: format!("swfix01-p1r{i}x{j}"),
                duration_s: 14.5 + j as f64,
                finished_at: Some(format!("2026-11-22T02:{:02}:{:02}Z", i + 1, j * 20)),
                outcome: if pair.involves("node-4") { over_tcp() } else { healthy() },
            });
        }
    }
    for (j, pair) in [Pair::new("node-4", "node-1"), Pair::new("node-2", "node-4")]
        .into_iter()
        .enumerate()
    {
        pairs.push(PairResult {
            pair,
            pass: 2,
            run_id: format!("swfix01-p2r0x{j}"),
            duration_s: 15.25,
            finished_at: Some(format!("2026-11-22T02:30:{:02}Z", j * 20)),
            outcome: over_tcp(),
        });
    }
    let node_verdicts = icb_sweep::score::final_verdicts(&nodes, &pairs);
    SweepResults {
        schema: SWEEP_SCHEMA.into(),
        tool_version: "0.0.0-fixture".into(),
        sweep_id: "swfix01".into(),
        started_at: "2026-11-24T02:00:00Z".into(),
        updated_at: "2026-11-24T02:41:30.5Z".into(),
        complete: true,
        schedule: Schedule::AllPairs,
        nodes,
        pair_budget_s: 120.0,
        rounds,
        pairs,
        node_verdicts,
        criteria: None,
        attempt: 1,
        stopped: None,
        baseline: None,
        node_readiness: Default::default(),
        fleet: None,
    }
}
