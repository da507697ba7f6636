//! Which rails a run pairs: from each node's rail map (`--rails auto`), an explicit GPU→NIC list
//! (`--rails gpu0=mlx5_0,…`) or named network devices for host-memory rails (`--rail-devices`).
//! Decided once before anything starts; every mistake is one line naming what to fix.

use super::RailRow;
use icb_core::rails::{NicRef, RailEnd, RailMap, RailPattern};
use icb_core::readiness::{PortReadiness, Readiness, ReadinessMismatch};

/// Which rails to run, as the flags say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RailSelection {
    /// Every rail of the nodes' rail maps (`--rails auto`).
    Auto,
    /// Rank i uses GPU `.0` and NIC `.1` (`--rails gpu0=mlx5_0,gpu1=mlx5_3`), on both nodes.
    Explicit(Vec<(usize, String)>),
    /// Host-memory rails over these network devices, on both nodes (`--rail-devices`).
    Devices(Vec<String>),
}

impl std::str::FromStr for RailSelection {
    type Err = RailPlanError;

    /// `auto` or `gpuN=NIC,…`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text == "auto" {
            return Ok(RailSelection::Auto);
        }
        let bad = || RailPlanError(format!("--rails {text:?}: write `auto` or `gpu0=mlx5_0,gpu1=mlx5_3,…`"));
        let mut pairs = Vec::new();
        for item in text.split(',') {
            let (gpu, nic) = item.trim().split_once('=').ok_or_else(bad)?;
            let ordinal = gpu.trim().strip_prefix("gpu").and_then(|n| n.parse::<usize>().ok());
            let nic = nic.trim();
            match ordinal {
                Some(o) if !nic.is_empty() => pairs.push((o, nic.to_string())),
                _ => return Err(bad()),
            }
        }
        let mut gpus: Vec<usize> = pairs.iter().map(|p| p.0).collect();
        gpus.sort_unstable();
        gpus.dedup();
        if gpus.len() != pairs.len() {
            return Err(RailPlanError(format!("--rails {text:?}: a GPU is named twice")));
        }
        Ok(RailSelection::Explicit(pairs))
    }
}

/// A rails plan that cannot run, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RailPlanError(pub String);

/// One node as the planner sees it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeRailInfo {
    pub node: String,
    pub map: RailMap,
    /// For each rail of `map`, in order, the device a rank opens on this host and whose
    /// counters carry the rail's bytes: the RDMA port (`mlx5_0:1`), or the network device of a
    /// NIC that shows here only as one (an emulated NIC: `rail0`).
    pub devices: Vec<String>,
    /// Each PCI device's root complex in this node's PCI tree (address → `pci0000:16`), which
    /// a node's DRA slices are checked against (`super::dra_roots`). Empty from an older
    /// `rail-info` or where the tree does not resolve: not known, nothing is checked.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pcie_roots: std::collections::BTreeMap<String, String>,
    /// The node's RDMA readiness as `probe node` reads it (each port's MTU, GID, link layer,
    /// firmware), for comparing a rail's two ends before it runs; absent from an older node's
    /// `rail-info`: not compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<Readiness>,
}

impl NodeRailInfo {
    /// `end`'s port as this node's readiness has it.
    fn port(&self, end: &RailEnd) -> Option<&PortReadiness> {
        let name = end.nic.port_name();
        self.readiness.as_ref()?.ports.iter().find(|p| p.port == name)
    }
}

/// What the two ends of a row disagree on (`prefill mlx5_1:1 netdev MTU 9000, decode mlx5_1:1
/// netdev MTU 1500`); empty where either end's port was not read.
fn mismatches(prefill: (&NodeRailInfo, &RailEnd), decode: (&NodeRailInfo, &RailEnd)) -> Vec<ReadinessMismatch> {
    let (Some(pa), Some(pb)) = (prefill.0.port(prefill.1), decode.0.port(decode.1)) else {
        return Vec::new();
    };
    let a = format!("prefill {}", pa.port);
    let b = format!("decode {}", pb.port);
    icb_core::readiness::compare_ports(&a, pa, &b, pb).mismatches
}

