//! Issue 17: in narrow terminals the pair table wrapped mid-token: a shape's figure apart from its
//! unit (`64 × 16` / `KiB`), a lane mid-name (`rc_mlx5/mlx5_` / `0:1`), a flag at its hyphen
//! (`--min-` / `iterations`). It now wraps on whole tokens; skipped memory pairs with one reason
//! share one row.

use crate::common;

use common::*;
use icb_core::model::{CaseStatus, MemoryPair, MemoryType, TestKind};
use icb_report::{Format, View, render_pair_in};

fn narrow(width: u16) -> View {
    View { width, wide: false }
}

#[test]
fn shapes_lanes_and_flags_wrap_on_whole_tokens() {
    let mut r = two_nodes_rdma();
    let mut kv = r.cases[0].clone();
    kv.blocks = Some(64);
    kv.size = 16 << 10;
    r.cases.push(kv);
    r.warnings
        .push("too few round trips for a p99 in 1 case: raise --min-iterations or --min-time".into());
    for width in [60u16, 72, 80, 90, 100] {
        let out = render_pair_in(&r, Format::Table, narrow(width)).unwrap();
        let text = out.replace('\u{a0}', " ");
        for line in text.lines() {
            let cells: Vec<&str> = line.split(['│', '┆']).map(str::trim).collect();
            assert!(
                !cells.iter().any(|c| ["KiB", "MiB", "B"].contains(c)),
                "{width}: a unit apart from its figure: {line}\n{out}"
            );
            if line.contains("mlx5_") {
                assert!(
                    line.contains("mlx5_0:1"),
                    "{width}: a lane split mid-name: {line}\n{out}"
                );
            }
            if line.contains("--min-") {
                assert!(
                    line.contains("--min-iterations") || line.contains("--min-time"),
                    "{width}: a flag split at its hyphen: {line}\n{out}"
                );
            }
        }
    }
}

#[test]
fn memory_pairs_skipped_for_one_reason_share_a_row() {
    let mut r = pods_same_node();
    let skipped = r
        .cases
        .iter()
        .find(|c| c.status == CaseStatus::Skipped)
        .cloned()
        .expect("fixture has a skipped case");
    let cuda_host = MemoryPair {
        initiator: MemoryType::Cuda,
        target: MemoryType::Host,
    };
    let mut other = skipped.clone();
    other.memory = cuda_host;
    r.cases.push(other);
    let out = render_pair_in(&r, Format::Table, narrow(200)).unwrap();
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("skipped ×")).collect();
    assert_eq!(rows.len(), 1, "{out}");
    assert!(
        rows[0].contains(&format!("{}, {cuda_host}", skipped.memory)),
        "{}",
        rows[0]
    );
}

/// Cold CI run of 2026-11-30 23:10: on a loaded machine a 1 MiB latency case's p99 took nine
/// characters (`123456.78`), its column 11, and the data path's `rendezvous` did not fit what was
/// left: the table was 81 wide in an 80-column terminal. A latency from 1 ms on has no decimals
/// now (hundredths of a µs say nothing there), and the same report fits.
#[test]
fn a_slow_latency_keeps_the_table_within_80_columns() {
    let mut r = same_host_healthy();
    let lat = r
        .cases
        .iter_mut()
        .find(|c| c.test == TestKind::TagLat)
        .expect("fixture has a latency case");
    let stats = lat.measurement.as_mut().unwrap().latency_us.as_mut().unwrap();
    stats.p50 = 69.38;
    stats.p99 = 123_456.78;
    // The failing run's skipped GPU cases: one row, `tag_bw, tag_lat, put_bw` and `2 sizes`.
    for (test, size) in [TestKind::TagBw, TestKind::TagLat, TestKind::PutBw]
        .into_iter()
        .flat_map(|t| [(t, 8), (t, MIB)])
    {
        let mut skipped = r.cases[0].clone();
        skipped.test = test;
        skipped.size = size;
        skipped.memory = CC;
        skipped.status = CaseStatus::Skipped;
        skipped.reason = Some("no CUDA driver on the prefill side".into());
        skipped.measurement = None;
        skipped.transport = None;
        skipped.verdict = None;
        r.cases.push(skipped);
    }
    for width in [80u16, 100] {
        let out = render_pair_in(&r, Format::Table, narrow(width)).unwrap();
        assert!(out.contains("123457") && !out.contains("123456.78"), "{out}");
        assert!(out.contains("tag_lat,"), "the skipped row is there: {out}");
        for line in out.lines() {
            assert!(
                line.chars().count() <= usize::from(width),
                "{width} columns: {line:?} is {} wide\n{out}",
                line.chars().count()
            );
        }
    }
}
