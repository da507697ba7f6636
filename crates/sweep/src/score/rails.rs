//! Blaming a rail, not the node (`sweep --rails`).
//!
//! A bad rail row implicates both of its ends: the prefill node's rail and the decode node's.
//! One bad row cannot say which end is at fault, but a rail that is bad with two different
//! partners is: the same argument as the second pass, which fails a node when re-pairs with two
//! nodes fail. Such a rail is *blamed* (its node fails, and its verdict names the rail and the
//! partners instead of the whole node), and its partners' bad rows with it are not counted
//! against them. A rail bad with one partner only, whose partner's end is not blamed, makes its
//! node a suspect: the second pass re-pairs it, and a rail bad again there is bad with two
//! partners.

use crate::rails::RailNic;
use crate::results::PairResult;
use crate::score::NodeStatus;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A rail a node's verdict names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BadRail {
    /// The rail's number on the node and its NIC (name, PCI address).
    pub nic: RailNic,
    /// `fail`: bad with two or more different partners, blamed; `suspect`: bad with one only,
    /// not cleared by the second pass.
    pub status: NodeStatus,
    /// The partners it was bad with, sorted (a node paired with itself: `node (pass N)`).
    pub partners: Vec<String>,
}

impl BadRail {
    /// `gpu-3 rail 5 (mlx5_5 0000:9a:00.0): bad with gpu-1 and gpu-4`.
    pub fn line(&self, node: &str) -> String {
        let with = match self.partners.as_slice() {
            [] => String::new(),
            [one] => format!("{one} only"),
            [init @ .., last] => format!("{} and {last}", init.join(", ")),
        };
        format!("{node} {}: bad with {with}", self.nic.label())
    }
}

/// A rail: its node and NIC key (PCI address, else name).
type RailId = (String, String);

#[derive(Debug, Default)]
struct Entry {
    nic: Option<RailNic>,
    /// Partner label → the partner's rails at the other end of the bad rows.
    with: BTreeMap<String, BTreeSet<RailId>>,
}

/// Which rails were bad with which partners over a set of pair results.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    bad: BTreeMap<RailId, Entry>,
}

/// The partner as counted: the node, or for a node paired with itself, the node and the pass
/// (running its own pair again is the intra-node schedule's second opinion).
fn partner_label(r: &PairResult, node: &str) -> String {
    match r.pair.partner(node) {
        p if p == node => format!("{node} (pass {})", r.pass),
        p => p.to_string(),
    }
}

impl Tally {
    pub(crate) fn of<'a>(results: impl IntoIterator<Item = &'a PairResult>) -> Tally {
        let mut t = Tally::default();
        for r in results {
            for row in r.outcome.rails().iter().filter(|row| row.bad()) {
                let ends = [
                    (&r.pair.prefill, &row.prefill, &r.pair.decode, &row.decode),
                    (&r.pair.decode, &row.decode, &r.pair.prefill, &row.prefill),
                ];
                for (node, end, other, other_end) in ends {
                    let e = t.bad.entry((node.clone(), end.key().to_string())).or_default();
                    e.nic.get_or_insert_with(|| end.clone());
                    e.with
                        .entry(partner_label(r, node))
                        .or_default()
                        .insert((other.clone(), other_end.key().to_string()));
                }
            }
        }
        t
    }

    fn blamed(&self, id: &RailId) -> bool {
        self.bad.get(id).is_some_and(|e| e.with.len() >= 2)
    }

    /// The node's rails that are bad with a partner whose own end is not blamed: blamed (two or
    /// more partners) or suspect (one), in rail order.
    pub(crate) fn bad_rails(&self, node: &str) -> Vec<BadRail> {
        let mut out: Vec<BadRail> = self
            .bad
            .range((node.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == node)
            .filter_map(|(id, e)| {
                let status = if self.blamed(id) {
                    NodeStatus::Fail
                } else if e.with.values().flatten().any(|other| self.blamed(other)) {
                    // Bad with one partner, whose rail is bad with others too: the partner's.
                    return None;
                } else {
                    NodeStatus::Suspect
                };
                Some(BadRail {
                    nic: e.nic.clone()?,
                    status,
                    partners: e.with.keys().cloned().collect(),
                })
            })
            .collect();
        out.sort_by_key(|b| b.nic.rail);
        out
    }

    /// Whether the pair's badness for `node` is its partner's blamed rails': it has bad rows,
    /// and in every one this node's end is not blamed while the partner's end is. `Some`: the
    /// partner's rails, named (`node-3 rail 2`).
    pub(crate) fn excused_by(&self, r: &PairResult, node: &str) -> Option<String> {
        if r.pair.prefill == r.pair.decode {
            return None;
        }
        let partner = r.pair.partner(node);
        let mut theirs = BTreeSet::new();
        for row in r.outcome.rails().iter().filter(|row| row.bad()) {
            let (own, other) = if r.pair.prefill == node {
                (&row.prefill, &row.decode)
            } else {
                (&row.decode, &row.prefill)
            };
            if self.blamed(&(node.to_string(), own.key().to_string()))
                || !self.blamed(&(partner.to_string(), other.key().to_string()))
            {
                return None;
            }
            theirs.insert(other.rail);
        }
        let rails: Vec<String> = theirs.iter().map(usize::to_string).collect();
        (!rails.is_empty()).then(|| format!("{partner} rail {}", rails.join("+")))
    }
}

