//! Finding the bad node, not only the bad pair.
//!
//! First pass: every node gets the median bandwidth of its measured pairs and its failure ratio.
//! A pair is bad when its verdict failed (e.g. TCP carrying the data), nothing was measured, or it
//! is slow: under 25 % of the reference (the 75th percentile of all pairs, which one bad node
//! cannot drag down the way it drags a median in a small cluster). A node is a *suspect* when at
//! least half its pairs are bad, or its median is a robust low outlier (more than 3 scaled median
//! absolute deviations, and at least 20 %, under the median of all nodes). Nodes whose bench pods
//! could not be placed are *unschedulable*, never a fabric verdict.
//!
//! Second pass: each suspect is re-paired with two nodes that passed. Both re-pairs fail → the
//! node is bad (`fail`); both pass → the first pass blamed a pair or a partner, the node is cleared
//! (`pass`); one each → `suspect` with that evidence. Healthy partners of a bad node are cleared by
//! the same rule: their failures were all with the bad node.

use crate::results::PairResult;
use crate::schedule::{Pair, Round, pack};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    Pass,
    /// Evidence both ways, or a suspect that could not be re-paired.
    Suspect,
    Fail,
    /// Bench pods cannot be placed there: not a fabric verdict.
    Unschedulable,
    /// Nothing measured with this node (all its pairs were blocked by the partner).
    Unknown,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Pass => "pass",
            NodeStatus::Suspect => "suspect",
            NodeStatus::Fail => "fail",
            NodeStatus::Unschedulable => "unschedulable",
            NodeStatus::Unknown => "unknown",
        }
    }
}

/// A node's verdict with the evidence behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeVerdict {
    pub node: String,
    pub status: NodeStatus,
    /// Median bandwidth of its first-pass pairs, bytes/s.
    pub median_bps: Option<f64>,
    pub pairs: usize,
    pub failed_pairs: usize,
    /// Data paths seen in its pairs.
    pub data_paths: Vec<String>,
    /// Why: which pairs failed, the outlier test, the second pass.
    pub evidence: Vec<String>,
}

/// A pair's result counted for one node of it.
fn first_pass<'a>(results: &'a [PairResult], node: &'a str) -> impl Iterator<Item = &'a PairResult> + 'a {
    results.iter().filter(move |r| r.pass == 1 && r.pair.involves(node))
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// Nodes named unschedulable by any pair.
fn unschedulable(results: &[PairResult]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for r in results {
        if let crate::results::Outcome::Unschedulable { node, reason } = &r.outcome {
            let nodes: Vec<&str> = match node {
                Some(n) => vec![n.as_str()],
                None => vec![r.pair.prefill.as_str(), r.pair.decode.as_str()],
            };
            for n in nodes {
                out.entry(n.to_string()).or_insert_with(|| reason.clone());
            }
        }
    }
    out
}

/// A pair under this fraction of the reference bandwidth is slow (counts as failed).
pub const SLOW_FRACTION: f64 = 0.25;

/// The reference pair bandwidth: the 75th percentile of the first pass, robust while at least a quarter of
/// the pairs are good, and unaffected by a bad node dragging half the pairs of a
/// small cluster down (a median would be).
pub fn reference_bandwidth(results: &[PairResult]) -> Option<f64> {
    let mut bws: Vec<f64> = results
        .iter()
        .filter(|r| r.pass == 1)
        .filter_map(|r| r.outcome.bandwidth())
        .collect();
    if bws.is_empty() {
        return None;
    }
    bws.sort_by(f64::total_cmp);
    Some(bws[(bws.len() * 3 / 4).min(bws.len() - 1)])
}

/// Failed, nothing measured, or slow against `reference`.
pub fn pair_bad(r: &PairResult, reference: Option<f64>) -> bool {
    r.outcome.failed() || matches!((r.outcome.bandwidth(), reference), (Some(b), Some(f)) if b < SLOW_FRACTION * f)
}

