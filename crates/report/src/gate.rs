//! The gate report for people (a verdict line, then the findings, fitted to the terminal) and
//! for CI (JUnit: one testcase per finding, so a CI view lists what failed one by one).

use crate::diagnostic::{Diagnostic, push_diagnostic};
use crate::format::{ExportError, View};
use icb_core::model::{GateReport, GateVerdict, Status};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::fmt::Write as _;
use std::time::Duration;

fn wrapped(out: &mut String, text: &str, width: usize, first: &str, rest: &str) {
    for line in crate::wrap::fill(text, width, first, rest) {
        let _ = writeln!(out, "{line}");
    }
}

/// The verdict line, what the bench pods were modelled on, the time per step, then each finding
/// as a diagnostic (`fail[check]: step`, then its detail and its fix at full width). `-o wide`
/// does not wrap and keeps one line per finding, before the bench pods and the time.
pub(crate) fn table(r: &GateReport, view: View) -> String {
    let width = if view.wide {
        usize::MAX / 2
    } else {
        usize::from(view.width)
    };
    let mut out = String::new();
    let head = format!("{}: {} ({:.1}s)", r.verdict.as_str().to_uppercase(), r.reason, r.wall_s);
    wrapped(&mut out, &head, width, "", "  ");
    if let Some(p) = &r.pair {
        wrapped(&mut out, &pair_step_line(p), width, "  ", "    ");
        // A knobs-off control is always one of the gate's findings (its line, with the fix):
        // listed here too it would be two lines for one thing.
        for c in p.controls.iter().filter(|c| c.kind.tests_the_detector()) {
            wrapped(
                &mut out,
                &crate::verdict_text::control_line(c, p.settings.unit),
                width,
                "  ",
                "    ",
            );
        }
    }
    if view.wide {
        // `-o wide` keeps its one line per finding, where it was.
        for f in &r.findings {
            let text = format!("{}: {}", f.step, f.detail);
            wrapped(&mut out, &text, width, &format!("  [{}] ", f.status), "         ");
            if let Some(h) = &f.hint {
                wrapped(&mut out, &format!("fix: {h}"), width, "      ", "           ");
            }
        }
    }
    for (side, source) in &r.modelled_on {
        wrapped(
            &mut out,
            &format!("{side} bench pod modelled on {source}"),
            width,
            "  ",
            "    ",
        );
    }
    let steps: Vec<String> = r.steps.iter().map(|(s, t)| format!("{s} {t:.1}s")).collect();
    if !steps.is_empty() {
        wrapped(&mut out, &format!("time: {}", steps.join(", ")), width, "  ", "    ");
    }
    if !view.wide {
        // Last, each after a blank line: an indented line after a diagnostic reads as its own.
        for f in &r.findings {
            let d = Diagnostic {
                status: f.status.as_str(),
                id: f.check.as_deref(),
                place: Some(&f.step),
                seen: &f.detail,
                fix: f.hint.as_deref().map(|h| ("fix", h)),
            };
            out.push('\n');
            push_diagnostic(&mut out, &d, width);
        }
    }
    out
}

/// What the pair step measured, whatever the gate concluded: its verdict, data paths and, for a
/// `--kv-shape` step, the milliseconds per request (issue 36: a PASS listed only probe warnings
/// while its pair step warned).
fn pair_step_line(p: &icb_core::PairReport) -> String {
    let paths: Vec<&str> = p.verdict.data_paths.iter().map(|c| c.as_str()).collect();
    let over = if paths.is_empty() {
        "no data path".to_string()
    } else {
        format!("over {}", paths.join(", "))
    };
    let kv =
        p.kv.as_deref()
            .and_then(|kv| kv.request_ms_p50)
            .map(|ms| format!(", KV {ms:.1} ms per request (p50)"))
            .unwrap_or_default();
    format!(
        "pair step: {} {over}{kv}: {}",
        crate::verdict_text::verdict_word(p.verdict.status),
        p.verdict.reason
    )
}

/// One suite: a `gate` testcase with the verdict (a failure when it failed, an error when it
/// could not finish or was interrupted), then one testcase per finding (failures fail, warnings
/// pass with their text in system-out).
pub(crate) fn junit(r: &GateReport) -> Result<String, ExportError> {
    let mut report = Report::new("ic-bench gate");
    let mut suite = TestSuite::new("ic-bench.gate");
    suite.add_property(("verdict", r.verdict.as_str()));
    let status = match r.verdict {
        GateVerdict::Pass => TestCaseStatus::success(),
        GateVerdict::Fail => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(first_line(&r.reason));
            s.set_type("verdict");
            s.set_description(r.reason.as_str());
            s
        }
        GateVerdict::Error | GateVerdict::Interrupted => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message(first_line(&r.reason));
            s.set_type(r.verdict.as_str());
            s
        }
    };
    let mut gate = TestCase::new("gate", status);
    gate.set_classname("ic-bench.gate");
    if r.wall_s.is_finite() && r.wall_s >= 0.0 {
        gate.set_time(Duration::from_secs_f64(r.wall_s.min(1e9)));
    }
    suite.add_test_case(gate);
    for (i, f) in r.findings.iter().enumerate() {
        let name = format!(
            "{} #{}: {}",
            f.step,
            i + 1,
            f.check.as_deref().unwrap_or(first_words(&f.detail))
        );
        let status = if f.status == Status::Fail {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(f.detail.as_str());
            s.set_type("finding");
            if let Some(h) = &f.hint {
                s.set_description(format!("fix: {h}"));
            }
            s
        } else {
            TestCaseStatus::success()
        };
        let mut tc = TestCase::new(name, status);
        tc.set_classname(format!("ic-bench.gate.{}", f.step.replace(' ', "_")));
        if f.status != Status::Fail {
            tc.set_system_out(format!("{}: {}", f.status, f.detail));
        }
        suite.add_test_case(tc);
    }
    report.add_test_suite(suite);
    crate::junit::write(&report)
}

