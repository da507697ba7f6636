use super::rules::*;
use super::*;

/// A recorded reading, as the probe writes it.
fn snap(json: &str) -> HealthSnapshot {
    serde_json::from_str(json).unwrap()
}

/// An mlx5 RoCE port around a slow 1 GiB WRITE case on a congested rail: ECN marks and CNPs
/// moved, no loss; its netdev's PFC pause counter moved.
const CONGESTED_BEFORE: &str = r#"{"ports": [
  {"device": "mlx5_1:1", "drivers": ["ib_core", "mlx5"], "values": {
    "symbol_error": 0, "link_downed": 1, "port_rcv_errors": 0, "port_xmit_discards": 0,
    "port_xmit_wait": 1000, "out_of_sequence": 5, "packet_seq_err": 0,
    "local_ack_timeout_err": 0, "rnr_nak_retry_err": 0, "np_cnp_sent": 10,
    "rp_cnp_handled": 20, "np_ecn_marked_roce_packets": 30, "rx_read_requests": 7,
    "rx_write_requests": 100}},
  {"device": "eth1", "drivers": ["netdev"], "values": {"rx_prio3_pause": 0, "tx_prio3_pause": 4}}
]}"#;
const CONGESTED_AFTER: &str = r#"{"ports": [
  {"device": "mlx5_1:1", "drivers": ["ib_core", "mlx5"], "values": {
    "symbol_error": 0, "link_downed": 1, "port_rcv_errors": 0, "port_xmit_discards": 0,
    "port_xmit_wait": 91000, "out_of_sequence": 5, "packet_seq_err": 0,
    "local_ack_timeout_err": 0, "rnr_nak_retry_err": 0, "np_cnp_sent": 1210,
    "rp_cnp_handled": 20, "np_ecn_marked_roce_packets": 4030, "rx_read_requests": 7,
    "rx_write_requests": 65636}},
  {"device": "eth1", "drivers": ["netdev"], "values": {"rx_prio3_pause": 0, "tx_prio3_pause": 904}}
]}"#;

/// An mlx5 port of a lossy rail: sequence errors and ACK timeouts moved; `rnr_nak_retry_err`
/// unreadable and `implied_nak_seq_err` absent.
const LOSSY_BEFORE: &str = r#"{"ports": [{"device": "mlx5_2:1", "drivers": ["ib_core", "mlx5"],
  "values": {"symbol_error": 3, "link_downed": 0, "port_rcv_errors": 0, "port_xmit_discards": 0,
    "port_xmit_wait": 0, "out_of_sequence": 0, "packet_seq_err": 2, "local_ack_timeout_err": 0,
    "rx_read_requests": 0, "rx_write_requests": 0},
  "unreadable": {"rnr_nak_retry_err": "reads \"n/a\", not a count"}}]}"#;
const LOSSY_AFTER: &str = r#"{"ports": [{"device": "mlx5_2:1", "drivers": ["ib_core", "mlx5"],
  "values": {"symbol_error": 3, "link_downed": 0, "port_rcv_errors": 0, "port_xmit_discards": 0,
    "port_xmit_wait": 0, "out_of_sequence": 412, "packet_seq_err": 40, "local_ack_timeout_err": 9,
    "rx_read_requests": 5000, "rx_write_requests": 0},
  "unreadable": {"rnr_nak_retry_err": "reads \"n/a\", not a count"}}]}"#;

fn d(before: &str, after: &str, dev: &str) -> PortDeltas {
    deltas(&snap(before), &snap(after), dev).unwrap()
}

