//! NIC byte counters on a recorded tree (tests/fixtures/rails/counters, made by generate.py).

use icb_core::rails::NicRef;
use icb_core::rails::counters::{CounterKind, NicCounter};
use icb_probe::counters::{counter_device, snapshot};
use std::path::PathBuf;

fn sys() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rails/counters/sys")
}

fn find<'a>(c: &'a [NicCounter], device: &str) -> Option<&'a NicCounter> {
    c.iter().find(|c| c.device == device)
}

fn nic(name: &str, netdevs: &[&str]) -> NicRef {
    NicRef {
        name: name.into(),
        pci: None,
        port: 1,
        state: "ACTIVE/LinkUp".into(),
        rate_gbps: None,
        link_layer: None,
        netdevs: netdevs.iter().map(|s| s.to_string()).collect(),
        numa_node: None,
    }
}

#[test]
fn ib_port_counters_count_words_of_four_bytes() {
    let snap = snapshot(&sys());
    let c = find(&snap.counters, "mlx5_0:1").expect("mlx5_0:1");
    assert_eq!(
        c.kind,
        CounterKind::IbPort,
        "the port counters win over mlx5's hw_counters"
    );
    assert_eq!((c.tx_bytes, c.rx_bytes), (4000, 1000));
    assert_eq!(c.pci.as_deref(), Some("0000:3b:00.0"));
    // Its netdev is counted on its own, with the same PCI address.
    let nd = find(&snap.counters, "ens1np0").expect("ens1np0");
    assert_eq!((nd.kind, nd.tx_bytes, nd.rx_bytes), (CounterKind::Netdev, 5000, 6000));
    assert_eq!(nd.pci.as_deref(), Some("0000:3b:00.0"));
}

#[test]
fn efa_ports_are_read_from_hw_counters_tx_and_rx_bytes() {
    let snap = snapshot(&sys());
    let c = find(&snap.counters, "efa_0:1").expect("efa_0:1");
    assert_eq!(c.kind, CounterKind::EfaHw);
    // tx_bytes/rx_bytes (all bytes), not send_bytes or rdma_read_bytes (subsets), and no × 4.
    assert_eq!((c.tx_bytes, c.rx_bytes), (123_456, 654_321));
    assert_eq!(c.pci.as_deref(), Some("0000:3c:00.0"));
}

#[test]
fn netdevs_are_counted_except_lo_and_virtual_ones_have_no_pci() {
    let snap = snapshot(&sys());
    assert!(find(&snap.counters, "lo").is_none(), "{snap:?}");
    let eth0 = find(&snap.counters, "eth0").expect("eth0");
    assert_eq!(
        (eth0.kind, eth0.tx_bytes, eth0.rx_bytes, eth0.pci.clone()),
        (CounterKind::Netdev, 42, 43, None)
    );
    let rail0 = find(&snap.counters, "rail0").expect("rail0");
    assert_eq!((rail0.tx_bytes, rail0.rx_bytes), (4096, 8192));
}

#[test]
fn garbage_and_overflow_are_unreadable_with_a_reason_and_missing_counters_are_absent() {
    let snap = snapshot(&sys());
    let mut devices: Vec<&str> = snap.counters.iter().map(|c| c.device.as_str()).collect();
    devices.sort_unstable();
    // mlx5_2 (no counters), the netdevs of mlx5_1..3 (no statistics) and nostats0 are absent.
    assert_eq!(devices, vec!["efa_0:1", "ens1np0", "eth0", "mlx5_0:1", "rail0"]);
    assert_eq!(snap.unreadable.len(), 3, "{:?}", snap.unreadable);
    let why = |dev: &str| {
        snap.unreadable
            .iter()
            .find(|u| u.device.as_deref() == Some(dev))
            .unwrap_or_else(|| panic!("{dev} not unreadable: {:?}", snap.unreadable))
            .to_string()
    };
    assert_eq!(
        why("mlx5_1:1"),
        "mlx5_1:1: counters/port_rcv_data reads \"n/a\", not a count"
    );
    assert!(why("mlx5_3:1").contains("overflows 64 bits"), "{}", why("mlx5_3:1"));
    assert_eq!(why("bad0"), "bad0: statistics/tx_bytes reads \"lots\", not a count");
    assert!(snap.unreadable.iter().all(|u| !u.why.contains('\n')));
}

#[test]
fn counter_device_prefers_the_port_then_falls_back_to_a_netdev_with_statistics() {
    let root = sys();
    assert_eq!(
        counter_device(&root, &nic("mlx5_0", &["ens1np0"])).as_deref(),
        Some("mlx5_0:1")
    );
    assert_eq!(counter_device(&root, &nic("efa_0", &[])).as_deref(), Some("efa_0:1"));
    // An emulated NIC: no RDMA device in the node's sysfs, only its netdev; the first netdev
    // with readable statistics is taken.
    assert_eq!(
        counter_device(&root, &nic("mlx5_9", &["nostats0", "bad0", "rail0", "eth0"])).as_deref(),
        Some("rail0")
    );
    // Port counters that do not parse are not "readable": its netdev has no statistics either.
    assert_eq!(counter_device(&root, &nic("mlx5_1", &["ens1np1"])), None);
    assert_eq!(counter_device(&root, &nic("mlx5_2", &[])), None);
    assert_eq!(
        counter_device(&root.join("missing"), &nic("mlx5_0", &["ens1np0"])),
        None
    );
}