/// The evidence lines for a node's bad rails: blamed ones first, then the suspects with what
/// happens next.
pub(crate) fn evidence(node: &str, rails: &[BadRail]) -> Vec<String> {
    let blamed = rails
        .iter()
        .filter(|b| b.status == NodeStatus::Fail)
        .map(|b| b.line(node));
    let suspect = rails
        .iter()
        .filter(|b| b.status == NodeStatus::Suspect)
        .map(|b| format!("{} (a suspect: the second pass re-pairs the node)", b.line(node)));
    blamed.chain(suspect).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rails::RailSummary;
    use crate::results::Outcome;
    use crate::schedule::Pair;
    use icb_core::model::VerdictStatus;

    /// A node paired with itself (the intra-node schedule) over two rails, rail 1 bad.
    fn own_pair(pass: u8, bad: bool) -> PairResult {
        let nic = |rail: usize| RailNic {
            rail,
            nic: format!("mlx5_{rail}"),
            pci: None,
        };
        let rails = (0..2)
            .map(|i| RailSummary {
                index: i,
                prefill: nic(i),
                decode: nic(i),
                bandwidth_bps: Some(if bad && i == 1 { 1e9 } else { 40e9 }),
                alone_bps: None,
                status: if bad && i == 1 {
                    VerdictStatus::Fail
                } else {
                    VerdictStatus::Pass
                },
                findings: vec![],
                health: None,
                counters: None,
            })
            .collect();
        PairResult {
            pair: Pair::new("n1", "n1"),
            pass,
            run_id: format!("s-p{pass}r0x0"),
            duration_s: 1.0,
            finished_at: None,
            outcome: Outcome::Measured {
                verdict: if bad {
                    icb_core::VerdictStatus::Fail
                } else {
                    icb_core::VerdictStatus::Pass
                },
                reason: String::new(),
                data_paths: vec![],
                bandwidth_bps: Some(40e9),
                latency_us: None,
                series: vec![],
                latency: vec![],
                warnings: vec![],
                rails,
                controls: vec![],
                nic: None,
            },
        }
    }

    #[test]
    fn a_node_paired_with_itself_blames_its_rail_only_when_the_run_again_repeats_it() {
        let nodes = vec!["n1".to_string()];
        let first = [own_pair(1, true)];
        let v = &crate::score::first_pass_verdicts(&nodes, &first)[0];
        assert_eq!(v.status, NodeStatus::Suspect);
        assert_eq!(v.bad_rails[0].status, NodeStatus::Suspect);
        assert_eq!(v.bad_rails[0].partners, ["n1 (pass 1)"]);
        let again = [own_pair(1, true), own_pair(2, true)];
        let v = &crate::score::final_verdicts(&nodes, &again)[0];
        assert_eq!(v.status, NodeStatus::Fail);
        assert_eq!(v.bad_rails.len(), 1);
        assert_eq!(v.bad_rails[0].partners, ["n1 (pass 1)", "n1 (pass 2)"]);
        // No PCI address: the NIC's name is its key.
        assert_eq!(crate::rails::bad_rails_annotation(v).as_deref(), Some("1:mlx5_1"));
        assert_eq!(
            v.evidence[0],
            "n1 rail 1 (mlx5_1): bad with n1 (pass 1) and n1 (pass 2)"
        );
        let cleared = [own_pair(1, true), own_pair(2, false)];
        let v = &crate::score::final_verdicts(&nodes, &cleared)[0];
        assert_eq!(v.status, NodeStatus::Pass, "{:?}", v.evidence);
        assert!(v.bad_rails.is_empty() && crate::rails::bad_rails_annotation(v).is_none());
    }
}
