//! Issue 17: in narrow terminals the pair table wrapped mid-token: a shape's figure apart from its
//! unit (`64 × 16` / `KiB`), a lane mid-name (`rc_mlx5/mlx5_` / `0:1`), a flag at its hyphen
//! (`--min-` / `iterations`). It now wraps on whole tokens; skipped memory pairs with one reason
//! share one row.

use crate::common;

use common::*;
use icb_core::model::{CaseStatus, MemoryPair, MemoryType};
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