/// First-pass verdicts (suspects not yet re-paired).
pub fn first_pass_verdicts(nodes: &[String], results: &[PairResult]) -> Vec<NodeVerdict> {
    let blocked = unschedulable(results);
    let reference = reference_bandwidth(results);
    let mut medians: BTreeMap<&str, f64> = BTreeMap::new();
    let mut out = Vec::new();
    for node in nodes {
        let mine: Vec<&PairResult> = first_pass(results, node)
            .filter(|r| !matches!(r.outcome, crate::results::Outcome::Unschedulable { .. }))
            .collect();
        let mut bws: Vec<f64> = mine.iter().filter_map(|r| r.outcome.bandwidth()).collect();
        let med = median(&mut bws);
        if let Some(m) = med {
            medians.insert(node, m);
        }
        let failed: Vec<&&PairResult> = mine.iter().filter(|r| pair_bad(r, reference)).collect();
        let mut paths = BTreeSet::new();
        for r in &mine {
            if let crate::results::Outcome::Measured { data_paths, .. } = &r.outcome {
                paths.extend(data_paths.iter().cloned());
            }
        }
        let mut evidence: Vec<String> = failed
            .iter()
            .map(|r| {
                let slow = if r.outcome.failed() {
                    String::new()
                } else {
                    format!(
                        " (slow: under {:.0}% of the reference {:.2} GB/s)",
                        SLOW_FRACTION * 100.0,
                        reference.unwrap_or_default() / 1e9
                    )
                };
                format!("{}: {}{slow}", r.pair, r.outcome.short())
            })
            .collect();
        let status = if let Some(reason) = blocked.get(node.as_str()) {
            evidence.insert(0, format!("bench pods cannot be placed: {reason}"));
            NodeStatus::Unschedulable
        } else if mine.is_empty() {
            NodeStatus::Unknown
        } else if failed.len() * 2 >= mine.len() {
            evidence.insert(0, format!("{} of {} pairs failed or slow", failed.len(), mine.len()));
            NodeStatus::Suspect
        } else {
            NodeStatus::Pass
        };
        out.push(NodeVerdict {
            node: node.clone(),
            status,
            median_bps: med,
            pairs: mine.len(),
            failed_pairs: failed.len(),
            data_paths: paths.into_iter().collect(),
            evidence,
        });
    }
    // Robust low outliers among the nodes' medians.
    let meds: Vec<f64> = medians.values().copied().collect();
    if let Some((center, mad, floor)) = outlier_floor(&meds) {
        for v in &mut out {
            if let Some(m) = v.median_bps
                && m < floor
                && v.status == NodeStatus::Pass
            {
                v.status = NodeStatus::Suspect;
                v.evidence.insert(
                    0,
                    format!(
                        "median {:.2} GB/s is a low outlier (all nodes: median {:.2} GB/s, MAD {:.2} GB/s, threshold {:.2} GB/s)",
                        m / 1e9,
                        center / 1e9,
                        mad / 1e9,
                        floor / 1e9
                    ),
                );
            }
        }
    }
    out
}

/// (median, scaled MAD, threshold) of the nodes' medians: a node under the threshold is slow.
fn outlier_floor(medians: &[f64]) -> Option<(f64, f64, f64)> {
    let mut all = medians.to_vec();
    let center = median(&mut all)?;
    let mut dev: Vec<f64> = medians.iter().map(|m| (m - center).abs()).collect();
    let mad = median(&mut dev).unwrap_or(0.0) * 1.4826;
    Some((center, mad, center - (3.0 * mad).max(0.2 * center)))
}

