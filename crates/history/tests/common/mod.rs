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
