//! The rail map on recorded sysfs trees of real layouts (tests/fixtures/rails, made by
//! generate.py; the links are relative symlinks, as the kernel writes them).

use icb_core::rails::{LeftOutReason, PcieRelation, RailMap};
use icb_probe::rails::{PCI_DEVICES, PciPath, relation};
use icb_probe::{GatherOptions, LocalSource, NodeExpectations, NodeSource, gather, probe_node};
use std::path::PathBuf;
use std::time::Duration;

fn root(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/rails")
        .join(name)
}

fn opts() -> GatherOptions {
    GatherOptions {
        tool_timeout: Duration::from_secs(5),
        counter_interval: Duration::ZERO,
    }
}

fn map(name: &str) -> RailMap {
    let src = LocalSource::replay(&root(name));
    let (report, _) = probe_node(&src, &opts(), &NodeExpectations::default());
    report
        .rail_map
        .unwrap_or_else(|| panic!("{name}: no rail map in {:?}", report.checks))
}

fn nic_names(m: &RailMap) -> Vec<String> {
    m.rails.iter().map(|r| r.nic.name.clone()).collect()
}

#[test]
fn hgx_every_gpu_takes_the_nic_on_its_own_switch() {
    let m = map("hgx8");
    assert_eq!(m.rails.len(), 8, "{m:#?}");
    for (i, r) in m.rails.iter().enumerate() {
        assert_eq!(r.index, i);
        let gpu = r.gpu.as_ref().expect("a GPU on every rail");
        assert_eq!(gpu.ordinal, i);
        assert_eq!(r.relation, Some(PcieRelation::Pix), "rail {i}: {r:?}");
        assert_eq!(r.nic.name, format!("mlx5_{i}"));
        assert_eq!(r.nic.port, 1);
        assert_eq!(r.nic.rate_gbps, Some(400.0));
        assert_eq!(r.nic.state, "ACTIVE/LinkUp");
        assert_eq!(r.nic.link_layer.as_deref(), Some("InfiniBand"));
        assert_eq!(gpu.numa_node, Some(if i < 4 { 0 } else { 1 }));
        assert_eq!(r.nic.numa_node, gpu.numa_node);
    }
    // GPUs in PCI bus order (NVSwitches, NVIDIA bridges, are not GPUs); NICs keyed by PCI address.
    let gpus: Vec<&str> = m.rails.iter().map(|r| r.gpu.as_ref().unwrap().pci.as_str()).collect();
    assert_eq!(
        gpus,
        vec![
            "0000:18:00.0",
            "0000:1a:00.0",
            "0000:39:00.0",
            "0000:3b:00.0",
            "0000:9a:00.0",
            "0000:9c:00.0",
            "0000:bb:00.0",
            "0000:bd:00.0"
        ]
    );
    assert_eq!(m.rails[0].nic.pci.as_deref(), Some("0000:19:00.0"));
    assert_eq!(m.rails[7].nic.netdevs, vec!["ibp190s0"]);
    assert!(m.left_out.is_empty(), "{:?}", m.left_out);
    // nvidia-smi topo -m was replayed and agrees: nothing to note.
    assert!(m.notes.is_empty(), "{:?}", m.notes);
    assert_eq!(m.ucx_net_devices()[5], "rank 5: UCX_NET_DEVICES=mlx5_5:1");
}

#[test]
fn hgx_cross_socket_and_cross_switch_relations_come_from_the_tree() {
    let src = LocalSource::replay(&root("hgx8"));
    let path = |addr: &str| {
        let p = src.resolve(&format!("{PCI_DEVICES}/{addr}")).unwrap();
        PciPath::parse(&p).unwrap()
    };
    let gpu0 = path("0000:18:00.0");
    // NIC 2 sits on the other switch of socket 0, NIC 4 on socket 1.
    let rel = |addr: &str, numa| relation(&gpu0, Some(0), &path(addr), Some(numa)).map(|r| r.0);
    assert_eq!(rel("0000:19:00.0", 0), Some(PcieRelation::Pix));
    assert_eq!(rel("0000:3a:00.0", 0), Some(PcieRelation::Node));
    assert_eq!(rel("0000:9b:00.0", 1), Some(PcieRelation::Sys));
    assert_eq!(rel("0000:be:00.0", 1), Some(PcieRelation::Sys));
    // The class link, then the device link relative to the real directory, resolve to the same node.
    assert_eq!(
        src.resolve("/sys/class/infiniband/mlx5_0/device").as_deref(),
        Some("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0")
    );
}

