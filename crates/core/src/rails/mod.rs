//! Rails: the rail map of a GPU node (`probe node`'s `rail_map`: which RDMA NIC port each GPU
//! should send through, how the two are connected on PCIe, which NICs were left out and why), the
//! NICs' byte counters ([`counters`]), and the per-rail result of `pair --rails` ([`outcome`],
//! judged by [`judge`]). Built by `icb_probe` and `icb_pair`; here only data and pure rules.

use serde::{Deserialize, Serialize};

pub mod counters;
pub mod judge;
mod judge_health;
pub mod nic_health;
pub mod outcome;

pub use counters::{CounterKind, CounterSnapshot, NicCounter, NicTraffic, Unreadable};
pub use outcome::*;

/// How a GPU and a NIC are connected on PCIe, in `nvidia-smi topo -m`'s spelling, closest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PcieRelation {
    /// At most one PCIe switch between them (the same switch).
    #[serde(rename = "PIX")]
    Pix,
    /// Several PCIe bridges, without crossing the host bridge.
    #[serde(rename = "PXB")]
    Pxb,
    /// Through the PCIe host bridge (the same root complex).
    #[serde(rename = "PHB")]
    Phb,
    /// Between root complexes of one NUMA node.
    #[serde(rename = "NODE")]
    Node,
    /// Across NUMA nodes (the SMP interconnect).
    #[serde(rename = "SYS")]
    Sys,
}

impl PcieRelation {
    pub fn as_str(self) -> &'static str {
        match self {
            PcieRelation::Pix => "PIX",
            PcieRelation::Pxb => "PXB",
            PcieRelation::Phb => "PHB",
            PcieRelation::Node => "NODE",
            PcieRelation::Sys => "SYS",
        }
    }

    /// The relation for `nvidia-smi topo -m`'s cell text; `None` for anything else (`NV#`, `X`).
    pub fn parse(text: &str) -> Option<PcieRelation> {
        match text.trim() {
            "PIX" => Some(PcieRelation::Pix),
            "PXB" => Some(PcieRelation::Pxb),
            "PHB" => Some(PcieRelation::Phb),
            "NODE" => Some(PcieRelation::Node),
            "SYS" => Some(PcieRelation::Sys),
            _ => None,
        }
    }
}

impl std::fmt::Display for PcieRelation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A GPU, by its ordinal in PCI bus order (what `CUDA_DEVICE_ORDER=PCI_BUS_ID` and nvidia-smi use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRef {
    pub ordinal: usize,
    /// PCI address, e.g. `0000:19:00.0`.
    pub pci: String,
    /// `None` when sysfs does not say (`-1`, missing, unreadable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
}

/// One port of an RDMA NIC. The PCI address is the NIC's key: `mlx5_N` names are not stable
/// across nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicRef {
    /// RDMA device name, e.g. `mlx5_0`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    pub port: u32,
    /// Logical/physical port state, e.g. `ACTIVE/LinkUp`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_layer: Option<String>,
    #[serde(default)]
    pub netdevs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
}

impl NicRef {
    /// `mlx5_0:1`, as `UCX_NET_DEVICES` and `NCCL_IB_HCA` spell a port.
    pub fn port_name(&self) -> String {
        format!("{}:{}", self.name, self.port)
    }
}

/// One rail: a GPU (none on a node without GPUs) and the NIC port it should use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rail {
    /// 0…K-1, in GPU order (NIC PCI order on a node without GPUs).
    pub index: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRef>,
    pub nic: NicRef,
    /// The GPU↔NIC relation computed from the PCI tree; absent without a GPU or when the tree
    /// does not tell (no PCI path, unknown NUMA node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<PcieRelation>,
}

/// Why a NIC port is not a rail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum LeftOutReason {
    /// Its netdev is enslaved to (or is) a bonding master: a front-end NIC.
    Bonded {
        netdev: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        master: Option<String>,
    },
    /// The port is not ACTIVE/LinkUp.
    PortDown,
    /// Below half of the fastest RDMA port's rate: a front-end NIC.
    Slow { fastest_gbps: f64 },
}

impl std::fmt::Display for LeftOutReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeftOutReason::Bonded { netdev, master } => match master {
                Some(m) => write!(f, "bonded ({netdev} is a slave of {m})"),
                None => write!(f, "bonded ({netdev} is a bonding master)"),
            },
            LeftOutReason::PortDown => f.write_str("port down"),
            LeftOutReason::Slow { fastest_gbps } => {
                write!(f, "slow (below half of the fastest port's {fastest_gbps} Gb/s)")
            }
        }
    }
}

