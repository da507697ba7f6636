//! Baselines: a run against the mean of its last matching runs, a regression distinct from a
//! fail, acknowledged regressions, a changed key starting a new baseline, a file as baseline.

mod common;

use common::{TempHistory, night};
use icb_core::model::{BaselineVerdict, Metric};
use icb_history::baseline::{BaselineSource, Thresholds};
use icb_history::record::{RunKind, pair_record};
use icb_history::{Options, Prepared};

/// Five steady nights of a→b (bandwidth ±2 %), recorded.
fn five_nights(t: &TempHistory) {
    let mut h = t.open();
    for (n, bw) in [1.0, 1.02, 0.98, 1.01, 0.99].into_iter().enumerate() {
        h.record(&pair_record(&night(n as u32, "a", "b", bw, 1.0), RunKind::Pair), None)
            .unwrap();
    }
}

fn prepared(t: &TempHistory, ack: Option<std::path::PathBuf>, fail: bool) -> Prepared {
    Options {
        history: Some(t.path.clone()),
        baseline: Some(BaselineSource::Last(5)),
        thresholds: None,
        ack,
        fail_on_regression: fail,
        lock_deadline: None,
    }
    .prepare()
    .unwrap()
}

#[test]
fn a_slower_night_is_regressed_while_it_still_passes() {
    let t = TempHistory::new();
    five_nights(&t);
    let mut p = prepared(&t, None, true);
    let mut report = night(5, "a", "b", 0.70, 1.0);
    p.pair(&mut report).unwrap();
    let b = report.baseline.as_ref().expect("a baseline report");
    assert_eq!(b.source, "last:5");
    assert_eq!(b.regressed, 1);
    let bw = b.checks.iter().find(|c| c.metric == Metric::BandwidthBps).unwrap();
    assert_eq!(bw.verdict, BaselineVerdict::Regressed);
    assert_eq!(bw.baseline_runs, 5);
    assert!((bw.baseline_mean.unwrap() - 40e9).abs() < 1e6, "{bw:?}");
    assert!((bw.change.unwrap() + 0.30).abs() < 1e-3, "{bw:?}");
    assert!(bw.baseline_stddev.unwrap() > 0.0);
    assert!(
        bw.summary().starts_with("regressed -30.0 % vs 40.00 GB/s (mean of 5)"),
        "{}",
        bw.summary()
    );
    let lat = b.checks.iter().find(|c| c.metric == Metric::LatencyP50Us).unwrap();
    assert_eq!(lat.verdict, BaselineVerdict::Within);
    // The fabric verdict is untouched; only --fail-on-regression turns it into exit 1.
    assert_eq!(report.verdict.status, icb_core::model::VerdictStatus::Pass);
    assert_eq!(p.exit_code(0, report.baseline.as_deref()), 1);
    assert_eq!(prepared(&t, None, false).exit_code(0, report.baseline.as_deref()), 0);
    // Recorded: the next night's baseline includes it.
    assert_eq!(t.open().runs(100).unwrap().len(), 6);
}

#[test]
fn latency_regresses_upwards_and_improvements_are_not_regressions() {
    let t = TempHistory::new();
    five_nights(&t);
    let mut p = prepared(&t, None, true);
    let mut report = night(5, "a", "b", 1.5, 1.4);
    p.pair(&mut report).unwrap();
    let b = report.baseline.unwrap();
    let verdict = |m| b.checks.iter().find(|c| c.metric == m).unwrap().verdict;
    assert_eq!(verdict(Metric::BandwidthBps), BaselineVerdict::Improved);
    assert_eq!(verdict(Metric::LatencyP50Us), BaselineVerdict::Regressed);
}

#[test]
fn an_acknowledged_regression_is_reported_but_does_not_fail() {
    let t = TempHistory::new();
    five_nights(&t);
    let ack = t.dir.path().join("ack.yaml");
    std::fs::write(
        &ack,
        "acks:\n  - pair: [b, a]\n    metric: bandwidth\n    reason: NIC swap INC-7\n    expires: 2099-01-01\n",
    )
    .unwrap();
    let mut p = prepared(&t, Some(ack), true);
    let mut report = night(5, "a", "b", 0.5, 1.0);
    p.pair(&mut report).unwrap();
    let b = report.baseline.as_ref().unwrap();
    let bw = b.checks.iter().find(|c| c.metric == Metric::BandwidthBps).unwrap();
    assert_eq!(bw.verdict, BaselineVerdict::Acknowledged);
    assert!(bw.note.as_deref().unwrap().starts_with("NIC swap INC-7"), "{bw:?}");
    assert_eq!(b.regressed, 0);
    assert_eq!(p.exit_code(0, Some(b)), 0);
}

