//! Fixtures, a history holding `pair --kv-shape` runs, and float comparison.
#![allow(dead_code)]

use icb_core::model::{CaseKey, EnvKey, Metric};
use icb_history::record::Row;
use icb_history::{History, RunKind, RunRecord, RunVerdict};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/serving")
        .join(name)
}

/// `a` equals the hand-computed `b` to 1e-9 relative.
#[track_caller]
pub fn close(a: Option<f64>, b: f64) {
    let a = a.unwrap_or_else(|| panic!("expected {b}, got not known"));
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} != {b}");
}

/// A KV case of the pair as `pair --kv-shape` records it: its descriptor size and count.
pub fn kv_case(prefill: &str, decode: &str, test: &str, size: u64, blocks: u32) -> CaseKey {
    CaseKey {
        prefill: prefill.into(),
        decode: decode.into(),
        rail: None,
        test: test.into(),
        memory: "cuda-cuda".into(),
        size,
        blocks: Some(blocks),
        direction: None,
        engine: "nixl".into(),
    }
}

/// A history file at `path` with one run per value of each case, oldest first.
pub fn write_history(path: &Path, cases: &[(CaseKey, Vec<f64>)]) {
    let mut h = History::open(path, Duration::from_secs(10)).unwrap();
    let runs = cases.iter().map(|c| c.1.len()).max().unwrap_or(0);
    for i in 0..runs {
        let rows = cases
            .iter()
            .filter_map(|(case, values)| {
                values.get(i).map(|v| Row {
                    case: case.clone(),
                    env: EnvKey::default(),
                    metric: Metric::BandwidthBps,
                    value: *v,
                    status: "ok".into(),
                })
            })
            .collect();
        let run = RunRecord {
            run_id: format!("pair-2026-11-2{i}T00:00:00Z-a-b"),
            kind: RunKind::Pair,
            started_at: format!("2026-11-2{i}T00:00:00Z"),
            tool_version: "test".into(),
            verdict: RunVerdict::Pass,
            rows,
            nodes: vec![],
        };
        h.record(&run, None).unwrap();
    }
}
