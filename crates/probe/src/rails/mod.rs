//! The rail map of `probe node`: every GPU's nearest RDMA NIC port, from the node's PCI tree.
//!
//! GPUs are the NVIDIA display/3D controllers under `/sys/bus/pci/devices` (vendor `0x10de`,
//! class `0x0300xx`/`0x0302xx`; NVSwitches are bridges and do not count), numbered in PCI bus
//! order — the order of `CUDA_DEVICE_ORDER=PCI_BUS_ID` and of nvidia-smi. NICs are the devices of
//! `/sys/class/infiniband`, keyed by the PCI address their `device` link resolves to. The
//! relation of a GPU and a NIC is where their resolved paths part ([`pcie::relation`]). Front-end
//! NICs (bonded, or slower than half the fastest port) and down ports are left out with the
//! reason; `nvidia-smi topo -m`, where it ran, is compared and any disagreement noted.

use crate::facts::{IB_CLASS, NodeFacts};
use crate::parse::Topo;
use crate::source::NodeSource;
use icb_core::rails::{LeftOutReason, NicRef, PcieRelation, RailMap};

mod build;
pub mod data_direct;
pub mod pcie;

pub use pcie::{PciPath, is_pci_address, relation};

pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";
const NET_CLASS: &str = "/sys/class/net";
const NVIDIA_VENDOR: &str = "0x10de";
/// PCI classes of a GPU: VGA-compatible (`0x0300xx`, PCIe cards) and 3D controller (`0x0302xx`,
/// SXM / data-centre parts).
const GPU_CLASSES: [&str; 2] = ["0x0300", "0x0302"];

/// A GPU as sysfs shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSeen {
    pub pci: String,
    pub path: Option<PciPath>,
    pub numa: Option<u32>,
}

/// An RDMA port as sysfs shows it, with what decides whether it is a rail.
#[derive(Debug, Clone, PartialEq)]
pub struct PortSeen {
    pub nic: NicRef,
    pub path: Option<PciPath>,
    pub up: bool,
    /// Why its NIC is a bonded front-end NIC.
    pub bond: Option<LeftOutReason>,
}

/// Builds the rail map; `None` where the source shows no PCI tree (a snapshot taken without
/// it, a replayed root without `bus/pci`).
pub fn rail_map(src: &dyn NodeSource, facts: &NodeFacts) -> Option<RailMap> {
    let pci = src.list(PCI_DEVICES)?;
    let mut notes = Vec::new();
    let gpus = gpus(src, &pci, &mut notes);
    let mut ports = ports(src, facts, &mut notes);
    follow_data_direct(src, &pci, &mut ports, &mut notes);
    let mut map = build::build(&gpus, &ports, notes);
    if let Some(topo) = &facts.topo {
        cross_check(&mut map, gpus.len(), topo);
    }
    Some(map)
}

/// A ConnectX-8 port with a Data Direct function is placed where that function is: its GPU
/// pairing follows the Data Direct device's PCIe root, not the PF's ([`data_direct`]).
fn follow_data_direct(src: &dyn NodeSource, pci: &[String], ports: &mut [PortSeen], notes: &mut Vec<String>) {
    let nic_pcis: Vec<String> = ports.iter().filter_map(|p| p.nic.pci.clone()).collect();
    let dd = data_direct::find(src, pci, &nic_pcis);
    if !dd.unpaired.is_empty() {
        notes.push(format!(
            "Data Direct function(s) {} but {} ConnectX-8 card(s): not paired, the PF's PCIe place is used",
            dd.unpaired.join(", "),
            dd.cards.len()
        ));
    }
    let mut noted: Vec<String> = Vec::new();
    for p in ports.iter_mut() {
        let Some(f) = p.nic.pci.as_deref().and_then(|a| dd.for_nic(a)).map(str::to_string) else {
            continue;
        };
        let at = format!("{PCI_DEVICES}/{f}");
        let Some(path) = src.resolve(&at).and_then(|r| PciPath::parse(&r)) else {
            notes.push(format!("{}: its Data Direct function {f} has no PCI path", p.nic.name));
            continue;
        };
        p.path = Some(path);
        if let Some(n) = numa(src, &format!("{at}/numa_node")) {
            p.nic.numa_node = Some(n);
        }
        if !noted.contains(&p.nic.name) {
            noted.push(p.nic.name.clone());
            notes.push(format!(
                "{} is a ConnectX-8 with Data Direct: paired with GPUs through its Data Direct function {f} (paired in PCI order; the VUID that ties them needs root)",
                p.nic.name
            ));
        }
    }
}

