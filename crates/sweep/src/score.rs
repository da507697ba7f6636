//! Finding the bad node, not only the bad pair.
//!
//! First pass: every node gets the median bandwidth and median latency of its measured pairs and
//! its bad pairs. A pair is bad when its verdict failed (e.g. TCP carrying the data), nothing was
//! measured (an *error*), or it is slow: under 25 % of the reference (the 75th percentile of all
//! pairs, which one bad node cannot drag down the way it drags a median in a small cluster).
//! Errors are kept apart from slowness: a node that measured nothing with most of its partners
//! (a lost link, a dead NIC) takes the blame for those pairs, and its partners' errors with it are
//! not counted against them, so one unreachable node does not make every node look bad. A node
//! is a *suspect* when at least half its counted pairs are bad, when any counted pair measured
//! nothing (an error is never a pass until a second pass clears it: a node cut mid-sweep errs
//! with its last partners only, and passed on its first ones), or its median is a robust outlier
//! ([`crate::outliers`]: bandwidth low, latency high). A latency its own pair's quality check
//! called implausible (`implausible_latency`: the data path is right, its timing is not) judges
//! no node: it is left out of the medians and of the re-pairs' latency rule, and a node left with
//! no bandwidth and no other latency is *unjudged*, never a pass on nothing. Nodes whose bench
//! pods could not be placed are *unschedulable*, never a fabric verdict.
//!
//! Second pass: each suspect is re-paired with two nodes that passed. Both re-pairs fail → the
//! node is bad (`fail`); both pass → the first pass blamed a pair or a partner, the node is cleared
//! (`pass`); one each → `suspect` with that evidence. Healthy partners of a bad node are cleared by
//! the same rule: their failures were all with the bad node. With no node passed there is no one
//! to re-pair with: the suspects stay suspects and the evidence says why.
//!
//! With rails (`sweep --rails`), a rail bad with two different partners fails its node by name,
//! and a rail bad with one partner only makes its node a suspect ([`rails`]).

use crate::outliers::{Limit, bandwidth_floor, latency_ceiling, median};
use crate::results::{Outcome, PairResult};
use crate::schedule::{Pair, Round, pack};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

mod distrust;
mod rails;

use distrust::{unjudged_by_a_distrusted_latency, without_distrusted_latencies};
pub use rails::BadRail;

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
    /// Measured, but a pair's run was inconclusive (a data path it could not attribute, a
    /// control it did not catch) and none failed: not a pass.
    Unjudged,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Pass => "pass",
            NodeStatus::Suspect => "suspect",
            NodeStatus::Fail => "fail",
            NodeStatus::Unschedulable => "unschedulable",
            NodeStatus::Unknown => "unknown",
            NodeStatus::Unjudged => "unjudged",
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
    /// Median of its first-pass pairs' latency (p50 of the smallest tag_lat case), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_latency_us: Option<f64>,
    pub pairs: usize,
    /// Bad first-pass pairs counted against it: failed, slow, or nothing measured.
    pub failed_pairs: usize,
    /// Of `failed_pairs`, those that measured nothing (an error, not slowness).
    #[serde(default)]
    pub error_pairs: usize,
    /// Data paths seen in its pairs.
    pub data_paths: Vec<String>,
    /// Why: which pairs failed, the outlier tests, the second pass, pair quality warnings.
    pub evidence: Vec<String>,
    /// `sweep --rails`: its rails that were bad with a partner, blamed (`fail`) or `suspect`;
    /// absent without rails or when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bad_rails: Vec<BadRail>,
}

/// A pair's result counted for one node of it.
fn first_pass<'a>(results: &'a [PairResult], node: &'a str) -> impl Iterator<Item = &'a PairResult> + 'a {
    results.iter().filter(move |r| r.pass == 1 && r.pair.involves(node))
}

