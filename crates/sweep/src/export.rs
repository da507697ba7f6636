//! JUnit for a sweep: one test case per pair (both passes) and one per node, so CI shows which
//! link and which node failed.

use crate::results::SweepResults;
use crate::score::NodeStatus;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

pub fn junit(results: &SweepResults) -> Result<String, String> {
    let mut report = Report::new("ic-bench sweep");
    let mut pairs = TestSuite::new("pairs");
    for r in &results.pairs {
        let status = if r.outcome.failed() {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(r.outcome.short());
            s
        } else if matches!(r.outcome, crate::results::Outcome::Unschedulable { .. }) {
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
    for v in &results.node_verdicts {
        let status = match v.status {
            NodeStatus::Pass => TestCaseStatus::success(),
            NodeStatus::Unschedulable | NodeStatus::Unknown => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(v.evidence.join("; "));
                s
            }
            NodeStatus::Fail | NodeStatus::Suspect => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(format!("{}: {}", v.status.as_str(), v.evidence.join("; ")));
                s
            }
        };
        let mut case = TestCase::new(v.node.clone(), status);
        case.set_classname("node");
        nodes.add_test_case(case);
    }
    report.add_test_suite(pairs);
    report.add_test_suite(nodes);
    report.to_string().map_err(|e| format!("cannot render JUnit: {e}"))
}