impl NodeRailInfo {
    /// The rail ends of this node for a selection, in rank order.
    fn ends(&self, selection: &RailSelection, told: Option<&[String]>) -> Result<Vec<RailEnd>, RailPlanError> {
        let mut ends: Vec<RailEnd> = match selection {
            RailSelection::Devices(devs) => devs
                .iter()
                .enumerate()
                .map(|(i, d)| RailEnd {
                    rail: i,
                    node: self.node.clone(),
                    gpu: None,
                    nic: netdev_nic(d),
                    relation: None,
                    ucx_net_devices: d.clone(),
                    counter_device: d.clone(),
                })
                .collect(),
            RailSelection::Auto => {
                if self.map.rails.is_empty() {
                    return Err(RailPlanError(format!(
                        "the rail map of {} has no usable NIC{}: see `ic-bench probe node`",
                        self.node,
                        left_out_text(&self.map)
                    )));
                }
                (0..self.map.rails.len()).map(|i| self.end_of(i, None)).collect()
            }
            RailSelection::Explicit(pairs) => pairs
                .iter()
                .enumerate()
                .map(|(rank, (gpu, nic))| self.explicit_end(rank, *gpu, nic))
                .collect::<Result<_, _>>()?,
        };
        if let Some(told) = told {
            if told.len() != ends.len() {
                return Err(RailPlanError(format!(
                    "--rail-devices names {} devices for {} rails on {}: give one per rail",
                    told.len(),
                    ends.len(),
                    self.node
                )));
            }
            for (end, dev) in ends.iter_mut().zip(told) {
                end.ucx_net_devices = dev.clone();
            }
        }
        Ok(ends)
    }

    fn end_of(&self, i: usize, rank: Option<usize>) -> RailEnd {
        let rail = &self.map.rails[i];
        RailEnd {
            rail: rank.unwrap_or(rail.index),
            node: self.node.clone(),
            gpu: rail.gpu.clone(),
            nic: rail.nic.clone(),
            relation: rail.relation,
            ucx_net_devices: self.devices[i].clone(),
            counter_device: self.devices[i].clone(),
        }
    }

    fn explicit_end(&self, rank: usize, gpu: usize, nic: &str) -> Result<RailEnd, RailPlanError> {
        let gpus: Vec<usize> = self
            .map
            .rails
            .iter()
            .filter_map(|r| r.gpu.as_ref().map(|g| g.ordinal))
            .collect();
        let Some(gpu_rail) = self
            .map
            .rails
            .iter()
            .position(|r| r.gpu.as_ref().is_some_and(|g| g.ordinal == gpu))
        else {
            return Err(RailPlanError(format!(
                "--rails: {} has no GPU gpu{gpu} (it has {})",
                self.node,
                list_or_none(gpus.iter().map(|g| format!("gpu{g}")))
            )));
        };
        let Some(nic_rail) = self.map.rails.iter().position(|r| r.nic.name == nic) else {
            return Err(RailPlanError(format!(
                "--rails: {} has no rail NIC {nic} (it has {})",
                self.node,
                list_or_none(self.map.rails.iter().map(|r| r.nic.name.clone()))
            )));
        };
        let mut end = self.end_of(nic_rail, Some(rank));
        end.gpu = self.map.rails[gpu_rail].gpu.clone();
        // The relation is known for a GPU and its own nearest NIC only.
        end.relation = (gpu_rail == nic_rail).then_some(end.relation).flatten();
        Ok(end)
    }
}

fn list_or_none(items: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = items.collect();
    if v.is_empty() { "none".into() } else { v.join(", ") }
}

fn left_out_text(map: &RailMap) -> String {
    if map.left_out.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = map
        .left_out
        .iter()
        .map(|l| {
            let why: Vec<String> = l.reasons.iter().map(ToString::to_string).collect();
            format!("{} {}", l.nic.port_name(), why.join(", "))
        })
        .collect();
    format!(" (left out: {})", parts.join("; "))
}

/// A network device used as a host-memory rail.
fn netdev_nic(dev: &str) -> NicRef {
    NicRef {
        name: dev.to_string(),
        pci: None,
        port: 1,
        state: "unknown".into(),
        rate_gbps: None,
        link_layer: Some("Ethernet".into()),
        netdevs: vec![dev.to_string()],
        numa_node: None,
    }
}