/// Nodes named unschedulable by any pair.
fn unschedulable(results: &[PairResult]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for r in results {
        if let Outcome::Unschedulable { node, reason } = &r.outcome {
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

fn is_error(r: &PairResult) -> bool {
    matches!(r.outcome, Outcome::Error { .. })
}

/// Nodes that measured nothing with most (strictly more than half) of their first-pass pairs:
/// the errors are theirs, not their partners'.
fn erroring(nodes: &[String], results: &[PairResult]) -> BTreeSet<String> {
    nodes
        .iter()
        .filter(|n| {
            let placed: Vec<&PairResult> = first_pass(results, n).filter(|r| r.outcome.counts()).collect();
            let errors = placed.iter().filter(|r| is_error(r)).count();
            errors * 2 > placed.len()
        })
        .cloned()
        .collect()
}

/// What the first pass knows, shared by every node's verdict.
struct FirstPass<'a> {
    results: &'a [PairResult],
    blocked: BTreeMap<String, String>,
    reference: Option<f64>,
    erroring: BTreeSet<String>,
    rails: rails::Tally,
}

/// First-pass verdicts (suspects not yet re-paired).
pub fn first_pass_verdicts(nodes: &[String], results: &[PairResult]) -> Vec<NodeVerdict> {
    let ctx = FirstPass {
        results,
        blocked: unschedulable(results),
        reference: reference_bandwidth(results),
        erroring: erroring(nodes, results),
        rails: rails::Tally::of(results.iter().filter(|r| r.pass == 1)),
    };
    let mut out: Vec<NodeVerdict> = nodes.iter().map(|n| ctx.verdict(n)).collect();
    mark_outliers(&mut out);
    for v in &mut out {
        v.evidence.extend(quality_warnings(results, &v.node));
        v.evidence.extend(crate::nic::node_evidence(results, &v.node));
    }
    out
}

impl FirstPass<'_> {
    fn verdict(&self, node: &str) -> NodeVerdict {
        let placed: Vec<&PairResult> = first_pass(self.results, node).filter(|r| r.outcome.counts()).collect();
        // An error with a partner that errors with everyone is the partner's; so is a pair whose
        // bad rails are all the partner's blamed rails.
        let excused = |r: &PairResult| {
            (is_error(r) && !self.erroring.contains(node) && self.erroring.contains(r.pair.partner(node)))
                || (pair_bad(r, self.reference) && self.rails.excused_by(r, node).is_some())
        };
        let counted: Vec<&PairResult> = placed.iter().copied().filter(|r| !excused(r)).collect();
        let bad: Vec<&PairResult> = counted
            .iter()
            .copied()
            .filter(|r| pair_bad(r, self.reference))
            .collect();
        let errors = bad.iter().filter(|r| is_error(r)).count();
        let mut evidence: Vec<String> = bad.iter().map(|r| self.bad_line(r)).collect();
        evidence.extend(placed.iter().filter(|r| excused(r)).map(|r| {
            let why = match self.rails.excused_by(r, node) {
                Some(rail) if !is_error(r) => format!("{rail} is bad with other partners too"),
                _ => format!("{} measured nothing with most of its partners", r.pair.partner(node)),
            };
            format!("not counted: {}: {} ({why})", r.pair, r.outcome.short())
        }));
        let bad_rails = self.rails.bad_rails(node);
        let rail_blamed = bad_rails.iter().any(|b| b.status == NodeStatus::Fail);
        let status = if let Some(reason) = self.blocked.get(node) {
            evidence.insert(0, format!("bench pods cannot be placed: {reason}"));
            NodeStatus::Unschedulable
        } else if counted.is_empty() {
            NodeStatus::Unknown
        } else if rail_blamed {
            NodeStatus::Fail
        } else if bad.len() * 2 >= counted.len() || errors > 0 || !bad_rails.is_empty() {
            if bad.len() * 2 >= counted.len() || errors > 0 {
                evidence.insert(0, bad_summary(bad.len(), errors, counted.len()));
            }
            NodeStatus::Suspect
        } else if let Some(r) = counted.iter().find(|r| r.outcome.inconclusive()) {
            evidence.insert(0, format!("not judged: {}: {}", r.pair, r.outcome.short()));
            NodeStatus::Unjudged
        } else {
            NodeStatus::Pass
        };
        if matches!(status, NodeStatus::Fail | NodeStatus::Suspect) {
            // The rails first: they name what to fix.
            evidence.splice(0..0, rails::evidence(node, &bad_rails));
        }
        let measured = |r: &&&PairResult| matches!(r.outcome, Outcome::Measured { .. });
        let mut bws: Vec<f64> = counted.iter().filter_map(|r| r.outcome.bandwidth()).collect();
        // Only latencies their own pair trusts: one it called implausible judges no node.
        let mut lats: Vec<f64> = counted.iter().filter_map(|r| r.outcome.latency()).collect();
        let judged_by_figures = !bws.is_empty() || !lats.is_empty();
        let status = without_distrusted_latencies(status, &counted, judged_by_figures, &mut evidence);
        let mut paths = BTreeSet::new();
        for r in placed.iter().filter(measured) {
            if let Outcome::Measured { data_paths, .. } = &r.outcome {
                paths.extend(data_paths.iter().cloned());
            }
        }
        NodeVerdict {
            node: node.to_string(),
            status,
            median_bps: median(&mut bws),
            median_latency_us: median(&mut lats),
            pairs: placed.len(),
            failed_pairs: bad.len(),
            error_pairs: errors,
            data_paths: paths.into_iter().collect(),
            evidence,
            bad_rails,
        }
    }

    fn bad_line(&self, r: &PairResult) -> String {
        let why = if is_error(r) {
            " (measured nothing: an error, not slowness)".to_string()
        } else if r.outcome.failed() {
            String::new()
        } else {
            format!(
                " (slow: under {:.0}% of the reference {:.2} GB/s)",
                SLOW_FRACTION * 100.0,
                self.reference.unwrap_or_default() / 1e9
            )
        };
        format!("{}: {}{why}", r.pair, r.outcome.short())
    }
}

/// The controls a second-pass pair ran, for its evidence line: `; tcp control caught`.
fn controls_note(outcome: &Outcome) -> String {
    let Outcome::Measured { controls, .. } = outcome else {
        return String::new();
    };
    controls
        .iter()
        .map(|c| {
            format!(
                "; {} control {}",
                c.kind,
                if c.caught { "caught" } else { "not caught" }
            )
        })
        .collect()
}

/// An accusation (or a clearing) rests on a detector shown to work on the re-pairs: a control
/// one of `second` did not catch leaves the suspect `v` neither failed nor passed. Whether it did.
fn unjudged_by_a_control(v: &mut NodeVerdict, second: &[&PairResult]) -> bool {
    let Some((r, c)) = second.iter().find_map(|r| Some((r, r.outcome.uncaught_control()?))) else {
        return false;
    };
    v.evidence.insert(
        0,
        format!(
            "not judged: second pass {}: its {} control was not caught ({}), so its result can neither accuse nor clear the node",
            r.pair, c.kind, c.detail
        ),
    );
    v.status = NodeStatus::Unjudged;
    true
}

/// The suspect's first evidence line: how many pairs were bad, errors apart from slowness.
fn bad_summary(bad: usize, errors: usize, counted: usize) -> String {
    if errors == 0 {
        format!("{bad} of {counted} pairs failed or slow")
    } else if errors == bad {
        format!("{bad} of {counted} pairs measured nothing (errors, not slowness)")
    } else {
        format!(
            "{bad} of {counted} pairs bad: {} failed or slow, {errors} measured nothing (errors, not slowness)",
            bad - errors
        )
    }
}

/// Robust outliers among the nodes' medians: bandwidth low, latency high. Only a node that
/// passed so far is marked (a suspect already is one).
fn mark_outliers(out: &mut [NodeVerdict]) {
    let bws: Vec<f64> = out.iter().filter_map(|v| v.median_bps).collect();
    let lats: Vec<f64> = out.iter().filter_map(|v| v.median_latency_us).collect();
    let floor = bandwidth_floor(&bws);
    let ceiling = latency_ceiling(&lats);
    for v in out.iter_mut().filter(|v| v.status == NodeStatus::Pass) {
        if let (Some(m), Some(l)) = (v.median_bps, floor)
            && m < l.threshold
        {
            v.status = NodeStatus::Suspect;
            v.evidence.insert(
                0,
                format!(
                    "median {:.2} GB/s is a low outlier (all nodes: median {:.2} GB/s, MAD {:.2} GB/s, threshold {:.2} GB/s)",
                    m / 1e9,
                    l.center / 1e9,
                    l.mad / 1e9,
                    l.threshold / 1e9
                ),
            );
        } else if let (Some(m), Some(l)) = (v.median_latency_us, ceiling)
            && m > l.threshold
        {
            v.status = NodeStatus::Suspect;
            v.evidence.insert(0, latency_line(m, l));
        }
    }
}

fn latency_line(m: f64, l: Limit) -> String {
    format!(
        "median latency {} µs is a high outlier (all nodes: median {} µs, MAD {} µs, threshold {} µs)",
        micros(m),
        micros(l.center),
        micros(l.mad),
        micros(l.threshold)
    )
}

/// µs with three significant digits (0.650, 12.3, 8000).
pub fn micros(us: f64) -> String {
    if us > 0.0 && us < 100.0 {
        let decimals = (2 - us.log10().floor() as i32).clamp(0, 6) as usize;
        format!("{us:.decimals$}")
    } else {
        format!("{us:.0}")
    }
}

/// The measurement-quality warnings of this node's pairs, one evidence line each (last, after
/// the verdict's reasons): a noisy pair can explain a slow one.
fn quality_warnings(results: &[PairResult], node: &str) -> Vec<String> {
    results
        .iter()
        .filter(|r| r.pair.involves(node))
        .flat_map(|r| match &r.outcome {
            Outcome::Measured { warnings, .. } => warnings.iter().map(|w| format!("quality {}: {w}", r.pair)).collect(),
            _ => Vec::new(),
        })
        .collect()
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

/// Why the second pass cannot run although there are suspects: every node is suspect (or
/// otherwise not passed), so there is no partner to re-pair one with. `None` when it can run or
/// there is nothing to re-pair.
pub fn second_pass_skipped(verdicts: &[NodeVerdict], intra_node: bool) -> Option<String> {
    let suspects = verdicts.iter().filter(|v| v.status == NodeStatus::Suspect).count();
    let passed = verdicts.iter().any(|v| v.status == NodeStatus::Pass);
    (suspects > 0 && !intra_node && !passed).then(|| {
        format!(
            "second pass skipped: no node passed the first pass, so the {suspects} suspect(s) have no partner to be re-paired with; their verdicts stay unconfirmed"
        )
    })
}

/// With no second pass to tell suspects apart: the one node in every bad first-pass pair, when
/// there is one and some pair was good (a 3-node sweep with one slow node makes every node a
/// suspect; the node common to the bad pairs is the likeliest culprit).
pub fn common_to_bad_pairs(nodes: &[String], results: &[PairResult]) -> Option<String> {
    let reference = reference_bandwidth(results);
    let first: Vec<&PairResult> = results.iter().filter(|r| r.pass == 1 && r.outcome.counts()).collect();
    let bad: Vec<&PairResult> = first.iter().copied().filter(|r| pair_bad(r, reference)).collect();
    if bad.is_empty() || bad.len() == first.len() {
        return None;
    }
    let mut common = nodes.iter().filter(|n| bad.iter().all(|r| r.pair.involves(n)));
    match (common.next(), common.next()) {
        (Some(n), None) => Some(format!(
            "{n} is in every bad first-pass pair ({} of {}): the likeliest culprit",
            bad.len(),
            first.len()
        )),
        _ => None,
    }
}

/// Final verdicts: first pass, then each suspect judged by its second-pass pairs.
pub fn final_verdicts(nodes: &[String], results: &[PairResult]) -> Vec<NodeVerdict> {
    let mut verdicts = first_pass_verdicts(nodes, results);
    let intra_node = results
        .iter()
        .filter(|r| r.pass == 1)
        .all(|r| r.pair.prefill == r.pair.decode);
    let skipped = second_pass_skipped(&verdicts, intra_node).map(|why| match common_to_bad_pairs(nodes, results) {
        Some(culprit) => format!("{why}; {culprit}"),
        None => why,
    });
    let bws: Vec<f64> = verdicts.iter().filter_map(|v| v.median_bps).collect();
    let lats: Vec<f64> = verdicts.iter().filter_map(|v| v.median_latency_us).collect();
    let floor = bandwidth_floor(&bws).map(|l| l.threshold);
    let ceiling = latency_ceiling(&lats).map(|l| l.threshold);
    let reference = reference_bandwidth(results);
    // A re-pair fails on a failed verdict, on a slow pair, under the node-outlier bandwidth
    // threshold or over the node-outlier latency threshold (a latency its own pair trusts:
    // `Outcome::latency`).
    let bad = |r: &PairResult| {
        pair_bad(r, reference)
            || matches!((r.outcome.bandwidth(), floor), (Some(b), Some(f)) if b < f)
            || matches!((r.outcome.latency(), ceiling), (Some(l), Some(c)) if l > c)
    };
    // Every pass: a suspect rail bad again in the second pass is bad with two partners.
    let all_rails = rails::Tally::of(results);
    for v in &mut verdicts {
        if v.status != NodeStatus::Suspect {
            continue;
        }
        let second: Vec<&PairResult> = results
            .iter()
            .filter(|r| r.pass == 2 && r.pair.involves(&v.node))
            .collect();
        if second.is_empty() {
            v.evidence
                .push(skipped.clone().unwrap_or_else(|| "second pass: no re-pair ran".into()));
            continue;
        }
        let failed = second.iter().filter(|r| bad(r)).count();
        for r in &second {
            v.evidence.push(format!(
                "second pass {}: {}{}",
                r.pair,
                r.outcome.short(),
                controls_note(&r.outcome)
            ));
        }
        if unjudged_by_a_control(v, &second) {
            continue;
        }
        let confirmed: Vec<BadRail> = all_rails
            .bad_rails(&v.node)
            .into_iter()
            .filter(|b| b.status == NodeStatus::Fail)
            .collect();
        if !confirmed.is_empty() {
            let lines = rails::evidence(&v.node, &confirmed);
            v.evidence.splice(0..0, lines);
            v.bad_rails = confirmed;
            v.status = NodeStatus::Fail;
            continue;
        }
        if failed == 0 && unjudged_by_a_distrusted_latency(v, &second) {
            continue;
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
            // Cleared: its rails' failures were its partners' too.
            v.bad_rails.clear();
            NodeStatus::Pass
        } else {
            // Still a suspect: its rails as every pass tells them (one whose partner's rail
            // turned out blamed is no longer its).
            v.bad_rails = all_rails.bad_rails(&v.node);
            NodeStatus::Suspect
        };
    }
    verdicts
}

#[cfg(test)]
#[path = "score_tests.rs"]
mod tests;
