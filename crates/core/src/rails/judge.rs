//! Judging a node pair's rails: where each rail's bytes went by the NICs' counters
//! ([`attribute`]), which rails must also run alone ([`needs_alone`]), and the per-rail verdicts
//! with the findings that name the rail and the fix ([`judge_rails`]). Pure: the pair pipeline
//! (`icb_pair::rails`) runs the rails and reads the counters.

use super::counters::NicTraffic;
use super::nic_health::Indicates;
use super::outcome::*;
use crate::model::{BandwidthUnit, Status, VerdictStatus};
use crate::units::format_bandwidth;

/// Shares are of the application's bytes (headers and ACKs put a healthy rail's own NIC a little
/// above 1).
/// A device carrying less than this share of its rail's bytes carried "~0".
const IDLE_SHARE: f64 = 0.05;
/// Below this share of its rail's bytes on its own device, concurrently, a rail is suspect and
/// runs alone, where every counted byte is its own.
const SUSPECT_SHARE: f64 = 0.5;
/// Another device carrying more than this share of a rail's bytes (alone) took the rail's
/// traffic.
const STOLEN_SHARE: f64 = 0.5;
/// Counted bytes below this share of the application's bytes: the counters do not see this
/// traffic (RDMA bytes on a netdev counter, a counter that stopped): not attributed.
const UNDERCOUNT_SHARE: f64 = 0.5;
/// Devices below this share are left out of the evidence list.
const NOTICEABLE_SHARE: f64 = 0.01;
/// aggregate ÷ Σ(alone) below this: the node funnels its rails (a PCIe switch, a NUMA link).
const FUNNEL_SCALING: f64 = 0.7;

/// What one node's counters showed over one phase.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SideTraffic {
    pub traffic: Vec<NicTraffic>,
    /// Counters that could not be read, with why.
    pub unreadable: Vec<super::counters::Unreadable>,
}

/// A rail end's device and the rail it belongs to on that node, for naming who carried bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRails {
    /// (rail number, counter device) of every rail of the node.
    pub devices: Vec<(usize, String)>,
}

impl NodeRails {
    fn rail_of(&self, device: &str) -> Option<usize> {
        self.devices.iter().find(|(_, d)| d == device).map(|(r, _)| *r)
    }
}

/// Where one side's bytes of a rail went over a phase. Concurrently only the rail's own device
/// is this rail's (the others carry the other rails); alone, every device's bytes are.
pub fn attribute(
    end: &RailEnd,
    node: &NodeRails,
    seen: &SideTraffic,
    app_bytes: u64,
    phase_app_bytes: u64,
    phase: Phase,
) -> SideAttribution {
    let not_attributed = |note: String| SideAttribution {
        status: AttributionStatus::NotAttributed,
        devices: Vec::new(),
        note: Some(note),
    };
    if app_bytes == 0 {
        return not_attributed("the rail moved no bytes".into());
    }
    let Some(own) = seen.traffic.iter().find(|t| t.device == end.counter_device) else {
        let why = seen
            .unreadable
            .iter()
            .find(|u| u.concerns(&end.counter_device))
            .map_or_else(
                || format!("no counters for {}", end.counter_device),
                ToString::to_string,
            );
        return not_attributed(why);
    };
    let counted: u64 = seen.traffic.iter().map(NicTraffic::bytes).sum();
    if (counted as f64) < UNDERCOUNT_SHARE * phase_app_bytes as f64 {
        return not_attributed(format!(
            "the counters show {counted} bytes for {phase_app_bytes} bytes moved: they do not see this traffic"
        ));
    }
    let share = |t: &NicTraffic| DeviceShare {
        device: t.device.clone(),
        pci: t.pci.clone(),
        rail: node.rail_of(&t.device),
        bytes: t.bytes(),
        share: t.bytes() as f64 / app_bytes as f64,
    };
    let mut devices: Vec<DeviceShare> = match phase {
        Phase::Concurrent => vec![share(own)],
        Phase::Alone => seen
            .traffic
            .iter()
            .map(share)
            .filter(|d| d.share >= NOTICEABLE_SHARE || d.device == end.counter_device)
            .collect(),
    };
    devices.sort_by_key(|d| std::cmp::Reverse(d.bytes));
    SideAttribution {
        status: AttributionStatus::Counted,
        devices,
        note: None,
    }
}