#[test]
fn every_named_counter_is_in_the_vocabulary_with_its_path_and_what_it_indicates() {
    for (driver, name, path, what) in [
        (
            Driver::IbCore,
            "symbol_error",
            CounterPath::PortCounters,
            Indicates::LinkFault,
        ),
        (
            Driver::IbCore,
            "port_xmit_wait",
            CounterPath::PortCounters,
            Indicates::Congestion,
        ),
        (
            Driver::IbCore,
            "port_xmit_discards",
            CounterPath::PortCounters,
            Indicates::Loss,
        ),
        (
            Driver::Mlx5,
            "out_of_sequence",
            CounterPath::HwCounters,
            Indicates::Loss,
        ),
        (
            Driver::Mlx5,
            "np_ecn_marked_roce_packets",
            CounterPath::HwCounters,
            Indicates::Congestion,
        ),
        (
            Driver::Mlx5,
            "rx_read_requests",
            CounterPath::HwCounters,
            Indicates::Attribution,
        ),
        (
            Driver::Efa,
            "retrans_timeout_events",
            CounterPath::HwCounters,
            Indicates::Loss,
        ),
        (Driver::Efa, "rx_drops", CounterPath::HwCounters, Indicates::Loss),
        (
            Driver::Netdev,
            "rx_prio3_pause",
            CounterPath::Ethtool,
            Indicates::Congestion,
        ),
    ] {
        let def = lookup(driver, name).unwrap_or_else(|| panic!("{name} not in the vocabulary"));
        assert_eq!((def.path, def.indicates), (path, what), "{name}");
        assert!(!def.meaning.is_empty());
    }
    // A per-priority template matches priorities 0-7 only; names are per driver.
    assert!(lookup(Driver::Netdev, "tx_prio7_pause").is_some());
    assert!(lookup(Driver::Netdev, "tx_prio8_pause").is_none());
    assert!(lookup(Driver::Netdev, "tx_prio_pause").is_none());
    assert!(lookup(Driver::Efa, "out_of_sequence").is_none());
    assert_eq!(CounterPath::HwCounters.dir(), Some("hw_counters"));
    assert_eq!(CounterPath::Ethtool.dir(), None);
    // Each name is defined once per driver.
    for (i, a) in VOCABULARY.iter().enumerate() {
        assert!(
            VOCABULARY[i + 1..]
                .iter()
                .all(|b| (a.driver, a.name) != (b.driver, b.name)),
            "{} twice",
            a.name
        );
    }
}

#[test]
fn deltas_are_after_minus_before_and_what_was_not_read_is_never_zero() {
    let d = d(LOSSY_BEFORE, LOSSY_AFTER, "mlx5_2:1");
    assert_eq!(d.get("out_of_sequence"), Some(&Delta::Moved { by: 412 }));
    assert_eq!(d.get("symbol_error"), Some(&Delta::Moved { by: 0 }));
    assert_eq!(
        d.get("rnr_nak_retry_err"),
        Some(&Delta::NotRead {
            why: "before: reads \"n/a\", not a count".into()
        })
    );
    // In the vocabulary, absent from both readings: not read, not zero.
    assert_eq!(
        d.get("implied_nak_seq_err"),
        Some(&Delta::NotRead {
            why: "absent before".into()
        })
    );
    assert_eq!(d.get("implied_nak_seq_err").and_then(Delta::read), None);
    // A device only one reading has; a device neither has.
    let mut after = snap(LOSSY_AFTER);
    after.ports[0].device = "mlx5_3:1".into();
    let gone = deltas(&snap(LOSSY_BEFORE), &after, "mlx5_2:1").unwrap();
    assert!(gone.deltas.values().all(|d| d.read().is_none()), "{gone:?}");
    assert_eq!(deltas(&snap(LOSSY_BEFORE), &after, "mlx5_9:1"), None);
}

#[test]
fn a_counter_that_went_back_was_cleared_and_gives_no_delta() {
    let after = LOSSY_BEFORE.replace("\"packet_seq_err\": 2", "\"packet_seq_err\": 1");
    let d = d(LOSSY_BEFORE, &after, "mlx5_2:1");
    assert_eq!(d.get("packet_seq_err"), Some(&Delta::WentBack));
    assert!(judge_port(&d, false).iter().all(|f| f.kind != HealthKind::LossyLink));
}

#[test]
fn a_slow_rail_with_ecn_cnp_and_pause_deltas_is_congested_naming_counters_and_qos() {
    let port = d(CONGESTED_BEFORE, CONGESTED_AFTER, "mlx5_1:1");
    let f = judge_port(&port, true);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].kind, HealthKind::Congested);
    assert_eq!(
        f[0].counters,
        vec![
            ("np_cnp_sent".to_string(), 1200),
            ("np_ecn_marked_roce_packets".to_string(), 4000),
            ("port_xmit_wait".to_string(), 90000)
        ]
    );
    assert!(
        f[0].fix.contains("PFC") && f[0].fix.contains("UCX_IB_TRAFFIC_CLASS"),
        "{}",
        f[0].fix
    );
    let nd = d(CONGESTED_BEFORE, CONGESTED_AFTER, "eth1");
    let f = judge_port(&nd, true);
    assert_eq!(
        f.iter().map(|f| f.kind).collect::<Vec<_>>(),
        vec![HealthKind::NotRead, HealthKind::Congested]
    );
    assert_eq!(f[1].counters, vec![("tx_prio3_pause".to_string(), 900)]);
    // The same deltas on a rail that is not slow: no congestion finding.
    assert!(judge_port(&port, false).is_empty());
}

