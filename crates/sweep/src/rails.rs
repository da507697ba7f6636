//! Whole-node sweeps (`sweep --rails`): each pair report's per-rail table reduced to what the
//! sweep keeps ([`RailSummary`], in `ic-bench.sweep/v1` as a measured outcome's `rails`), and the
//! per node × rail view the reports draw ([`node_rails`]: a rail's figure with every partner it
//! was measured with). Which rails the score blames is [`crate::score`]'s; here the data only.
//!
//! A rail is keyed by its node and its NIC's PCI address (the NIC name where there is none):
//! `mlx5_N` names are not stable across nodes, and a rail number is only a position in a node's
//! rail map.

use crate::results::{Outcome, PairResult};
use crate::score::{NodeStatus, NodeVerdict};
use icb_core::model::VerdictStatus;
use icb_core::rails::nic_health::Indicates;
use icb_core::rails::nic_health::rail::{RailHealth, SideHealth};
use icb_core::rails::{RailEnd, RailFindingKind, RailResult, RailsOutcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One end of a rail row: the rail's number on its node and the NIC port it ran through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RailNic {
    /// The rail's number on its node, 0…K-1.
    pub rail: usize,
    /// RDMA device name (`mlx5_5`), or the network device of a host rail.
    pub nic: String,
    /// The NIC's PCI address, the key that is stable across nodes; absent when sysfs did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
}

impl RailNic {
    fn of(end: &RailEnd) -> RailNic {
        RailNic {
            rail: end.rail,
            nic: end.nic.name.clone(),
            pci: end.nic.pci.clone(),
        }
    }

    /// What identifies the NIC on its node: the PCI address, else the name.
    pub fn key(&self) -> &str {
        self.pci.as_deref().unwrap_or(&self.nic)
    }

    /// `rail 5 (mlx5_5 0000:9a:00.0)`.
    pub fn label(&self) -> String {
        match &self.pci {
            Some(pci) => format!("rail {} ({} {pci})", self.rail, self.nic),
            None => format!("rail {} ({})", self.rail, self.nic),
        }
    }
}

/// One row of a pair's per-rail table, as the sweep keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailSummary {
    /// The row's number in the pair report (the rail's number for the aligned pattern).
    pub index: usize,
    pub prefill: RailNic,
    pub decode: RailNic,
    /// The row's figure with all rails running at once (bytes/s); absent when it measured nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_bps: Option<f64>,
    /// Its figure alone, when it also ran alone (slow or misrouted concurrently).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone_bps: Option<f64>,
    pub status: VerdictStatus,
    /// The kinds of the pair report's findings about this row, worst first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<RailFindingKind>,
    /// What the NICs' own error and congestion counters said (`ok`, `congested`, `lossy`,
    /// `not RDMA`, `not read`); absent where the pair report has no health for the row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<String>,
    /// The NIC health counters that moved on each end over the row's phase (added within v1);
    /// absent where none moved or the pair report has no health for the row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<MovedCounters>,
}

/// The congestion, loss and link-fault counters that moved on each end of a row, as
/// `(counter, delta)` in name order: what explains a slow or lossy rail. The request counters
/// (`rx_read_requests` …) that move on every RDMA rail are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MovedCounters {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefill: Vec<(String, u64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decode: Vec<(String, u64)>,
}

impl MovedCounters {
    /// What moved on each end of `health`; `None` when nothing did.
    fn of(health: &RailHealth) -> Option<MovedCounters> {
        let moved = |side: &SideHealth| -> Vec<(String, u64)> {
            let Some(deltas) = &side.deltas else {
                return Vec::new();
            };
            let mut all: Vec<(String, u64)> = [Indicates::Congestion, Indicates::Loss, Indicates::LinkFault]
                .into_iter()
                .flat_map(|what| deltas.moved(what))
                .collect();
            all.sort();
            all
        };
        let counters = MovedCounters {
            prefill: moved(&health.prefill),
            decode: moved(&health.decode),
        };
        (!counters.prefill.is_empty() || !counters.decode.is_empty()).then_some(counters)
    }
}