#[test]
fn hgx_with_a_bonded_front_end_nic_leaves_it_out() {
    let m = map("hgx8_bond");
    // The front-end pair took mlx5_0/1: the rails are mlx5_2…9, found by PCI place, not by name.
    let want: Vec<String> = (2..10).map(|n| format!("mlx5_{n}")).collect();
    assert_eq!(nic_names(&m), want);
    assert!(m.rails.iter().all(|r| r.relation == Some(PcieRelation::Pix)));
    assert_eq!(m.left_out.len(), 2, "{:?}", m.left_out);
    for (lo, netdev) in m.left_out.iter().zip(["eno1np0", "eno2np1"]) {
        assert_eq!(lo.nic.rate_gbps, Some(25.0));
        assert_eq!(lo.nic.link_layer.as_deref(), Some("Ethernet"));
        assert_eq!(
            lo.reasons,
            vec![
                LeftOutReason::Bonded {
                    netdev: netdev.into(),
                    master: Some("bond0".into())
                },
                LeftOutReason::Slow { fastest_gbps: 400.0 }
            ]
        );
    }
    assert_eq!(m.left_out[1].nic.pci.as_deref(), Some("0000:01:00.1"));
}

#[test]
fn two_gpus_sharing_a_nic_name_it_on_both_rails_with_a_note() {
    let m = map("shared_nic");
    assert_eq!(nic_names(&m), vec!["mlx5_0", "mlx5_0", "mlx5_1", "mlx5_1"]);
    assert!(m.rails.iter().all(|r| r.relation == Some(PcieRelation::Pix)));
    let shared: Vec<&String> = m.notes.iter().filter(|n| n.contains(" share ")).collect();
    assert_eq!(shared.len(), 2, "{:?}", m.notes);
    assert!(
        shared[0].starts_with("GPU0 and GPU1 share mlx5_0:1 (0000:1a:00.0): each gets 1/2"),
        "{}",
        shared[0]
    );
    // The replayed nvidia-smi says PXB for GPU1↔NIC0: a note names the disagreement.
    let disagree: Vec<&String> = m
        .notes
        .iter()
        .filter(|n| n.contains("nvidia-smi topo -m says"))
        .collect();
    assert_eq!(disagree.len(), 1, "{:?}", m.notes);
    assert!(
        disagree[0].contains("rail 1") && disagree[0].contains("GPU1↔mlx5_0 is PIX") && disagree[0].ends_with("PXB"),
        "{}",
        disagree[0]
    );
    assert_eq!(
        m.ucx_net_devices(),
        vec![
            "rank 0: UCX_NET_DEVICES=mlx5_0:1",
            "rank 1: UCX_NET_DEVICES=mlx5_0:1",
            "rank 2: UCX_NET_DEVICES=mlx5_1:1",
            "rank 3: UCX_NET_DEVICES=mlx5_1:1"
        ]
    );
}

#[test]
fn a_node_without_gpus_has_one_rail_per_active_port_in_pci_order() {
    let m = map("no_gpu");
    // mlx5_1 (0000:3b:00.0) comes before mlx5_0 (0000:86:00.0).
    assert_eq!(nic_names(&m), vec!["mlx5_1", "mlx5_0"]);
    assert!(m.rails.iter().all(|r| r.gpu.is_none() && r.relation.is_none()));
    assert_eq!(m.rails[1].index, 1);
    assert_eq!(m.rails[1].nic.numa_node, Some(1));
    assert_eq!(m.left_out.len(), 1);
    assert_eq!(m.left_out[0].nic.name, "mlx5_2");
    assert_eq!(m.left_out[0].nic.pci.as_deref(), Some("0000:3b:00.1"));
    assert_eq!(m.left_out[0].reasons, vec![LeftOutReason::PortDown]);
}

