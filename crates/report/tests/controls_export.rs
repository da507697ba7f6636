//! Issue 35 item 4: every control is one JUnit testcase and one Prometheus series, knobs-off
//! included: the TCP control caught passes, a knobs-off control that found the recipe's env slower
//! warns (and its effect is a series of its own), one that could not compare is skipped (not
//! known), never a pass or a failure.

use crate::common::same_host_healthy;
use icb_core::model::{ControlKind, ControlResult, KnobsEffect, PairReport};
use icb_report::{Format, render_pair};

fn control(kind: ControlKind, caught: bool, effect: Option<KnobsEffect>) -> ControlResult {
    ControlResult {
        kind,
        caught,
        seen_as: Vec::new(),
        case: "put_bw 1 MiB host→host".into(),
        bandwidth_bps: caught.then_some(5e9),
        main_bandwidth_bps: caught.then_some(1e9),
        detail: format!("{kind} detail"),
        removed: match kind {
            ControlKind::KnobsOff => vec!["UCX_TLS".into()],
            ControlKind::Tcp | ControlKind::WrongNic => Vec::new(),
        },
        effect,
    }
}

fn with_controls(controls: Vec<ControlResult>) -> PairReport {
    let mut r = same_host_healthy();
    r.controls = controls;
    r
}

/// The `<testcase>` element named `name`, up to its end.
fn testcase<'a>(xml: &'a str, name: &str) -> &'a str {
    let at = xml
        .find(&format!("name=\"{name}\""))
        .unwrap_or_else(|| panic!("no testcase {name}: {xml}"));
    let rest = &xml[at..];
    let end = rest
        .find("</testcase>")
        .or_else(|| rest.find("/>"))
        .unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn each_control_is_a_junit_testcase_and_a_prometheus_series() {
    let r = with_controls(vec![
        control(ControlKind::Tcp, true, None),
        control(ControlKind::KnobsOff, true, Some(KnobsEffect::Slower)),
    ]);
    let xml = render_pair(&r, Format::Junit).unwrap();
    let tcp = testcase(&xml, "control tcp");
    assert!(!tcp.contains("<failure") && !tcp.contains("<skipped"), "{tcp}");
    let knobs = testcase(&xml, "control knobs-off");
    assert!(
        !knobs.contains("<failure"),
        "a slower recipe env warns, it does not fail: {knobs}"
    );
    assert!(knobs.contains("warn: knobs-off detail"), "{knobs}");

    let text = render_pair(&r, Format::Prometheus).unwrap();
    let line = |name: &str, kind: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains(&format!("kind=\"{kind}\"")))
            .unwrap_or_else(|| panic!("no {name} for {kind}: {text}"))
            .to_string()
    };
    assert!(line("icbench_control_caught", "tcp").ends_with(" 1"));
    assert!(line("icbench_control_caught", "knobs-off").ends_with(" 1"));
    assert!(
        line("icbench_control_knobs_effect", "knobs-off").ends_with(" 1"),
        "{text}"
    );
    assert!(!line_exists(&text, "tcp"), "only knobs-off has an effect: {text}");
}

fn line_exists(text: &str, kind: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with("icbench_control_knobs_effect") && l.contains(&format!("kind=\"{kind}\"")))
}

#[test]
fn a_knobs_off_control_that_could_not_compare_is_skipped_not_passed_or_failed() {
    let r = with_controls(vec![control(ControlKind::KnobsOff, false, None)]);
    let xml = render_pair(&r, Format::Junit).unwrap();
    let knobs = testcase(&xml, "control knobs-off");
    assert!(knobs.contains("<skipped"), "{knobs}");
    let text = render_pair(&r, Format::Prometheus).unwrap();
    assert!(
        !text.contains("icbench_control_knobs_effect"),
        "no effect, no series: {text}"
    );
    // The TCP control not caught still fails, as before.
    let r = with_controls(vec![control(ControlKind::Tcp, false, None)]);
    let xml = render_pair(&r, Format::Junit).unwrap();
    assert!(testcase(&xml, "control tcp").contains("<failure"), "{xml}");
}