/// Finding kinds that say the rail itself is bad, not contention or an unreadable counter.
const BAD_KINDS: [RailFindingKind; 4] = [
    RailFindingKind::BelowMedian,
    RailFindingKind::WrongNic,
    RailFindingKind::IdleNic,
    RailFindingKind::Failed,
];

impl RailSummary {
    fn of(row: &RailResult, rails: &RailsOutcome) -> RailSummary {
        RailSummary {
            index: row.index,
            prefill: RailNic::of(&row.prefill),
            decode: RailNic::of(&row.decode),
            bandwidth_bps: row.concurrent.bandwidth_bps,
            alone_bps: row.alone.as_ref().and_then(|a| a.bandwidth_bps),
            status: row.status,
            findings: rails
                .findings
                .iter()
                .filter(|f| f.rail == Some(row.index))
                .map(|f| f.kind)
                .collect(),
            health: row.health.as_ref().map(|h| h.cell()),
            counters: row.health.as_ref().and_then(MovedCounters::of),
        }
    }

    /// Every row of a pair report's `rails` section.
    pub fn from_rails(rails: &RailsOutcome) -> Vec<RailSummary> {
        rails.rails.iter().map(|r| RailSummary::of(r, rails)).collect()
    }

    /// The row says its rail pair is bad: it failed, or a finding names a bad rail (below the
    /// median alone too, its bytes on another NIC, its NIC idle, nothing measured). Contention
    /// and counters that could not attribute are not the rail's fault.
    pub fn bad(&self) -> bool {
        self.status == VerdictStatus::Fail || self.findings.iter().any(|k| BAD_KINDS.contains(k))
    }

    /// The ends of this row on `node` in pair `r`, each with the health counters that moved
    /// on it: one, or both for a node paired with itself (the intra-node schedule), none when
    /// `node` is not in the pair.
    pub(crate) fn ends_on<'a>(&'a self, r: &PairResult, node: &str) -> Vec<(&'a RailNic, &'a [(String, u64)])> {
        let none: &[(String, u64)] = &[];
        let (prefill, decode) = match &self.counters {
            Some(c) => (c.prefill.as_slice(), c.decode.as_slice()),
            None => (none, none),
        };
        let mut ends = Vec::new();
        if r.pair.prefill == node {
            ends.push((&self.prefill, prefill));
        }
        if r.pair.decode == node && !(r.pair.prefill == node && self.decode.key() == self.prefill.key()) {
            ends.push((&self.decode, decode));
        }
        ends
    }
}

impl Outcome {
    /// The per-rail rows of a measured pair (empty without `--rails`).
    pub fn rails(&self) -> &[RailSummary] {
        match self {
            Outcome::Measured { rails, .. } => rails,
            _ => &[],
        }
    }
}

/// One partner of a node's rail: how the rail did in one pair.
#[derive(Debug, Clone, PartialEq)]
pub struct RailPartner {
    pub partner: String,
    pub pass: u8,
    /// The row's figure (bytes/s); the worst where the pair had several rows on this rail
    /// (the cross pattern).
    pub bandwidth_bps: Option<f64>,
    /// Any row of the pair on this rail was bad.
    pub bad: bool,
    /// The health counters that moved on this node's end, `(counter, delta)` summed over the
    /// pair's rows on this rail ([`RailSummary::counters`]).
    pub counters: Vec<(String, u64)>,
}

/// One cell of the node × rail view: a node's rail with every pair it was measured in.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRail {
    pub node: String,
    pub nic: RailNic,
    pub partners: Vec<RailPartner>,
    /// The median of its first-pass figures (the second pass's when it has no first-pass one).
    pub median_bps: Option<f64>,
    /// The lowest figure of any pass.
    pub worst_bps: Option<f64>,
    /// `fail`: the score blamed it; `suspect`: bad with one partner only, not cleared; `pass`:
    /// measured and not blamed (bad rows whose blame is a partner's included); `unknown`: no
    /// figure.
    pub status: NodeStatus,
}