#[test]
fn an_ib_port_waiting_for_credits_points_at_the_fabric_not_roce_qos() {
    let before = r#"{"ports": [{"device": "mlx5_0:1", "drivers": ["ib_core"], "values": {"port_xmit_wait": 0, "symbol_error": 0}}]}"#;
    let after = r#"{"ports": [{"device": "mlx5_0:1", "drivers": ["ib_core"], "values": {"port_xmit_wait": 500, "symbol_error": 0}}]}"#;
    let f = judge_port(&d(before, after, "mlx5_0:1"), true);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].kind, HealthKind::Congested);
    assert!(
        f[0].fix.contains("adaptive routing") && !f[0].fix.contains("PFC"),
        "{}",
        f[0].fix
    );
}

#[test]
fn retransmits_and_sequence_errors_are_a_lossy_link_naming_the_port() {
    let f = judge_port(&d(LOSSY_BEFORE, LOSSY_AFTER, "mlx5_2:1"), false);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!((f[0].kind, f[0].device.as_str()), (HealthKind::LossyLink, "mlx5_2:1"));
    assert_eq!(
        f[0].counters,
        vec![
            ("local_ack_timeout_err".to_string(), 9),
            ("out_of_sequence".to_string(), 412),
            ("packet_seq_err".to_string(), 38)
        ]
    );
    assert!(f[0].reason.contains("mlx5_2:1"));
    // EFA: its own retransmit counters.
    let before = r#"{"ports": [{"device": "efa_0:1", "drivers": ["efa"], "values": {"rx_drops": 0, "retrans_timeout_events": 1}}]}"#;
    let after = r#"{"ports": [{"device": "efa_0:1", "drivers": ["efa"], "values": {"rx_drops": 0, "retrans_timeout_events": 4}}]}"#;
    let f = judge_port(&d(before, after, "efa_0:1"), false);
    assert_eq!(f[0].counters, vec![("retrans_timeout_events".to_string(), 3)]);
}

#[test]
fn a_healthy_port_has_no_finding_and_an_unread_one_says_so() {
    let f = judge_port(&d(CONGESTED_BEFORE, CONGESTED_BEFORE, "mlx5_1:1"), true);
    assert!(f.is_empty(), "{f:?}");
    let none = r#"{"ports": [{"device": "mlx5_5:1", "drivers": ["ib_core", "mlx5"]}]}"#;
    let f = judge_port(&d(none, none, "mlx5_5:1"), true);
    let kinds: Vec<(HealthKind, Indicates)> = f.iter().map(|f| (f.kind, f.about)).collect();
    assert_eq!(
        kinds,
        vec![
            (HealthKind::NotRead, Indicates::Loss),
            (HealthKind::NotRead, Indicates::Congestion)
        ]
    );
    assert!(
        f[0].not_read.contains(&"out_of_sequence".to_string()),
        "{:?}",
        f[0].not_read
    );
}

#[test]
fn read_requests_confirm_a_read_and_contradict_a_write() {
    // The lossy rail's target saw READ requests only.
    let lossy = d(LOSSY_BEFORE, LOSSY_AFTER, "mlx5_2:1");
    assert_eq!(confirm_rdma(RdmaOp::Read, &lossy).evidence, RdmaEvidence::Confirmed);
    let w = confirm_rdma(RdmaOp::Write, &lossy);
    assert_eq!(w.evidence, RdmaEvidence::Contradicted, "{w:?}");
    // The congested rail's target saw WRITE requests and no READ request.
    let congested = d(CONGESTED_BEFORE, CONGESTED_AFTER, "mlx5_1:1");
    assert_eq!(
        confirm_rdma(RdmaOp::Write, &congested).evidence,
        RdmaEvidence::Confirmed
    );
    assert_eq!(
        confirm_rdma(RdmaOp::Read, &congested).evidence,
        RdmaEvidence::Contradicted
    );
    // Nothing moved: a WRITE did not go over RDMA through this port.
    let idle = d(CONGESTED_BEFORE, CONGESTED_BEFORE, "mlx5_1:1");
    assert_eq!(confirm_rdma(RdmaOp::Write, &idle).evidence, RdmaEvidence::Contradicted);
    // EFA has no such counters: not read, never confirmed.
    let efa = r#"{"ports": [{"device": "efa_0:1", "drivers": ["efa"], "values": {"rx_drops": 0}}]}"#;
    let e = confirm_rdma(RdmaOp::Read, &d(efa, efa, "efa_0:1"));
    assert_eq!(e.evidence, RdmaEvidence::NotRead);
}
