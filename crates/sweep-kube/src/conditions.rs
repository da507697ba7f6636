//! `sweep --node-conditions`: every node of a finished sweep gets the `ICBenchFabric` condition
//! (`icb_kube::node_conditions` writes it). Only a pass is `True` and only a fail is `False`;
//! everything else is `Unknown` with a reason that says which: a node that was not measured, could
//! not take bench pods, is still a suspect, or whose pairs were inconclusive is not known to be
//! good, and a node of the sweep without a verdict at all is `NotMeasured`. Unlike the label
//! (left as it was on such nodes), the condition always says what tonight's sweep knows, and its
//! `lastHeartbeatTime` how fresh that is.

use icb_core::BandwidthUnit;
use icb_kube::node_conditions::{self, ConditionError, ConditionMark, ConditionStatus};
use icb_sweep::labels::{ReasonStyle, reason};
use icb_sweep::results::SweepResults;
use icb_sweep::score::NodeStatus;

/// The condition's status and reason for a node's verdict.
pub fn condition_of(status: NodeStatus) -> (ConditionStatus, &'static str) {
    match status {
        NodeStatus::Pass => (ConditionStatus::True, "FabricPass"),
        NodeStatus::Fail => (ConditionStatus::False, "FabricFail"),
        NodeStatus::Suspect => (ConditionStatus::Unknown, "Suspect"),
        NodeStatus::Unschedulable => (ConditionStatus::Unknown, "Unschedulable"),
        NodeStatus::Unknown => (ConditionStatus::Unknown, "NotMeasured"),
        NodeStatus::Unjudged => (ConditionStatus::Unknown, "Inconclusive"),
    }
}

/// One mark per node of the sweep, in the sweep's node order.
pub fn marks(results: &SweepResults, style: ReasonStyle) -> Vec<ConditionMark> {
    let sweep = format!("sweep {}", results.sweep_id);
    results
        .nodes
        .iter()
        .map(|node| match results.node_verdicts.iter().find(|v| &v.node == node) {
            Some(v) => {
                let (status, why) = condition_of(v.status);
                ConditionMark {
                    node: node.clone(),
                    status,
                    reason: why,
                    message: format!("{sweep}: {}", reason(v, style)),
                }
            }
            None => ConditionMark {
                node: node.clone(),
                status: ConditionStatus::Unknown,
                reason: "NotMeasured",
                message: format!("{sweep}: no verdict for this node"),
            },
        })
        .collect()
}

/// Writes the condition on every node of the sweep; returns the line that says what was written.
pub async fn apply(
    cluster: &icb_kube::Cluster,
    results: &SweepResults,
    unit: BandwidthUnit,
) -> Result<String, ConditionError> {
    let relaxed = icb_sweep::labels::relaxations(results);
    let style = ReasonStyle {
        unit,
        relaxed: &relaxed,
    };
    let marks = marks(results, style);
    let done = node_conditions::set_conditions(cluster, &marks, &results.updated_at).await?;
    Ok(summary(done, &marks, &results.sweep_id))
}

/// `set condition ICBenchFabric on 4 node(s): 2 True, 1 False, 1 Unknown (sweep …)`.
pub fn summary(done: usize, marks: &[ConditionMark], sweep_id: &str) -> String {
    let count = |s: ConditionStatus| marks.iter().filter(|m| m.status == s).count();
    format!(
        "set condition {} on {done} node(s): {} True, {} False, {} Unknown (sweep {sweep_id})",
        node_conditions::CONDITION_TYPE,
        count(ConditionStatus::True),
        count(ConditionStatus::False),
        count(ConditionStatus::Unknown)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pass_is_true_and_only_a_fail_is_false() {
        use NodeStatus::*;
        for s in [Pass, Fail, Suspect, Unschedulable, Unknown, Unjudged] {
            let (c, why) = condition_of(s);
            let want = match s {
                Pass => ConditionStatus::True,
                Fail => ConditionStatus::False,
                _ => ConditionStatus::Unknown,
            };
            assert_eq!(c, want, "{s:?}");
            assert!(why.chars().all(|c| c.is_ascii_alphanumeric()) && why.starts_with(char::is_uppercase));
        }
    }
}
