//! One node's rails as the planner needs them ([`NodeRailInfo`]): the rail map from sysfs (or a
//! recorded tree) and, per rail, the device whose counters carry its bytes and what UCX is told.
//! One function for every seam, so a rail is planned the same way whether the node is an emulated
//! local one (read from here), a bench pod (`ic-bench rail-info`, exec'd there) or a real host.

use super::plan::NodeRailInfo;
use icb_core::rails::CounterSnapshot;
use icb_probe::{GatherOptions, LocalSource, NodeSource};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// Test-only: a recorded rail-map tree (a root holding `sys/…`) that `ic-bench rail-info` reads
/// the rail map from instead of `/sys` (the emulated cluster sets it; a pair side reads its
/// readiness from it too); the counters are still read from the real `/sys`.
pub use icb_probe::readiness::RAIL_TREE_ENV;

/// `node`'s rails: the map from `tree` (a recorded sysfs root) or else this host's sysfs, the
/// counter devices from `sys_root` (the sysfs where the node's own counters are readable).
pub fn node_info(node: String, tree: Option<&Path>, sys_root: &Path) -> NodeRailInfo {
    let src: Box<dyn NodeSource> = match tree {
        Some(t) => Box::new(LocalSource::replay(t)),
        None => Box::new(LocalSource::default()),
    };
    let opts = GatherOptions {
        tool_timeout: Duration::from_secs(5),
        counter_interval: Duration::ZERO,
    };
    let facts = icb_probe::gather(src.as_ref(), &opts);
    let map = icb_probe::rails::rail_map(src.as_ref(), &facts).unwrap_or_default();
    let devices = map
        .rails
        .iter()
        // An RDMA port is opened by its port name, a NIC seen here only as a network device (an
        // emulated one) by that device: either way the device whose counters carry its bytes.
        .map(|r| icb_probe::counters::counter_device(sys_root, &r.nic).unwrap_or_else(|| r.nic.port_name()))
        .collect();
    let pcie = icb_probe::readiness::gather(src.as_ref(), &facts, Some(&map));
    let readiness = Some(icb_probe::readiness::readiness(src.as_ref(), &facts, &pcie));
    NodeRailInfo {
        node,
        map,
        devices,
        pcie_roots: icb_probe::rails::pcie_roots(src.as_ref()),
        readiness,
    }
}

/// What `ic-bench rail-info` prints, one JSON line: the node's rails, or with `--counters` only
/// a snapshot of its counters (read twice per phase: the map is not recomputed each time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailInfoLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<NodeRailInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<CounterSnapshot>,
    /// With `--counters`: the RDMA ports' error and congestion counters, read right after the
    /// byte counters (added within v1; an older binary prints none: "not read").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<icb_core::rails::nic_health::HealthSnapshot>,
    /// With `--cpus`: the node's NUMA topology and the CPUs a process here may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<HostCpus>,
}

/// Where a process may run on a host, as that process sees it: the node's NUMA topology (its
/// `/sys`: in a pod, the node's) and the CPUs its affinity allows (in a pod, its cpuset). What
/// [`crate::cpus::place_ranks`] decides from, for ranks exec'd into a pod.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostCpus {
    pub topology: icb_probe::numa::CpuTopology,
    pub allowed: Vec<u32>,
}

impl HostCpus {
    /// This process's view: the topology from `tree` (a recorded sysfs root, [`RAIL_TREE_ENV`]:
    /// an emulated node's, as its rail map is read) or else this host's sysfs; the allowed CPUs
    /// are always this process's own affinity.
    pub fn here(tree: Option<&Path>) -> HostCpus {
        let topology = match tree {
            Some(t) => icb_probe::numa::cpu_topology(&LocalSource::replay(t)),
            None => icb_probe::numa::cpu_topology(&LocalSource::default()),
        };
        HostCpus {
            topology,
            allowed: crate::cpus::allowed_cpus(),
        }
    }
}

/// What `ic-bench rail-info` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoKind {
    Rails,
    Counters,
    Cpus,
}

