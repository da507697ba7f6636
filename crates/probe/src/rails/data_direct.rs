//! Data Direct NICs (ConnectX-8 on GB300-class nodes): the NIC's DMA to and from GPU memory goes
//! through a separate PCI function, the Data Direct device (`15b3:2100`, the kernel's
//! `mlx5_data_direct` driver), which sits on the GPU's side of the PCIe tree, while the NIC's
//! own PF hangs off another root. The GPU↔NIC pairing must follow the Data Direct function's
//! place in the tree, not the PF's (NVIDIA's DRA SR-IOV driver doc; NCCL's
//! `mlx5dv_get_data_direct_sysfs_path`).
//!
//! The kernel ties a Data Direct function to its NIC by a VUID that firmware reports and that
//! is not readable unprivileged, so here the k-th Data Direct function (PCI order) pairs with
//! the k-th ConnectX-8 card (PCI order of its PFs' bus/device) when the counts agree, and the
//! pairing says so.

use super::{PCI_DEVICES, pci_order, read_trim};
use crate::source::NodeSource;

const MELLANOX: &str = "0x15b3";
/// The Data Direct function of a ConnectX-8 (`mlx5_data_direct_pci_table`).
pub const DATA_DIRECT_DEVICE: &str = "0x2100";
/// ConnectX-8's PF device ID.
pub const CONNECTX8_DEVICE: &str = "0x1023";

/// What the node shows of Data Direct.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataDirect {
    /// `(card, data direct function)`: a ConnectX-8 card (PCI address without the function,
    /// `0000:03:00`) and the Data Direct function paired with it.
    pub pairs: Vec<(String, String)>,
    /// Data Direct functions no card could be paired with (the counts disagree).
    pub unpaired: Vec<String>,
    /// ConnectX-8 cards seen.
    pub cards: Vec<String>,
}

impl DataDirect {
    /// The Data Direct function paired with the NIC at PCI address `pci`.
    pub fn for_nic(&self, pci: &str) -> Option<&str> {
        let card = card_of(pci);
        self.pairs.iter().find(|(c, _)| *c == card).map(|(_, dd)| dd.as_str())
    }
}

/// `0000:03:00.1` → `0000:03:00`.
pub fn card_of(pci: &str) -> String {
    pci.rsplit_once('.').map_or(pci, |(card, _)| card).to_string()
}

/// Finds the Data Direct functions among `pci` (the entries of `/sys/bus/pci/devices`) and the
/// ConnectX-8 cards among the NICs' PCI addresses, and pairs them.
pub fn find(src: &dyn NodeSource, pci: &[String], nic_pcis: &[String]) -> DataDirect {
    let id = |a: &str, f: &str| read_trim(src, &format!("{PCI_DEVICES}/{a}/{f}"));
    let dd: Vec<String> = pci
        .iter()
        .filter(|a| id(a, "vendor").as_deref() == Some(MELLANOX))
        .filter(|a| id(a, "device").as_deref() == Some(DATA_DIRECT_DEVICE))
        .map(|a| a.to_ascii_lowercase())
        .collect();
    let cx8: Vec<String> = nic_pcis
        .iter()
        .filter(|a| id(a, "device").as_deref() == Some(CONNECTX8_DEVICE))
        .cloned()
        .collect();
    pair_by_order(dd, &cx8)
}

/// Pure: pairs the Data Direct functions and the cards of `cx8_pfs` in PCI order when there are
/// as many of each; otherwise nothing is paired.
pub fn pair_by_order(mut dd: Vec<String>, cx8_pfs: &[String]) -> DataDirect {
    let mut cards: Vec<String> = cx8_pfs.iter().map(|p| card_of(p)).collect();
    cards.sort_by_key(|c| pci_order(c));
    cards.dedup();
    dd.sort_by_key(|a| pci_order(a));
    if dd.len() == cards.len() {
        let pairs = cards.iter().cloned().zip(dd).collect();
        DataDirect {
            pairs,
            unpaired: Vec::new(),
            cards,
        }
    } else {
        DataDirect {
            pairs: Vec::new(),
            unpaired: dd,
            cards,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn pairs_in_pci_order_by_card() {
        // Two ports (PFs) of one card count once; listed out of order.
        let dd = pair_by_order(
            s(&["0009:04:00.0", "0008:04:00.0"]),
            &s(&["0001:01:00.0", "0000:01:00.1", "0000:01:00.0"]),
        );
        assert_eq!(dd.cards, s(&["0000:01:00", "0001:01:00"]));
        assert_eq!(
            dd.pairs,
            vec![
                ("0000:01:00".to_string(), "0008:04:00.0".to_string()),
                ("0001:01:00".to_string(), "0009:04:00.0".to_string())
            ]
        );
        assert_eq!(dd.for_nic("0000:01:00.1"), Some("0008:04:00.0"));
        assert_eq!(dd.for_nic("0002:01:00.0"), None);
        assert!(dd.unpaired.is_empty());
    }

    #[test]
    fn counts_that_disagree_pair_nothing() {
        let dd = pair_by_order(s(&["0008:04:00.0", "0009:04:00.0"]), &s(&["0000:01:00.0"]));
        assert!(dd.pairs.is_empty());
        assert_eq!(dd.unpaired.len(), 2);
        let none = pair_by_order(vec![], &s(&["0000:01:00.0"]));
        assert!(none.pairs.is_empty() && none.unpaired.is_empty());
    }
}
