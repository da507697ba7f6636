//! What the NICs' own error and congestion counters said over a plain pair's cases (issue 40
//! item 1): the pair report's `cases[].nic_health` reduced to the findings the sweep keeps, each
//! on its side (so on its node), with the counters that moved summed over the cases that found
//! it, and why a side read nothing. The node evidence ([`PairNic::evidence_for`]) and the HTML
//! heatmap's tooltip ([`PairNic::summary`]) are written from it. A rails pair's counters are its
//! rows' (`rails[].health`), not these.

use crate::schedule::Pair;
use icb_core::rails::nic_health::case::{CaseHealth, CaseSideHealth};
use icb_core::rails::nic_health::rules::HealthKind;
use serde::{Deserialize, Serialize};

/// Which end of a pair a finding was read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairSide {
    Prefill,
    Decode,
}

impl PairSide {
    pub fn as_str(self) -> &'static str {
        match self {
            PairSide::Prefill => "prefill",
            PairSide::Decode => "decode",
        }
    }

    /// The node this side ran on in `pair`.
    pub fn node(self, pair: &Pair) -> &str {
        match self {
            PairSide::Prefill => &pair.prefill,
            PairSide::Decode => &pair.decode,
        }
    }
}

/// One counter finding (`congested`, `lossy_link`) on one port of one side, over the cases
/// that found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicFinding {
    pub side: PairSide,
    /// The port (`mlx5_1:1`).
    pub device: String,
    pub kind: HealthKind,
    /// `(counter, delta)` summed over the cases, in name order.
    #[serde(default)]
    pub counters: Vec<(String, u64)>,
    /// How many of the pair's cases found it.
    pub cases: usize,
    /// One line: what to check (the rule's fix).
    pub fix: String,
}

/// A plain pair's counter findings, and why a side read nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairNic {
    /// Congested and lossy ports, prefill first; empty where the counters read found nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<NicFinding>,
    /// Why no counter was read on the prefill side over any case; absent where one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_not_read: Option<String>,
    /// The same for the decode side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_not_read: Option<String>,
}

impl PairNic {
    /// The measured cases' counters of a plain pair report (`None` for a rails pair).
    pub fn of(report: &icb_core::PairReport) -> Option<PairNic> {
        if report.rails.is_some() {
            return None;
        }
        let healths: Vec<&CaseHealth> = report
            .cases
            .iter()
            .filter(|c| c.status == icb_core::CaseStatus::Measured)
            .filter_map(|c| c.nic_health.as_deref())
            .collect();
        let mut nic = PairNic {
            prefill_not_read: not_read(&healths, PairSide::Prefill),
            decode_not_read: not_read(&healths, PairSide::Decode),
            ..PairNic::default()
        };
        for h in &healths {
            for (side, of_side) in [(PairSide::Prefill, &h.prefill), (PairSide::Decode, &h.decode)] {
                let found = of_side.ports.iter().flat_map(|p| &p.findings);
                for f in found.filter(|f| f.kind != HealthKind::NotRead) {
                    nic.add(side, f);
                }
            }
        }
        nic.findings
            .sort_by(|a, b| (a.side, &a.device).cmp(&(b.side, &b.device)));
        Some(nic)
    }

    fn add(&mut self, side: PairSide, f: &icb_core::rails::nic_health::rules::HealthFinding) {
        let found = self
            .findings
            .iter_mut()
            .find(|n| n.side == side && n.device == f.device && n.kind == f.kind);
        let Some(n) = found else {
            self.findings.push(NicFinding {
                side,
                device: f.device.clone(),
                kind: f.kind,
                counters: f.counters.clone(),
                cases: 1,
                fix: f.fix.clone(),
            });
            return;
        };
        n.cases += 1;
        for (name, delta) in &f.counters {
            match n.counters.iter_mut().find(|(c, _)| c == name) {
                Some((_, sum)) => *sum = sum.saturating_add(*delta),
                None => n.counters.push((name.clone(), *delta)),
            }
        }
        n.counters.sort();
    }

    fn not_read_on(&self, side: PairSide) -> Option<&str> {
        match side {
            PairSide::Prefill => self.prefill_not_read.as_deref(),
            PairSide::Decode => self.decode_not_read.as_deref(),
        }
    }

