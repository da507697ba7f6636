//! JUnit for a sweep: one test case per pair (both passes) and one per node, so CI shows which
//! link and which node failed. Unschedulable or disrupted pairs and unschedulable nodes are skipped, not failed: they say
//! nothing about the fabric. While the sweep runs, the node cases are the first-pass verdicts so
//! far (the suites' `complete` property says which). A sweep that stopped early (signal, API
//! outage) says so: a `stopped` property, one errored `sweep` case with the reason, and no node
//! case that passes (a pass needs the whole sweep). A whole-node sweep adds a `rails` suite: one
//! case per node rail ([`super::rails`]).

use crate::format::ExportError;
use icb_sweep::results::{SweepResults, gbps};
use icb_sweep::score::{NodeStatus, SLOW_FRACTION, pair_bad, reference_bandwidth};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

pub(crate) fn render(results: &SweepResults) -> Result<String, ExportError> {
    let mut report = Report::new(format!("ic-bench sweep {}", results.sweep_id));
    let complete = results.complete.to_string();
    let mut pairs = TestSuite::new("pairs");
    pairs.add_property(("sweep_id", results.sweep_id.as_str()));
    pairs.add_property(("complete", complete.as_str()));
    // A pair fails as the node verdicts count it: a failed verdict, nothing measured, or slow
    // against the sweep's reference bandwidth.
    let reference = reference_bandwidth(&results.pairs);
    for r in &results.pairs {
        let status = if pair_bad(r, reference) {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let slow = match (r.outcome.failed(), reference) {
                (false, Some(f)) => format!(
                    " (slow: under {:.0}% of the reference {} GB/s)",
                    SLOW_FRACTION * 100.0,
                    gbps(f)
                ),
                _ => String::new(),
            };
            s.set_message(format!("{}{slow}", r.outcome.short()));
            s
        } else if !r.outcome.counts() {
            let mut s = TestCaseStatus::skipped();
            s.set_message(r.outcome.short());
            s
        } else {
            TestCaseStatus::success()
        };
        let mut case = TestCase::new(format!("pass {} {}", r.pass, r.pair), status);
        case.set_time(std::time::Duration::from_secs_f64(r.duration_s.max(0.0)));
        case.set_classname("pair");
        pairs.add_test_case(case);
    }
    let mut nodes = TestSuite::new("nodes");
    nodes.add_property(("sweep_id", results.sweep_id.as_str()));
    nodes.add_property(("complete", complete.as_str()));
    if let Some(stop) = &results.stopped {
        for suite in [&mut pairs, &mut nodes] {
            suite.add_property(("stopped", stop.reason.as_str()));
        }
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
        s.set_message(format!(
            "{}: {}; --resume the results file to finish",
            stop.reason.as_str(),
            stop.detail
        ));
        let mut case = TestCase::new("sweep", s);
        case.set_classname("sweep");
        nodes.add_test_case(case);
    }
    for v in super::verdicts(results).iter() {
        let status = match v.status {
            NodeStatus::Pass if results.stopped.is_some() => {
                let mut s = TestCaseStatus::skipped();
                s.set_message("not judged: the sweep stopped before its end");
                s
            }
            NodeStatus::Pass => TestCaseStatus::success(),
            NodeStatus::Unschedulable | NodeStatus::Unknown => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(v.evidence.join("; "));
                s
            }
            NodeStatus::Fail | NodeStatus::Suspect | NodeStatus::Unjudged => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(format!("{}: {}", v.status.as_str(), v.evidence.join("; ")));
                s
            }
        };
        let mut case = TestCase::new(v.node.clone(), status);
        case.set_classname("node");
        // Regressed is not failed: the case keeps its status, the comparison is a property.
        if let Some(c) = results.baseline.as_deref().and_then(|b| b.node_check(&v.node)) {
            case.add_property(("baseline.median_bandwidth", c.summary().as_str()));
        }
        nodes.add_test_case(case);
    }
    let verdicts = super::verdicts(results);
    let cells = icb_sweep::rails::node_rails(&results.pairs, &verdicts);
    let props = [("sweep_id", results.sweep_id.as_str()), ("complete", complete.as_str())];
    let rails = super::rails::junit_suite(&cells, &verdicts, &props, results.stopped.is_some());
    report.add_test_suite(pairs);
    report.add_test_suite(nodes);
    if let Some(mut rails) = rails {
        if let Some(stop) = &results.stopped {
            rails.add_property(("stopped", stop.reason.as_str()));
        }
        report.add_test_suite(rails);
    }
    report.to_string().map_err(|e| ExportError::Serialize {
        format: "junit",
        detail: e.to_string(),
    })
}
