//! `sweep --label-nodes`: the marks `icb_sweep::labels` decides, written by
//! `icb_kube::node_labels`; one line on stderr says what was written and what was left alone.

use icb_core::BandwidthUnit;
use icb_kube::node_labels::{self, Fabric, NodeMark};
use icb_sweep::labels::{ReasonStyle, marks};
use icb_sweep::results::SweepResults;

/// Labels the judged nodes of a finished sweep; one line on stderr says what was written and what
/// was left alone.
pub async fn apply(cluster: &icb_kube::Cluster, results: &SweepResults, unit: BandwidthUnit) -> anyhow::Result<()> {
    let relaxed = results
        .criteria
        .as_ref()
        .map(icb_sweep::Criteria::relaxations)
        .unwrap_or_default();
    let (marks, untouched) = marks(
        &results.node_verdicts,
        ReasonStyle {
            unit,
            relaxed: &relaxed,
        },
    );
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
    let mut line = format!(
        "ic-bench: labelled {done} node(s) {}=pass|fail (sweep {})",
        node_labels::FABRIC_LABEL,
        results.sweep_id
    );
    if !untouched.is_empty() {
        let list: Vec<String> = untouched.iter().map(|(n, s)| format!("{n} ({})", s.as_str())).collect();
        line.push_str(&format!(
            "; no verdict, left as they were: {} (a label there is an earlier sweep's: see {})",
            list.join(", "),
            node_labels::CHECKED_AT_ANNOTATION
        ));
    }
    eprintln!("{line}");
    Ok(())
}