fn own_share(side: &SideAttribution, end: &RailEnd) -> Option<f64> {
    (side.status == AttributionStatus::Counted).then(|| {
        side.devices
            .iter()
            .find(|d| d.device == end.counter_device)
            .map_or(0.0, |d| d.share)
    })
}

/// The median of the figures (bytes/s) of the rows that have one.
pub fn median(figures: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = figures.into_iter().filter(|f| f.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

/// The rows that must also run alone: slower than `margin` below the median concurrently, or
/// whose own devices carried too little of their bytes while the counters saw the traffic.
pub fn needs_alone(rows: &[RailResult], margin: f64) -> Vec<usize> {
    let med = median(rows.iter().filter_map(|r| r.concurrent.bandwidth_bps));
    rows.iter()
        .filter(|r| {
            let slow = matches!((r.concurrent.bandwidth_bps, med), (Some(bw), Some(m)) if rows.len() > 1 && bw < m * (1.0 - margin));
            let misrouted = r.attribution.as_ref().is_some_and(|a| {
                own_share(&a.prefill, &r.prefill).is_some_and(|s| s < SUSPECT_SHARE)
                    || own_share(&a.decode, &r.decode).is_some_and(|s| s < SUSPECT_SHARE)
            });
            slow || misrouted
        })
        .map(|r| r.index)
        .collect()
}

/// Judges every row (attribution already filled in, alone runs done) and the node pair.
pub fn judge_rails(pattern: RailPattern, mut rows: Vec<RailResult>, margin: f64, unit: BandwidthUnit) -> RailsOutcome {
    let figures: Vec<f64> = rows.iter().filter_map(|r| r.concurrent.bandwidth_bps).collect();
    let median_bps = median(figures.iter().copied()).unwrap_or(0.0);
    let clean_median_bps = clean_median(&rows);
    let aggregate_bps: f64 = figures.iter().sum();
    let all_alone: Option<Vec<f64>> = rows
        .iter()
        .map(|r| r.alone.as_ref().and_then(|a| a.bandwidth_bps))
        .collect();
    let sum_alone_bps = all_alone.map(|v| v.iter().sum::<f64>());
    let mut findings = Vec::new();
    let others: Vec<String> = rows.iter().map(|r| others_text(&rows, r.index, unit)).collect();
    for (row, others) in rows.iter_mut().zip(&others) {
        row.line_rate_share = line_rate_share(row);
        let before = findings.len();
        let ctx = RowContext {
            median_bps,
            clean_median_bps,
            margin,
            unit,
            relative: figures.len() > 1,
            others,
        };
        row_findings(row, &ctx, &mut findings);
        let slow = is_slow(row, &ctx);
        super::judge_health::health_findings(row, slow, &mut findings);
        super::judge_health::mismatch_findings(row, &mut findings);
        let worst = findings[before..].iter().map(|f| f.status).max();
        row.status = match (worst, row.concurrent.status) {
            (Some(Status::Fail), _) | (_, VerdictStatus::Fail) => VerdictStatus::Fail,
            (Some(Status::Warn), _) | (_, VerdictStatus::Warn) => VerdictStatus::Warn,
            _ => row.concurrent.status,
        };
    }
    if let Some(sum) = sum_alone_bps.filter(|s| *s > 0.0)
        && aggregate_bps / sum < FUNNEL_SCALING
    {
        findings.push(RailFinding {
            kind: RailFindingKind::Funnel,
            status: Status::Warn,
            rail: None,
            text: format!(
                "all rails together move {}, {:.0} % of the {} they move one at a time",
                format_bandwidth(aggregate_bps, unit),
                100.0 * aggregate_bps / sum,
                format_bandwidth(sum, unit)
            ),
            fix: Some("the node funnels its rails: check GPU/NIC PCIe placement and NUMA (`ic-bench probe node` shows the rail map)".into()),
        });
    }
    // Worst first; within a status the most specific evidence first (where the bytes went
    // before how fast they went, a rail's own figure before its floor verdict).
    findings.sort_by_key(|f| (std::cmp::Reverse(f.status), kind_order(f.kind)));
    RailsOutcome {
        pattern,
        rails: rows,
        aggregate_bps,
        sum_alone_bps,
        median_bps,
        margin,
        findings,
    }
}

fn kind_order(kind: RailFindingKind) -> u8 {
    match kind {
        RailFindingKind::Failed => 0,
        RailFindingKind::WrongNic => 1,
        RailFindingKind::OffRail => 2,
        RailFindingKind::IdleNic => 3,
        // The NIC's own counters explain a slow rail: named before the figure they explain.
        RailFindingKind::Congested => 4,
        RailFindingKind::LossyLink => 5,
        RailFindingKind::BelowMedian => 6,
        RailFindingKind::Verdict => 7,
        RailFindingKind::Contention => 8,
        RailFindingKind::NotRdma => 9,
        RailFindingKind::Mismatch => 10,
        RailFindingKind::Funnel => 11,
        RailFindingKind::NotAttributed => 12,
        // About how the node's devices are published, not how this run's bytes went.
        RailFindingKind::PcieRootMismatch => 13,
    }
}

/// Adds findings made outside the judge (the nodes' ResourceSlices against their PCI trees)
/// to a judged outcome, in the judge's order: worst first, then by kind.
pub fn add_findings(outcome: &mut RailsOutcome, extra: Vec<RailFinding>) {
    outcome.findings.extend(extra);
    outcome
        .findings
        .sort_by_key(|f| (std::cmp::Reverse(f.status), kind_order(f.kind)));
}

/// `24 %`, or `0.3 %` below one percent.
fn percent(share: f64) -> String {
    if share < 0.001 {
        "<0.1 %".into()
    } else if share < 0.01 {
        format!("{:.1} %", 100.0 * share)
    } else {
        format!("{:.0} %", 100.0 * share)
    }
}

/// `others 44–46 GB/s`: the figures of every other row, for a slow rail's line.
fn others_text(rows: &[RailResult], index: usize, unit: BandwidthUnit) -> String {
    let rest: Vec<f64> = rows
        .iter()
        .filter(|r| r.index != index)
        .filter_map(|r| r.concurrent.bandwidth_bps)
        .collect();
    match (
        rest.iter().copied().reduce(f64::min),
        rest.iter().copied().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) if (hi - lo) / hi.max(1.0) < 0.01 => format!("others {}", format_bandwidth(lo, unit)),
        (Some(lo), Some(hi)) => format!(
            "others {}–{}",
            crate::units::bandwidth_value(lo, unit),
            format_bandwidth(hi, unit)
        ),
        _ => "no other rail measured".into(),
    }
}

/// The slower end's line rate in Gb/s (sysfs `rate`), when either end knows it.
fn line_rate_gbps(row: &RailResult) -> Option<f64> {
    [row.prefill.nic.rate_gbps, row.decode.nic.rate_gbps]
        .into_iter()
        .flatten()
        .filter(|r| *r > 0.0)
        .reduce(f64::min)
}

fn line_rate_share(row: &RailResult) -> Option<f64> {
    let bw = row.concurrent.bandwidth_bps?;
    Some(bw * 8.0 / (line_rate_gbps(row)? * 1e9))
}

struct RowContext<'a> {
    median_bps: f64,
    /// [`clean_median`]: the rails' reference for the NIC counters' rules.
    clean_median_bps: Option<f64>,
    margin: f64,
    unit: BandwidthUnit,
    /// The relative rule needs at least two rails to compare.
    relative: bool,
    others: &'a str,
}

