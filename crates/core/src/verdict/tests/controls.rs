//! Issue 35 item 4: negative controls. A control the run catches leaves its verdict alone; one it
//! does not catch makes a pass inconclusive (exit 1); a fast path no faster than forced TCP warns.

use super::*;
use crate::verdict::controls::{control_not_run, judge_knobs_off_control, judge_tcp_control, tcp_control_shape};

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
    // A host case the main run measured within 4 MiB wins over a capped larger one: the control
    // then has the main row to compare with.
    let mut with_1_mib = main.clone();
    with_1_mib
        .cases
        .push(measured(TestKind::TagBw, HH, MIB, Some(TAG_CMA), &[], 5.0));
    let (shape, _) = tcp_control_shape(&with_1_mib).unwrap();
    assert_eq!(shape.size, MIB);
    // A latency-only run: its smallest host latency case (the transport is classified alike).
    let mut latency_only = healthy(7.0);
    latency_only.cases = vec![
        measured(TestKind::TagLat, HH, 64 * 1024, Some(TAG_CMA), &[], 0.0),
        measured(TestKind::TagLat, CC, 8, Some(TAG_CMA), &[], 0.0),
        measured(TestKind::TagLat, HH, 8, Some(TAG_CMA), &[], 0.0),
    ];
    let (shape, memory) = tcp_control_shape(&latency_only).unwrap();
    assert_eq!((shape.test, shape.size, memory), (TestKind::TagLat, 8, HH));
    let mut nothing = healthy(7.0);
    nothing.cases.clear();
    assert!(tcp_control_shape(&nothing).is_none(), "no measured case to repeat");
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

/// The main run at 4 MiB over cma at `gbps` (the shape a control repeats), judged.
fn main_at_4_mib(gbps: f64) -> PairReport {
    let mut main = healthy(gbps);
    main.cases[0].size = 4 * MIB;
    main.settings.sizes = vec![4 * MIB];
    judge(&mut main);
    main
}

/// Issue 35 item 4 (knobs-off): the recipe's env slower than UCX's defaults beyond the margin
/// warns naming its variables; within the margin the control says the variables changed nothing
/// and the pass stands; faster is said as such.
#[test]
fn a_recipe_env_slower_than_the_defaults_warns_naming_its_variables() {
    let removed = vec!["UCX_TLS".to_string()];
    // With the recipe's UCX_TLS: 1 GB/s; without it (UCX's defaults): 6 GB/s.
    let mut main = main_at_4_mib(1.0);
    assert_eq!(main.verdict.status, VerdictStatus::Pass, "{}", main.verdict.reason);
    let c = judge_knobs_off_control(&control(TAG_CMA, 6.0), &main, &removed);
    assert_eq!(
        (c.kind, c.caught, c.effect),
        (ControlKind::KnobsOff, true, Some(KnobsEffect::Slower))
    );
    assert_eq!(c.removed, removed);
    assert_eq!((c.main_bandwidth_bps, c.bandwidth_bps), (Some(1e9), Some(6e9)));
    main.controls = vec![c];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Warn);
    assert!(
        main.verdict
            .reason
            .starts_with("the recipe's UCX_TLS made tag_bw 4 MiB host→host slower than UCX's defaults"),
        "{}",
        main.verdict.reason
    );
    assert!(main.verdict.hint.as_deref().unwrap().contains("UCX_TLS"));

    // A run that fails already keeps failing; its reason names the variables too.
    let mut failed = tcp_report(serde_json::json!({}));
    judge(&mut failed);
    assert_eq!(failed.verdict.status, VerdictStatus::Fail);
    failed.controls = vec![judge_knobs_off_control(
        &control(TAG_CMA, 6.0),
        &main_at_4_mib(1.0),
        &removed,
    )];
    judge(&mut failed);
    assert_eq!(failed.verdict.status, VerdictStatus::Fail);
    assert!(
        failed.verdict.reason.contains("; and the recipe's UCX_TLS made"),
        "{}",
        failed.verdict.reason
    );

    // Within the run's noise: nothing measurable, the pass stands and the control says so.
    let mut main = main_at_4_mib(5.0);
    let harmless = vec!["UCX_RNDV_THRESH".to_string()];
    let c = judge_knobs_off_control(&control(TAG_CMA, 5.0 * (KNOBS_OFF_MARGIN - 0.1)), &main, &harmless);
    assert_eq!(c.effect, Some(KnobsEffect::Unchanged));
    assert!(
        c.detail
            .starts_with("the recipe's UCX_RNDV_THRESH changed nothing here"),
        "{}",
        c.detail
    );
    main.controls = vec![c];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Pass, "{}", main.verdict.reason);

    // Faster with the recipe's env: said, no warning.
    let c = judge_knobs_off_control(&control(TAG_CMA, 1.0), &main, &harmless);
    assert_eq!(c.effect, Some(KnobsEffect::Faster));
    main.controls = vec![c];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Pass, "{}", main.verdict.reason);
}

