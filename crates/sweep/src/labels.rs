//! A finished sweep's node verdicts as node labels (`sweep --label-nodes`; `icb_kube::node_labels`
//! writes them). Only pass and fail are verdicts; unschedulable, unknown and suspect nodes are
//! left exactly as they are (a busy node keeps last night's label; its checked-at annotation
//! says how old it is). A pass under relaxed criteria says so in its reason
//! (`pass (--allow-tcp): …`): a node whose data went over TCP is not a plain pass.

use crate::score::{NodeStatus, NodeVerdict};
use icb_core::BandwidthUnit;

/// One node's label: pass or fail, the reason annotated beside it, and its blamed rails
/// ([`crate::bad_rails_annotation`]; `None`: the annotation is removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub node: String,
    pub pass: bool,
    pub reason: String,
    pub bad_rails: Option<String>,
}

/// How the reasons are written: the bandwidth unit, and the relaxed criteria a pass was given
/// under (`--allow-tcp`).
#[derive(Debug, Clone, Copy)]
pub struct ReasonStyle<'a> {
    pub unit: BandwidthUnit,
    pub relaxed: &'a [&'static str],
}

/// The relaxed criteria (`--allow-tcp`) a sweep's results were judged under; none when the
/// results recorded no criteria. What a [`ReasonStyle`] of those results borrows.
pub fn relaxations(results: &crate::results::SweepResults) -> Vec<&'static str> {
    results
        .criteria
        .as_ref()
        .map(crate::Criteria::relaxations)
        .unwrap_or_default()
}

/// The marks to write, and the nodes left alone with their status.
pub fn marks(verdicts: &[NodeVerdict], style: ReasonStyle) -> (Vec<Mark>, Vec<(String, NodeStatus)>) {
    let mut marks = Vec::new();
    let mut untouched = Vec::new();
    for v in verdicts {
        let pass = match v.status {
            NodeStatus::Pass => true,
            NodeStatus::Fail => false,
            other => {
                untouched.push((v.node.clone(), other));
                continue;
            }
        };
        marks.push(Mark {
            node: v.node.clone(),
            pass,
            reason: reason(v, style),
            bad_rails: crate::bad_rails_annotation(v),
        });
    }
    (marks, untouched)
}

/// One line of evidence for `v` (the label's reason annotation, and the `--node-conditions`
/// message).
pub fn reason(v: &NodeVerdict, style: ReasonStyle) -> String {
    // A latency-only profile has no bandwidth: say nothing rather than "0". Three significant
    // digits below 1, so a throttled node does not read "0.00".
    let median = v
        .median_bps
        .map(|b| {
            format!(
                " median {} {},",
                icb_core::units::bandwidth_value(b, style.unit),
                style.unit.label()
            )
        })
        .unwrap_or_default();
    let relaxed = match (v.status, style.relaxed.is_empty()) {
        (NodeStatus::Pass, false) => format!(" ({})", style.relaxed.join(", ")),
        _ => String::new(),
    };
    let paths = if v.data_paths.is_empty() {
        String::new()
    } else {
        format!(", data paths {}", v.data_paths.join("+"))
    };
    let head = format!(
        "{}{relaxed}:{median} {}/{} pairs failed{paths}",
        v.status.as_str(),
        v.failed_pairs,
        v.pairs
    );
    match (v.status, v.evidence.is_empty()) {
        (NodeStatus::Fail, false) => format!("{head}; {}", v.evidence.join("; ")),
        _ => head,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(node: &str, status: NodeStatus) -> NodeVerdict {
        NodeVerdict {
            bad_rails: vec![],
            node: node.into(),
            status,
            median_bps: Some(2.5e9),
            median_latency_us: None,
            pairs: 3,
            failed_pairs: if status == NodeStatus::Fail { 3 } else { 0 },
            error_pairs: 0,
            data_paths: vec!["tcp".into()],
            evidence: vec!["node-2 > node-1: fail (tcp fallback)".into()],
        }
    }

    const PLAIN: ReasonStyle = ReasonStyle {
        unit: BandwidthUnit::GBps,
        relaxed: &[],
    };

    fn marks_of(v: NodeVerdict) -> String {
        marks(&[v], PLAIN).0.remove(0).reason
    }

    #[test]
    fn a_slow_median_keeps_three_significant_digits_in_the_unit_asked_for() {
        let mut v = verdict("node-7", NodeStatus::Fail);
        v.median_bps = Some(3.75e6);
        assert!(
            marks_of(v.clone()).starts_with("fail: median 0.00375 GB/s,"),
            "{}",
            marks_of(v.clone())
        );
        let mib = ReasonStyle {
            unit: BandwidthUnit::MiBps,
            relaxed: &[],
        };
        let r = marks(&[v], mib).0.remove(0).reason;
        assert!(r.starts_with("fail: median 3.58 MiB/s,"), "{r}");
    }

    #[test]
    fn a_pass_under_allow_tcp_says_so() {
        let style = ReasonStyle {
            unit: BandwidthUnit::GBps,
            relaxed: &["--allow-tcp"],
        };
        let (m, _) = marks(
            &[verdict("node-1", NodeStatus::Pass), verdict("node-2", NodeStatus::Fail)],
            style,
        );
        assert!(
            m[0].reason.starts_with("pass (--allow-tcp): median 2.50 GB/s,"),
            "{}",
            m[0].reason
        );
        assert!(
            m[1].reason.starts_with("fail: "),
            "a failure needs no caveat: {}",
            m[1].reason
        );
    }

    #[test]
    fn only_pass_and_fail_are_written() {
        let (marks, untouched) = marks(
            &[
                verdict("node-1", NodeStatus::Pass),
                verdict("node-2", NodeStatus::Fail),
                verdict("node-3", NodeStatus::Unschedulable),
                verdict("node-4", NodeStatus::Suspect),
                verdict("node-5", NodeStatus::Unknown),
            ],
            PLAIN,
        );
        let written: Vec<(&str, bool)> = marks.iter().map(|m| (m.node.as_str(), m.pass)).collect();
        assert_eq!(written, [("node-1", true), ("node-2", false)]);
        assert_eq!(
            untouched.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["node-3", "node-4", "node-5"]
        );
        assert_eq!(
            marks[0].reason,
            "pass: median 2.50 GB/s, 0/3 pairs failed, data paths tcp"
        );
        assert!(
            marks[1].reason.ends_with("; node-2 > node-1: fail (tcp fallback)"),
            "{}",
            marks[1].reason
        );
    }

    #[test]
    fn a_latency_only_verdict_has_no_bandwidth_in_its_reason() {
        let mut v = verdict("node-6", NodeStatus::Pass);
        v.median_bps = None;
        assert_eq!(marks_of(v), "pass: 0/3 pairs failed, data paths tcp");
    }
}
