//! JUnit XML for CI: one testcase per case (pair) or per check (probe); a pair testcase carries
//! what was measured (bandwidth, latency percentiles, data path, iterations) as properties. Failures carry the
//! verdict's reason as the message and the hint plus data path as the body; warnings pass but
//! keep their reason in system-out so they stay visible in CI test views.

use crate::format::{ExportError, Exporter};
use crate::labels::{bw_value, case_class, case_name, class_id, memory_id};
use icb_core::checks::ProbeReport;
use icb_core::classify::describe;
use icb_core::model::{BandwidthUnit, CaseResult, CaseStatus, PairReport, Status};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::time::Duration;

pub struct JunitExporter;

/// A detector control not caught fails (the run is inconclusive); a knobs-off control that
/// could not compare is skipped (not known), one that found the recipe's env slower warns.
fn control_status(c: &icb_core::model::ControlResult) -> Status {
    use icb_core::model::KnobsEffect;
    match (c.caught, c.kind.tests_the_detector(), c.effect) {
        (true, _, Some(KnobsEffect::Slower)) => Status::Warn,
        (true, _, _) => Status::Ok,
        (false, true, _) => Status::Fail,
        (false, false, _) => Status::Skipped,
    }
}

pub(crate) fn status_for(status: Status, reason: &str, hint: Option<&str>, detail: Option<&str>) -> TestCaseStatus {
    match status {
        Status::Ok | Status::Warn => TestCaseStatus::success(),
        Status::Skipped => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(reason);
            s
        }
        Status::Fail => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(reason);
            s.set_type("verdict");
            let body: Vec<&str> = [Some(reason), hint.map(|_| "hint:"), hint, detail]
                .into_iter()
                .flatten()
                .collect();
            s.set_description(body.join("\n"));
            s
        }
    }
}

/// What was measured in case `c`, as testcase properties: CI views show them next to the case.
fn measured_values(c: &CaseResult, unit: BandwidthUnit) -> Vec<(&'static str, String)> {
    let mut props = vec![
        ("test", c.test.to_string()),
        ("memory", memory_id(c.memory)),
        ("size_bytes", c.size.to_string()),
        ("data_path", class_id(case_class(c)).to_string()),
    ];
    props.extend(crate::labels::case_shape_labels(c));
    if let Some(m) = &c.measurement {
        props.push(("iterations", m.iterations.to_string()));
        if let Some(bps) = m.bandwidth_bps {
            props.push(("bandwidth_bytes_per_second", format!("{bps:.0}")));
            props.push(("bandwidth", format!("{} {}", bw_value(bps, unit), unit.label())));
        }
        if let Some(l) = &m.latency_us {
            props.push(("latency_p50_us", format!("{:.3}", l.p50)));
            props.push(("latency_p99_us", format!("{:.3}", l.p99)));
        }
    }
    props
}

pub(crate) fn write(report: &Report) -> Result<String, ExportError> {
    report.to_string().map_err(|e| ExportError::Serialize {
        format: "junit",
        detail: e.to_string(),
    })
}

impl Exporter for JunitExporter {
    fn pair(&self, r: &PairReport) -> Result<String, ExportError> {
        let mut report = Report::new("ic-bench pair");
        let mut suite = TestSuite::new(format!("ic-bench.pair {}", r.placement.locality));
        suite.add_property(("locality", r.placement.locality.to_string().as_str()));
        suite.add_property(("mode", r.placement.mode.as_str()));
        suite.add_property(("verdict", format!("{:?}", r.verdict.status).to_lowercase().as_str()));
        suite.add_property(("verdict_reason", r.verdict.reason.as_str()));
        suite.add_property(("unit", r.settings.unit.label()));
        for c in &r.cases {
            let path = c
                .transport
                .as_ref()
                .map(|t| describe(c.test, c.memory, c.size, &t.data_path));
            let (status, reason, hint) = match &c.verdict {
                Some(v) => (v.status, v.reason.clone(), v.hint.clone()),
                // Unjudged report: fall back on the case status alone.
                None => match c.status {
                    CaseStatus::Measured => (Status::Ok, "measured".to_string(), None),
                    CaseStatus::Skipped => (Status::Skipped, c.reason.clone().unwrap_or_default(), None),
                    CaseStatus::Failed => (Status::Fail, c.reason.clone().unwrap_or_default(), None),
                },
            };
            let mut tc = TestCase::new(
                case_name(c),
                status_for(status, &reason, hint.as_deref(), path.as_deref()),
            );
            tc.set_classname(format!("ic-bench.pair.{}", c.test));
            if let Some(m) = &c.measurement
                && m.elapsed_s.is_finite()
                && m.elapsed_s >= 0.0
            {
                tc.set_time(Duration::from_secs_f64(m.elapsed_s.min(1e9)));
            }
            for (name, value) in measured_values(c, r.settings.unit) {
                tc.add_property((name, value.as_str()));
            }
            for (name, value) in crate::baseline::case_properties(r, &icb_core::model::CaseKey::of_case(r, c)) {
                tc.add_property((name.as_str(), value.as_str()));
            }
            for (name, value) in crate::case_health::properties(c) {
                tc.add_property((name.as_str(), value.as_str()));
            }
            if status == Status::Warn {
                tc.set_system_out(format!("warn: {reason}"));
            } else if let Some(p) = &path {
                tc.set_system_out(p.as_str());
            }
            suite.add_test_case(tc);
        }
        for c in &r.controls {
            let status = control_status(c);
            let mut tc = TestCase::new(format!("control {}", c.kind), status_for(status, &c.detail, None, None));
            tc.set_classname("ic-bench.pair.control");
            tc.set_system_out(match status {
                Status::Warn => format!("warn: {}", c.detail),
                _ => c.detail.clone(),
            });
            suite.add_test_case(tc);
        }
        if r.verdict.status == icb_core::VerdictStatus::Inconclusive {
            // The cases only warn; the run as a whole could not tell, which a CI must not read
            // as a pass.
            let mut tc = TestCase::new(
                "verdict",
                status_for(Status::Fail, &r.verdict.reason, r.verdict.hint.as_deref(), None),
            );
            tc.set_classname("ic-bench.pair.verdict");
            suite.add_test_case(tc);
        }
        if let Some(rails) = &r.rails {
            for tc in crate::rail_export::junit_cases(rails, r.settings.unit) {
                suite.add_test_case(tc);
            }
        }
        report.add_test_suite(suite);
        write(&report)
    }

    fn probe(&self, r: &ProbeReport) -> Result<String, ExportError> {
        let mut report = Report::new("ic-bench probe");
        let mut suite = TestSuite::new(format!("ic-bench.probe.{}", r.kind));
        suite.add_property(("target", r.target.as_str()));
        suite.add_property(("verdict", r.verdict.as_str()));
        for c in &r.checks {
            let mut tc = TestCase::new(
                c.id.as_str(),
                status_for(c.status, &c.detail, c.hint.as_deref(), c.scope.as_deref()),
            );
            tc.set_classname(format!("ic-bench.probe.{}", r.kind));
            if c.status == Status::Warn {
                tc.set_system_out(format!("warn: {}", c.detail));
            }
            suite.add_test_case(tc);
        }
        report.add_test_suite(suite);
        write(&report)
    }

    fn sweep(&self, results: &icb_sweep::SweepResults) -> Result<String, ExportError> {
        crate::sweep::junit::render(results)
    }
    fn gate(&self, report: &icb_core::model::GateReport) -> Result<String, ExportError> {
        crate::gate::junit(report)
    }
}
