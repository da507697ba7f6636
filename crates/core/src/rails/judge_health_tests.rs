//! The NIC health counters in the rail verdict, on hand-made rows: each rule path triggers
//! where its counters moved and not where they did not (or were not read).
use crate::model::{BandwidthUnit, Status, VerdictStatus};
use crate::rails::judge::judge_rails;
use crate::rails::nic_health::rail::{RailHealth, TargetEnd};
use crate::rails::nic_health::rules::{RdmaEvidence, RdmaOp};
use crate::rails::nic_health::{Driver, HealthSnapshot, PortHealth};
use crate::rails::*;

fn end(rail: usize, node: &str) -> RailEnd {
    RailEnd {
        rail,
        node: node.into(),
        gpu: None,
        nic: NicRef {
            name: format!("mlx5_{rail}"),
            pci: None,
            port: 1,
            state: "ACTIVE/LinkUp".into(),
            rate_gbps: Some(400.0),
            link_layer: Some("Ethernet".into()),
            netdevs: vec![],
            numa_node: Some(0),
        },
        relation: None,
        ucx_net_devices: format!("mlx5_{rail}:1"),
        counter_device: format!("mlx5_{rail}:1"),
    }
}

/// One side's reading: every rail's port with `values` (name, value) on the rails listed.
fn snapshot(rails: usize, moved: &[(usize, &str, u64)]) -> HealthSnapshot {
    let names = [
        "np_cnp_sent",
        "rp_cnp_handled",
        "out_of_sequence",
        "packet_seq_err",
        "rx_read_requests",
    ];
    HealthSnapshot {
        ports: (0..rails)
            .map(|k| PortHealth {
                device: format!("mlx5_{k}:1"),
                drivers: vec![Driver::IbCore, Driver::Mlx5],
                values: names
                    .iter()
                    .map(|n| {
                        let by = moved.iter().find(|(r, m, _)| *r == k && m == n).map_or(0, |m| m.2);
                        (n.to_string(), 100 + by)
                    })
                    .collect(),
                unreadable: Default::default(),
            })
            .collect(),
        unreadable: None,
    }
}

/// Three rails at `gbps`, each with its health over the phase from `before` to `after` (the
/// same on both sides).
fn judged(gbps: [f64; 3], after: &HealthSnapshot, op: Option<RdmaOp>) -> RailsOutcome {
    let before = snapshot(3, &[]);
    let rows = (0..3)
        .map(|i| {
            let name = format!("mlx5_{i}:1");
            let mut health = RailHealth::read(Phase::Concurrent, (&name, &name), (&before, &before), (after, after));
            if let Some(op) = op {
                health.check_rdma(op, TargetEnd::Decode);
            }
            RailResult {
                index: i,
                prefill: end(i, "gpu-1"),
                decode: end(i, "gpu-2"),
                concurrent: RailRun {
                    bandwidth_bps: Some(gbps[i] * 1e9),
                    status: VerdictStatus::Pass,
                    reason: "ok".into(),
                    app_bytes: 1 << 30,
                    data_path: Some("rc_mlx5/mlx5_0:1".into()),
                    error: None,
                },
                alone: None,
                line_rate_share: None,
                attribution: None,
                health: Some(health),
                mismatches: Vec::new(),
                status: VerdictStatus::Pass,
            }
        })
        .collect();
    judge_rails(RailPattern::Aligned, rows, 0.2, BandwidthUnit::GBps)
}

fn kinds(out: &RailsOutcome, rail: usize) -> Vec<(RailFindingKind, Status)> {
    let mut k: Vec<_> = out
        .findings
        .iter()
        .filter(|f| f.rail == Some(rail))
        .map(|f| (f.kind, f.status))
        .collect();
    k.sort_by_key(|(k, _)| format!("{k:?}"));
    k
}

#[test]
fn a_slow_rail_whose_cnp_counters_moved_is_congested_first_naming_them_and_the_qos() {
    let out = judged([45.0, 10.0, 44.0], &snapshot(3, &[(1, "np_cnp_sent", 900)]), None);
    let first = &out.findings[0];
    assert_eq!(
        (first.kind, first.rail, first.status),
        (RailFindingKind::Congested, Some(1), Status::Fail)
    );
    assert!(
        first.text.contains("np_cnp_sent +900") && first.text.contains("mlx5_1:1"),
        "{}",
        first.text
    );
    assert!(first.fix.as_deref().unwrap().contains("PFC"), "{:?}", first.fix);
    assert_eq!(out.rails[1].health.as_ref().unwrap().cell(), "congested");
    for healthy in [0, 2] {
        assert_eq!(kinds(&out, healthy), vec![], "no finding on a healthy rail");
        assert_eq!(out.rails[healthy].health.as_ref().unwrap().cell(), "ok");
    }
}