/// Every node's rails seen in `pairs`, sorted by node then rail number, with their status from
/// `verdicts`' `bad_rails`. Empty for a sweep without rails.
pub fn node_rails(pairs: &[PairResult], verdicts: &[NodeVerdict]) -> Vec<NodeRail> {
    let mut cells: BTreeMap<(String, usize, String), NodeRail> = BTreeMap::new();
    for r in pairs {
        let nodes = if r.pair.prefill == r.pair.decode {
            vec![&r.pair.prefill]
        } else {
            vec![&r.pair.prefill, &r.pair.decode]
        };
        for node in nodes {
            for (row, (end, moved)) in r
                .outcome
                .rails()
                .iter()
                .flat_map(|row| row.ends_on(r, node).into_iter().map(move |e| (row, e)))
            {
                let cell = cells
                    .entry((node.clone(), end.rail, end.key().to_string()))
                    .or_insert_with(|| NodeRail {
                        node: node.clone(),
                        nic: end.clone(),
                        partners: Vec::new(),
                        median_bps: None,
                        worst_bps: None,
                        status: NodeStatus::Unknown,
                    });
                let partner = r.pair.partner(node).to_string();
                match cell
                    .partners
                    .iter_mut()
                    .find(|p| p.partner == partner && p.pass == r.pass)
                {
                    Some(p) => {
                        p.bad |= row.bad();
                        p.bandwidth_bps = min_opt(p.bandwidth_bps, row.bandwidth_bps);
                        add_counters(&mut p.counters, moved);
                    }
                    None => cell.partners.push(RailPartner {
                        partner,
                        pass: r.pass,
                        bandwidth_bps: row.bandwidth_bps,
                        bad: row.bad(),
                        counters: moved.to_vec(),
                    }),
                }
            }
        }
    }
    let mut out: Vec<NodeRail> = cells.into_values().collect();
    for cell in &mut out {
        let figures = |pass: Option<u8>| -> Vec<f64> {
            cell.partners
                .iter()
                .filter(|p| pass.is_none_or(|n| p.pass == n))
                .filter_map(|p| p.bandwidth_bps)
                .collect()
        };
        let mut first = figures(Some(1));
        if first.is_empty() {
            first = figures(None);
        }
        cell.median_bps = crate::outliers::median(&mut first);
        cell.worst_bps = figures(None).into_iter().reduce(f64::min);
        let blamed = verdicts
            .iter()
            .filter(|v| v.node == cell.node)
            .flat_map(|v| &v.bad_rails)
            .find(|b| b.nic.key() == cell.nic.key());
        cell.status = match (blamed, cell.worst_bps) {
            (Some(b), _) => b.status,
            (None, Some(_)) => NodeStatus::Pass,
            (None, None) => NodeStatus::Unknown,
        };
    }
    out
}

/// Adds `more` into `sum`, counter by counter, keeping name order.
fn add_counters(sum: &mut Vec<(String, u64)>, more: &[(String, u64)]) {
    for (name, delta) in more {
        match sum.iter_mut().find(|(n, _)| n == name) {
            Some((_, total)) => *total = total.saturating_add(*delta),
            None => sum.push((name.clone(), *delta)),
        }
    }
    sum.sort();
}

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The value of `icb_kube::node_labels::BAD_RAILS_ANNOTATION` (written by `sweep --label-nodes`)
/// for a node: its blamed rails as `rail:key`, comma separated (`5:0000:9a:00.0,6:mlx5_6`), the key being the NIC's PCI address or, without one,
/// its name. `None` when no rail is blamed: the caller removes an earlier sweep's annotation, so
/// a repaired rail does not stay marked. Suspect rails are not written: a label is a verdict.
pub fn bad_rails_annotation(verdict: &NodeVerdict) -> Option<String> {
    let rails: Vec<String> = verdict
        .bad_rails
        .iter()
        .filter(|b| b.status == NodeStatus::Fail)
        .map(|b| format!("{}:{}", b.nic.rail, b.nic.key()))
        .collect();
    (!rails.is_empty()).then(|| rails.join(","))
}
