//! The sweep's fleet view as lines (table and HTML report): each firmware or MTU value on which
//! a node differs from the majority, naming the odd ones out with their values; a count of the
//! values every node read agrees on; the nodes whose readiness no pair read.

use icb_sweep::SweepResults;
use icb_sweep::fleet::FleetValue;

/// The fleet's lines, heading first; none when no pair read a readiness (an older ic-bench in
/// the pods, a `--rails` sweep: its rails compare their own two ends) or no node read showed an
/// RDMA port (nothing to compare: the pairs' own data paths say what carried the bytes).
pub(crate) fn lines(r: &SweepResults) -> Vec<String> {
    let Some(fleet) = r.fleet.as_ref().filter(|f| !f.values.is_empty()) else {
        return Vec::new();
    };
    let read = r.nodes.len() - fleet.not_read.len();
    let mut out = vec![format!(
        "Fleet: NIC firmware and MTUs of {read} of {} nodes, as their pairs read them:",
        r.nodes.len()
    )];
    let differing: Vec<&FleetValue> = fleet.values.iter().filter(|v| v.nodes.len() > 1).collect();
    for v in &differing {
        out.push(format!("  {}", differing_line(v)));
    }
    let same = fleet.values.len() - differing.len();
    if same > 0 {
        out.push(format!("  {same} more value(s) the same on every node that read them"));
    }
    if !fleet.not_read.is_empty() {
        out.push(format!("  not read on {} (not compared)", fleet.not_read.join(", ")));
    }
    out
}

/// `netdev MTU mlx5_1:1: 9000 on 3 nodes; odd one out: gpu-2 1280`, or without a majority every
/// value with its nodes.
fn differing_line(v: &FleetValue) -> String {
    let what = format!("{} {}", v.field.label(), v.port);
    let text = match &v.majority {
        Some(m) => {
            let held = v.nodes.get(m).map_or(0, Vec::len);
            let odd: Vec<String> = v.odd_ones_out.iter().map(|(n, val)| format!("{n} {val}")).collect();
            let word = if odd.len() == 1 { "odd one out" } else { "odd ones out" };
            format!("{what}: {m} on {held} nodes; {word}: {}", odd.join(", "))
        }
        None => {
            let each: Vec<String> = v
                .nodes
                .iter()
                .map(|(val, nodes)| format!("{val} on {}", nodes.join(", ")))
                .collect();
            format!("{what}: no majority: {}", each.join("; "))
        }
    };
    match v.not_read.is_empty() {
        true => text,
        false => format!("{text} (not read on {})", v.not_read.join(", ")),
    }
}