/// The second pass: each suspect with two partners that passed (spread over the passed nodes so
/// the re-pairs of several suspects can run in parallel), packed into node-disjoint rounds. With
/// `intra_node` (the intra-node schedule, where a node's only pair is with itself) a partner would
/// test another path, so each suspect runs its own pair again instead: a failure that repeats is
/// the node's.
pub fn second_pass_plan(verdicts: &[NodeVerdict], max_concurrent: usize, intra_node: bool) -> Vec<Round> {
    if intra_node {
        let again: Vec<Pair> = verdicts
            .iter()
            .filter(|v| v.status == NodeStatus::Suspect)
            .map(|v| Pair::new(&v.node, &v.node))
            .collect();
        return match (again.is_empty(), max_concurrent) {
            (true, _) => vec![],
            (false, 0) => vec![again],
            (false, n) => again.chunks(n).map(<[Pair]>::to_vec).collect(),
        };
    }
    let passed: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.status == NodeStatus::Pass)
        .map(|v| v.node.as_str())
        .collect();
    if passed.is_empty() {
        return vec![];
    }
    let mut pairs = Vec::new();
    let mut next = 0usize;
    for v in verdicts.iter().filter(|v| v.status == NodeStatus::Suspect) {
        for k in 0..2.min(passed.len()) {
            let partner = passed[(next + k) % passed.len()];
            // Alternate directions: the suspect once as prefill, once as decode.
            pairs.push(if k == 0 {
                Pair::new(&v.node, partner)
            } else {
                Pair::new(partner, &v.node)
            });
        }
        next += 2;
    }
    let rounds = pack(pairs);
    if max_concurrent == 0 {
        return rounds;
    }
    rounds
        .into_iter()
        .flat_map(|r| r.chunks(max_concurrent).map(<[Pair]>::to_vec).collect::<Vec<_>>())
        .collect()
}

