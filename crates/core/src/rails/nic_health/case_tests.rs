use super::*;
use crate::rails::nic_health::rules::HealthKind;

fn snap(json: &str) -> HealthSnapshot {
    serde_json::from_str(json).unwrap()
}

/// Two mlx5 ports: `mlx5_0:1` quiet, `mlx5_1:1` with `np_cnp_sent`, `rx_read_requests` and
/// `out_of_sequence` as given.
fn two_ports(cnp: u64, reads: u64, ooo: u64) -> HealthSnapshot {
    snap(&format!(
        r#"{{"ports": [
      {{"device": "mlx5_0:1", "drivers": ["ib_core", "mlx5"], "values": {{"symbol_error": 0,
        "out_of_sequence": 0, "np_cnp_sent": 0, "rx_read_requests": 0, "rx_write_requests": 0}}}},
      {{"device": "mlx5_1:1", "drivers": ["ib_core", "mlx5"], "values": {{"symbol_error": 0,
        "out_of_sequence": {ooo}, "np_cnp_sent": {cnp}, "rx_read_requests": {reads},
        "rx_write_requests": 0}}}}
    ]}}"#
    ))
}

#[test]
fn a_failed_case_whose_cnp_counter_moved_is_congested_on_that_port_only() {
    let (b, a) = (two_ports(10, 0, 0), two_ports(510, 0, 0));
    let mut h = CaseHealth::read((Some(&b), Some(&a)), (Some(&b), Some(&b)));
    h.judge(true, None);
    let congested: Vec<(&str, &str)> = h
        .findings()
        .filter(|(_, f)| f.kind == HealthKind::Congested)
        .map(|(side, f)| (side, f.device.as_str()))
        .collect();
    assert_eq!(congested, [("prefill", "mlx5_1:1")]);
    assert_eq!(h.cell(), "congested");
    // The same counters around a case that passed explain nothing: no congestion finding.
    h.judge(false, None);
    assert!(h.findings().all(|(_, f)| f.kind != HealthKind::Congested));
    assert_eq!(h.cell(), "ok");
}

#[test]
fn loss_counters_moving_are_a_lossy_link_whether_or_not_the_case_failed() {
    let (b, a) = (two_ports(0, 0, 0), two_ports(0, 0, 40));
    let mut h = CaseHealth::read((Some(&b), Some(&b)), (Some(&b), Some(&a)));
    h.judge(false, None);
    let lossy: Vec<&str> = h
        .findings()
        .filter(|(_, f)| f.kind == HealthKind::LossyLink)
        .map(|(side, _)| side)
        .collect();
    assert_eq!(lossy, ["decode"]);
    assert_eq!(h.cell(), "lossy");
}

#[test]
fn a_read_case_is_confirmed_by_one_port_and_a_write_case_moving_read_requests_is_not_rdma() {
    let (b, a) = (two_ports(0, 0, 0), two_ports(0, 300, 0));
    let mut read = CaseHealth::read((Some(&b), Some(&b)), (Some(&b), Some(&a)));
    read.judge(false, Some(RdmaOp::Read));
    let rdma = read.rdma.clone().unwrap();
    assert_eq!(
        (rdma.evidence, rdma.device.as_str()),
        (RdmaEvidence::Confirmed, "mlx5_1:1")
    );
    read.judge(false, Some(RdmaOp::Write));
    assert_eq!(read.rdma.as_ref().unwrap().evidence, RdmaEvidence::Contradicted);
    assert_eq!(read.cell(), "not RDMA");
    // A READ case whose requests reached no port of the target.
    let mut none = CaseHealth::read((Some(&b), Some(&b)), (Some(&b), Some(&b)));
    none.judge(false, Some(RdmaOp::Read));
    assert_eq!(none.rdma.unwrap().evidence, RdmaEvidence::Contradicted);
}

#[test]
fn a_side_without_a_reading_or_a_port_is_not_read_never_ok() {
    let b = two_ports(0, 0, 0);
    let empty = HealthSnapshot::default();
    let mut h = CaseHealth::read((None, None), (Some(&empty), Some(&empty)));
    h.judge(true, Some(RdmaOp::Read));
    assert_eq!(h.cell(), "not read");
    assert!(!h.any_read());
    assert_eq!(
        h.prefill.not_read.as_deref(),
        Some("the prefill side sent no counter reading")
    );
    assert_eq!(h.decode.not_read.as_deref(), Some("no RDMA port on the decode side"));
    assert_eq!(h.rdma.unwrap().evidence, RdmaEvidence::NotRead);
    // One side read, the other not: quiet counters are `ok (part not read)`, never a plain `ok`.
    let failed = HealthSnapshot::unread("cannot read /sys");
    let mut part = CaseHealth::read((Some(&b), Some(&b)), (Some(&failed), Some(&b)));
    part.judge(false, None);
    assert_eq!(part.cell(), "ok (part not read)");
    assert_eq!(part.decode.not_read.as_deref(), Some("decode: cannot read /sys"));
    part.judge(true, None);
    assert_eq!(part.cell(), "not explained (part not read)");
}