    /// The findings on `node`'s side(s) of `pair`, one evidence line each with its counters
    /// and fix.
    pub fn findings_for(&self, pair: &Pair, node: &str) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.side.node(pair) == node)
            .map(|f| {
                let at = format!("nic {pair}: {node} ({})", f.side.as_str());
                format!("{at} {}; fix: {}", finding_text(f), f.fix)
            })
            .collect()
    }

    /// Why `node`'s side(s) of `pair` read no counter.
    pub fn not_read_for(&self, pair: &Pair, node: &str) -> Vec<&str> {
        [PairSide::Prefill, PairSide::Decode]
            .into_iter()
            .filter(|side| side.node(pair) == node)
            .filter_map(|side| self.not_read_on(side))
            .collect()
    }

    /// One line for the pair's heatmap tooltip: every finding with its node, or what was not
    /// read, or `no counter finding` where both sides read counters and nothing was found.
    pub fn summary(&self, pair: &Pair) -> String {
        let mut parts: Vec<String> = self
            .findings
            .iter()
            .map(|f| format!("{} ({}) {}", f.side.node(pair), f.side.as_str(), finding_text(f)))
            .collect();
        for side in [PairSide::Prefill, PairSide::Decode] {
            if let Some(why) = self.not_read_on(side) {
                parts.push(format!("{} ({}) not read: {why}", side.node(pair), side.as_str()));
            }
        }
        if parts.is_empty() {
            "NIC counters: no counter finding".into()
        } else {
            format!("NIC counters: {}", parts.join("; "))
        }
    }
}

/// `node`'s NIC counter evidence over every pair of `results` it ran in: each finding on its
/// side, then one line per reason its side read no counter, with how many pairs that was (a
/// cluster without RDMA ports says it once, not once per pair). Pairs that kept no counters
/// (rails pairs, older files) add nothing.
pub fn node_evidence(results: &[crate::results::PairResult], node: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut unread: Vec<(&str, usize)> = Vec::new();
    for r in results.iter().filter(|r| r.pair.involves(node)) {
        let crate::results::Outcome::Measured { nic: Some(nic), .. } = &r.outcome else {
            continue;
        };
        lines.extend(nic.findings_for(&r.pair, node));
        for why in nic.not_read_for(&r.pair, node) {
            match unread.iter_mut().find(|(w, _)| *w == why) {
                Some((_, n)) => *n += 1,
                None => unread.push((why, 1)),
            }
        }
    }
    lines.extend(
        unread
            .into_iter()
            .map(|(why, n)| format!("nic: NIC counters not read on {node} in {n} pair(s): {why}")),
    );
    lines
}

/// `mlx5_1:1 congested in 4 case(s): np_cnp_sent +120, rp_cnp_handled +120`.
fn finding_text(f: &NicFinding) -> String {
    let word = match f.kind {
        HealthKind::Congested => "congested",
        HealthKind::LossyLink => "lossy link",
        HealthKind::NotRead => "not read",
    };
    let counters: Vec<String> = f.counters.iter().map(|(n, d)| format!("{n} +{d}")).collect();
    format!("{} {word} in {} case(s): {}", f.device, f.cases, counters.join(", "))
}

/// Why `side` read no counter over any of `healths`: the first case's own reason, or that no
/// case carried counters (an engine or an older pod that reads none); `None` where one was read.
fn not_read(healths: &[&CaseHealth], side: PairSide) -> Option<String> {
    let sides: Vec<&CaseSideHealth> = healths
        .iter()
        .map(|h| match side {
            PairSide::Prefill => &h.prefill,
            PairSide::Decode => &h.decode,
        })
        .collect();
    if sides.iter().any(|s| !s.nothing_read()) {
        return None;
    }
    Some(
        sides
            .iter()
            .find_map(|s| s.not_read.clone())
            .unwrap_or_else(|| "no measured case carried NIC counters".into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_whose_cases_carried_no_counters_reads_not_read_on_both_sides_never_ok() {
        let report: icb_core::PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        let nic = PairNic::of(&report).unwrap();
        assert!(nic.findings.is_empty());
        let pair = Pair::new("a", "b");
        assert_eq!(nic.not_read_for(&pair, "b"), ["no measured case carried NIC counters"]);
        assert!(nic.findings_for(&pair, "b").is_empty());
        assert!(
            nic.summary(&pair).contains("a (prefill) not read"),
            "{}",
            nic.summary(&pair)
        );
        assert!(!nic.summary(&pair).contains("no counter finding"));
    }
}