/// `rail 5: GPU5 mlx5_5 (0000:9a:00.0) ↔ GPU5 mlx5_5 (0000:9a:00.0)`, shortened when both ends
/// look alike.
pub fn rail_name(row: &RailResult) -> String {
    let end = |e: &RailEnd| {
        let gpu = e.gpu.as_ref().map(|g| format!("GPU{} ", g.ordinal)).unwrap_or_default();
        let pci = e.nic.pci.as_ref().map(|p| format!(" ({p})")).unwrap_or_default();
        format!("{}:{gpu}{}{pci}", e.node, e.nic.name)
    };
    format!("rail {}: {} ↔ {}", row.index, end(&row.prefill), end(&row.decode))
}

fn probe_fix(row: &RailResult) -> String {
    format!(
        "check the ports: `ic-bench probe node --node {}` and `--node {}` show their state",
        row.prefill.node, row.decode.node
    )
}

/// Whether the rail was slow, for the NIC counters' rules: more than the margin below the
/// rails' reference (alone too when it ran alone), or, with no other rail to compare, its own
/// verdict failed. The reference is the higher of the median and the median of the rails whose
/// own counters show no fault: with three rails, one lossy and one congested, the median can be
/// a faulty rail's figure, and the congested rail was then never below it (issue 40: a
/// 200 Mbit/s rail shown as health `ok`). Not its verdict where rails compare: every emulated
/// rail fails its floor over TCP, which says nothing about its counters.
fn is_slow(row: &RailResult, ctx: &RowContext) -> bool {
    if !ctx.relative {
        return row.concurrent.status == VerdictStatus::Fail;
    }
    let reference = ctx.median_bps.max(ctx.clean_median_bps.unwrap_or(0.0));
    let below = |bw: Option<f64>| bw.is_some_and(|bw| bw < reference * (1.0 - ctx.margin));
    below(row.concurrent.bandwidth_bps) && row.alone.as_ref().is_none_or(|a| below(a.bandwidth_bps))
}

