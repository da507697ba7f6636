//! A sweep as a table: the verdict line first (PASS, or FAIL naming the nodes), then one row per
//! node with its median bandwidth, bad pairs, data paths and the first line of its evidence
//! (`-o wide`: every line of it).

use crate::format::View;
use icb_sweep::SweepResults;
use icb_sweep::results::gbps;
use icb_sweep::score::NodeStatus;

pub(crate) fn render(r: &SweepResults, view: View) -> String {
    let mut t = crate::table::new_table(
        vec!["Node", "Verdict", "Median GB/s", "Bad pairs", "Data paths", "Evidence"],
        view,
    );
    let verdicts = super::verdicts(r);
    for v in verdicts.iter() {
        let evidence = if view.wide {
            v.evidence.join("\n")
        } else {
            v.evidence.first().cloned().unwrap_or_default()
        };
        t.add_row([
            v.node.clone(),
            v.status.as_str().to_string(),
            v.median_bps.map(gbps).unwrap_or_else(|| "-".into()),
            format!("{}/{}", v.failed_pairs, v.pairs),
            v.data_paths.join(", "),
            evidence,
        ]);
    }
    let bad: Vec<&str> = verdicts
        .iter()
        .filter(|v| matches!(v.status, NodeStatus::Fail | NodeStatus::Suspect))
        .map(|v| v.node.as_str())
        .collect();
    let unplaced: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.status == NodeStatus::Unschedulable)
        .map(|v| v.node.as_str())
        .collect();
    let measured = r
        .pairs
        .iter()
        .filter(|p| matches!(p.outcome, icb_sweep::Outcome::Measured { .. }))
        .count();
    let mut summary = if measured == 0 && !r.pairs.is_empty() {
        // Every pair ended before a transfer (setup errors, unschedulable): no fabric verdict.
        format!(
            "ERROR: no pair was measured ({} pairs ended before a transfer; see the evidence)",
            r.pairs.len()
        )
    } else if bad.is_empty() {
        format!(
            "PASS: no node failed ({} nodes, {} pairs)",
            r.nodes.len(),
            r.pairs.len()
        )
    } else {
        format!("FAIL: {} ({} pairs run)", bad.join(", "), r.pairs.len())
    };
    if !unplaced.is_empty() {
        summary.push_str(&format!(
            "; bench pods could not be placed on {} (not a fabric verdict)",
            unplaced.join(", ")
        ));
    }
    if !r.complete {
        summary.push_str(&format!(
            " — incomplete: {} of {} planned pairs, first-pass verdicts so far",
            r.pairs.iter().filter(|p| p.pass == 1).count(),
            r.planned()
        ));
    }
    format!("{summary}\n{t}\n")
}
