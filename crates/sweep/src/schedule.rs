//! Which pairs run together: every round is a set of node-disjoint pairs, so no node carries two
//! bench pairs at once and the round's wall time is one pair's.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One measurement: the prefill side (client) on one node, the decode side (server) on another
/// (or the same node for intra-node).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pair {
    pub prefill: String,
    pub decode: String,
}

impl Pair {
    pub fn new(prefill: &str, decode: &str) -> Pair {
        Pair {
            prefill: prefill.to_string(),
            decode: decode.to_string(),
        }
    }

    pub fn involves(&self, node: &str) -> bool {
        self.prefill == node || self.decode == node
    }

    /// The other node of the pair (the same node for intra-node pairs).
    pub fn partner(&self, node: &str) -> &str {
        if self.prefill == node {
            &self.decode
        } else {
            &self.prefill
        }
    }
}

impl std::fmt::Display for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}→{}", self.prefill, self.decode)
    }
}

/// Pairs that run at the same time.
pub type Round = Vec<Pair>;

/// How nodes are paired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Schedule {
    /// Every unordered pair once: N−1 rounds of ⌊N/2⌋ disjoint pairs (round-robin tournament).
    AllPairs,
    /// Each node with its ring neighbour: N pairs in 2–3 rounds.
    Ring,
    /// Every prefill-pool node with every decode-pool node.
    Bipartite { prefill: Vec<String>, decode: Vec<String> },
    /// Two pods on one node (different GPUs): one round.
    IntraNode,
    /// A ring plus `matchings` random perfect matchings: cost linear in N.
    Linear { matchings: usize, seed: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("{0}")]
    TooFewNodes(String),
}

/// Why `--schedule` and the pool flags do not make a schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    #[error("--schedule bipartite needs --prefill-pool and --decode-pool")]
    BipartiteNeedsPools,
    #[error("--prefill-pool/--decode-pool go with --schedule bipartite, not {0}")]
    PoolsNeedBipartite(String),
    #[error("unknown --schedule {0}")]
    Unknown(String),
}