#[test]
fn bad_content_never_panics_and_reads_as_unknown() {
    let src = LocalSource::replay(&root("broken"));
    let facts = gather(&src, &opts());
    let m = icb_probe::rails::rail_map(&src, &facts).expect("the PCI tree is there");
    // mlx5_1: device link into nowhere, rate "fast": no PCI address, no rate, so no relation and
    // no GPU takes it; mlx5_0: numa_node "zero", a `master` link that loops.
    assert_eq!(facts.port("mlx5_1", 1).map(|p| p.rate.clone()), Some(None));
    assert!(
        m.notes
            .iter()
            .any(|n| n == "mlx5_1:1 is no GPU's nearest port: not a rail"),
        "{:?}",
        m.notes
    );
    let gpu = m.rails[0].gpu.as_ref().expect("one GPU");
    assert_eq!(gpu.pci, "0000:16:00.0");
    assert_eq!(gpu.numa_node, None);
    assert_eq!(m.rails.len(), 1, "one GPU, one rail: {m:#?}");
    assert_eq!(m.rails[0].nic.name, "mlx5_0");
    assert_eq!(m.rails[0].nic.numa_node, None);
    // Same root port: PIX needs no NUMA node.
    assert_eq!(m.rails[0].relation, Some(PcieRelation::Pix));
    assert!(
        m.notes.iter().any(|n| n.starts_with("mlx5_1: its device link")),
        "{:?}",
        m.notes
    );
    assert_eq!(src.resolve("/sys/bus/pci/devices/0000:77:00.0"), None, "dangling");
    let master = "/sys/class/net/ibp22s0f1/master";
    assert_eq!(src.resolve(master), None, "a loop of links ends");
}

#[test]
fn nodes_without_a_pci_tree_have_no_rail_map() {
    let old = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/nodes/healthy_ib");
    let (report, _) = probe_node(&LocalSource::replay(&old), &opts(), &NodeExpectations::default());
    assert_eq!(report.rail_map, None);
    let json = serde_json::to_value(&report).unwrap();
    assert!(json.get("rail_map").is_none(), "skipped when absent");
    let json = serde_json::to_value(
        probe_node(
            &LocalSource::replay(&root("hgx8")),
            &opts(),
            &NodeExpectations::default(),
        )
        .0,
    )
    .unwrap();
    assert_eq!(json["rail_map"]["rails"][0]["relation"], "PIX");
    assert_eq!(json["rail_map"]["rails"][0]["nic"]["pci"], "0000:19:00.0");
}

#[test]
fn an_emulated_nodes_recorded_tree_has_one_rail_per_nic_with_its_rail_netdev() {
    // The tree `icb_isolate::Fabric` writes for each node with rails (no root needed to write it).
    let dir = tempfile::tempdir().unwrap();
    for k in [1, 4] {
        let root = dir.path().join(format!("k{k}"));
        icb_isolate::write_rail_tree(&root, k).unwrap();
        let src = LocalSource::replay(&root);
        let facts = gather(&src, &opts());
        let m = icb_probe::rails::rail_map(&src, &facts).expect("the tree has a PCI tree");
        assert_eq!(m.rails.len(), k, "{m:#?}");
        assert!(m.left_out.is_empty(), "{:?}", m.left_out);
        for (i, r) in m.rails.iter().enumerate() {
            assert_eq!(r.index, i);
            assert!(r.gpu.is_none() && r.relation.is_none(), "host rails: {r:?}");
            assert_eq!(r.nic.name, format!("mlx5_{i}"));
            assert_eq!(r.nic.netdevs, vec![format!("rail{i}")]);
            assert_eq!(
                r.nic.pci.as_deref(),
                Some(format!("0000:{:02x}:00.0", 0x11 + i).as_str())
            );
            assert_eq!(r.nic.state, "ACTIVE/LinkUp");
            assert_eq!(r.nic.rate_gbps, Some(100.0));
            assert_eq!(r.nic.link_layer.as_deref(), Some("Ethernet"));
            assert_eq!(r.nic.numa_node, Some(0));
        }
    }
}
