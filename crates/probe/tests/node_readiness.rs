//! RDMA readiness in `probe node` on recorded sysfs trees (tests/fixtures/rails, made by
//! generate.py): each rule on a tree that triggers it and one that does not.

use icb_core::Status;
use icb_core::checks::{Check, ProbeReport};
use icb_core::rails::PcieRelation;
use icb_core::readiness::{GdrMode, LinkTraining};
use icb_probe::readiness::{AcsState, gather};
use icb_probe::{GatherOptions, LocalSource, NodeExpectations, probe_node};
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

fn probe(name: &str) -> ProbeReport {
    let src = LocalSource::replay(&root(name));
    probe_node(&src, &opts(), &NodeExpectations::default()).0
}

fn check<'a>(r: &'a ProbeReport, id: &str) -> &'a Check {
    r.checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no {id} in {:?}", r.checks))
}

fn acs_states(name: &str) -> Vec<AcsState> {
    let src = LocalSource::replay(&root(name));
    let (report, facts) = probe_node(&src, &opts(), &NodeExpectations::default());
    let p = gather(&src, &facts, report.rail_map.as_ref());
    p.acs.into_iter().map(|a| a.state).collect()
}

#[test]
fn a_nic_trained_at_half_width_is_flagged_naming_the_device_and_both_values() {
    let r = probe("pcie_down");
    let c = check(&r, "node.pcie_link");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(
        c.detail
            .contains("mlx5_0 (0000:19:00.0) x8 32 GT/s, can train at x16 32 GT/s"),
        "{}",
        c.detail
    );
    // The link as read, with the bridge above it, is in the readiness section.
    let links = &r.readiness.as_ref().unwrap().pcie_links;
    let nic = links.iter().find(|l| l.device == "mlx5_0").unwrap();
    assert_eq!(nic.training(), LinkTraining::WidthBelow);
    assert_eq!(nic.bridge.as_deref(), Some("0000:17:01.0"));
    assert_eq!((nic.bridge_max_width, nic.bridge_max_speed_gts), (Some(16), Some(32.0)));
}

#[test]
fn full_links_and_an_idle_gpu_are_not_flagged() {
    let r = probe("pcie_ok");
    let c = check(&r, "node.pcie_link");
    assert_eq!(c.status, Status::Ok, "{c:?}");
    // The GPU at 2.5 GT/s of 32 is idle power saving: said, not warned.
    assert!(c.detail.contains("GPU0 below max speed"), "{}", c.detail);
    let links = &r.readiness.as_ref().unwrap().pcie_links;
    let gpu = links.iter().find(|l| l.device == "GPU0").unwrap();
    assert_eq!(gpu.training(), LinkTraining::SpeedBelow);
}

#[test]
fn a_tree_without_link_attributes_is_not_ok() {
    let c = check(&probe("hgx8"), "node.pcie_link").clone();
    assert_eq!(c.status, Status::Skipped, "{c:?}");
}

#[test]
fn acs_redirect_read_from_config_space_is_flagged() {
    assert_eq!(
        acs_states("pcie_down"),
        vec![AcsState::Redirects {
            bridge: "0000:17:00.0".into(),
            control: 0x001d
        }]
    );
    let c = check(&probe("pcie_down"), "node.acs").clone();
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(c.detail.contains("GPU0↔mlx5_0"), "{}", c.detail);
}

#[test]
fn acs_read_from_config_space_without_p2p_redirect_is_ok_whatever_the_groups() {
    // Source Validation and Upstream Forwarding only: peers are not redirected. Config space,
    // where readable, is what counts (the groups differ on this tree).
    assert_eq!(acs_states("pcie_acs_off"), vec![AcsState::Off]);
    assert_eq!(check(&probe("pcie_acs_off"), "node.acs").status, Status::Ok);
}

#[test]
fn acs_from_iommu_groups_where_config_space_needs_root() {
    // Unprivileged (64 bytes of config): separate groups behind one switch → ACS isolates them.
    assert_eq!(
        acs_states("pcie_acs_groups"),
        vec![AcsState::SeparateGroups {
            gpu: "12".into(),
            nic: "13".into()
        }]
    );
    assert_eq!(check(&probe("pcie_acs_groups"), "node.acs").status, Status::Warn);
    // One group: no ACS isolation between them.
    assert_eq!(acs_states("pcie_ok"), vec![AcsState::SameGroup { group: "12".into() }]);
    assert_eq!(check(&probe("pcie_ok"), "node.acs").status, Status::Ok);
}

