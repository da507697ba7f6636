//! Rank placement (`icb_rails::cpus::place_ranks`) on the recorded sysfs trees of real
//! layouts (crates/probe/tests/fixtures/rails): the topology as `icb_probe::numa` reads it, the
//! decision as the per-rank model takes it.

use icb_core::protocol::kv_rank::{RankId, RankSide};
use icb_probe::LocalSource;
use icb_probe::numa::{CpuTopology, cpu_topology};
use icb_rails::cpus::{RankDevice, place_ranks};
use std::path::PathBuf;

fn topology(name: &str) -> CpuTopology {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../probe/tests/fixtures/rails")
        .join(name);
    cpu_topology(&LocalSource::replay(&root))
}

fn ranks(side: RankSide, n: u32, gpus: Option<u32>) -> Vec<RankDevice> {
    (0..n)
        .map(|rank| RankDevice {
            id: RankId { side, rank },
            gpu: gpus.map(|g| (rank % g) as usize),
        })
        .collect()
}

/// HGX, 8 GPUs over 2 sockets, every CPU allowed: TP8 decode ranks on GPU memory run on their
/// GPU's socket (GPUs 0-3: CPUs 0-55,112-167; 4-7: 56-111,168-223).
#[test]
fn hgx_gpu_ranks_run_on_their_gpus_socket() {
    let t = topology("hgx8");
    let allowed: Vec<u32> = (0..224).collect();
    let p = place_ranks(&t, &allowed, &ranks(RankSide::Decode, 8, Some(8)));
    for (i, x) in p.iter().enumerate() {
        let node = if i < 4 { 0 } else { 1 };
        assert_eq!(x.numa_node, Some(node), "rank {i}: {x:?}");
        assert_eq!(x.reason, format!("NUMA node {node} of GPU{i}"));
        assert_eq!(x.cpus.len(), 112);
        assert_eq!(x.cpus[0], if node == 0 { 0 } else { 56 });
    }
    // A container allowed CPUs 0-7 and 56-63 only: still its socket, only those CPUs.
    let allowed: Vec<u32> = (0..8).chain(56..64).collect();
    let p = place_ranks(&t, &allowed, &ranks(RankSide::Decode, 8, Some(8)));
    assert_eq!(p[0].cpus, (0..8).collect::<Vec<_>>());
    assert_eq!(p[7].cpus, (56..64).collect::<Vec<_>>());
}

/// A CPU node (no GPU), host memory: ranks spread over its RDMA NICs that are up, by name
/// (mlx5_0 on node 1, mlx5_1 on node 0; mlx5_2, on node 0, is down and never chosen).
#[test]
fn host_memory_ranks_on_a_cpu_node_follow_the_nics() {
    let t = topology("no_gpu");
    let allowed: Vec<u32> = (0..64).collect();
    let p = place_ranks(&t, &allowed, &ranks(RankSide::Prefill, 4, None));
    let got: Vec<(Option<u32>, &str)> = p.iter().map(|x| (x.numa_node, x.reason.as_str())).collect();
    assert_eq!(
        got,
        [
            (Some(1), "NUMA node 1 of NIC mlx5_0"),
            (Some(0), "NUMA node 0 of NIC mlx5_1"),
            (Some(1), "NUMA node 1 of NIC mlx5_0"),
            (Some(0), "NUMA node 0 of NIC mlx5_1"),
        ]
    );
    assert_eq!(p[0].cpus, (32..64).collect::<Vec<_>>());
}

/// One NUMA node (the `counters` tree, like this build machine): every rank unpinned, the
/// reason says so; a tree without node directories says that instead.
#[test]
fn one_numa_node_leaves_every_rank_unpinned() {
    let p = place_ranks(&topology("counters"), &[0, 1], &ranks(RankSide::Decode, 3, None));
    assert!(p.iter().all(|x| x.cpus.is_empty() && x.numa_node == Some(0)), "{p:?}");
    assert!(p[0].reason.starts_with("unpinned: one NUMA node"), "{}", p[0].reason);
    let p = place_ranks(&topology("broken"), &[0, 1], &ranks(RankSide::Decode, 1, None));
    assert_eq!(p[0].reason, "unpinned: sysfs shows no NUMA topology");
}