#[test]
fn congestion_counters_on_a_fast_rail_are_no_finding() {
    // The fabric marked a few packets but the rail kept up: nothing to explain.
    let out = judged([45.0, 46.0, 44.0], &snapshot(3, &[(1, "np_cnp_sent", 900)]), None);
    assert_eq!(kinds(&out, 1), vec![]);
    assert!(out.findings.is_empty(), "{:?}", out.findings);
}

#[test]
fn sequence_errors_are_a_lossy_link_naming_the_port_warn_when_fast_fail_when_slow() {
    let lossy = snapshot(3, &[(2, "packet_seq_err", 37)]);
    let fast = judged([45.0, 46.0, 44.0], &lossy, None);
    // Both ends read the same snapshot here: one finding per side.
    assert_eq!(
        kinds(&fast, 2),
        vec![
            (RailFindingKind::LossyLink, Status::Warn),
            (RailFindingKind::LossyLink, Status::Warn)
        ]
    );
    let f = fast.findings.iter().find(|f| f.rail == Some(2)).unwrap();
    assert!(
        f.text.contains("lossy link on mlx5_2:1: packet_seq_err +37"),
        "{}",
        f.text
    );
    assert!(f.fix.as_deref().unwrap().contains("mlx5_2:1's cable"), "{:?}", f.fix);
    assert_eq!(fast.rails[2].status, VerdictStatus::Warn);
    assert_eq!(kinds(&fast, 0), vec![]);
    let slow = judged([45.0, 46.0, 9.0], &lossy, None);
    assert!(kinds(&slow, 2).contains(&(RailFindingKind::LossyLink, Status::Fail)));
    assert_eq!(
        slow.findings[0].kind,
        RailFindingKind::LossyLink,
        "it explains the figure: named first"
    );
}

#[test]
fn health_not_read_is_said_and_is_neither_a_finding_nor_ok() {
    let gone = HealthSnapshot::unread("the agent did not answer");
    let before = snapshot(3, &[]);
    let mut h = RailHealth::read(
        Phase::Alone,
        ("mlx5_0:1", "mlx5_0:1"),
        (&before, &gone),
        (&before, &gone),
    );
    assert!(h.decode.deltas.is_none());
    assert_eq!(
        h.decode.note.as_deref(),
        Some("health counters not read: the agent did not answer")
    );
    h.judge_ports(false);
    assert_eq!(
        h.cell(),
        "ok (part not read)",
        "the prefill side was read, the decode side not"
    );
    h.judge_ports(true);
    assert_eq!(
        h.cell(),
        "not explained (part not read)",
        "a slow rail is never `ok`: what was read does not explain it"
    );
    let nothing = HealthSnapshot::default();
    let mut none = RailHealth::read(
        Phase::Alone,
        ("mlx5_9:1", "mlx5_9:1"),
        (&nothing, &nothing),
        (&nothing, &nothing),
    );
    none.judge_ports(true);
    assert_eq!(none.cell(), "not read");
    assert!(none.prefill.note.as_deref().unwrap().contains("no port mlx5_9:1"));
    // A slow rail without counters: no congested or lossy finding, only the figure's.
    let out = judged([45.0, 9.0, 44.0], &HealthSnapshot::default(), None);
    assert!(
        out.findings.iter().all(|f| f.kind == RailFindingKind::BelowMedian),
        "{:?}",
        out.findings
    );
    assert_eq!(out.rails[1].health.as_ref().unwrap().cell(), "not read");
}

#[test]
fn read_requests_confirm_a_read_case_and_contradict_a_write_case() {
    let reads = snapshot(
        3,
        &[
            (0, "rx_read_requests", 512),
            (1, "rx_read_requests", 512),
            (2, "rx_read_requests", 512),
        ],
    );
    let read = judged([45.0, 46.0, 44.0], &reads, Some(RdmaOp::Read));
    let rdma = read.rails[0].health.as_ref().unwrap().rdma.as_ref().unwrap();
    assert_eq!(rdma.evidence, RdmaEvidence::Confirmed);
    assert!(read.findings.is_empty(), "{:?}", read.findings);
    let write = judged([45.0, 46.0, 44.0], &reads, Some(RdmaOp::Write));
    assert_eq!(kinds(&write, 0), vec![(RailFindingKind::NotRdma, Status::Warn)]);
    assert!(
        write.findings[0].text.contains("rx_read_requests +512"),
        "{}",
        write.findings[0].text
    );
    assert_eq!(write.rails[0].health.as_ref().unwrap().cell(), "not RDMA");
    // A read whose requests never reached the target NIC.
    let quiet = judged([45.0, 46.0, 44.0], &snapshot(3, &[]), Some(RdmaOp::Read));
    assert_eq!(kinds(&quiet, 1), vec![(RailFindingKind::NotRdma, Status::Warn)]);
}

