//! The rail judge on hand-made rows: attribution, alone reruns, the relative rule, findings.
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
        health: None,
        mismatches: Vec::new(),
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
        unreadable: vec![crate::rails::Unreadable {
            device: Some("mlx5_0:1".into()),
            why: "permission denied".into(),
        }],
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