fn first_line(text: &str) -> &str {
    text.split("; ").next().unwrap_or(text)
}

/// A finding's name when it has no check id: its first few words.
fn first_words(text: &str) -> &str {
    let end = text
        .char_indices()
        .filter(|(_, c)| c.is_whitespace())
        .nth(5)
        .map_or(text.len(), |(i, _)| i);
    text[..end].trim_end_matches([':', ','])
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::model::Finding;

    #[test]
    fn figures_keep_their_units_on_one_line_and_lines_fit() {
        let mut r = GateReport::new();
        r.findings.push(Finding {
            step: "pair".into(),
            status: Status::Fail,
            check: None,
            detail: "no RDMA transport: data went over tcp/eth0; 2.45 GB/s measured, expected ≥ 8.00 GB/s for host→host on different hosts".into(),
            hint: None,
        });
        r.conclude();
        for width in [60u16, 80, 100] {
            let text = table(&r, View { width, wide: false });
            for line in text.lines() {
                assert!(line.chars().count() <= usize::from(width), "{width}: {line}");
                assert!(
                    !line.trim_start().starts_with("GB/s"),
                    "{width}: unit split from its figure:\n{text}"
                );
            }
            assert!(!text.contains('\u{a0}'));
        }
    }

    /// Issue 38: a finding reads like a compiler's diagnostic, its header the status, the check
    /// and the step, its detail and fix at full width on whole words (a file name was split at
    /// its hyphens).
    #[test]
    fn a_finding_is_a_diagnostic_on_whole_words() {
        let mut r = GateReport::new();
        r.findings.push(Finding {
            step: "probe env".into(),
            status: Status::Fail,
            check: Some("env.ucx_tls.tcp_only".into()),
            detail: "UCX_TLS=tcp [spec.containers[engine].env (recipes/fail/ucx-tls-tcp-only-with-a-long-name.yaml:19)] lists no RDMA transport".into(),
            hint: Some("use UCX_TLS=rc_x,rc,dc_x,dc,cuda_copy,cuda_ipc and request the RDMA device".into()),
        });
        r.conclude();
        let text = table(&r, View { width: 60, wide: false });
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| *l == "fail[env.ucx_tls.tcp_only]: probe env")
            .unwrap_or_else(|| panic!("no header:\n{text}"));
        assert_eq!(lines[at + 1], "  UCX_TLS=tcp [spec.containers[engine].env", "{text}");
        assert_eq!(
            lines[at + 2],
            "  (recipes/fail/ucx-tls-tcp-only-with-a-long-name.yaml:19)]",
            "{text}"
        );
        assert!(lines[at + 4].starts_with("  fix: use UCX_TLS="), "{text}");
        assert_eq!(lines[at - 1], "", "a blank line sets it apart:\n{text}");
        // -o wide keeps one line per finding.
        let wide = table(&r, View { width: 60, wide: true });
        assert!(wide.contains("  [fail] probe env: UCX_TLS=tcp"), "{wide}");
    }

    /// A knobs-off control's line is the gate's finding (with its fix), printed once; the TCP
    /// control, which no finding repeats, keeps its line.
    #[test]
    fn a_knobs_off_control_is_one_line_of_the_gate_table() {
        use icb_core::model::{ControlKind, ControlResult, KnobsEffect};
        let mut pair: icb_core::PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        let control = |kind, effect, detail: &str| ControlResult {
            kind,
            caught: true,
            seen_as: vec![],
            case: "put_bw 4 KiB host→host".into(),
            bandwidth_bps: Some(6e9),
            main_bandwidth_bps: Some(1e9),
            detail: detail.into(),
            removed: vec!["UCX_TLS".into()],
            effect,
        };
        pair.controls = vec![
            control(ControlKind::Tcp, None, "a forced TCP fallback was seen as tcp"),
            control(
                ControlKind::KnobsOff,
                Some(KnobsEffect::Slower),
                "the recipe's UCX_TLS made put_bw slower than UCX's defaults",
            ),
        ];
        let mut r = GateReport::new();
        r.add_pair(pair);
        r.conclude();
        let text = table(&r, View { width: 200, wide: true });
        assert_eq!(text.matches("made put_bw slower").count(), 1, "{text}");
        assert!(text.contains("[warn] pair: the recipe's UCX_TLS"), "{text}");
        assert!(text.contains("control tcp: caught"), "{text}");
    }

    /// Issue 36 item 4: the pair step's verdict, data path and KV time show whatever the gate
    /// concluded (a PASS listed only probe warnings while its pair step warned over TCP).
    #[test]
    fn the_pair_step_shows_its_verdict_path_and_kv_time() {
        let mut pair: icb_core::PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        pair.verdict.status = icb_core::VerdictStatus::Warn;
        pair.verdict.reason = "tcp fallback allowed".into();
        pair.verdict.data_paths = vec![icb_core::TransportClass::Tcp];
        let mut r = GateReport::new();
        r.pair = Some(pair);
        r.conclude();
        let text = table(
            &r,
            View {
                width: 100,
                wide: false,
            },
        );
        assert!(
            text.starts_with("PASS: fit for benchmarking only because TCP was allowed"),
            "{text}"
        );
        assert!(
            text.contains("pair step: WARN over tcp: tcp fallback allowed"),
            "{text}"
        );
    }
}
