//! Where each rank process of the per-rank model runs: the decision, as a pure function of the
//! node's topology ([`icb_probe::numa::CpuTopology`]), the CPUs this run may use and each rank's
//! GPU — what an operator pinning serving workers would do:
//!
//! - **Several NUMA nodes**: a rank runs on the CPUs of its device's node (its GPU's for GPU
//!   memory; else the node of a NIC, ranks spread over the RDMA NICs that are up, else the
//!   physical netdevs that are up),
//!   so its buffer and its progress thread sit next to the device that moves the bytes — the
//!   `numactl --cpunodebind` of a tuned deployment. With no device locality known the ranks
//!   are spread over the nodes by rank index, so every rank's memory is local to its CPUs.
//! - **One NUMA node** (or none in sysfs, or one the run may use): ranks are left unpinned.
//!   Pinning buys no memory locality there, and with more busy-polling ranks than CPUs (6 ranks
//!   on 2 CPUs on the build machine) fixed CPUs would stack initiators on one CPU while another
//!   idles; the scheduler balances them better. Each rank still reports the CPUs it ran on.
//!
//! Only CPUs this run is allowed (its own affinity, a container's cpuset) are ever chosen.

use icb_core::protocol::kv_rank::{CpuPlacement, RankId};
use icb_probe::numa::CpuTopology;

/// One rank to place and the GPU it uses (ordinal in PCI bus order; `None`: host memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankDevice {
    pub id: RankId,
    pub gpu: Option<usize>,
}

