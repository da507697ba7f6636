//! A sweep as a table: the verdict line first (PASS; FAIL naming the failed nodes and, apart,
//! the suspects; INTERRUPTED or STOPPED for a sweep that did not finish, never PASS), then one row
//! per node with its median bandwidth and latency, bad pairs (errors counted apart), data paths
//! and the first line of its evidence (`-o wide`: every line of it). A whole-node sweep
//! (`--rails`) lists the rails the verdicts name below the table, one wrapped line each, since a
//! rail's NIC name, PCI address and partners do not fit a column.

use crate::format::View;
use crate::wrap::push_wrapped;
use icb_sweep::results::{StopReason, gbps};
use icb_sweep::score::{NodeStatus, NodeVerdict, micros};
use icb_sweep::{Outcome, SweepResults};

pub(crate) fn render(r: &SweepResults, view: View) -> String {
    let mut t = crate::table::new_table(
        vec![
            "Node",
            "Verdict",
            "GB/s",
            "p50 µs",
            "Bad pairs",
            "Data paths",
            "Evidence",
        ],
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
            node_cell(r, v),
            v.median_bps.map(gbps).unwrap_or_else(|| "-".into()),
            v.median_latency_us.map(micros).unwrap_or_else(|| "-".into()),
            bad_pairs(v),
            v.data_paths.join(", "),
            evidence,
        ]);
    }
    let mut out = format!("{}\n{t}\n", headline(r, &verdicts));
    bad_rails(&mut out, &verdicts, view);
    for line in super::fleet::lines(r) {
        push_wrapped(&mut out, &line, view);
    }
    if let Some(b) = r.baseline.as_deref() {
        push_wrapped(&mut out, &crate::baseline::summary(b), view);
        for line in crate::baseline::lines(b, view.wide) {
            push_wrapped(&mut out, &line, view);
        }
    }
    out
}

/// `pass`, or `pass, regressed` for a node most of whose pairs regressed (`--baseline`).
fn node_cell(r: &SweepResults, v: &NodeVerdict) -> String {
    match r.baseline.as_deref().is_some_and(|b| b.node_regressed(&v.node)) {
        true => format!("{}, regressed", v.status.as_str()),
        false => v.status.as_str().to_string(),
    }
}

/// `Bad rails:` then one line per rail a verdict names, blamed ones (`FAIL`) before suspects.
fn bad_rails(out: &mut String, verdicts: &[NodeVerdict], view: View) {
    let mut lines: Vec<(NodeStatus, String)> = verdicts
        .iter()
        .flat_map(|v| v.bad_rails.iter().map(|b| (b.status, b.line(&v.node))))
        .collect();
    if lines.is_empty() {
        return;
    }
    lines.sort_by_key(|(status, _)| std::cmp::Reverse(*status == NodeStatus::Fail));
    out.push_str("Bad rails:\n");
    for (status, line) in lines {
        let word = if status == NodeStatus::Fail { "FAIL" } else { "SUSPECT" };
        push_wrapped(out, &format!("  {word} {line}"), view);
    }
}

/// `1/3`, or `3/3 (3 err)` when some of them measured nothing: errors are not slowness.
fn bad_pairs(v: &NodeVerdict) -> String {
    match v.error_pairs {
        0 => format!("{}/{}", v.failed_pairs, v.pairs),
        e => format!("{}/{} ({e} err)", v.failed_pairs, v.pairs),
    }
}

fn names(verdicts: &[NodeVerdict], status: NodeStatus) -> Vec<&str> {
    verdicts
        .iter()
        .filter(|v| v.status == status)
        .map(|v| v.node.as_str())
        .collect()
}

/// The one verdict line, naming what the table says: failed nodes as FAIL, suspects as suspect,
/// unjudged nodes as INCONCLUSIVE (in the order of the sweep's ending, `SweepResults::ending`).
pub(crate) fn headline(r: &SweepResults, verdicts: &[NodeVerdict]) -> String {
    let failed = names(verdicts, NodeStatus::Fail);
    let suspect = names(verdicts, NodeStatus::Suspect);
    let unplaced = names(verdicts, NodeStatus::Unschedulable);
    let unjudged = names(verdicts, NodeStatus::Unjudged);
    let measured = r
        .pairs
        .iter()
        .filter(|p| matches!(p.outcome, Outcome::Measured { .. }))
        .count();
    let mut summary = if let Some(stop) = &r.stopped {
        let what = match stop.reason {
            StopReason::Interrupted => "INTERRUPTED",
            StopReason::ClusterError => "STOPPED (cluster error, no node blamed)",
        };
        format!("{what}: {}; --resume the results file to finish", stop.detail)
    } else if measured == 0 && !r.pairs.is_empty() {
        // Every pair ended before a transfer (setup errors, unschedulable): no fabric verdict.
        format!(
            "ERROR: no pair was measured ({} pairs ended before a transfer; see the evidence)",
            r.pairs.len()
        )
    } else if !failed.is_empty() {
        let mut s = format!("FAIL: {} ({} pairs run)", failed.join(", "), r.pairs.len());
        if !suspect.is_empty() {
            s.push_str(&format!("; suspect: {}", suspect.join(", ")));
        }
        s
    } else if !suspect.is_empty() {
        format!(
            "SUSPECT: {} ({} pairs run; not confirmed, see the evidence)",
            suspect.join(", "),
            r.pairs.len()
        )
    } else if !unjudged.is_empty() {
        // Not a pass (the exit status is 1): a node was measured but nothing it gave could judge it.
        format!(
            "INCONCLUSIVE: no node failed, but {} could not be judged ({} pairs run; see the evidence)",
            unjudged.join(", "),
            r.pairs.len()
        )
    } else if !r.complete {
        // Not a pass before the sweep ends: the pairs still to run can fail.
        format!("RUNNING: no node failed so far ({} nodes)", r.nodes.len())
    } else {
        format!(
            "PASS: no node failed ({} nodes, {} pairs)",
            r.nodes.len(),
            r.pairs.len()
        )
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
    summary
}
