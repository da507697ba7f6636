//! Issue 35 item 4: negative controls. A control the run catches leaves its verdict alone; one it
//! does not catch makes a pass inconclusive (exit 1); a fast path no faster than forced TCP warns.

use super::*;
use crate::verdict::controls::{control_not_run, judge_tcp_control, tcp_control_shape};

/// A healthy same-host run: tag_bw 64 MiB over cma at `gbps`.
fn healthy(gbps: f64) -> PairReport {
    let mut report = tcp_report(serde_json::json!({}));
    report.cases = vec![measured(TestKind::TagBw, HH, 64 * MIB, Some(TAG_CMA), &[], gbps)];
    report
}

/// What the forced-TCP control measured: the main shape (capped at 4 MiB) over `info`.
fn control(info: &str, gbps: f64) -> PairReport {
    let mut report = tcp_report(serde_json::json!({}));
    report.cases = vec![measured(TestKind::TagBw, HH, 4 * MIB, Some(info), &[], gbps)];
    report
}

#[test]
fn the_control_repeats_the_main_runs_largest_host_case_capped_at_4_mib() {
    let mut main = healthy(7.0);
    main.cases
        .push(measured(TestKind::TagBw, CC, 64 * MIB, Some(TAG_CMA), &[], 9.0));
    main.cases
        .push(measured(TestKind::TagLat, HH, 8, Some(TAG_CMA), &[], 0.0));
    let (shape, memory) = tcp_control_shape(&main).unwrap();
    assert_eq!((shape.test, shape.size, memory), (TestKind::TagBw, 4 * MIB, HH));
    let mut latency_only = healthy(7.0);
    latency_only.cases = vec![measured(TestKind::TagLat, HH, 8, Some(TAG_CMA), &[], 0.0)];
    assert!(
        tcp_control_shape(&latency_only).is_none(),
        "no bandwidth case to repeat"
    );
}

#[test]
fn a_caught_control_keeps_the_pass_and_an_uncaught_one_makes_it_inconclusive() {
    let mut main = healthy(7.0);
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Pass);

    let caught = judge_tcp_control(&control(TAG_TCP, 1.5), &main);
    assert!(caught.caught, "{caught:?}");
    assert_eq!(caught.seen_as, vec![TransportClass::Tcp]);
    assert_eq!(caught.bandwidth_bps, Some(1.5e9));
    main.controls = vec![caught];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Pass, "{}", main.verdict.reason);

    // The detector blinded: the forced fallback read as shared memory.
    let missed = judge_tcp_control(&control(TAG_CMA, 6.0), &main);
    assert!(!missed.caught);
    main.controls = vec![missed];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Inconclusive);
    assert_ne!(main.verdict.status.exit_code(), 0);
    assert!(
        main.verdict
            .reason
            .starts_with("inconclusive: transport detection could not see a forced TCP fallback on this pair"),
        "{}",
        main.verdict.reason
    );

    // A control that could not run at all shows nothing either.
    main.controls = vec![control_not_run(ControlKind::Tcp, "the decode side did not start")];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Inconclusive);

    // A failed run stays failed, with the control noted.
    let mut failed = tcp_report(serde_json::json!({}));
    failed.controls = vec![judge_tcp_control(&control(TAG_CMA, 6.0), &failed)];
    judge(&mut failed);
    assert_eq!(failed.verdict.status, VerdictStatus::Fail);
    assert!(failed.verdict.reason.contains("could not see a forced TCP fallback"));
}

#[test]
fn a_fast_path_no_faster_than_forced_tcp_warns() {
    // The same shape: main 4 MiB over cma at 1.1 GB/s, the TCP control at 1.0 GB/s.
    let mut main = healthy(1.1);
    main.cases[0].size = 4 * MIB;
    main.settings.sizes = vec![4 * MIB];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Pass, "{}", main.verdict.reason);
    let c = judge_tcp_control(&control(TAG_TCP, 1.0), &main);
    assert_eq!(c.main_bandwidth_bps, Some(1.1e9));
    main.controls = vec![c];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Warn);
    assert!(
        main.verdict.reason.contains("no faster than forced TCP"),
        "{}",
        main.verdict.reason
    );
    // Well above the margin: a pass.
    main.cases[0].measurement.as_mut().unwrap().bandwidth_bps = Some(5e9);
    main.controls = vec![judge_tcp_control(&control(TAG_TCP, 1.0), &main)];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Pass, "{}", main.verdict.reason);
}

#[test]
fn wrong_nic_is_spelt_with_a_hyphen_on_the_command_line_and_an_underscore_in_json() {
    for spelling in ["wrong-nic", "wrong_nic"] {
        assert_eq!(spelling.parse::<ControlKind>(), Ok(ControlKind::WrongNic));
    }
    assert_eq!(serde_json::to_string(&ControlKind::WrongNic).unwrap(), "\"wrong_nic\"");
    assert!(ControlKind::WrongNic.needs_rails() && !ControlKind::Tcp.needs_rails());
    let e = "nic".parse::<ControlKind>().unwrap_err().to_string();
    assert!(e.contains("use tcp or wrong-nic"), "{e}");
}

#[test]
fn a_missed_wrong_nic_control_adds_one_not_attributed_finding_after_the_failing_ones() {
    // The rows' attributions are checked end to end by icb-pair's rails_scripted tests.
    use crate::rails::{RailFinding, RailFindingKind, RailPattern, RailsOutcome};
    let mut rails = RailsOutcome {
        pattern: RailPattern::Aligned,
        rails: vec![],
        aggregate_bps: 0.0,
        sum_alone_bps: None,
        median_bps: 0.0,
        margin: 0.2,
        findings: vec![RailFinding {
            kind: RailFindingKind::BelowMedian,
            status: Status::Fail,
            rail: Some(1),
            text: "rail 1 is slow".into(),
            fix: None,
        }],
    };
    rails.distrust_counters("the wrong-nic control was not caught");
    assert_eq!(rails.findings.len(), 2);
    assert_eq!(
        rails.findings[0].kind,
        RailFindingKind::BelowMedian,
        "the failing one stays first"
    );
    let f = &rails.findings[1];
    assert_eq!(
        (f.kind, f.status, f.rail),
        (RailFindingKind::NotAttributed, Status::Warn, None)
    );
    assert!(f.text.contains("the wrong-nic control was not caught"), "{}", f.text);
}