/// Final verdicts: first pass, then each suspect judged by its second-pass pairs.
pub fn final_verdicts(nodes: &[String], results: &[PairResult]) -> Vec<NodeVerdict> {
    let mut verdicts = first_pass_verdicts(nodes, results);
    let meds: Vec<f64> = verdicts.iter().filter_map(|v| v.median_bps).collect();
    let floor = outlier_floor(&meds).map(|(_, _, f)| f);
    let reference = reference_bandwidth(results);
    // A re-pair fails on a failed verdict, on a slow pair, or under the node-outlier threshold.
    let bad = |r: &PairResult| {
        pair_bad(r, reference) || matches!((r.outcome.bandwidth(), floor), (Some(b), Some(f)) if b < f)
    };
    for v in &mut verdicts {
        if v.status != NodeStatus::Suspect {
            continue;
        }
        let second: Vec<&PairResult> = results
            .iter()
            .filter(|r| r.pass == 2 && r.pair.involves(&v.node))
            .collect();
        if second.is_empty() {
            v.evidence.push("second pass: no re-pair ran".into());
            continue;
        }
        let failed = second.iter().filter(|r| bad(r)).count();
        for r in &second {
            v.evidence
                .push(format!("second pass {}: {}", r.pair, r.outcome.short()));
        }
        v.status = if failed == second.len() {
            NodeStatus::Fail
        } else if failed == 0 {
            v.evidence
                .push(if second.iter().all(|r| r.pair.prefill == r.pair.decode) {
                    "cleared: its own pair passed when run again; the first-pass failure did not repeat".into()
                } else {
                    "cleared: it passed with nodes that passed; the first-pass failures were its partners'".into()
                });
            NodeStatus::Pass
        } else {
            NodeStatus::Suspect
        };
    }
    verdicts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Outcome;
    use crate::schedule::Schedule;

    #[test]
    fn an_intra_node_suspect_runs_its_own_pair_again() {
        let v = |node: &str, status| NodeVerdict {
            node: node.into(),
            status,
            median_bps: None,
            pairs: 1,
            failed_pairs: 0,
            data_paths: vec![],
            evidence: vec![],
        };
        let verdicts = [
            v("a", NodeStatus::Pass),
            v("b", NodeStatus::Suspect),
            v("c", NodeStatus::Suspect),
        ];
        assert_eq!(
            second_pass_plan(&verdicts, 0, true),
            vec![vec![Pair::new("b", "b"), Pair::new("c", "c")]]
        );
        assert_eq!(second_pass_plan(&verdicts, 1, true).len(), 2, "one at a time");
        // Across nodes, partners that passed instead.
        assert!(
            second_pass_plan(&verdicts, 0, false)
                .concat()
                .iter()
                .all(|p| p.involves("a"))
        );
    }

    fn measured(bw: f64, fail: bool) -> Outcome {
        Outcome::Measured {
            verdict: if fail { "fail" } else { "pass" }.into(),
            reason: String::new(),
            data_paths: vec![if fail { "tcp" } else { "rdma" }.into()],
            bandwidth_bps: Some(bw),
            latency_us: None,
            series: vec![],
            latency: vec![],
        }
    }

    fn run(pairs: &[Pair], pass: u8, bad: &[&str], slow: &[&str]) -> Vec<PairResult> {
        pairs
            .iter()
            .map(|p| {
                let is_bad = bad.iter().any(|b| p.involves(b));
                let is_slow = slow.iter().any(|b| p.involves(b));
                PairResult {
                    pair: p.clone(),
                    pass,
                    run_id: "r".into(),
                    duration_s: 1.0,
                    outcome: measured(if is_slow { 2e9 } else { 20e9 }, is_bad),
                }
            })
            .collect()
    }

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("node-{i}")).collect()
    }

    #[test]
    fn a_tcp_node_and_a_slow_node_are_named_and_their_partners_cleared() {
        let nodes = nodes(8);
        let plan: Vec<Pair> = Schedule::Ring.rounds(&nodes, 0).unwrap().concat();
        let mut results = run(&plan, 1, &["node-3"], &["node-6"]);
        let first = first_pass_verdicts(&nodes, &results);
        let suspects: Vec<&str> = first
            .iter()
            .filter(|v| v.status == NodeStatus::Suspect)
            .map(|v| v.node.as_str())
            .collect();
        assert!(
            suspects.contains(&"node-3") && suspects.contains(&"node-6"),
            "{first:#?}"
        );
        let second = second_pass_plan(&first, 0, false).concat();
        results.extend(run(&second, 2, &["node-3"], &["node-6"]));
        let fin = final_verdicts(&nodes, &results);
        let failed: Vec<&str> = fin
            .iter()
            .filter(|v| v.status == NodeStatus::Fail)
            .map(|v| v.node.as_str())
            .collect();
        assert_eq!(failed, vec!["node-3", "node-6"], "{fin:#?}");
        // The slow node's re-pairs pass the verdict but stay slow: named by its median.
        let six = fin.iter().find(|v| v.node == "node-6").unwrap();
        assert!(six.evidence[0].contains("failed or slow"), "{six:#?}");
        assert!(six.evidence.iter().any(|e| e.contains("slow: under 25%")), "{six:#?}");
        for v in &fin {
            if !["node-3", "node-6"].contains(&v.node.as_str()) {
                assert_eq!(v.status, NodeStatus::Pass, "{v:#?}");
            }
        }
    }

    #[test]
    fn unschedulable_is_not_a_fabric_verdict() {
        let nodes = nodes(4);
        let plan: Vec<Pair> = Schedule::AllPairs.rounds(&nodes, 0).unwrap().concat();
        let results: Vec<PairResult> = plan
            .iter()
            .map(|p| PairResult {
                pair: p.clone(),
                pass: 1,
                run_id: "r".into(),
                duration_s: 1.0,
                outcome: if p.involves("node-2") {
                    Outcome::Unschedulable {
                        node: Some("node-2".into()),
                        reason: "0/4 nodes are available: Insufficient nvidia.com/gpu".into(),
                    }
                } else {
                    measured(20e9, false)
                },
            })
            .collect();
        let v = final_verdicts(&nodes, &results);
        assert_eq!(v[1].status, NodeStatus::Unschedulable);
        assert!(v[1].evidence[0].contains("Insufficient nvidia.com/gpu"));
        assert!(
            v.iter()
                .filter(|x| x.node != "node-2")
                .all(|x| x.status == NodeStatus::Pass)
        );
    }
}
