//! The readiness checks of `probe node`: `node.pcie_link`, `node.acs`, `node.data_direct`. Pure
//! functions of [`PcieFacts`]; decisions on the typed states, never on message text.

use super::{AcsState, LinkOf, PcieFacts};
use crate::node_checks::{CheckExt, check, list};
use icb_core::Status;
use icb_core::checks::Check;
use icb_core::readiness::{LinkTraining, PcieLink};

pub fn readiness_checks(p: &PcieFacts) -> Vec<Check> {
    vec![pcie_link(p), acs(p), data_direct(p)]
}

fn describe(l: &PcieLink) -> String {
    format!("{} ({}) {}", l.device, l.pci, l.current_text())
}

pub fn pcie_link(p: &PcieFacts) -> Check {
    let id = "node.pcie_link";
    if p.links.is_empty() {
        return check(id, Status::Skipped, "no PCIe link attributes read for the NICs or GPUs");
    }
    let (mut down, mut idle, mut capped, mut unread) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (of, l) in &p.links {
        let text = format!("{}, can train at {}", describe(l), l.trainable_text());
        match (l.training(), of) {
            (LinkTraining::Full, _) => {}
            (LinkTraining::WidthBelow, _) | (LinkTraining::SpeedBelow, LinkOf::Nic) => down.push(text),
            (LinkTraining::SpeedBelow, LinkOf::Gpu) => idle.push(l.device.clone()),
            (LinkTraining::CappedBySlot, _) => capped.push(format!("{} (slot {})", describe(l), l.trainable_text())),
            (LinkTraining::Unknown, _) => unread.push(l.device.clone()),
        }
    }
    let mut notes = Vec::new();
    if !idle.is_empty() {
        notes.push(format!(
            "{} below max speed (GPUs slow their link when idle)",
            list(&idle, 4)
        ));
    }
    if !capped.is_empty() {
        notes.push(format!("capped by the slot: {}", list(&capped, 2)));
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    if !down.is_empty() {
        return check(
            id,
            Status::Warn,
            format!("trained below max: {}{notes}", list(&down, 3)),
        )
        .hint(
            "reseat the card or riser, check the slot's lane bifurcation in the BIOS; a downtrained link caps the rail",
        );
    }
    if !unread.is_empty() {
        return check(
            id,
            Status::Skipped,
            format!("link width/speed not read for {}{notes}", list(&unread, 4)),
        );
    }
    check(
        id,
        Status::Ok,
        format!(
            "{} link(s) at the width and speed they can train at{notes}",
            p.links.len()
        ),
    )
}

pub fn acs(p: &PcieFacts) -> Check {
    let id = "node.acs";
    if p.acs.is_empty() {
        return check(
            id,
            Status::Skipped,
            "no GPU shares a PCIe switch with its rail NIC (or no rail map): ACS not applicable",
        );
    }
    let (mut on, mut clear, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    for a in &p.acs {
        let pair = format!("{}↔{}", a.gpu, a.nic);
        match &a.state {
            AcsState::Redirects { bridge, control } => {
                on.push(format!("{pair}: ACS redirects P2P on {bridge} (ACSCtl {control:#06x})"))
            }
            AcsState::SeparateGroups { gpu, nic } => on.push(format!(
                "{pair}: separate IOMMU groups {gpu} and {nic} behind one switch (ACS isolates them)"
            )),
            AcsState::Off => clear.push(format!("{pair} (ACSCtl read)")),
            AcsState::SameGroup { group } => clear.push(format!("{pair} (IOMMU group {group})")),
            AcsState::Unknown => unknown.push(pair),
        }
    }
    if !on.is_empty() {
        return check(id, Status::Warn, list(&on, 2)).hint(
            "GPUDirect RDMA goes up to the root complex: disable ACS P2P redirect on the switch ports (BIOS, or setpci ECAP_ACS+6.w=0 at boot); in a VM enable ATS",
        );
    }
    if !unknown.is_empty() {
        return check(
            id,
            Status::Skipped,
            format!(
                "unknown for {}: PCI config space needs root and no IOMMU groups are visible",
                list(&unknown, 4)
            ),
        );
    }
    check(
        id,
        Status::Ok,
        format!("no ACS redirect between GPU and NIC: {}", list(&clear, 3)),
    )
}

pub fn data_direct(p: &PcieFacts) -> Check {
    let id = "node.data_direct";
    if !p.data_direct_unpaired.is_empty() {
        return check(
            id,
            Status::Warn,
            format!(
                "Data Direct function(s) {} not paired with a ConnectX-8: GPU pairing follows the PF's PCIe root",
                list(&p.data_direct_unpaired, 4)
            ),
        )
        .hint("pair each GPU with the NIC whose Data Direct function shares its PCIe root (rdma-core's rdma_topo)");
    }
    if p.data_direct.is_empty() {
        return check(id, Status::Skipped, "no Data Direct NIC");
    }
    let pairs: Vec<String> = p
        .data_direct
        .iter()
        .map(|(nic, f, gpu)| match gpu {
            Some(g) => format!("{g}↔{nic} via {f}"),
            None => format!("{nic} via {f}"),
        })
        .collect();
    check(
        id,
        Status::Ok,
        format!(
            "Data Direct NIC(s) paired by their Data Direct function: {}; NCCL and UCX reach it through rdma-core's mlx5dv_get_data_direct_sysfs_path",
            list(&pairs, 4)
        ),
    )
}