/// This host's line: `node` names it, `tree` is [`RAIL_TREE_ENV`] when set.
pub fn this_host(node: String, tree: Option<&Path>, kind: InfoKind) -> RailInfoLine {
    let sys = Path::new("/sys");
    let mut line = RailInfoLine {
        info: None,
        counters: None,
        health: None,
        cpus: None,
    };
    match kind {
        InfoKind::Counters => {
            line.counters = Some(icb_probe::counters::snapshot(sys));
            // An emulated node's NIC ports (and their counter files) exist only in its tree.
            let health_root = tree.map_or_else(|| sys.to_path_buf(), |t| t.join("sys"));
            line.health = Some(icb_probe::counters::health_snapshot_with_pause(
                &health_root,
                &icb_probe::counters::ethtool_stats,
            ));
        }
        InfoKind::Rails => line.info = Some(node_info(node, tree, sys)),
        InfoKind::Cpus => line.cpus = Some(HostCpus::here(tree)),
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emulated_trees_rails_are_planned_on_their_netdevs() {
        let dir = std::env::temp_dir().join(format!("icb-rail-info-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        icb_isolate::write_rail_tree(&dir, 3).unwrap();
        // The tree has no statistics: the counter device falls back to the RDMA port name.
        let info = node_info("n1".into(), Some(&dir), &dir.join("sys"));
        assert_eq!(info.map.rails.len(), 3);
        assert_eq!(info.devices.len(), 3);
        assert_eq!(info.devices[2], "mlx5_2:1");
        // Each NIC's PCIe root as the tree shows it (DRA slices are checked against these).
        assert_eq!(info.pcie_roots[&icb_isolate::rail_nic_pci(2)], "pci0000:02");
        // With the GPUs of a DRA node, GPU k takes rail k's NIC, beside it on one root port.
        icb_isolate::write_rail_gpus(&dir, 3).unwrap();
        let with_gpus = node_info("n1".into(), Some(&dir), &dir.join("sys"));
        std::fs::remove_dir_all(&dir).unwrap();
        for rail in &with_gpus.map.rails {
            let gpu = rail.gpu.as_ref().expect("a GPU per rail");
            assert_eq!(rail.nic.name, format!("mlx5_{}", gpu.ordinal), "{rail:?}");
            assert_eq!(rail.relation, Some(icb_core::rails::PcieRelation::Pix), "{rail:?}");
            assert_eq!(with_gpus.pcie_roots[&gpu.pci], icb_isolate::rail_pcie_root(gpu.ordinal));
        }
        let line = RailInfoLine {
            info: Some(info.clone()),
            counters: None,
            health: None,
            cpus: None,
        };
        let back: RailInfoLine = serde_json::from_str(&serde_json::to_string(&line).unwrap()).unwrap();
        assert_eq!(back.info, Some(info));
    }

    /// `--cpus` reports this process's own affinity (never empty on Linux) and the topology of
    /// a recorded tree where one is given (two NUMA nodes here), and reads back whole.
    #[test]
    fn a_hosts_cpus_line_reads_back_whole() {
        let dir = std::env::temp_dir().join(format!("icb-rail-info-cpus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (n, cpus) in [(0, "0-3"), (1, "4-7")] {
            let node = dir.join(format!("sys/devices/system/node/node{n}"));
            std::fs::create_dir_all(&node).unwrap();
            std::fs::write(node.join("cpulist"), format!("{cpus}\n")).unwrap();
        }
        let line = this_host("n1".into(), Some(&dir), InfoKind::Cpus);
        std::fs::remove_dir_all(&dir).unwrap();
        let cpus = line.cpus.clone().expect("a cpus line");
        assert!(!cpus.allowed.is_empty());
        let nodes: Vec<(u32, Vec<u32>)> = cpus.topology.nodes.iter().map(|n| (n.id, n.cpus.clone())).collect();
        assert_eq!(nodes, [(0, vec![0, 1, 2, 3]), (1, vec![4, 5, 6, 7])]);
        assert!(line.info.is_none() && line.counters.is_none());
        let back: RailInfoLine = serde_json::from_str(&serde_json::to_string(&line).unwrap()).unwrap();
        assert_eq!(back.cpus, Some(cpus));
    }
}
