//! Latencies a pair's own quality check distrusts (`implausible_latency`): they judge no node.
//! A node left with no bandwidth and no trusted latency is unjudged, never a pass on nothing,
//! and a re-pair whose only figure is such a latency neither accuses nor clears its suspect.

use super::{NodeStatus, NodeVerdict, micros};
use crate::results::PairResult;

/// The evidence line for a pair whose latency is left out of the node verdicts because its own
/// quality check distrusts it; `None` when it is used (or there is none).
fn left_out_latency(r: &PairResult) -> Option<String> {
    let (p, kind) = r.outcome.distrusted_latency()?;
    Some(format!(
        "{}: latency {} µs ({} {}) not used: its own quality check says {}",
        r.pair,
        micros(p.p50_us),
        p.test,
        icb_core::units::format_size(p.size),
        kind.headline()
    ))
}

/// `status`, or `unjudged` for a node that passed with no bandwidth and no latency to judge it by
/// (`judged_by_figures` false) but latencies its `counted` pairs distrust: not a pass on nothing.
/// Either way `evidence` says which latencies were not used.
pub(super) fn without_distrusted_latencies(
    status: NodeStatus,
    counted: &[&PairResult],
    judged_by_figures: bool,
    evidence: &mut Vec<String>,
) -> NodeStatus {
    let left_out: Vec<String> = counted.iter().filter_map(|r| left_out_latency(r)).collect();
    if status != NodeStatus::Pass || judged_by_figures || left_out.is_empty() {
        evidence.extend(left_out);
        return status;
    }
    evidence.insert(
        0,
        format!(
            "not judged: no bandwidth measured and no latency to judge it by: {}",
            left_out.join("; ")
        ),
    );
    NodeStatus::Unjudged
}

/// A re-pair that failed nothing but whose only figure was a latency its own quality check
/// distrusts: it can neither accuse nor clear the suspect `v`, which is left unjudged. Whether
/// one was.
pub(super) fn unjudged_by_a_distrusted_latency(v: &mut NodeVerdict, second: &[&PairResult]) -> bool {
    let Some(line) = second
        .iter()
        .filter(|r| r.outcome.bandwidth().is_none() && r.outcome.latency().is_none())
        .find_map(|r| left_out_latency(r))
    else {
        return false;
    };
    v.evidence.insert(
        0,
        format!("not judged: second pass {line}, so it can neither accuse nor clear the node"),
    );
    v.status = NodeStatus::Unjudged;
    true
}