#[test]
fn a_rails_json_without_health_still_parses_and_health_round_trips() {
    let out = judged([45.0, 10.0, 44.0], &snapshot(3, &[(1, "np_cnp_sent", 9)]), None);
    let mut v = serde_json::to_value(&out).unwrap();
    assert_eq!(v["rails"][1]["health"]["prefill"]["device"], "mlx5_1:1");
    assert_eq!(v["rails"][1]["health"]["prefill"]["findings"][0]["kind"], "congested");
    assert_eq!(v["findings"][0]["kind"], "congested");
    let back: RailsOutcome = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(back, out);
    v["rails"][1].as_object_mut().unwrap().remove("health");
    let old: RailsOutcome = serde_json::from_value(v).unwrap();
    assert!(old.rails[1].health.is_none());
}

#[test]
fn a_rail_whose_two_ports_disagree_on_the_mtu_warns_naming_both_values_and_the_fix() {
    use crate::readiness::{PortReadiness, ReadinessField, compare_ports};
    let port = |name: &str, mtu: u32| PortReadiness {
        port: name.into(),
        link_layer: Some("Ethernet".into()),
        netdev_mtu: Some(mtu),
        ..Default::default()
    };
    // Another port name on each end (the cross pattern): each side is named with its own.
    let c = compare_ports(
        "prefill mlx5_1:1",
        &port("mlx5_1:1", 9000),
        "decode mlx5_3:1",
        &port("mlx5_3:1", 1500),
    );
    assert_eq!(c.mismatches.len(), 1, "{c:?}");
    assert_eq!(c.mismatches[0].field, ReadinessField::NetdevMtu);
    let text = "prefill mlx5_1:1 netdev MTU 9000, decode mlx5_3:1 netdev MTU 1500";
    assert_eq!(c.mismatches[0].to_string(), text);
    let mut out = judged([45.0, 44.0, 45.5], &snapshot(3, &[]), None);
    assert!(out.findings.iter().all(|f| f.kind != RailFindingKind::Mismatch));
    let mut rows = std::mem::take(&mut out.rails);
    rows[1].mismatches = c.mismatches;
    let out = judge_rails(RailPattern::Aligned, rows, 0.2, BandwidthUnit::GBps);
    assert_eq!(kinds(&out, 1), vec![(RailFindingKind::Mismatch, Status::Warn)]);
    let found = out
        .findings
        .iter()
        .find(|f| f.kind == RailFindingKind::Mismatch)
        .unwrap();
    assert!(
        found.text.starts_with("rail 1: gpu-1:mlx5_1") && found.text.ends_with(text),
        "{}",
        found.text
    );
    assert!(found.fix.as_deref().unwrap().contains("one MTU"), "{:?}", found.fix);
    assert_eq!(out.rails[1].status, VerdictStatus::Warn);
    assert!(kinds(&out, 0).is_empty() && kinds(&out, 2).is_empty());
}

#[test]
fn a_congested_rail_beside_a_lossy_one_is_congested_though_the_median_is_a_faulty_rails() {
    // Issue 40's run: 3 rails, rail 1 lossy (slower still), rail 2 shaped to 200 Mbit/s. The
    // median is rail 2's own figure, so it was never "below the median": its CNP counters were
    // not judged and its health read `ok`. The clean rail (0) is the reference now.
    let faults = snapshot(3, &[(1, "packet_seq_err", 40), (2, "rp_cnp_handled", 900)]);
    let out = judged([1.0, 0.011, 0.0234], &faults, None);
    assert!(
        (out.median_bps - 0.0234e9).abs() < 1.0,
        "the median is the congested rail's"
    );
    assert!(
        kinds(&out, 2).contains(&(RailFindingKind::Congested, Status::Fail)),
        "{:?}",
        out.findings
    );
    assert_eq!(out.rails[2].health.as_ref().unwrap().cell(), "congested");
    assert_eq!(out.rails[2].status, VerdictStatus::Fail);
    assert!(kinds(&out, 1).contains(&(RailFindingKind::LossyLink, Status::Fail)));
    assert_eq!(out.rails[1].health.as_ref().unwrap().cell(), "lossy");
    assert_eq!(kinds(&out, 0), vec![]);
    assert_eq!(out.rails[0].health.as_ref().unwrap().cell(), "ok");
}

#[test]
fn a_slow_rail_whose_counters_did_not_move_is_not_explained_never_ok() {
    let out = judged([45.0, 9.0, 44.0], &snapshot(3, &[]), None);
    let health = out.rails[1].health.as_ref().unwrap();
    assert!(health.slow);
    assert_eq!(health.cell(), "not explained");
    assert_eq!(out.rails[0].health.as_ref().unwrap().cell(), "ok");
    let v = serde_json::to_value(&out).unwrap();
    assert_eq!(v["rails"][1]["health"]["slow"], true);
    assert!(v["rails"][0]["health"].get("slow").is_none(), "absent: not slow");
}
