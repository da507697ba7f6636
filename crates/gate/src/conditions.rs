//! `gate --node-conditions`: the gate's verdict, for the nodes it measured, as the node condition
//! `ICBenchFabric` that `sweep --node-conditions` writes (`icb_kube::node_conditions`: the same
//! type, reasons, timestamps and ClusterRole). Only a pass is `True`. A fail is `False` on the
//! nodes it rests on: the pair's (it ran between them) and a node whose own probe failed; a fail
//! that rests only on the recipe or on the other node's probe says nothing against this node's
//! fabric, so it is `Unknown` there. A gate that could not finish (over budget, a setup error) is
//! `Unknown` (`Inconclusive`), never `True`. An interrupted gate writes nothing, as an
//! interrupted sweep does: a signal asks ic-bench to stop, not to call the API server again.

use icb_core::Status;
use icb_core::model::{Finding, GateReport, GateVerdict};
use icb_kube::node_conditions::{self, ConditionError, ConditionMark, ConditionStatus};

/// The step of the gate's pair findings (`GateReport::add_pair`, `findings::ucx_refused_recipe`).
const PAIR_STEP: &str = "pair";

/// Whether `finding` is a failure of something measured on `node`: the pair (which ran on every
/// node of the gate) or `node`'s own probe.
fn implicates(finding: &Finding, node: &str) -> bool {
    finding.status == Status::Fail
        && (finding.step == PAIR_STEP
            || finding
                .step
                .strip_prefix("probe node/")
                .is_some_and(|probed| probed == node))
}

/// The condition's status and reason on `node` for the gate's `report`.
pub fn condition_of(report: &GateReport, node: &str) -> (ConditionStatus, &'static str) {
    match report.verdict {
        GateVerdict::Pass => (ConditionStatus::True, "FabricPass"),
        GateVerdict::Fail if report.findings.iter().any(|f| implicates(f, node)) => {
            (ConditionStatus::False, "FabricFail")
        }
        GateVerdict::Fail => (ConditionStatus::Unknown, "NotImplicated"),
        GateVerdict::Error => (ConditionStatus::Unknown, "Inconclusive"),
        GateVerdict::Interrupted => (ConditionStatus::Unknown, "Interrupted"),
    }
}

/// One mark per measured node, in the gate's order (prefill's node first). The message names
/// the gate, the nodes it measured and its one-line reason (the findings' summary).
pub fn marks(report: &GateReport, nodes: &[String]) -> Vec<ConditionMark> {
    let between = nodes.join(" and ");
    nodes
        .iter()
        .map(|node| {
            let (status, reason) = condition_of(report, node);
            let context = match status {
                ConditionStatus::Unknown if report.verdict == GateVerdict::Fail => {
                    " (nothing measured on this node failed)"
                }
                _ => "",
            };
            ConditionMark {
                node: node.clone(),
                status,
                reason,
                message: format!(
                    "gate {} on {between}{context}: {}",
                    report.verdict.as_str(),
                    report.reason
                ),
            }
        })
        .collect()
}

/// What the gate does with `--node-conditions` at its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing is written, for this reason (said on stderr).
    Skip(String),
    /// These marks, one per measured node.
    Write(Vec<ConditionMark>),
}

/// Decides what `--node-conditions` writes for `report`, given the nodes the bench pods were
/// placed on (empty when the gate stopped before it knew them).
pub fn plan(report: &GateReport, nodes: &[String]) -> Plan {
    if report.verdict == GateVerdict::Interrupted {
        return Plan::Skip(format!(
            "condition {} not written: the gate was interrupted",
            node_conditions::CONDITION_TYPE
        ));
    }
    if nodes.is_empty() {
        return Plan::Skip(format!(
            "condition {} not written: the gate ended ({}) before it placed its bench pods",
            node_conditions::CONDITION_TYPE,
            report.verdict.as_str()
        ));
    }
    Plan::Write(marks(report, nodes))
}

/// Writes `marks` at `at` (RFC 3339); the line that says what was written.
pub async fn apply(cluster: &icb_kube::Cluster, marks: &[ConditionMark], at: &str) -> Result<String, ConditionError> {
    let done = node_conditions::set_conditions(cluster, marks, at).await?;
    let each: Vec<String> = marks
        .iter()
        .map(|m| format!("{} {} ({})", m.node, m.status.as_str(), m.reason))
        .collect();
    Ok(format!(
        "set condition {} on {done} node(s): {}",
        node_conditions::CONDITION_TYPE,
        each.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(step: &str, status: Status) -> Finding {
        Finding {
            step: step.into(),
            status,
            check: None,
            detail: "seen".into(),
            hint: None,
        }
    }

    fn report(verdict: GateVerdict, findings: Vec<Finding>) -> GateReport {
        let mut r = GateReport::new();
        r.findings = findings;
        r.stop(verdict, "why".into());
        r
    }

    fn nodes() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    fn statuses(r: &GateReport) -> Vec<(ConditionStatus, &'static str)> {
        match plan(r, &nodes()) {
            Plan::Write(marks) => marks.iter().map(|m| (m.status, m.reason)).collect(),
            Plan::Skip(why) => panic!("skipped: {why}"),
        }
    }

    #[test]
    fn only_a_pass_is_true() {
        use ConditionStatus::*;
        let pass = report(GateVerdict::Pass, vec![finding("probe env", Status::Warn)]);
        assert_eq!(statuses(&pass), [(True, "FabricPass"), (True, "FabricPass")]);
        let error = report(GateVerdict::Error, vec![]);
        assert_eq!(statuses(&error), [(Unknown, "Inconclusive"), (Unknown, "Inconclusive")]);
        // A failed pair ran between both nodes: both are False.
        let pair = report(GateVerdict::Fail, vec![finding("pair", Status::Fail)]);
        assert_eq!(statuses(&pair), [(False, "FabricFail"), (False, "FabricFail")]);
    }

    #[test]
    fn a_fail_is_false_only_on_the_nodes_it_rests_on() {
        use ConditionStatus::*;
        let probe_b = report(
            GateVerdict::Fail,
            vec![
                finding("probe node/b", Status::Fail),
                finding("probe node/a", Status::Warn),
            ],
        );
        assert_eq!(statuses(&probe_b), [(Unknown, "NotImplicated"), (False, "FabricFail")]);
        // The recipe alone failed: nothing against either node's fabric.
        let recipe = report(
            GateVerdict::Fail,
            vec![finding("probe env", Status::Fail), finding("pair", Status::Warn)],
        );
        assert_eq!(
            statuses(&recipe),
            [(Unknown, "NotImplicated"), (Unknown, "NotImplicated")]
        );
        let Plan::Write(marks) = plan(&recipe, &nodes()) else {
            panic!("written")
        };
        assert_eq!(
            marks[0].message,
            "gate fail on a and b (nothing measured on this node failed): why"
        );
        // A node whose name only starts like the probed one is not it.
        let prefix = report(GateVerdict::Fail, vec![finding("probe node/ab", Status::Fail)]);
        assert_eq!(statuses(&prefix)[0], (Unknown, "NotImplicated"));
    }

    #[test]
    fn an_interrupted_gate_or_one_without_nodes_writes_nothing() {
        let interrupted = report(GateVerdict::Interrupted, vec![finding("pair", Status::Fail)]);
        assert!(matches!(plan(&interrupted, &nodes()), Plan::Skip(w) if w.contains("interrupted")));
        let early = report(GateVerdict::Error, vec![]);
        assert!(matches!(plan(&early, &[]), Plan::Skip(w) if w.contains("before it placed its bench pods")));
    }
}