fn read_trim(src: &dyn NodeSource, path: &str) -> Option<String> {
    src.read(path)
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
}

/// `numa_node`: `-1` (no affinity known), a missing file and garbage all read as unknown.
fn numa(src: &dyn NodeSource, path: &str) -> Option<u32> {
    read_trim(src, path)?.parse::<u32>().ok()
}

/// PCI bus order: domain, then bus/device/function (fixed-width hex within a domain).
fn pci_order(addr: &str) -> (u64, String) {
    let (dom, rest) = addr.split_once(':').unwrap_or(("", addr));
    (u64::from_str_radix(dom, 16).unwrap_or(u64::MAX), rest.to_string())
}

/// Each GPU's NUMA node, by ordinal in PCI bus order (`None`: unknown).
pub fn gpu_numa_nodes(src: &dyn NodeSource) -> Vec<Option<u32>> {
    let pci = src.list(PCI_DEVICES).unwrap_or_default();
    gpus(src, &pci, &mut Vec::new()).into_iter().map(|g| g.numa).collect()
}

/// Every PCI device's root complex as the node's PCI tree shows it: address (lower case) →
/// host bridge (`pci0000:16`), the value the standard DRA attribute `resource.kubernetes.io/pcieRoot`
/// names. A device whose path does not resolve is absent (not known), never guessed.
pub fn pcie_roots(src: &dyn NodeSource) -> std::collections::BTreeMap<String, String> {
    src.list(PCI_DEVICES)
        .unwrap_or_default()
        .iter()
        .filter(|a| is_pci_address(a))
        .filter_map(|a| {
            let path = src
                .resolve(&format!("{PCI_DEVICES}/{a}"))
                .and_then(|p| PciPath::parse(&p))?;
            Some((a.to_ascii_lowercase(), path.root))
        })
        .collect()
}

/// The node's GPUs in PCI bus order.
fn gpus(src: &dyn NodeSource, pci: &[String], notes: &mut Vec<String>) -> Vec<GpuSeen> {
    let mut found: Vec<String> = pci
        .iter()
        .filter(|a| is_pci_address(a))
        .filter(|a| read_trim(src, &format!("{PCI_DEVICES}/{a}/vendor")).as_deref() == Some(NVIDIA_VENDOR))
        .filter(|a| {
            read_trim(src, &format!("{PCI_DEVICES}/{a}/class"))
                .is_some_and(|c| GPU_CLASSES.iter().any(|g| c.starts_with(g)))
        })
        .map(|a| a.to_ascii_lowercase())
        .collect();
    found.sort_by_key(|a| pci_order(a));
    found
        .into_iter()
        .enumerate()
        .map(|(ordinal, addr)| {
            let path = src
                .resolve(&format!("{PCI_DEVICES}/{addr}"))
                .and_then(|p| PciPath::parse(&p));
            if path.is_none() {
                notes.push(format!(
                    "GPU{ordinal} ({addr}): its PCI path could not be resolved; its relations are unknown"
                ));
            }
            let numa = numa(src, &format!("{PCI_DEVICES}/{addr}/numa_node"));
            GpuSeen { pci: addr, path, numa }
        })
        .collect()
}

