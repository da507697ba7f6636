//! The CPU/NUMA topology (`icb_probe::numa`) read from the recorded sysfs trees of
//! tests/fixtures/rails (generate.py writes their node cpulists).

use icb_probe::LocalSource;
use icb_probe::numa::{NumaNode, cpu_topology};
use std::path::PathBuf;

fn src(name: &str) -> LocalSource {
    LocalSource::replay(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/rails")
            .join(name),
    )
}

#[test]
fn hgx_gpus_and_nics_sit_on_the_node_of_their_switch() {
    let t = cpu_topology(&src("hgx8"));
    assert_eq!(t.nodes.len(), 2);
    assert_eq!(t.nodes[0].id, 0);
    assert_eq!(t.nodes[0].cpus.len(), 112);
    assert_eq!(
        (t.nodes[1].cpus[0], t.nodes[1].cpus[55], t.nodes[1].cpus[56]),
        (56, 111, 168)
    );
    // GPUs 0-3 behind the first two switches (node 0), 4-7 behind the others (node 1).
    let want: Vec<Option<u32>> = (0..8).map(|i| Some(if i < 4 { 0 } else { 1 })).collect();
    assert_eq!(t.gpus, want);
    let rdma: Vec<(&str, Option<u32>)> = t
        .nics
        .iter()
        .filter(|n| n.rdma)
        .map(|n| (n.name.as_str(), n.numa_node))
        .collect();
    assert_eq!(rdma.len(), 8);
    assert_eq!(rdma[0], ("mlx5_0", Some(0)));
    assert_eq!(rdma[7], ("mlx5_7", Some(1)));
}

#[test]
fn a_cpu_node_has_nics_but_no_gpus_and_a_single_node_tree_one_node() {
    let t = cpu_topology(&src("no_gpu"));
    assert!(t.gpus.is_empty());
    let nodes: Vec<(&str, Option<u32>)> = t
        .nics
        .iter()
        .filter(|n| n.rdma)
        .map(|n| (n.name.as_str(), n.numa_node))
        .collect();
    assert_eq!(nodes, [("mlx5_0", Some(1)), ("mlx5_1", Some(0)), ("mlx5_2", Some(0))]);
    // mlx5_2's one port is down.
    let up: Vec<bool> = t.nics.iter().filter(|n| n.rdma).map(|n| n.up).collect();
    assert_eq!(up, [true, true, false]);
    let t = cpu_topology(&src("counters"));
    assert_eq!(
        t.nodes,
        [NumaNode {
            id: 0,
            cpus: (0..8).collect()
        }]
    );
    // Virtual netdevs (lo, eth0 under /sys/devices/virtual) are no NICs of the node.
    assert!(
        t.nics.iter().all(|n| n.rdma || n.name.starts_with("ens")),
        "{:?}",
        t.nics
    );
    // No node directory at all: no nodes, nothing invented.
    assert!(cpu_topology(&src("broken")).nodes.is_empty());
}