/// A NIC port that is not a rail, with every reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftOutNic {
    pub nic: NicRef,
    pub reasons: Vec<LeftOutReason>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RailMap {
    pub rails: Vec<Rail>,
    #[serde(default)]
    pub left_out: Vec<LeftOutNic>,
    /// Shared NICs, disagreements with `nvidia-smi topo -m`, what could not be read.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl RailMap {
    /// One ready-to-paste line per local rank: `rank 0: UCX_NET_DEVICES=mlx5_0:1`. On a node with
    /// GPUs rank N is GPU N (PCI bus order) and gets every rail port of its GPU (two NICs per GPU:
    /// `mlx5_0:1,mlx5_1:1`); without GPUs rank N is rail N.
    pub fn ucx_net_devices(&self) -> Vec<String> {
        let mut ranks: Vec<(usize, Vec<String>)> = Vec::new();
        for r in &self.rails {
            let rank = r.gpu.as_ref().map_or(r.index, |g| g.ordinal);
            match ranks.iter_mut().find(|(n, _)| *n == rank) {
                Some((_, ports)) => ports.push(r.nic.port_name()),
                None => ranks.push((rank, vec![r.nic.port_name()])),
            }
        }
        ranks
            .into_iter()
            .map(|(rank, ports)| format!("rank {rank}: UCX_NET_DEVICES={}", ports.join(",")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(name: &str, port: u32) -> NicRef {
        NicRef {
            name: name.into(),
            pci: Some("0000:1a:00.0".into()),
            port,
            state: "ACTIVE/LinkUp".into(),
            rate_gbps: Some(400.0),
            link_layer: Some("InfiniBand".into()),
            netdevs: vec![],
            numa_node: Some(0),
        }
    }

    #[test]
    fn per_rank_ucx_net_devices() {
        let map = RailMap {
            rails: vec![
                Rail {
                    index: 0,
                    gpu: None,
                    nic: nic("mlx5_0", 1),
                    relation: None,
                },
                Rail {
                    index: 1,
                    gpu: None,
                    nic: nic("mlx5_3", 2),
                    relation: Some(PcieRelation::Pix),
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            map.ucx_net_devices(),
            vec!["rank 0: UCX_NET_DEVICES=mlx5_0:1", "rank 1: UCX_NET_DEVICES=mlx5_3:2"]
        );
        assert!(RailMap::default().ucx_net_devices().is_empty());
        // Two NICs per GPU: one rank, both ports.
        let gpu = |ordinal| GpuRef {
            ordinal,
            pci: String::new(),
            numa_node: None,
        };
        let two = RailMap {
            rails: vec![
                Rail {
                    index: 0,
                    gpu: Some(gpu(0)),
                    nic: nic("mlx5_0", 1),
                    relation: None,
                },
                Rail {
                    index: 1,
                    gpu: Some(gpu(0)),
                    nic: nic("mlx5_1", 1),
                    relation: None,
                },
                Rail {
                    index: 2,
                    gpu: Some(gpu(1)),
                    nic: nic("mlx5_2", 1),
                    relation: None,
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            two.ucx_net_devices(),
            vec![
                "rank 0: UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1",
                "rank 1: UCX_NET_DEVICES=mlx5_2:1"
            ]
        );
    }

    #[test]
    fn relations_use_nvidia_smi_spellings_and_order() {
        for r in [
            PcieRelation::Pix,
            PcieRelation::Pxb,
            PcieRelation::Phb,
            PcieRelation::Node,
            PcieRelation::Sys,
        ] {
            assert_eq!(PcieRelation::parse(r.as_str()), Some(r));
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{}\"", r.as_str()));
        }
        assert!(PcieRelation::Pix < PcieRelation::Sys);
        assert_eq!(PcieRelation::parse("NV18"), None);
    }

    #[test]
    fn left_out_reasons_are_tagged() {
        let v = serde_json::to_value(LeftOutReason::Bonded {
            netdev: "eth0".into(),
            master: Some("bond0".into()),
        })
        .unwrap();
        assert_eq!(v["reason"], "bonded");
        assert_eq!(v["master"], "bond0");
        let v = serde_json::to_value(LeftOutReason::Slow { fastest_gbps: 400.0 }).unwrap();
        assert_eq!(v["reason"], "slow");
        assert_eq!(
            LeftOutReason::PortDown.to_string(),
            "port down",
            "the table prints the reason as text"
        );
    }
}