#[test]
fn a_changed_key_starts_a_new_baseline_and_says_what_changed() {
    let t = TempHistory::new();
    five_nights(&t);
    let mut p = prepared(&t, None, true);
    let mut report = night(5, "a", "b", 0.5, 1.0);
    report.client.ucx_version = "1.23.0".into();
    report.server.ucx_version = "1.23.0".into();
    p.pair(&mut report).unwrap();
    let b = report.baseline.as_ref().unwrap();
    assert_eq!((b.regressed, b.new_baselines), (0, 2));
    let bw = &b.checks[0];
    assert_eq!(bw.verdict, BaselineVerdict::NewBaseline);
    assert_eq!(bw.note.as_deref(), Some("key changed: ucx 1.22.0 → 1.23.0"));
    assert!(bw.key_changed);
    // The next night with the new UCX compares with this one only.
    let mut next = night(6, "a", "b", 0.5, 1.0);
    next.client.ucx_version = "1.23.0".into();
    next.server.ucx_version = "1.23.0".into();
    p.pair(&mut next).unwrap();
    let bw = &next.baseline.as_ref().unwrap().checks[0];
    assert_eq!((bw.verdict, bw.baseline_runs), (BaselineVerdict::Within, 1));
    // A pair never measured before: a first run.
    let mut other = night(6, "c", "d", 1.0, 1.0);
    p.pair(&mut other).unwrap();
    let first = &other.baseline.as_ref().unwrap().checks[0];
    assert_eq!(first.note.as_deref(), Some("first run of this case"));
    assert!(!first.key_changed);
}

#[test]
fn a_results_file_can_be_the_baseline_without_a_history() {
    let t = TempHistory::new();
    let file = t.dir.path().join("night0.json");
    std::fs::write(&file, serde_json::to_string(&night(0, "a", "b", 1.0, 1.0)).unwrap()).unwrap();
    let mut p = Options {
        baseline: Some(BaselineSource::File(file)),
        thresholds: Some(Thresholds::parse("bandwidth=20%").unwrap()),
        ..Options::default()
    }
    .prepare()
    .unwrap();
    let mut report = night(1, "a", "b", 0.85, 1.0);
    p.pair(&mut report).unwrap();
    let checks = &report.baseline.as_ref().unwrap().checks;
    let bw = checks.iter().find(|c| c.metric == Metric::BandwidthBps).unwrap();
    assert_eq!(
        (bw.verdict, bw.baseline_runs, bw.threshold),
        (BaselineVerdict::Within, 1, 0.2)
    );
    assert!(!t.path.exists(), "no history was written");
}

#[test]
fn flags_that_need_a_baseline_are_refused_without_one() {
    let e = Options {
        fail_on_regression: true,
        ..Options::default()
    }
    .prepare()
    .unwrap_err();
    assert!(matches!(e, icb_history::HistoryError::Usage(_)), "{e}");
    let e = Options {
        baseline: Some(BaselineSource::Last(3)),
        ..Options::default()
    }
    .prepare()
    .unwrap_err();
    assert!(e.to_string().contains("add --history FILE"), "{e}");
}

#[test]
fn a_sweep_flags_the_throttled_nodes_pairs_only() {
    let t = TempHistory::new();
    let mut p = prepared(&t, None, true);
    for n in 0..3 {
        let mut r = common::sweep_night(n, None);
        p.sweep(&mut r).unwrap();
        assert_eq!(r.baseline.as_ref().unwrap().regressed, 0);
    }
    let mut r = common::sweep_night(3, Some(("n2", 30e9)));
    p.sweep(&mut r).unwrap();
    let b = r.baseline.as_ref().unwrap();
    assert_eq!(b.regressed, 2);
    assert!(b.regressions().all(|c| c.case.prefill == "n2" || c.case.decode == "n2"));
    assert_eq!(b.regressed_on("n2").count(), 2);
    assert_eq!(
        b.regressed_on("n1").count() + b.regressed_on("n3").count(),
        2,
        "n2's partners, once each"
    );
    assert_eq!(p.exit_code(0, Some(b)), 1);
    assert_eq!(p.exit_code(2, Some(b)), 2, "a setup error keeps its own code");
    // The node itself: its median against its last sweeps, the partners unchanged.
    let regressed: Vec<&str> = ["n1", "n2", "n3"].into_iter().filter(|n| b.node_regressed(n)).collect();
    assert_eq!(regressed, ["n2"]);
    let n2 = b.node_check("n2").unwrap();
    assert_eq!((n2.baseline_runs, n2.recent.len()), (3, 3));
    assert!((n2.change.unwrap() + 0.25).abs() < 1e-9, "{n2:?}");
    assert_eq!(n2.summary(), "regressed -25.0 % vs 40.00 GB/s (mean of 3)");
}

#[test]
fn a_gate_records_its_pair_only_when_it_concluded() {
    use icb_core::model::{GateReport, GateVerdict};
    let t = TempHistory::new();
    five_nights(&t);
    let mut p = prepared(&t, None, true);
    let mut gate = GateReport::new();
    gate.pair = Some(night(5, "a", "b", 0.5, 1.0));
    gate.verdict = GateVerdict::Error;
    p.gate(&mut gate).unwrap();
    assert!(
        gate.pair.as_ref().unwrap().baseline.is_none(),
        "an unfinished gate is not judged"
    );
    assert_eq!(t.open().runs(100).unwrap().len(), 5, "nor recorded");
    gate.verdict = GateVerdict::Pass;
    p.gate(&mut gate).unwrap();
    let b = gate.pair.as_ref().unwrap().baseline.as_deref().unwrap();
    assert_eq!(b.regressed, 1);
    let runs = t.open().runs(100).unwrap();
    assert_eq!((runs.len(), runs[0].kind.as_str()), (6, "gate"));
}