/// Each rank's placement, in the order given.
pub fn place_ranks(topo: &CpuTopology, allowed: &[u32], ranks: &[RankDevice]) -> Vec<CpuPlacement> {
    // Nodes with CPUs this run may use, restricted to those CPUs.
    let usable: Vec<(u32, Vec<u32>)> = topo
        .nodes
        .iter()
        .map(|n| {
            (
                n.id,
                n.cpus
                    .iter()
                    .copied()
                    .filter(|c| allowed.contains(c))
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect();
    if usable.len() <= 1 {
        let reason = match (topo.nodes.len(), usable.first()) {
            (0, _) => "unpinned: sysfs shows no NUMA topology".to_string(),
            (1, _) => format!(
                "unpinned: one NUMA node, {} CPUs allowed; the scheduler spreads the ranks",
                allowed.len()
            ),
            (n, _) => format!("unpinned: the allowed CPUs lie on one of the {n} NUMA nodes"),
        };
        return ranks
            .iter()
            .map(|_| CpuPlacement {
                cpus: Vec::new(),
                numa_node: usable.first().map(|u| u.0),
                reason: reason.clone(),
            })
            .collect();
    }
    let on = |node: u32| usable.iter().find(|u| u.0 == node).map(|u| u.1.clone());
    // NICs on a usable node: RDMA devices where there are any, else physical netdevs.
    let nics: Vec<(&str, u32)> = {
        let with = |rdma: bool| -> Vec<(&str, u32)> {
            topo.nics
                .iter()
                .filter(|n| n.rdma == rdma && n.up)
                .filter_map(|n| Some((n.name.as_str(), n.numa_node.filter(|&m| on(m).is_some())?)))
                .collect()
        };
        let rdma = with(true);
        if rdma.is_empty() { with(false) } else { rdma }
    };
    ranks
        .iter()
        .map(|r| {
            let gpu = r
                .gpu
                .and_then(|g| Some((g, topo.gpus.get(g).copied().flatten()?)))
                .filter(|(_, n)| on(*n).is_some());
            let (node, reason) = if let Some((g, n)) = gpu {
                (n, format!("NUMA node {n} of GPU{g}"))
            } else if !nics.is_empty() {
                let (name, n) = nics[r.id.rank as usize % nics.len()];
                (n, format!("NUMA node {n} of NIC {name}"))
            } else {
                let n = usable[r.id.rank as usize % usable.len()].0;
                let k = usable.len();
                (
                    n,
                    format!("NUMA node {n}: no device locality known, ranks spread over {k} nodes"),
                )
            };
            CpuPlacement {
                cpus: on(node).unwrap_or_default(),
                numa_node: Some(node),
                reason,
            }
        })
        .collect()
}

/// The CPUs this process may run on (its affinity), ascending; what the ranks it starts inherit.
pub use icb_probe::numa::allowed_cpus;

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::protocol::kv_rank::RankSide;
    use icb_probe::numa::{NicNuma, NumaNode};

    fn rank(side: RankSide, rank: u32, gpu: Option<usize>) -> RankDevice {
        RankDevice {
            id: RankId { side, rank },
            gpu,
        }
    }

    fn two_nodes() -> CpuTopology {
        CpuTopology {
            nodes: vec![
                NumaNode {
                    id: 0,
                    cpus: vec![0, 1, 4, 5],
                },
                NumaNode {
                    id: 1,
                    cpus: vec![2, 3, 6, 7],
                },
            ],
            gpus: vec![Some(0), Some(1)],
            nics: vec![
                NicNuma {
                    name: "mlx5_0".into(),
                    numa_node: Some(1),
                    rdma: true,
                    up: true,
                },
                NicNuma {
                    name: "mlx5_1".into(),
                    numa_node: Some(0),
                    rdma: true,
                    up: false,
                },
                NicNuma {
                    name: "eth0".into(),
                    numa_node: Some(0),
                    rdma: false,
                    up: true,
                },
            ],
        }
    }

    /// The GPU decides first, then an RDMA NIC that is up (the netdev is not used while one
    /// exists; the down mlx5_1 never); only allowed CPUs are chosen.
    #[test]
    fn a_rank_runs_on_its_devices_node_within_the_allowed_cpus() {
        let allowed: Vec<u32> = (0..8).filter(|&c| c != 7).collect();
        let ranks = [
            rank(RankSide::Prefill, 0, Some(1)),
            rank(RankSide::Decode, 0, Some(0)),
            rank(RankSide::Decode, 1, None),
            // A GPU the topology does not know: its NIC decides.
            rank(RankSide::Decode, 2, Some(9)),
        ];
        let p = place_ranks(&two_nodes(), &allowed, &ranks);
        assert_eq!(p[0].cpus, [2, 3, 6]);
        assert_eq!((p[0].numa_node, p[0].reason.as_str()), (Some(1), "NUMA node 1 of GPU1"));
        assert_eq!(p[1].cpus, [0, 1, 4, 5]);
        assert_eq!(p[1].reason, "NUMA node 0 of GPU0");
        assert_eq!(p[2].cpus, [2, 3, 6]);
        assert_eq!(p[2].reason, "NUMA node 1 of NIC mlx5_0");
        assert_eq!(p[3].reason, "NUMA node 1 of NIC mlx5_0");
    }

    /// No RDMA NIC: a physical netdev's node; no NIC at all: ranks spread by index.
    #[test]
    fn without_device_locality_ranks_spread_over_the_nodes() {
        let mut t = two_nodes();
        t.gpus.clear();
        t.nics.retain(|n| !n.rdma);
        let allowed: Vec<u32> = (0..8).collect();
        let p = place_ranks(&t, &allowed, &[rank(RankSide::Decode, 1, None)]);
        assert_eq!(
            (p[0].numa_node, p[0].reason.as_str()),
            (Some(0), "NUMA node 0 of NIC eth0")
        );
        t.nics.clear();
        let ranks: Vec<RankDevice> = (0..3).map(|r| rank(RankSide::Prefill, r, None)).collect();
        let p = place_ranks(&t, &allowed, &ranks);
        let nodes: Vec<Option<u32>> = p.iter().map(|x| x.numa_node).collect();
        assert_eq!(nodes, [Some(0), Some(1), Some(0)]);
        assert_eq!(p[1].cpus, [2, 3, 6, 7]);
        assert!(p[1].reason.contains("spread over 2 nodes"), "{}", p[1].reason);
    }

    /// One node, no node at all, or a cpuset inside one node: unpinned, and the reason says which.
    #[test]
    fn one_usable_node_leaves_the_ranks_unpinned() {
        let ranks = [rank(RankSide::Prefill, 0, Some(0)), rank(RankSide::Decode, 0, Some(1))];
        let mut one = two_nodes();
        one.nodes.truncate(1);
        let p = place_ranks(&one, &[0, 1], &ranks);
        assert!(p.iter().all(|x| x.cpus.is_empty() && x.numa_node == Some(0)), "{p:?}");
        assert!(
            p[0].reason.starts_with("unpinned: one NUMA node, 2 CPUs allowed"),
            "{}",
            p[0].reason
        );
        let p = place_ranks(&CpuTopology::default(), &[0, 1], &ranks);
        assert!(p.iter().all(|x| x.cpus.is_empty() && x.numa_node.is_none()));
        assert_eq!(p[0].reason, "unpinned: sysfs shows no NUMA topology");
        // Two nodes, but this run may use CPUs of node 1 only.
        let p = place_ranks(&two_nodes(), &[2, 3], &ranks);
        assert!(p.iter().all(|x| x.cpus.is_empty() && x.numa_node == Some(1)), "{p:?}");
        assert!(p[0].reason.contains("one of the 2 NUMA nodes"), "{}", p[0].reason);
    }
}