/// A knobs-off control that could not compare is "not known": it is reported, but the main
/// verdict does not rest on it (unlike a detector control, it never makes the run inconclusive).
#[test]
fn a_knobs_off_control_that_measured_nothing_leaves_the_verdict_alone() {
    let mut main = main_at_4_mib(5.0);
    let mut nothing = control(TAG_CMA, 5.0);
    nothing.cases[0].status = CaseStatus::Failed;
    let c = judge_knobs_off_control(&nothing, &main, &["UCX_TLS".to_string()]);
    assert_eq!((c.caught, c.effect), (false, None));
    assert!(
        c.detail.starts_with("the knobs-off control measured nothing"),
        "{}",
        c.detail
    );
    main.controls = vec![c, control_not_run(ControlKind::KnobsOff, "no recipe")];
    judge(&mut main);
    assert_eq!(main.verdict.status, VerdictStatus::Pass, "{}", main.verdict.reason);
}

#[test]
fn knobs_effect_is_decided_outside_the_margin_only() {
    assert_eq!(KnobsEffect::of(1.0, KNOBS_OFF_MARGIN * 1.01), Some(KnobsEffect::Slower));
    assert_eq!(
        KnobsEffect::of(1.0, KNOBS_OFF_MARGIN * 0.99),
        Some(KnobsEffect::Unchanged)
    );
    assert_eq!(
        KnobsEffect::of(KNOBS_OFF_MARGIN * 0.99, 1.0),
        Some(KnobsEffect::Unchanged)
    );
    assert_eq!(KnobsEffect::of(KNOBS_OFF_MARGIN * 1.01, 1.0), Some(KnobsEffect::Faster));
    assert_eq!(KnobsEffect::of(0.0, 1.0), None, "no figure is not known");
    assert_eq!("knobs-off".parse::<ControlKind>().unwrap(), ControlKind::KnobsOff);
    assert_eq!(
        serde_json::to_value(ControlKind::KnobsOff).unwrap(),
        serde_json::json!("knobs_off")
    );
}

#[test]
fn wrong_nic_is_spelt_with_a_hyphen_on_the_command_line_and_an_underscore_in_json() {
    for spelling in ["wrong-nic", "wrong_nic"] {
        assert_eq!(spelling.parse::<ControlKind>(), Ok(ControlKind::WrongNic));
    }
    assert_eq!(serde_json::to_string(&ControlKind::WrongNic).unwrap(), "\"wrong_nic\"");
    assert!(ControlKind::WrongNic.needs_rails() && !ControlKind::Tcp.needs_rails());
    let e = "nic".parse::<ControlKind>().unwrap_err().to_string();
    assert!(e.contains("use tcp, knobs-off (with a recipe) or wrong-nic"), "{e}");
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

/// A recipe env that moved the bytes onto another data path (tcp with it, cma without) is judged
/// at the fast-path margin, not the same-path noise margin: forced TCP at 2.5x under the
/// defaults (a fast machine's loopback) is slower, and says which paths; the same 2.5x on one
/// path is still within the noise.
#[test]
fn a_recipe_env_that_moved_the_data_path_is_judged_at_the_fast_path_margin() {
    let removed = vec!["UCX_TLS".to_string()];
    let mut over_tcp = main_at_4_mib(5.0);
    over_tcp.cases = vec![measured(TestKind::TagBw, HH, 4 * MIB, Some(TAG_TCP), &[], 5.0)];
    let c = judge_knobs_off_control(&control(TAG_CMA, 12.5), &over_tcp, &removed);
    assert_eq!(c.effect, Some(KnobsEffect::Slower), "{c:?}");
    assert!(
        c.detail
            .ends_with(&format!("(over {FAST_PATH_MARGIN}x) (tcp with them, cma without)")),
        "{}",
        c.detail
    );
    // Within the fast-path margin on another path: unchanged, with both paths named.
    let c = judge_knobs_off_control(&control(TAG_CMA, 5.5), &over_tcp, &removed);
    assert_eq!(c.effect, Some(KnobsEffect::Unchanged), "{c:?}");
    assert!(c.detail.ends_with("(tcp with them, cma without)"), "{}", c.detail);
    // The same 2.5x on one path: the same-path margin.
    let c = judge_knobs_off_control(&control(TAG_CMA, 12.5), &main_at_4_mib(5.0), &removed);
    assert_eq!(c.effect, Some(KnobsEffect::Unchanged), "{c:?}");
    assert!(!c.detail.contains("with them, cma without)"), "{}", c.detail);
}