/// The median of the rows whose health was read on both ends with no loss, link-fault or
/// congestion counter moving; `None` when no row is known clean (a row not read is not clean).
fn clean_median(rows: &[RailResult]) -> Option<f64> {
    let clean = |row: &RailResult| {
        row.health.as_ref().is_some_and(|h| {
            [&h.prefill, &h.decode].into_iter().all(|side| {
                side.deltas.as_ref().is_some_and(|d| {
                    let faults = [Indicates::Loss, Indicates::LinkFault, Indicates::Congestion];
                    d.any_read(Indicates::Loss) && faults.into_iter().all(|what| d.moved(what).is_empty())
                })
            })
        })
    };
    median(
        rows.iter()
            .filter(|r| clean(r))
            .filter_map(|r| r.concurrent.bandwidth_bps),
    )
}

fn row_findings(row: &RailResult, ctx: &RowContext, out: &mut Vec<RailFinding>) {
    let RowContext {
        median_bps,
        margin,
        unit,
        relative,
        others,
        ..
    } = *ctx;
    let name = rail_name(row);
    let mut push = |kind, status, text: String, fix: Option<String>| {
        out.push(RailFinding {
            kind,
            status,
            rail: Some(row.index),
            text,
            fix,
        })
    };
    if let Some(err) = &row.concurrent.error {
        push(
            RailFindingKind::Failed,
            Status::Fail,
            format!("{name}: {err}"),
            Some(probe_fix(row)),
        );
        return;
    }
    if row.concurrent.status == VerdictStatus::Fail {
        push(
            RailFindingKind::Verdict,
            Status::Fail,
            format!("{name}: {}", row.concurrent.reason),
            None,
        );
    }
    if let Some(bw) = row.concurrent.bandwidth_bps
        && relative
        && bw < median_bps * (1.0 - margin)
    {
        let rate = row
            .line_rate_share
            .map(|s| format!(", {} of {}", percent(s), line_rate_text(row)))
            .unwrap_or_default();
        let alone = row.alone.as_ref().and_then(|a| a.bandwidth_bps);
        let text = format!("{name}: {}{rate}, {others}", format_bandwidth(bw, unit));
        match alone {
            Some(a) if a >= median_bps * (1.0 - margin) => push(
                RailFindingKind::Contention,
                Status::Warn,
                format!("{text}; alone {}: contention, not the rail", format_bandwidth(a, unit)),
                Some("rails share a PCIe switch or NUMA link: check the rail map (`ic-bench probe node`)".into()),
            ),
            Some(a) => push(
                RailFindingKind::BelowMedian,
                Status::Fail,
                format!("{text}; alone {}", format_bandwidth(a, unit)),
                Some(probe_fix(row)),
            ),
            None => push(RailFindingKind::BelowMedian, Status::Fail, text, Some(probe_fix(row))),
        }
    }
    if let Some(att) = &row.attribution {
        for (side, attr, end) in [
            ("prefill", &att.prefill, &row.prefill),
            ("decode", &att.decode, &row.decode),
        ] {
            attribution_findings(&name, side, attr, end, att.phase, &mut push);
        }
    }
}