/// The rows of a run: aligned (rank i ↔ rank i, one round) or cross (K rounds, round r pairing
/// prefill rail i with decode rail (i + r) mod K).
pub fn plan_rows(
    prefill: &NodeRailInfo,
    decode: &NodeRailInfo,
    selection: &RailSelection,
    told: Option<&[String]>,
    pattern: RailPattern,
) -> Result<Vec<RailRow>, RailPlanError> {
    let p = prefill.ends(selection, told)?;
    let d = decode.ends(selection, told)?;
    if p.len() != d.len() {
        return Err(RailPlanError(format!(
            "{} has {} rails and {} has {}: pair nodes of one kind, or name the rails with --rails gpuN=NIC",
            prefill.node,
            p.len(),
            decode.node,
            d.len()
        )));
    }
    let k = p.len();
    let rounds = match pattern {
        RailPattern::Aligned => 1,
        RailPattern::Cross => k,
    };
    Ok((0..rounds)
        .flat_map(|round| (0..k).map(move |i| (round, i)))
        .enumerate()
        .map(|(index, (round, i))| RailRow {
            index,
            round,
            prefill: p[i].clone(),
            decode: d[(i + round) % k].clone(),
            mismatches: mismatches((prefill, &p[i]), (decode, &d[(i + round) % k])),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::rails::{GpuRef, Rail};

    fn node(name: &str, k: usize) -> NodeRailInfo {
        let map = RailMap {
            rails: (0..k)
                .map(|i| Rail {
                    index: i,
                    gpu: Some(GpuRef {
                        ordinal: i,
                        pci: format!("0000:{:02x}:00.0", 0x19 + 0x10 * i),
                        numa_node: Some(0),
                    }),
                    nic: NicRef {
                        netdevs: vec![format!("ib{i}")],
                        ..netdev_nic(&format!("mlx5_{i}"))
                    },
                    relation: Some(icb_core::rails::PcieRelation::Pix),
                })
                .collect(),
            ..Default::default()
        };
        let devices = (0..k).map(|i| format!("mlx5_{i}:1")).collect();
        NodeRailInfo {
            node: name.into(),
            map,
            devices,
            pcie_roots: Default::default(),
            readiness: None,
        }
    }

    #[test]
    fn aligned_pairs_rank_i_with_rank_i_and_cross_runs_k_rounds() {
        let rows = plan_rows(
            &node("a", 4),
            &node("b", 4),
            &RailSelection::Auto,
            None,
            RailPattern::Aligned,
        )
        .unwrap();
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.round == 0 && r.prefill.rail == r.decode.rail));
        assert_eq!(rows[2].prefill.ucx_net_devices, "mlx5_2:1");
        let rows = plan_rows(
            &node("a", 3),
            &node("b", 3),
            &RailSelection::Auto,
            None,
            RailPattern::Cross,
        )
        .unwrap();
        assert_eq!(rows.len(), 9);
        let round1: Vec<(usize, usize)> = rows
            .iter()
            .filter(|r| r.round == 1)
            .map(|r| (r.prefill.rail, r.decode.rail))
            .collect();
        assert_eq!(round1, vec![(0, 1), (1, 2), (2, 0)], "each NIC once per round");
        assert_eq!(
            rows.iter().map(|r| r.index).collect::<Vec<_>>(),
            (0..9).collect::<Vec<_>>()
        );
    }

    #[test]
    fn explicit_rails_and_told_devices() {
        let sel: RailSelection = "gpu0=mlx5_1, gpu1=mlx5_0".parse().unwrap();
        let told = vec!["mlx5_1:1".to_string(), "mlx5_1:1".to_string()];
        let rows = plan_rows(&node("a", 2), &node("b", 2), &sel, Some(&told), RailPattern::Aligned).unwrap();
        assert_eq!(rows[0].prefill.gpu.as_ref().unwrap().ordinal, 0);
        assert_eq!(rows[0].prefill.nic.name, "mlx5_1");
        assert_eq!(
            rows[0].prefill.relation, None,
            "not the GPU's own NIC: relation unknown"
        );
        assert_eq!(rows[1].prefill.counter_device, "mlx5_0:1");
        assert_eq!(rows[1].prefill.ucx_net_devices, "mlx5_1:1", "what the rank is told");
    }

    #[test]
    fn bad_selections_are_one_line_naming_what_to_fix() {
        for (text, want) in [
            ("gpu9=mlx5_0", "a has no GPU gpu9 (it has gpu0, gpu1)"),
            ("gpu0=mlx5_7", "a has no rail NIC mlx5_7 (it has mlx5_0, mlx5_1)"),
        ] {
            let sel: RailSelection = text.parse().unwrap();
            let err = plan_rows(&node("a", 2), &node("b", 2), &sel, None, RailPattern::Aligned).unwrap_err();
            assert!(err.0.contains(want), "{err}");
        }
        for text in ["", "gpu0", "mlx5_0=gpu0", "gpu0=", "gpu0=a,gpu0=b"] {
            let err = text.parse::<RailSelection>().unwrap_err();
            assert!(err.0.starts_with("--rails"), "{err}");
        }
        let err = plan_rows(
            &node("a", 0),
            &node("b", 0),
            &RailSelection::Auto,
            None,
            RailPattern::Aligned,
        )
        .unwrap_err();
        assert!(err.0.contains("rail map of a has no usable NIC"), "{err}");
        let err = plan_rows(
            &node("a", 2),
            &node("b", 3),
            &RailSelection::Auto,
            None,
            RailPattern::Aligned,
        )
        .unwrap_err();
        assert!(err.0.contains("a has 2 rails and b has 3"), "{err}");
        let told = vec!["x".to_string()];
        let err = plan_rows(
            &node("a", 2),
            &node("b", 2),
            &RailSelection::Auto,
            Some(&told),
            RailPattern::Aligned,
        )
        .unwrap_err();
        assert!(err.0.contains("--rail-devices names 1 devices for 2 rails"), "{err}");
    }
}
