//! Judging a node pair's rails: where each rail's bytes went by the NICs' counters
//! ([`attribute`]), which rails must also run alone ([`needs_alone`]), and the per-rail verdicts
//! with the findings that name the rail and the fix ([`judge_rails`]). Pure: the pair pipeline
//! (`icb_pair::rails`) runs the rails and reads the counters.

use super::counters::NicTraffic;
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
    /// Devices whose counters could not be read, with why.
    pub unreadable: Vec<String>,
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
            .find(|u| u.contains(&end.counter_device))
            .cloned()
            .unwrap_or_else(|| format!("no counters for {}", end.counter_device));
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
            margin,
            unit,
            relative: figures.len() > 1,
            others,
        };
        row_findings(row, &ctx, &mut findings);
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
        RailFindingKind::BelowMedian => 4,
        RailFindingKind::Verdict => 5,
        RailFindingKind::Contention => 6,
        RailFindingKind::Funnel => 7,
        RailFindingKind::NotAttributed => 8,
    }
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

fn row_findings(row: &RailResult, ctx: &RowContext, out: &mut Vec<RailFinding>) {
    let RowContext {
        median_bps,
        margin,
        unit,
        relative,
        others,
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
    if end.counter_device.contains(':') {
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
mod tests {
    use super::*;
    use crate::rails::{CounterKind, NicRef};

    fn end(rail: usize, node: &str) -> RailEnd {
        RailEnd {
            rail,
            node: node.into(),
            gpu: None,
            nic: NicRef {
                name: format!("mlx5_{rail}"),
                pci: Some(format!("0000:{:02x}:00.0", 0x18 + rail)),
                port: 1,
                state: "ACTIVE/LinkUp".into(),
                rate_gbps: Some(400.0),
                link_layer: Some("InfiniBand".into()),
                netdevs: vec![],
                numa_node: Some(0),
            },
            relation: None,
            ucx_net_devices: format!("mlx5_{rail}:1"),
            counter_device: format!("mlx5_{rail}:1"),
        }
    }

    fn run(gbps: f64) -> RailRun {
        RailRun {
            bandwidth_bps: Some(gbps * 1e9),
            status: VerdictStatus::Pass,
            reason: "ok".into(),
            app_bytes: 1_000_000,
            data_path: Some("rc_mlx5".into()),
            error: None,
        }
    }

    fn row(i: usize, gbps: f64) -> RailResult {
        RailResult {
            index: i,
            prefill: end(i, "gpu-1"),
            decode: end(i, "gpu-2"),
            concurrent: run(gbps),
            alone: None,
            line_rate_share: None,
            attribution: None,
            status: VerdictStatus::Pass,
        }
    }

    fn traffic(device: &str, bytes: u64) -> NicTraffic {
        NicTraffic {
            device: device.into(),
            pci: None,
            kind: CounterKind::IbPort,
            tx_bytes: bytes,
            rx_bytes: 0,
        }
    }

    fn node(k: usize) -> NodeRails {
        NodeRails {
            devices: (0..k).map(|i| (i, format!("mlx5_{i}:1"))).collect(),
        }
    }

    #[test]
    fn a_slow_rail_is_named_with_its_nic_line_rate_and_the_others() {
        let rows = vec![row(0, 45.0), row(1, 46.0), row(2, 11.8), row(3, 44.0)];
        assert_eq!(needs_alone(&rows, 0.2), vec![2]);
        let mut rows = rows;
        rows[2].alone = Some(run(11.9));
        let out = judge_rails(RailPattern::Aligned, rows, 0.2, BandwidthUnit::GBps);
        assert_eq!(out.rails[2].status, VerdictStatus::Fail);
        assert!(
            out.rails
                .iter()
                .filter(|r| r.index != 2)
                .all(|r| r.status == VerdictStatus::Pass)
        );
        let f = &out.findings[0];
        assert_eq!((f.kind, f.rail), (RailFindingKind::BelowMedian, Some(2)));
        assert!(
            f.text.starts_with("rail 2: gpu-1:mlx5_2 (0000:1a:00.0) ↔ gpu-2:mlx5_2"),
            "{}",
            f.text
        );
        assert!(
            f.text
                .contains(": 11.80 GB/s, 24 % of 400 Gb/s, others 44.00–46.00 GB/s; alone 11.90 GB/s"),
            "{}",
            f.text
        );
        assert!(f.fix.as_deref().unwrap().contains("--node gpu-1"));
        assert_eq!(out.aggregate_bps, (45.0 + 46.0 + 11.8 + 44.0) * 1e9);
        assert_eq!(out.sum_alone_bps, None, "only one rail ran alone");
    }

    #[test]
    fn slow_only_together_is_contention_and_a_funnel_warns() {
        let mut rows: Vec<RailResult> = vec![row(0, 20.0), row(1, 40.0), row(2, 40.0)];
        for r in &mut rows {
            r.alone = Some(run(45.0));
        }
        let out = judge_rails(RailPattern::Aligned, rows, 0.2, BandwidthUnit::GBps);
        assert_eq!(out.rails[0].status, VerdictStatus::Warn);
        let kinds: Vec<_> = out.findings.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            vec![RailFindingKind::Contention],
            "100 of 135 alone is no funnel"
        );
        assert_eq!(out.scaling().map(|s| (s * 100.0).round()), Some(74.0));

        let mut rows: Vec<RailResult> = vec![row(0, 20.0), row(1, 20.0), row(2, 20.0)];
        for r in &mut rows {
            r.alone = Some(run(45.0));
        }
        let out = judge_rails(RailPattern::Aligned, rows, 0.2, BandwidthUnit::GBps);
        assert_eq!(out.findings.len(), 1);
        assert_eq!(
            (out.findings[0].kind, out.findings[0].rail),
            (RailFindingKind::Funnel, None)
        );
        assert!(
            out.findings[0].text.contains("44 % of the 135.00 GB/s"),
            "{}",
            out.findings[0].text
        );
    }

    #[test]
    fn one_rail_has_no_relative_rule() {
        let out = judge_rails(RailPattern::Aligned, vec![row(0, 1.0)], 0.2, BandwidthUnit::GBps);
        assert!(out.findings.is_empty());
        assert_eq!(out.rails[0].status, VerdictStatus::Pass);
        assert!(needs_alone(&out.rails, 0.2).is_empty());
    }

    #[test]
    fn counters_catch_bytes_on_another_rails_nic() {
        let r = row(1, 40.0);
        let conc = SideTraffic {
            traffic: vec![
                traffic("mlx5_0:1", 1_000_000),
                traffic("mlx5_1:1", 0),
                traffic("mlx5_2:1", 2_050_000),
            ],
            unreadable: vec![],
        };
        let a = attribute(&r.prefill, &node(3), &conc, 1_000_000, 3_000_000, Phase::Concurrent);
        assert_eq!(a.status, AttributionStatus::Counted);
        assert_eq!(a.devices.len(), 1, "concurrently only the own device is this rail's");
        let mut r = r;
        r.attribution = Some(Attribution {
            phase: Phase::Concurrent,
            app_bytes: 1_000_000,
            prefill: a.clone(),
            decode: a,
        });
        assert_eq!(needs_alone(std::slice::from_ref(&r), 0.2), vec![1]);
        let alone = SideTraffic {
            traffic: vec![
                traffic("mlx5_1:1", 0),
                traffic("mlx5_2:1", 1_030_000),
                traffic("eth0", 900),
            ],
            unreadable: vec![],
        };
        let a = attribute(&r.prefill, &node(3), &alone, 1_000_000, 1_000_000, Phase::Alone);
        assert_eq!(a.devices[0].device, "mlx5_2:1");
        assert_eq!(a.devices[0].rail, Some(2));
        assert!(a.devices.iter().all(|d| d.device != "eth0"), "below 1 % is left out");
        assert!(
            a.devices.iter().any(|d| d.device == "mlx5_1:1"),
            "the own device is always listed"
        );
        r.alone = Some(run(40.0));
        r.attribution = Some(Attribution {
            phase: Phase::Alone,
            app_bytes: 1_000_000,
            prefill: a.clone(),
            decode: a,
        });
        let out = judge_rails(RailPattern::Aligned, vec![r], 0.2, BandwidthUnit::GBps);
        let f = &out.findings[0];
        assert_eq!(f.kind, RailFindingKind::WrongNic);
        assert!(
            f.text
                .contains("went through mlx5_2:1 (rail 2's NIC, 103 %), not mlx5_1:1"),
            "{}",
            f.text
        );
        assert_eq!(out.rails[0].status, VerdictStatus::Fail);
    }

    #[test]
    fn payload_on_eth0_is_off_rail_and_undercounting_is_not_attributed() {
        let r = row(0, 1.0);
        let alone = SideTraffic {
            traffic: vec![traffic("mlx5_0:1", 10), traffic("eth0", 1_100_000)],
            unreadable: vec![],
        };
        let a = attribute(&r.decode, &node(1), &alone, 1_000_000, 1_000_000, Phase::Alone);
        let mut r2 = r.clone();
        r2.attribution = Some(Attribution {
            phase: Phase::Alone,
            app_bytes: 1_000_000,
            prefill: a.clone(),
            decode: a,
        });
        let out = judge_rails(RailPattern::Aligned, vec![r2], 0.2, BandwidthUnit::GBps);
        assert_eq!(out.findings[0].kind, RailFindingKind::OffRail);
        assert!(out.findings[0].text.contains("eth0"));

        let few = SideTraffic {
            traffic: vec![traffic("mlx5_0:1", 100)],
            unreadable: vec![],
        };
        let a = attribute(&r.decode, &node(1), &few, 1_000_000, 1_000_000, Phase::Alone);
        assert_eq!(a.status, AttributionStatus::NotAttributed);
        assert!(a.note.unwrap().contains("do not see this traffic"));
        let none = SideTraffic {
            traffic: vec![],
            unreadable: vec!["mlx5_0:1: permission denied".into()],
        };
        let a = attribute(&r.decode, &node(1), &none, 1_000_000, 1_000_000, Phase::Concurrent);
        assert_eq!(a.note.as_deref(), Some("mlx5_0:1: permission denied"));
    }

    #[test]
    fn a_failed_rail_fails_and_the_median_ignores_it() {
        let mut rows = vec![row(0, 40.0), row(1, 40.0)];
        rows[1].concurrent = RailRun {
            bandwidth_bps: None,
            status: VerdictStatus::Fail,
            reason: String::new(),
            app_bytes: 0,
            data_path: None,
            error: Some("the prefill side could not reach the decode side".into()),
        };
        let out = judge_rails(RailPattern::Aligned, rows, 0.2, BandwidthUnit::GBps);
        assert_eq!(out.median_bps, 40e9);
        assert_eq!(out.findings.len(), 1);
        assert_eq!(out.findings[0].kind, RailFindingKind::Failed);
        assert_eq!(out.rails[1].status, VerdictStatus::Fail);
        assert_eq!(median([3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median([]), None);
    }
}