#[test]
fn acs_unreadable_is_skipped_never_ok() {
    // hgx8: GPUs and NICs share switches, but no config space beyond 64 bytes, no IOMMU groups.
    assert!(acs_states("hgx8").iter().all(|s| *s == AcsState::Unknown));
    let c = check(&probe("hgx8"), "node.acs").clone();
    assert_eq!(c.status, Status::Skipped, "{c:?}");
}

#[test]
fn data_direct_nics_pair_with_gpus_through_their_data_direct_function() {
    let r = probe("gb300_dd");
    let map = r.rail_map.as_ref().unwrap();
    let rails: Vec<(usize, &str, Option<PcieRelation>)> = map
        .rails
        .iter()
        .map(|r| (r.gpu.as_ref().unwrap().ordinal, r.nic.name.as_str(), r.relation))
        .collect();
    assert_eq!(
        rails,
        vec![
            (0, "mlx5_0", Some(PcieRelation::Pix)),
            (1, "mlx5_1", Some(PcieRelation::Pix))
        ]
    );
    // The NIC is still keyed by its own PF.
    assert_eq!(map.rails[0].nic.pci.as_deref(), Some("0000:01:00.0"));
    assert!(
        map.notes
            .iter()
            .any(|n| n.contains("mlx5_0 is a ConnectX-8 with Data Direct") && n.contains("0008:04:00.0")),
        "{:?}",
        map.notes
    );
    let c = check(&r, "node.data_direct");
    assert_eq!(c.status, Status::Ok, "{c:?}");
    assert!(c.detail.contains("GPU0↔mlx5_0 via 0008:04:00.0"), "{}", c.detail);
}

#[test]
fn without_data_direct_the_pf_root_decides_and_nothing_is_flagged() {
    let r = probe("gb300_no_dd");
    let map = r.rail_map.as_ref().unwrap();
    assert!(
        map.rails.iter().all(|r| r.relation == Some(PcieRelation::Node)),
        "{:?}",
        map.rails
    );
    assert_eq!(check(&r, "node.data_direct").status, Status::Skipped);
    assert_eq!(check(&probe("hgx8"), "node.data_direct").status, Status::Skipped);
}

#[test]
fn readiness_exposes_each_port_for_comparing_two_sides() {
    // An InfiniBand HGX tree without firmware files or recorded tools.
    let r = probe("hgx8");
    let ready = r.readiness.as_ref().unwrap();
    assert_eq!(ready.ports.len(), 8);
    let p = &ready.ports[0];
    assert_eq!(p.port, "mlx5_0:1");
    assert_eq!(p.pci.as_deref(), Some("0000:19:00.0"));
    assert_eq!(p.link_layer.as_deref(), Some("InfiniBand"));
    // InfiniBand: no GID index; nothing the tree does not show is made up.
    assert_eq!((p.gid_index, p.active_mtu, p.firmware.clone()), (None, None, None));
    assert_eq!(ready.gdr_mode, None::<GdrMode>);
}

#[test]
fn roce_ports_expose_the_gid_index_and_type_auto_selection_would_use() {
    let node = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/nodes");
    let src = LocalSource::replay(&node.join("roce_gid_disagree"));
    let (r, _) = probe_node(&src, &opts(), &NodeExpectations::default());
    let ready = r.readiness.unwrap();
    let gids: Vec<(&str, Option<u32>, Option<&str>)> = ready
        .ports
        .iter()
        .map(|p| (p.port.as_str(), p.gid_index, p.gid_type.as_deref()))
        .collect();
    // The lowest RoCE v2 IPv4-mapped entry, not the link-local RoCE v2 one at index 1.
    assert_eq!(
        gids,
        vec![
            ("mlx5_0:1", Some(3), Some("RoCE v2")),
            ("mlx5_1:1", Some(5), Some("RoCE v2"))
        ]
    );
    // Two sides with these tables: the comparison names the port and both indices.
    let mut other = ready.clone();
    other.ports[0].gid_index = Some(1);
    let c = icb_core::readiness::compare("prefill", &ready, "decode", &other);
    assert_eq!(
        c.mismatches.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
        vec!["prefill mlx5_0:1 GID index 3, decode mlx5_0:1 GID index 1"]
    );
}