#[test]
fn health_counters_are_read_by_driver_and_what_is_absent_is_not_read() {
    use icb_core::rails::nic_health::{Delta, Driver, deltas};
    use icb_probe::counters::health_snapshot;
    let snap = health_snapshot(&sys());
    let mlx = snap.port("mlx5_0:1").expect("mlx5_0:1");
    assert_eq!(mlx.drivers, vec![Driver::IbCore, Driver::Mlx5]);
    let read: Vec<(&str, u64)> = mlx.values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    // Only vocabulary counters: not the byte counters, not out_of_buffer.
    assert_eq!(
        read,
        vec![
            ("np_ecn_marked_roce_packets", 5),
            ("port_xmit_wait", 12),
            ("symbol_error", 0)
        ]
    );
    assert_eq!(
        mlx.unreadable.get("rx_read_requests").map(String::as_str),
        Some("hw_counters/rx_read_requests: reads \"n/a\", not a count")
    );
    let efa = snap.port("efa_0:1").expect("efa_0:1");
    assert_eq!(efa.drivers, vec![Driver::Efa]);
    assert_eq!(efa.values.get("retrans_timeout_events"), Some(&2));
    // The same reading twice: read counters moved by zero, the rest are not read.
    let d = deltas(&snap, &snap, "mlx5_0:1").unwrap();
    assert_eq!(d.get("port_xmit_wait"), Some(&Delta::Moved { by: 0 }));
    assert!(matches!(d.get("out_of_sequence"), Some(Delta::NotRead { .. })));
    assert!(matches!(d.get("rx_read_requests"), Some(Delta::NotRead { .. })));
}

#[test]
fn a_roce_ports_pause_counters_come_from_its_netdevs_ethtool_statistics() {
    use icb_core::rails::nic_health::rules::{HealthKind, judge_port};
    use icb_core::rails::nic_health::{Delta, Driver, deltas};
    use icb_probe::counters::health_snapshot_with_pause;
    // mlx5_0's netdev ens1np0 sent `sent` PFC pauses on priority 3; the others' cannot be read.
    let reading = |sent: u64| {
        let stats = move |netdev: &str| match netdev {
            "ens1np0" => Ok(format!(
                "NIC statistics:\n     rx_packets: 10\n     rx_pause_ctrl_phy: 0\n     tx_pause_ctrl_phy: 0\n     rx_prio3_pause: 0\n     tx_prio3_pause: {sent}\n"
            )),
            other => Err(icb_probe::counters::EthtoolError::Failed {
                netdev: other.to_string(),
                line: "no such device".into(),
            }),
        };
        health_snapshot_with_pause(&sys(), &stats)
    };
    let (before, after) = (reading(4), reading(1004));
    let mlx = after.port("mlx5_0:1").expect("mlx5_0:1");
    assert_eq!(mlx.drivers, vec![Driver::IbCore, Driver::Mlx5, Driver::Netdev]);
    assert_eq!(mlx.values.get("tx_prio3_pause"), Some(&1004));
    assert_eq!(mlx.values.get("np_ecn_marked_roce_packets"), Some(&5), "sysfs's kept");
    assert!(
        !mlx.values.contains_key("rx_packets"),
        "only the vocabulary's pause counters"
    );
    let unread = after.port("mlx5_1:1").expect("mlx5_1:1");
    assert_eq!(
        unread.unreadable.get("tx_pause_ctrl_phy").map(String::as_str),
        Some("ens1np1: ethtool -S ens1np1: no such device"),
        "not read, never zero"
    );
    assert_eq!(
        after.port("efa_0:1").expect("efa_0:1").drivers,
        vec![Driver::Efa],
        "no netdev"
    );
    // Over a phase: the pauses moved, and on a slow rail they are congestion, named.
    let d = deltas(&before, &after, "mlx5_0:1").unwrap();
    assert_eq!(d.get("tx_prio3_pause"), Some(&Delta::Moved { by: 1000 }));
    let congested: Vec<_> = judge_port(&d, true)
        .into_iter()
        .filter(|f| f.kind == HealthKind::Congested)
        .collect();
    assert_eq!(congested.len(), 1);
    assert!(
        congested[0].reason.contains("tx_prio3_pause +1000"),
        "{}",
        congested[0].reason
    );
    assert!(matches!(
        deltas(&before, &after, "mlx5_1:1").unwrap().get("rx_pause_ctrl_phy"),
        Some(Delta::NotRead { .. })
    ));
}
