//! `sweep --label-nodes`: the marks `icb_sweep::labels` decides, written by
//! `icb_kube::node_labels`, and the one line that says what was written and what was left alone.

use icb_core::BandwidthUnit;
use icb_kube::node_labels::{self, Fabric, LabelError, NodeMark};
use icb_sweep::labels::{ReasonStyle, marks};
use icb_sweep::results::SweepResults;
use icb_sweep::score::NodeStatus;

/// Labels the judged nodes of a finished sweep; returns the line that says what was written and
/// what was left alone.
pub async fn apply(
    cluster: &icb_kube::Cluster,
    results: &SweepResults,
    unit: BandwidthUnit,
) -> Result<String, LabelError> {
    let relaxed = icb_sweep::labels::relaxations(results);
    let style = ReasonStyle {
        unit,
        relaxed: &relaxed,
    };
    let (marks, untouched) = marks(&results.node_verdicts, style);
    let marks: Vec<NodeMark> = marks
        .into_iter()
        .map(|m| NodeMark {
            node: m.node,
            fabric: if m.pass { Fabric::Pass } else { Fabric::Fail },
            reason: m.reason,
            bad_rails: m.bad_rails,
        })
        .collect();
    let done = node_labels::label_nodes(cluster, &marks, &results.sweep_id, &results.updated_at).await?;
    Ok(summary(done, &results.sweep_id, &untouched))
}

/// What was labelled, and the nodes without a verdict whose labels were left as they were.
pub fn summary(done: usize, sweep_id: &str, untouched: &[(String, NodeStatus)]) -> String {
    let mut line = format!(
        "labelled {done} node(s) {}=pass|fail (sweep {sweep_id})",
        node_labels::FABRIC_LABEL
    );
    if !untouched.is_empty() {
        let list: Vec<String> = untouched.iter().map(|(n, s)| format!("{n} ({})", s.as_str())).collect();
        line.push_str(&format!(
            "; no verdict, left as they were: {} (a label there is an earlier sweep's: see {})",
            list.join(", "),
            node_labels::CHECKED_AT_ANNOTATION
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_what_was_labelled_and_what_was_left_alone() {
        let label = node_labels::FABRIC_LABEL;
        assert_eq!(
            summary(3, "swab12cd", &[]),
            format!("labelled 3 node(s) {label}=pass|fail (sweep swab12cd)")
        );
        let untouched = [("node-4".to_string(), NodeStatus::Unschedulable)];
        let line = summary(2, "swab12cd", &untouched);
        assert!(
            line.contains(&format!(
                "; no verdict, left as they were: node-4 ({})",
                NodeStatus::Unschedulable.as_str()
            )),
            "{line}"
        );
        assert!(
            line.ends_with(&format!("see {})", node_labels::CHECKED_AT_ANNOTATION)),
            "{line}"
        );
    }
}
