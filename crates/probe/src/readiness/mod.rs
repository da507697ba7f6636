//! RDMA readiness read from where the workers run (`probe node`, the node or a pod): the PCIe
//! links of the NICs and GPUs (trained below their maximum?), ACS on the PCIe switch between a
//! GPU and its rail NIC, Data Direct NICs, and per port what a second side must agree on (MTU,
//! GID index and type, link layer, firmware: [`icb_core::readiness`]).
//!
//! sysfs, as the kernel's PCI ABI (Documentation/ABI/testing/sysfs-bus-pci) defines it:
//! `current_link_width`/`max_link_width` are lane counts, `current_link_speed`/`max_link_speed`
//! read `32.0 GT/s PCIe` (older kernels: `8 GT/s`, `Unknown`). ACS is a PCIe extended capability
//! (ID 0x000d; its control register at +6): `config` beyond the first 64 bytes is readable by
//! root only, so unprivileged the IOMMU groups tell instead — the kernel puts devices behind one
//! switch in separate groups only when ACS isolates them.

use crate::facts::{GatherOptions, IB_CLASS, NodeFacts};
use crate::rails::{PCI_DEVICES, PciPath};
use crate::source::{LocalSource, NodeSource};
use crate::tools::Tool;
use icb_core::rails::{PcieRelation, RailMap};
use icb_core::readiness::{GdrMode, PcieLink, PortReadiness, Readiness};
use std::path::Path;
use std::time::Duration;

pub mod acs;
pub mod checks;

pub use acs::{AcsSeen, AcsState};

/// What the readiness checks read, beyond [`NodeFacts`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PcieFacts {
    /// NIC links (every RDMA device on PCI), then GPU links (the rail map's GPUs).
    pub links: Vec<(LinkOf, PcieLink)>,
    /// One per rail whose GPU and NIC share a PCIe switch.
    pub acs: Vec<AcsSeen>,
    /// `(nic, data direct function, GPU label)` of every rail that goes through Data Direct.
    pub data_direct: Vec<(String, String, Option<String>)>,
    /// Data Direct functions that could not be paired with a NIC.
    pub data_direct_unpaired: Vec<String>,
}

/// Whose link it is: GPUs lower their link speed when idle, NICs do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkOf {
    Nic,
    Gpu,
}

/// Reads the PCIe facts of the node's NICs and of the rail map's GPUs.
pub fn gather(src: &dyn NodeSource, facts: &NodeFacts, map: Option<&RailMap>) -> PcieFacts {
    let mut out = PcieFacts::default();
    for dev in &facts.devices {
        let base = format!("{IB_CLASS}/{dev}/device");
        if let Some(l) = link(src, dev, &base) {
            out.links.push((LinkOf::Nic, l));
        }
    }
    let Some(map) = map else { return out };
    let mut gpus_seen: Vec<usize> = Vec::new();
    for rail in &map.rails {
        let Some(gpu) = &rail.gpu else { continue };
        let gbase = format!("{PCI_DEVICES}/{}", gpu.pci);
        let label = format!("GPU{}", gpu.ordinal);
        if !gpus_seen.contains(&gpu.ordinal) {
            gpus_seen.push(gpu.ordinal);
            if let Some(l) = link(src, &label, &gbase) {
                out.links.push((LinkOf::Gpu, l));
            }
        }
        if matches!(rail.relation, Some(PcieRelation::Pix | PcieRelation::Pxb)) {
            let nbase = format!("{IB_CLASS}/{}/device", rail.nic.name);
            out.acs.push(acs::seen(src, (&label, &gbase), (&rail.nic.name, &nbase)));
        }
    }
    let pci = src.list(PCI_DEVICES).unwrap_or_default();
    let nic_pcis: Vec<String> = map.rails.iter().filter_map(|r| r.nic.pci.clone()).collect();
    let dd = crate::rails::data_direct::find(src, &pci, &nic_pcis);
    out.data_direct_unpaired = dd.unpaired.clone();
    for rail in &map.rails {
        let Some(f) = rail.nic.pci.as_deref().and_then(|a| dd.for_nic(a)) else {
            continue;
        };
        let gpu = rail.gpu.as_ref().map(|g| format!("GPU{}", g.ordinal));
        out.data_direct.push((rail.nic.name.clone(), f.to_string(), gpu));
    }
    out
}

/// The link of the PCI device at `base` (a node path that is, or links to, its directory);
/// `None` when it is not a PCI device or shows no link attributes at all.
pub fn link(src: &dyn NodeSource, label: &str, base: &str) -> Option<PcieLink> {
    let resolved = src.resolve(base)?;
    let path = PciPath::parse(&resolved)?;
    let width = |p: &str| read_num(src, p).and_then(|v| v.parse::<u32>().ok());
    let speed = |p: &str| src.read(p).and_then(|v| parse_speed(&v));
    let (bridge, parent) = match path.chain.len() {
        n if n >= 2 => (
            Some(path.chain[n - 2].clone()),
            resolved.rsplit_once('/').map(|(p, _)| p.to_string()),
        ),
        _ => (None, None),
    };
    let at = |p: &Option<String>, f: &str| p.as_ref().map(|p| format!("{p}/{f}"));
    let l = PcieLink {
        device: label.to_string(),
        pci: path.address().to_string(),
        current_width: width(&format!("{base}/current_link_width")),
        max_width: width(&format!("{base}/max_link_width")),
        current_speed_gts: speed(&format!("{base}/current_link_speed")),
        max_speed_gts: speed(&format!("{base}/max_link_speed")),
        bridge,
        bridge_max_width: at(&parent, "max_link_width").and_then(|p| width(&p)),
        bridge_max_speed_gts: at(&parent, "max_link_speed").and_then(|p| speed(&p)),
    };
    let any = l.current_width.is_some()
        || l.max_width.is_some()
        || l.current_speed_gts.is_some()
        || l.max_speed_gts.is_some();
    any.then_some(l)
}

