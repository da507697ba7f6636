//! Baselines: a run against the mean of its last matching runs, a regression distinct from a
//! fail, acknowledged regressions, a changed key starting a new baseline, a file as baseline.

use crate::common;

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

/// The history key's transport env holds what changes the transport, never per-run values: a
/// Kubernetes pair's `IC_BENCH_SERVER` (the decode pod's address and random port), its token, its
/// library paths differ every night and still compare; a changed `UCX_TLS` starts a new baseline.
#[test]
fn per_run_environment_keeps_the_baseline_and_a_transport_setting_changes_it() {
    let t = TempHistory::new();
    let mut p = prepared(&t, None, true);
    let env_of = |n: u32, tls: &str| {
        [
            ("IC_BENCH_SERVER", format!("10.99.0.2:{}", 35_000 + n)),
            ("IC_BENCH_TOKEN", "***".to_string()),
            ("IC_BENCH_UCX_LIB", format!("/opt/run{n}/ucx/lib")),
            ("LD_LIBRARY_PATH", format!("/tmp/run{n}")),
            (
                "UCX_LOG_LEVEL",
                if n.is_multiple_of(2) { "warn" } else { "debug" }.to_string(),
            ),
            ("UCX_TLS", tls.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect::<std::collections::BTreeMap<_, _>>()
    };
    for n in 0..3 {
        let mut r = night(n, "a", "b", 1.0, 1.0);
        r.client.env = env_of(n, "tcp");
        r.server.env = env_of(n + 10, "tcp");
        p.pair(&mut r).unwrap();
    }
    let mut slow = night(3, "a", "b", 0.5, 1.0);
    slow.client.env = env_of(3, "tcp");
    slow.server.env = env_of(13, "tcp");
    p.pair(&mut slow).unwrap();
    let b = slow.baseline.as_ref().unwrap();
    assert_eq!((b.regressed, b.new_baselines), (1, 0), "{b:#?}");
    let bw = b.checks.iter().find(|c| c.metric == Metric::BandwidthBps).unwrap();
    assert_eq!((bw.verdict, bw.baseline_runs), (BaselineVerdict::Regressed, 3));
    assert_eq!(p.exit_code(0, Some(b)), 1);
    let mut other_tls = night(4, "a", "b", 0.5, 1.0);
    other_tls.client.env = env_of(4, "rc,cuda_copy");
    other_tls.server.env = env_of(14, "rc,cuda_copy");
    p.pair(&mut other_tls).unwrap();
    let b = other_tls.baseline.as_ref().unwrap();
    assert_eq!(b.regressed, 0, "{b:#?}");
    let bw = b.checks.iter().find(|c| c.metric == Metric::BandwidthBps).unwrap();
    assert_eq!(bw.verdict, BaselineVerdict::NewBaseline);
    assert!(
        bw.note.as_deref().unwrap().starts_with("key changed: transport env "),
        "{bw:?}"
    );
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
fn a_gate_is_judged_only_when_it_concluded_and_recorded_as_it_ended() {
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
    let runs = t.open().runs(100).unwrap();
    assert_eq!(
        (runs.len(), runs[0].verdict.as_str()),
        (6, "error"),
        "but recorded as it ended"
    );
    gate.verdict = GateVerdict::Pass;
    p.gate(&mut gate).unwrap();
    let b = gate.pair.as_ref().unwrap().baseline.as_deref().unwrap();
    assert_eq!(b.regressed, 1);
    let runs = t.open().runs(100).unwrap();
    assert_eq!(
        (runs.len(), runs[0].kind.as_str()),
        (6, "gate"),
        "the same run, replaced"
    );
    assert_eq!(runs[0].verdict, "pass");
}

/// A night is recorded as it ended: a sweep whose nodes stayed suspect (exit 1) is `suspect`,
/// one with a failed node `fail`, an interrupted one `interrupted` (and not judged); a pair's
/// partial report `interrupted`, an inconclusive one `inconclusive`.
#[test]
fn each_run_is_recorded_with_the_verdict_it_ended_with() {
    use icb_core::model::{PartialRun, VerdictStatus};
    use icb_sweep::{NodeStatus, StopReason};
    let t = TempHistory::new();
    let mut p = prepared(&t, None, false);
    let mut suspect = common::sweep_night(1, None);
    suspect
        .node_verdicts
        .iter_mut()
        .for_each(|v| v.status = NodeStatus::Suspect);
    assert_eq!(suspect.exit_code(), 1);
    p.sweep(&mut suspect).unwrap();
    let mut failed = common::sweep_night(2, None);
    failed.node_verdicts[1].status = NodeStatus::Fail;
    p.sweep(&mut failed).unwrap();
    let mut stopped = common::sweep_night(3, None);
    stopped.mark_stopped(StopReason::Interrupted, "interrupted by SIGINT".into());
    p.sweep(&mut stopped).unwrap();
    assert!(stopped.baseline.is_none(), "an interrupted night is not judged");
    let mut partial = night(4, "a", "b", 1.0, 1.0);
    partial.partial = Some(PartialRun {
        reason: "interrupted by SIGINT".into(),
        planned_cases: 20,
    });
    partial.verdict.status = VerdictStatus::Interrupted;
    p.pair(&mut partial).unwrap();
    assert!(partial.baseline.is_none());
    let mut unsure = night(5, "a", "b", 1.0, 1.0);
    unsure.verdict.status = VerdictStatus::Inconclusive;
    p.pair(&mut unsure).unwrap();
    let recorded: Vec<(String, String)> = t
        .open()
        .runs(100)
        .unwrap()
        .into_iter()
        .map(|r| (r.run_id, r.verdict))
        .collect();
    let verdict_of = |prefix: &str| {
        recorded
            .iter()
            .find(|(id, _)| id.starts_with(prefix))
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no run {prefix} in {recorded:?}"))
    };
    assert_eq!(verdict_of("sw0001"), "suspect");
    assert_eq!(verdict_of("sw0002"), "fail");
    assert_eq!(verdict_of("sw0003"), "interrupted");
    assert_eq!(verdict_of("pair-2026-11-05"), "interrupted");
    assert_eq!(verdict_of("pair-2026-11-06"), "inconclusive");
    assert_eq!(recorded.len(), 5);
}
