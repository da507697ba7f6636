//! The rails of a whole-node sweep (`sweep --rails`) in each format, from the node × rail view
//! ([`icb_sweep::rails::node_rails`]): the HTML heatmap (a row per node, a column per rail
//! number; the cell is the rail's median figure across its partners, coloured by the rail's
//! verdict, the tooltip lists every partner with the NIC health counters that moved), a JUnit testcase per node rail, and Prometheus
//! gauges per node rail labelled with its NIC name and PCI address, so a dashboard follows one
//! physical port across nights. Nothing is written for a sweep without rails.

use super::html::{color, esc};
use crate::prometheus::{FloatFamily, IntFamily, labels};
use icb_sweep::rails::NodeRail;
use icb_sweep::results::gbps;
use icb_sweep::score::{NodeStatus, NodeVerdict};
use prometheus_client::registry::{Registry, Unit};
use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
use std::fmt::Write as _;

/// A suspect rail's cell: amber, apart from the red of a blamed one and the green of a pass.
const SUSPECT: &str = "#bf8700";
/// A rail with no figure (every row of it measured nothing).
const UNKNOWN: &str = "#8c959f";

/// `n3 rail 2 (mlx5_2 0000:30:02.0)`.
fn name(c: &NodeRail) -> String {
    format!("{} {}", c.node, c.nic.label())
}

/// The verdict line that names this rail, when a verdict does.
fn blame(c: &NodeRail, verdicts: &[NodeVerdict]) -> Option<String> {
    verdicts
        .iter()
        .filter(|v| v.node == c.node)
        .flat_map(|v| v.bad_rails.iter())
        .find(|b| b.nic.key() == c.nic.key())
        .map(|b| b.line(&c.node))
}

fn figure(bps: Option<f64>) -> String {
    bps.map_or_else(|| "-".to_string(), gbps)
}

/// The cell's tooltip: the rail, its figures, then each partner (second-pass ones marked) with
/// the congestion, loss and link-fault counters this node's NIC counted in that pair.
fn tooltip(c: &NodeRail, verdicts: &[NodeVerdict]) -> String {
    let mut t = format!(
        "{}: {}, median {} GB/s, worst {} GB/s",
        name(c),
        c.status.as_str(),
        figure(c.median_bps),
        figure(c.worst_bps)
    );
    if let Some(line) = blame(c, verdicts) {
        let _ = write!(t, "\n{line}");
    }
    for p in &c.partners {
        let _ = write!(
            t,
            "\nwith {}{}: {} GB/s{}",
            p.partner,
            if p.pass == 2 { " (second pass)" } else { "" },
            figure(p.bandwidth_bps),
            if p.bad { ", bad" } else { "" }
        );
        if !p.counters.is_empty() {
            let moved: Vec<String> = p.counters.iter().map(|(n, d)| format!("{n} +{d}")).collect();
            let _ = write!(t, "; NIC counters {}", moved.join(", "));
        }
    }
    t
}