fn read_num(src: &dyn NodeSource, path: &str) -> Option<String> {
    src.read(path).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// `32.0 GT/s PCIe`, `8 GT/s`, `2.5 GT/s` → GT/s; `Unknown`, garbage → `None`.
pub fn parse_speed(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    let v: f64 = words.next()?.parse().ok()?;
    (words.next() == Some("GT/s") && v.is_finite() && v > 0.0).then_some(v)
}

/// The GPUDirect mode, as `node.gdr_mode` judges it; `None` where it cannot be told.
pub fn gdr_mode(f: &NodeFacts) -> Option<GdrMode> {
    let peermem = ["nvidia_peermem", "nv_peer_mem"]
        .iter()
        .any(|m| f.module_loaded(m) == Some(true));
    if peermem || f.memory_peers_nv_mem {
        return Some(GdrMode::PeerMem);
    }
    let drv = f.nvidia.as_ref()?;
    if drv.open_kernel_module && f.kernel().is_some_and(|k| k >= (5, 12)) {
        return Some(GdrMode::DmaBuf);
    }
    // Neither, and the module list was read (an unread list could hide peermem).
    f.modules.as_ref().map(|_| GdrMode::None)
}

/// Test-only: a recorded sysfs tree (a root holding `sys/…`) read instead of this host's. The
/// emulated cluster's node runtime sets it in every container of a node with emulated rails
/// (whose own `/sys` shows only veths), so `ic-bench rail-info` and a pair side read that node's
/// NICs with the unchanged readers.
pub const RAIL_TREE_ENV: &str = "IC_BENCH_RAIL_TREE";

/// How long `ibv_devinfo` may take when a pair side reads its readiness.
const SIDE_TOOL_TIMEOUT: Duration = Duration::from_secs(5);

/// This process's readiness where it runs, as a `pair` side sends it to its peer: read from
/// `tree` (an emulated node's recorded tree, [`RAIL_TREE_ENV`]) or else this host, with the
/// reader `probe node` uses. Only `ibv_devinfo` is run (the active MTUs and firmware): the other
/// tools tell nothing two sides compare, and each costs a side's start time.
pub fn read_here(tree: Option<&Path>) -> Readiness {
    let src = match tree {
        Some(t) => LocalSource::replay(t),
        None => LocalSource::default(),
    };
    let opts = GatherOptions {
        tool_timeout: SIDE_TOOL_TIMEOUT,
        counter_interval: Duration::ZERO,
    };
    let facts = crate::facts::gather_with(&src, &opts, &[Tool::IbvDevinfo]);
    // No rail map: the GPUs' links and Data Direct are per node checks, not compared.
    let pcie = gather(&src, &facts, None);
    readiness(&src, &facts, &pcie)
}

/// This side's readiness: every port's MTU, GID, link layer and firmware, the GPUDirect mode and
/// the PCIe links read.
pub fn readiness(src: &dyn NodeSource, f: &NodeFacts, pcie: &PcieFacts) -> Readiness {
    let ports = f
        .ports
        .iter()
        .map(|p| {
            let base = format!("{IB_CLASS}/{}", p.device);
            let gid = p
                .is_ethernet()
                .then(|| p.gids.iter().find(|g| g.is_roce_v2_ipv4()))
                .flatten();
            let netdev = src
                .list(&format!("{base}/device/net"))
                .and_then(|n| n.into_iter().next())
                .or_else(|| p.gids.iter().find_map(|g| g.ndev.clone()));
            let netdev_mtu = netdev
                .and_then(|nd| read_num(src, &format!("/sys/class/net/{nd}/mtu")))
                .and_then(|m| m.parse().ok());
            PortReadiness {
                port: p.name(),
                pci: src
                    .resolve(&format!("{base}/device"))
                    .and_then(|r| PciPath::parse(&r))
                    .map(|pp| pp.address().to_string()),
                link_layer: p.link_layer.as_ref().map(|l| l.as_str().to_string()),
                active_mtu: f.active_mtu.get(&p.name()).copied(),
                netdev_mtu,
                gid_index: gid.map(|g| g.index),
                gid_type: gid.and_then(|g| g.gid_type.as_ref().map(|t| t.as_str().to_string())),
                firmware: read_num(src, &format!("{base}/fw_ver")).or_else(|| f.devinfo_fw.get(&p.device).cloned()),
            }
        })
        .collect();
    Readiness {
        ports,
        gdr_mode: gdr_mode(f),
        pcie_links: pcie.links.iter().map(|(_, l)| l.clone()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_speeds_as_kernels_write_them() {
        assert_eq!(parse_speed("32.0 GT/s PCIe\n"), Some(32.0));
        assert_eq!(parse_speed("8 GT/s"), Some(8.0));
        assert_eq!(parse_speed("2.5 GT/s PCIe"), Some(2.5));
        assert_eq!(parse_speed("Unknown"), None);
        assert_eq!(parse_speed("Unknown speed"), None);
        assert_eq!(parse_speed(""), None);
        assert_eq!(parse_speed("16"), None);
    }
}