impl Schedule {
    /// The schedule `--schedule NAME` (none: all pairs, or bipartite with pools) chooses; `pools`
    /// are the prefill and decode pools' nodes when both pools were given, and `matchings` and
    /// `seed` shape the linear schedule.
    pub fn choose(
        name: Option<&str>,
        pools: Option<(Vec<String>, Vec<String>)>,
        matchings: usize,
        seed: u64,
    ) -> Result<Schedule, ChoiceError> {
        Ok(match (name, pools) {
            (None | Some("bipartite"), Some((prefill, decode))) => Schedule::Bipartite { prefill, decode },
            (Some("bipartite"), None) => return Err(ChoiceError::BipartiteNeedsPools),
            (Some(other), Some(_)) => return Err(ChoiceError::PoolsNeedBipartite(other.into())),
            (None | Some("all-pairs"), None) => Schedule::AllPairs,
            (Some("ring"), None) => Schedule::Ring,
            (Some("intra-node"), None) => Schedule::IntraNode,
            (Some("linear"), None) => Schedule::Linear { matchings, seed },
            (Some(other), None) => return Err(ChoiceError::Unknown(other.into())),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Schedule::AllPairs => "all-pairs",
            Schedule::Ring => "ring",
            Schedule::Bipartite { .. } => "bipartite",
            Schedule::IntraNode => "intra-node",
            Schedule::Linear { .. } => "linear",
        }
    }

    /// The rounds for `nodes` (sorted, distinct), each at most `max_concurrent` pairs wide.
    pub fn rounds(&self, nodes: &[String], max_concurrent: usize) -> Result<Vec<Round>, ScheduleError> {
        let need = if *self == Schedule::IntraNode { 1 } else { 2 };
        if !matches!(self, Schedule::Bipartite { .. }) && nodes.len() < need {
            return Err(ScheduleError::TooFewNodes(format!(
                "the {} schedule needs at least {need} node(s), got {}: widen the selection",
                self.name(),
                nodes.len()
            )));
        }
        let rounds = match self {
            Schedule::AllPairs => round_robin(nodes),
            Schedule::Ring => pack(ring(nodes)),
            Schedule::IntraNode => vec![nodes.iter().map(|n| Pair::new(n, n)).collect()],
            Schedule::Bipartite { prefill, decode } => {
                if prefill.is_empty() || decode.is_empty() {
                    return Err(ScheduleError::TooFewNodes(
                        "bipartite needs nodes in both --prefill-pool and --decode-pool".into(),
                    ));
                }
                // Diagonals first (prefill i with decode i+r): each is one disjoint round.
                let pairs = (0..decode.len())
                    .flat_map(|r| {
                        prefill
                            .iter()
                            .enumerate()
                            .map(move |(i, p)| (p, &decode[(i + r) % decode.len()]))
                    })
                    .filter(|(p, d)| p != d)
                    .map(|(p, d)| Pair::new(p, d))
                    .collect();
                pack(pairs)
            }
            Schedule::Linear { matchings, seed } => {
                let mut pairs = ring(nodes);
                let mut seen: BTreeSet<(String, String)> = pairs.iter().map(unordered).collect();
                let mut rng = rand::rngs::StdRng::seed_from_u64(*seed);
                for _ in 0..*matchings {
                    let mut order = nodes.to_vec();
                    order.shuffle(&mut rng);
                    for chunk in order.chunks(2) {
                        if let [a, b] = chunk {
                            let p = Pair::new(a, b);
                            if seen.insert(unordered(&p)) {
                                pairs.push(p);
                            }
                        }
                    }
                }
                pack(pairs)
            }
        };
        Ok(split(rounds, max_concurrent))
    }
}

fn unordered(p: &Pair) -> (String, String) {
    if p.prefill <= p.decode {
        (p.prefill.clone(), p.decode.clone())
    } else {
        (p.decode.clone(), p.prefill.clone())
    }
}

fn ring(nodes: &[String]) -> Vec<Pair> {
    match nodes.len() {
        0 | 1 => vec![],
        2 => vec![Pair::new(&nodes[0], &nodes[1])],
        n => (0..n).map(|i| Pair::new(&nodes[i], &nodes[(i + 1) % n])).collect(),
    }
}

/// The circle method: fix one node, rotate the rest; a bye when N is odd.
fn round_robin(nodes: &[String]) -> Vec<Round> {
    let mut slots: Vec<Option<&String>> = nodes.iter().map(Some).collect();
    if slots.len() % 2 == 1 {
        slots.push(None);
    }
    let n = slots.len();
    let mut rounds = Vec::with_capacity(n - 1);
    for r in 0..n - 1 {
        let mut round = Vec::with_capacity(n / 2);
        for i in 0..n / 2 {
            if let (Some(a), Some(b)) = (slots[i], slots[n - 1 - i]) {
                // Alternate directions so each node is prefill about half the time.
                if (r + i) % 2 == 0 {
                    round.push(Pair::new(a, b));
                } else {
                    round.push(Pair::new(b, a));
                }
            }
        }
        rounds.push(round);
        slots[1..].rotate_right(1);
    }
    rounds
}

/// Greedy packing of pairs into node-disjoint rounds, in the given order.
pub fn pack(pairs: Vec<Pair>) -> Vec<Round> {
    let mut rounds: Vec<(BTreeSet<String>, Round)> = Vec::new();
    for p in pairs {
        let slot = rounds
            .iter_mut()
            .find(|(busy, _)| !busy.contains(&p.prefill) && !busy.contains(&p.decode));
        match slot {
            Some((busy, round)) => {
                busy.insert(p.prefill.clone());
                busy.insert(p.decode.clone());
                round.push(p);
            }
            None => {
                let busy = BTreeSet::from([p.prefill.clone(), p.decode.clone()]);
                rounds.push((busy, vec![p]));
            }
        }
    }
    rounds.into_iter().map(|(_, r)| r).collect()
}

/// Splits rounds wider than `max_concurrent` (0: no limit).
fn split(rounds: Vec<Round>, max_concurrent: usize) -> Vec<Round> {
    if max_concurrent == 0 {
        return rounds;
    }
    rounds
        .into_iter()
        .flat_map(|r| r.chunks(max_concurrent).map(<[Pair]>::to_vec).collect::<Vec<_>>())
        .filter(|r| !r.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_flags_choose_one_schedule_or_say_which_is_wrong() {
        let pools = || Some((vec!["a".to_string()], vec!["b".to_string()]));
        assert_eq!(Schedule::choose(None, None, 2, 7), Ok(Schedule::AllPairs));
        assert_eq!(
            Schedule::choose(None, pools(), 2, 7),
            Ok(Schedule::Bipartite {
                prefill: vec!["a".into()],
                decode: vec!["b".into()]
            })
        );
        assert_eq!(
            Schedule::choose(Some("linear"), None, 2, 7),
            Ok(Schedule::Linear { matchings: 2, seed: 7 })
        );
        assert_eq!(
            Schedule::choose(Some("bipartite"), None, 2, 7),
            Err(ChoiceError::BipartiteNeedsPools)
        );
        assert_eq!(
            Schedule::choose(Some("ring"), pools(), 2, 7),
            Err(ChoiceError::PoolsNeedBipartite("ring".into()))
        );
        let e = Schedule::choose(Some("star"), None, 2, 7).unwrap_err();
        assert_eq!(e.to_string(), "unknown --schedule star");
    }

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("node-{i}")).collect()
    }