/// The RDMA ports of `facts`, with their NIC's PCI place, netdevs and bonding.
fn ports(src: &dyn NodeSource, facts: &NodeFacts, notes: &mut Vec<String>) -> Vec<PortSeen> {
    let mut out = Vec::new();
    for dev in &facts.devices {
        let base = format!("{IB_CLASS}/{dev}/device");
        let path = src.resolve(&base).and_then(|p| PciPath::parse(&p));
        if path.is_none() && src.exists(&format!("{IB_CLASS}/{dev}")) {
            notes.push(format!(
                "{dev}: its device link does not lead to a PCI device; keyed by name, relations unknown"
            ));
        }
        let numa_node = numa(src, &format!("{base}/numa_node"));
        let mut netdevs = src.list(&format!("{base}/net")).unwrap_or_default();
        if netdevs.is_empty() {
            // No device/net (a replay without it): the RoCE GID table names the netdev too.
            for p in facts.ports.iter().filter(|p| &p.device == dev) {
                for nd in p.gids.iter().filter_map(|g| g.ndev.clone()) {
                    if !netdevs.contains(&nd) {
                        netdevs.push(nd);
                    }
                }
            }
        }
        let bond = netdevs.iter().find_map(|nd| bonding(src, nd));
        for p in facts.ports.iter().filter(|p| &p.device == dev) {
            out.push(PortSeen {
                nic: NicRef {
                    name: dev.clone(),
                    pci: path.as_ref().map(|p| p.address().to_string()),
                    port: p.port,
                    state: p.state_text(),
                    rate_gbps: p.rate.as_ref().map(|r| r.gbps),
                    link_layer: p.link_layer.as_ref().map(|l| l.as_str().to_string()),
                    netdevs: netdevs.clone(),
                    numa_node,
                },
                path: path.clone(),
                up: p.is_up(),
                bond: bond.clone(),
            });
        }
    }
    out
}

/// Whether `netdev` is a bonding master, or enslaved to one (`master` → a netdev with `bonding/`).
fn bonding(src: &dyn NodeSource, netdev: &str) -> Option<LeftOutReason> {
    let at = format!("{NET_CLASS}/{netdev}");
    if src.exists(&format!("{at}/bonding")) {
        return Some(LeftOutReason::Bonded {
            netdev: netdev.to_string(),
            master: None,
        });
    }
    let master = src
        .resolve(&format!("{at}/master"))
        .and_then(|p| p.rsplit('/').next().map(str::to_string))
        .filter(|m| !m.is_empty());
    let enslaved = src.exists(&format!("{at}/bonding_slave"))
        || master
            .as_ref()
            .is_some_and(|m| src.exists(&format!("{NET_CLASS}/{m}/bonding")));
    enslaved.then(|| LeftOutReason::Bonded {
        netdev: netdev.to_string(),
        master,
    })
}

/// Compares each rail's relation with `nvidia-smi topo -m`'s; every disagreement is a note.
/// Ordinals only line up when nvidia-smi sees every GPU sysfs shows (a container with some GPUs
/// sees all of sysfs but only its own GPUs).
fn cross_check(map: &mut RailMap, sysfs_gpus: usize, topo: &Topo) {
    let topo_gpus = topo.gpus().len();
    if topo_gpus != sysfs_gpus {
        map.notes.push(format!(
            "nvidia-smi topo -m shows {topo_gpus} GPU(s), sysfs {sysfs_gpus}: relations not cross-checked (a container sees only its own GPUs)"
        ));
        return;
    }
    let mut notes = Vec::new();
    for rail in &map.rails {
        let Some(gpu) = &rail.gpu else { continue };
        let col = format!("GPU{}", gpu.ordinal);
        let Some(nic_col) = topo.nic_for_device(&rail.nic.name) else {
            notes.push(format!(
                "rail {}: {} is not in nvidia-smi topo -m's NIC legend: relation not cross-checked",
                rail.index, rail.nic.name
            ));
            continue;
        };
        let theirs = topo.link(&col, nic_col).map(|l| l.as_string());
        let ours = rail.relation.map(PcieRelation::as_str);
        if theirs.as_deref() != ours {
            notes.push(format!(
                "rail {}: the PCI tree says {col}↔{} is {}, nvidia-smi topo -m says {}",
                rail.index,
                rail.nic.name,
                ours.unwrap_or("unknown"),
                theirs.as_deref().unwrap_or("nothing")
            ));
        }
    }
    map.notes.extend(notes);
}