/// What a rank should be told for its own NIC: its RDMA port, or the network device where the
/// NIC shows only as one (its counters are the netdev's).
fn own_device(end: &RailEnd) -> String {
    if end.counter_device == end.nic.port_name() {
        end.nic.port_name()
    } else {
        end.counter_device.clone()
    }
}

fn line_rate_text(row: &RailResult) -> String {
    line_rate_gbps(row).map(|r| format!("{r} Gb/s")).unwrap_or_default()
}

fn attribution_findings(
    name: &str,
    side: &str,
    attr: &SideAttribution,
    end: &RailEnd,
    phase: Phase,
    push: &mut dyn FnMut(RailFindingKind, Status, String, Option<String>),
) {
    if attr.status == AttributionStatus::NotAttributed {
        let why = attr.note.clone().unwrap_or_default();
        push(
            RailFindingKind::NotAttributed,
            Status::Warn,
            format!("{name}: {side} bytes not attributed ({why})"),
            None,
        );
        return;
    }
    let own = attr
        .devices
        .iter()
        .find(|d| d.device == end.counter_device)
        .map_or(0.0, |d| d.share);
    if own >= IDLE_SHARE {
        return;
    }
    let thief = attr
        .devices
        .iter()
        .find(|d| d.device != end.counter_device && d.share > STOLEN_SHARE);
    let told = if end.ucx_net_devices.is_empty() {
        "UCX_NET_DEVICES unset".to_string()
    } else {
        format!("UCX_NET_DEVICES={}", end.ucx_net_devices)
    };
    match (phase, thief) {
        (Phase::Alone, Some(d)) if d.rail.is_some() => push(
            RailFindingKind::WrongNic,
            Status::Fail,
            format!(
                "{name}: {side} bytes went through {} (rail {}'s NIC, {:.0} %), not {} ({told})",
                d.device,
                d.rail.unwrap_or_default(),
                100.0 * d.share,
                end.counter_device
            ),
            Some(format!(
                "set UCX_NET_DEVICES per rank to the rank's own NIC ({}) on {}",
                own_device(end),
                end.node
            )),
        ),
        (Phase::Alone, Some(d)) => push(
            RailFindingKind::OffRail,
            Status::Fail,
            format!(
                "{name}: {side} bytes went through {} ({:.0} %), which is no rail's NIC: the RDMA path was not used",
                d.device,
                100.0 * d.share
            ),
            Some(format!(
                "check that {told} names an RDMA port the rank can open on {}",
                end.node
            )),
        ),
        _ => push(
            RailFindingKind::IdleNic,
            Status::Fail,
            format!(
                "{name}: {side} NIC {} carried ~0 bytes ({:.1} % of the rail's)",
                end.counter_device,
                100.0 * own
            ),
            Some(format!("check that {told} reaches the rank on {}", end.node)),
        ),
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