    fn assert_disjoint(rounds: &[Round]) {
        for r in rounds {
            let mut busy = BTreeSet::new();
            for p in r {
                assert!(busy.insert(p.prefill.clone()), "{p} shares a node in {r:?}");
                if p.decode != p.prefill {
                    assert!(busy.insert(p.decode.clone()), "{p} shares a node in {r:?}");
                }
            }
        }
    }

    #[test]
    fn all_pairs_is_a_round_robin_tournament() {
        for n in [2, 3, 7, 8, 32] {
            let rounds = Schedule::AllPairs.rounds(&nodes(n), 0).unwrap();
            let expected_rounds = if n % 2 == 0 { n - 1 } else { n };
            assert_eq!(rounds.len(), expected_rounds, "n={n}");
            assert_disjoint(&rounds);
            let all: BTreeSet<(String, String)> = rounds.iter().flatten().map(unordered).collect();
            assert_eq!(all.len(), n * (n - 1) / 2, "every unordered pair once (n={n})");
            assert_eq!(rounds.iter().map(Vec::len).sum::<usize>(), n * (n - 1) / 2);
        }
    }

    #[test]
    fn ring_bipartite_intra_and_linear() {
        let r = Schedule::Ring.rounds(&nodes(5), 0).unwrap();
        assert_eq!(r.iter().map(Vec::len).sum::<usize>(), 5);
        assert_eq!(r.len(), 3);
        assert_disjoint(&r);
        let r = Schedule::IntraNode.rounds(&nodes(4), 0).unwrap();
        assert_eq!(r, vec![nodes(4).iter().map(|n| Pair::new(n, n)).collect::<Vec<_>>()]);
        let b = Schedule::Bipartite {
            prefill: vec!["p1".into(), "p2".into()],
            decode: vec!["d1".into(), "d2".into(), "d3".into()],
        };
        let r = b.rounds(&[], 0).unwrap();
        assert_eq!(r.iter().map(Vec::len).sum::<usize>(), 6);
        assert_eq!(r.len(), 3);
        assert_disjoint(&r);
        let lin = Schedule::Linear { matchings: 3, seed: 7 };
        let r = lin.rounds(&nodes(100), 0).unwrap();
        let pairs: usize = r.iter().map(Vec::len).sum();
        assert!((100..=250).contains(&pairs), "{pairs}");
        assert!(r.len() <= 8, "linear cost in rounds too: {}", r.len());
        assert_disjoint(&r);
        assert_eq!(r, lin.rounds(&nodes(100), 0).unwrap(), "the seed fixes the plan");
    }

    #[test]
    fn max_concurrent_splits_rounds_and_too_few_nodes_is_an_error() {
        let r = Schedule::AllPairs.rounds(&nodes(8), 2).unwrap();
        assert!(r.iter().all(|r| r.len() <= 2));
        assert_eq!(r.iter().map(Vec::len).sum::<usize>(), 28);
        let e = Schedule::AllPairs.rounds(&nodes(1), 0).unwrap_err().to_string();
        assert!(e.contains("at least 2"), "{e}");
    }
}
