//! The NIC health counters of each case judged once its verdict is known (issue 40 item 1): a
//! failed case's congestion counters explain it, loss counters are a lossy link either way, and
//! an RMA case UCX reported as RDMA is checked against the target NIC's request counters. A
//! passing run whose counters show a lossy link or contradict RDMA becomes a warning naming it.

use crate::model::*;
use crate::rails::nic_health::rules::{HealthKind, RdmaEvidence, RdmaOp};

/// The RDMA operation `case` says it did, where its counters can confirm it: a put (WRITE) or
/// get (READ), or the NIXL engine's direction, over a data path UCX reported as RDMA.
fn rdma_op(case: &CaseResult) -> Option<RdmaOp> {
    let over_rdma = case.transport.as_ref()?.data_path.class == TransportClass::Rdma;
    let op = match (case.run_by.direction, case.test) {
        (Some(Direction::Read), _) | (None, TestKind::GetBw) => RdmaOp::Read,
        (Some(Direction::Write), _) | (None, TestKind::PutBw) => RdmaOp::Write,
        _ => return None,
    };
    over_rdma.then_some(op)
}

/// Judges every case's counters against its verdict (set before).
pub(crate) fn judge_cases(cases: &mut [CaseResult]) {
    for case in cases.iter_mut() {
        let slow = case.verdict.as_ref().is_some_and(|v| v.status == Status::Fail);
        let op = rdma_op(case);
        if let Some(health) = case.nic_health.as_deref_mut() {
            health.judge(slow, op);
        }
    }
}

/// The first thing a passing run's counters say against it, with its fix: a lossy link, or an
/// RDMA operation the target NIC did not see.
fn first_counter_finding(report: &PairReport) -> Option<(String, String)> {
    let cases = || report.cases.iter().filter_map(|c| Some((c, c.nic_health.as_deref()?)));
    let lossy = cases().find_map(|(c, h)| {
        let (side, f) = h.findings().find(|(_, f)| f.kind == HealthKind::LossyLink)?;
        Some((
            format!(
                "{} {}: {side} {}",
                c.operation(),
                crate::units::format_size(c.size),
                f.reason
            ),
            f.fix.clone(),
        ))
    });
    lossy.or_else(|| {
        cases().find_map(|(c, h)| {
            let r = h.rdma.as_ref().filter(|r| r.evidence == RdmaEvidence::Contradicted)?;
            let fix = format!(
                "check which transport carried {} (its data path) and UCX_NET_DEVICES",
                c.operation()
            );
            Some((
                format!("{} {}: {}", c.operation(), crate::units::format_size(c.size), r.reason),
                fix,
            ))
        })
    })
}

/// A pass whose NIC counters show a lossy link or contradict RDMA is a warning naming the first.
pub(crate) fn counter_warning(report: &mut PairReport) {
    if report.verdict.status != VerdictStatus::Pass {
        return;
    }
    let Some((what, fix)) = first_counter_finding(report) else {
        return;
    };
    report.verdict.status = VerdictStatus::Warn;
    report.verdict.reason = format!("{}; but the NIC counters say: {what}", report.verdict.reason);
    if report.verdict.hint.is_none() {
        report.verdict.hint = Some(fix);
    }
}