/// The node × rail heatmap, or nothing without rails.
pub(crate) fn html_heatmap(cells: &[NodeRail], nodes: &[String], verdicts: &[NodeVerdict]) -> String {
    if cells.is_empty() {
        return String::new();
    }
    let rails = cells.iter().map(|c| c.nic.rail).max().unwrap_or(0) + 1;
    let best = cells.iter().filter_map(|c| c.median_bps).fold(0.0_f64, f64::max);
    let mut h = String::from(
        "<div><h2>Rail bandwidth (GB/s, median across partners)</h2><table id=\"rail-heatmap\"><tr><th>node \\ rail</th>",
    );
    for i in 0..rails {
        let _ = write!(h, "<th>{i}</th>");
    }
    h.push_str("</tr>");
    for node in nodes {
        let _ = write!(h, "<tr><th>{}</th>", esc(node));
        for i in 0..rails {
            // One cell per rail number; a node whose rail number maps to two NICs across pairs
            // (a rail map that changed mid-sweep) shows the worse.
            let cell = cells
                .iter()
                .filter(|c| &c.node == node && c.nic.rail == i)
                .max_by_key(|c| severity(c.status));
            match cell {
                Some(c) => {
                    let bg = match c.status {
                        NodeStatus::Fail => color(0.0),
                        NodeStatus::Suspect => SUSPECT.to_string(),
                        NodeStatus::Pass => color(c.median_bps.unwrap_or(0.0) / best.max(1.0)),
                        _ => UNKNOWN.to_string(),
                    };
                    let _ = write!(
                        h,
                        "<td class=\"rail-cell {}\" style=\"background:{bg}\" title=\"{}\">{}</td>",
                        c.status.as_str(),
                        esc(&tooltip(c, verdicts)),
                        figure(c.median_bps)
                    );
                }
                None => h.push_str("<td class=\"unmeasured\" title=\"not measured\"></td>"),
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></div>");
    h
}

fn severity(s: NodeStatus) -> u8 {
    match s {
        NodeStatus::Fail => 3,
        NodeStatus::Suspect => 2,
        NodeStatus::Pass => 1,
        _ => 0,
    }
}

/// A `rails` suite: one testcase per node rail, failing when a verdict blames it or keeps it
/// suspect; skipped without a figure, or (a pass) when the sweep stopped before its end.
pub(crate) fn junit_suite(
    cells: &[NodeRail],
    verdicts: &[NodeVerdict],
    properties: &[(&str, &str)],
    stopped: bool,
) -> Option<TestSuite> {
    if cells.is_empty() {
        return None;
    }
    let mut suite = TestSuite::new("rails");
    for p in properties {
        suite.add_property(*p);
    }
    for c in cells {
        let status = match c.status {
            NodeStatus::Fail | NodeStatus::Suspect => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                let line = blame(c, verdicts).unwrap_or_else(|| name(c));
                s.set_message(format!("{}: {line}", c.status.as_str()));
                s
            }
            NodeStatus::Pass if stopped => {
                let mut s = TestCaseStatus::skipped();
                s.set_message("not judged: the sweep stopped before its end");
                s
            }
            NodeStatus::Pass => TestCaseStatus::success(),
            _ => {
                let mut s = TestCaseStatus::skipped();
                s.set_message("no figure: every pair of this rail measured nothing");
                s
            }
        };
        let mut case = TestCase::new(name(c), status);
        case.set_classname("rail");
        if let Some(m) = c.median_bps {
            case.add_property(("median_gbps", gbps(m).as_str()));
        }
        if let Some(w) = c.worst_bps {
            case.add_property(("worst_gbps", gbps(w).as_str()));
        }
        suite.add_test_case(case);
    }
    Some(suite)
}

/// The rail's status as a number to alert on: 0 pass, 1 suspect, 2 fail (blamed), -1 no figure.
fn status_value(s: NodeStatus) -> i64 {
    match s {
        NodeStatus::Pass => 0,
        NodeStatus::Suspect => 1,
        NodeStatus::Fail => 2,
        _ => -1,
    }
}

/// Families registered (in print order) by [`register`], filled by [`fill`].
pub(crate) struct RailFamilies {
    bandwidth: FloatFamily,
    worst: FloatFamily,
    status: IntFamily,
}

pub(crate) fn register(registry: &mut Registry) -> RailFamilies {
    let f = RailFamilies {
        bandwidth: FloatFamily::default(),
        worst: FloatFamily::default(),
        status: IntFamily::default(),
    };
    let bps = || Unit::Other("bytes_per_second".to_string());
    registry.register_with_unit(
        "rail_bandwidth",
        "Median bandwidth of one node's rail across its first-pass partners, all rails running",
        bps(),
        f.bandwidth.clone(),
    );
    registry.register_with_unit(
        "rail_worst_bandwidth",
        "Lowest bandwidth of one node's rail with any partner, either pass",
        bps(),
        f.worst.clone(),
    );
    registry.register(
        "rail_status",
        "Verdict of one node's rail: 0 pass, 1 suspect (bad with one partner), 2 fail (bad with two or more), -1 no figure",
        f.status.clone(),
    );
    f
}

pub(crate) fn fill(f: &RailFamilies, cells: &[NodeRail], sweep_id: &str) {
    for c in cells {
        let ls = labels(&[
            ("sweep_id", sweep_id.to_string()),
            ("node", c.node.clone()),
            ("rail", c.nic.rail.to_string()),
            ("nic", c.nic.nic.clone()),
            ("pci", c.nic.pci.clone().unwrap_or_default()),
        ]);
        if let Some(b) = c.median_bps {
            f.bandwidth.get_or_create(&ls).set(b);
        }
        if let Some(b) = c.worst_bps {
            f.worst.get_or_create(&ls).set(b);
        }
        f.status.get_or_create(&ls).set(status_value(c.status));
    }
}
