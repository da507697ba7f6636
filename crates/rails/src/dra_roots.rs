//! A node's ResourceSlices against its own PCI tree (issue 41). A DRA claim that pairs a GPU with
//! its rail NIC does it by the standard attribute `resource.kubernetes.io/pcieRoot` (a
//! `matchAttribute` constraint); the node's rail map does it by where the two devices sit in
//! its PCI tree. For every rail of the map whose GPU and NIC both appear in the slices with a
//! root, the two views must agree on whether the pair shares a PCIe root: where they do not,
//! a claim made on that node gets a GPU and a NIC that are not each other's rail (or is refused
//! the pair that is), and that is a finding naming both views and the device whose published
//! root is wrong. A device the slices do not name, or one without a root on either side, is not
//! compared: not known, never "agrees".

use super::plan::NodeRailInfo;
use icb_core::Status;
use icb_core::rails::{GpuRef, NicRef, RailFinding, RailFindingKind};
use icb_kube::dra::{GPU_DRIVER, PCIE_ROOT};
use icb_kube::k8s_openapi::api::resource::v1::{DeviceAttribute, ResourceSlice};

/// One published device, with the attributes that find it in the PCI tree.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SliceDevice {
    pub driver: String,
    pub name: String,
    /// `resource.kubernetes.io/pcieRoot`.
    pub pcie_root: Option<String>,
    /// Its PCI address (NVIDIA's `pcieBusID`; a NIC driver's `pciAddress`), lower case.
    pub pci: Option<String>,
    /// A NIC's RDMA device (`rdmaDevice`) and network interface (`ifName`).
    pub rdma: Option<String>,
    pub netdev: Option<String>,
    /// A GPU's `index` (NVIDIA's: its ordinal in PCI bus order), used only without an address.
    pub index: Option<i64>,
}

/// An attribute by its short name (the driver's own domain) or qualified by any domain.
fn attribute<'a>(
    attributes: &'a std::collections::BTreeMap<String, DeviceAttribute>,
    names: &[&str],
) -> Option<&'a DeviceAttribute> {
    attributes.iter().find_map(|(key, value)| {
        let short = key.rsplit_once('/').map_or(key.as_str(), |(_, n)| n);
        names.contains(&short).then_some(value)
    })
}

/// Every device of `slices`, as [`compare`] reads them.
pub fn slice_devices(slices: &[ResourceSlice]) -> Vec<SliceDevice> {
    let text = |a: Option<&DeviceAttribute>| a.and_then(|a| a.string.clone());
    slices
        .iter()
        .flat_map(|slice| {
            slice.spec.devices.iter().flatten().map(|device| {
                let empty = Default::default();
                let attrs = device.attributes.as_ref().unwrap_or(&empty);
                SliceDevice {
                    driver: slice.spec.driver.clone(),
                    name: device.name.clone(),
                    pcie_root: attrs.get(PCIE_ROOT).and_then(|a| a.string.clone()),
                    pci: text(attribute(attrs, &["pcieBusID", "pciBusID", "pciAddress"])).map(|a| normalize_pci(&a)),
                    rdma: text(attribute(attrs, &["rdmaDevice"])),
                    netdev: text(attribute(attrs, &["ifName"])),
                    index: attribute(attrs, &["index"]).and_then(|a| a.int),
                }
            })
        })
        .collect()
}

/// `00000000:19:00.0` (NVML's eight-digit domain) and `0000:19:00.0` are one address.
fn normalize_pci(address: &str) -> String {
    let lower = address.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 && domain.chars().all(|c| c == '0') => format!("0000:{rest}"),
        _ => lower,
    }
}

fn gpu_device<'a>(devices: &'a [SliceDevice], gpu: &GpuRef) -> Option<&'a SliceDevice> {
    let gpus = devices.iter().filter(|d| d.driver == GPU_DRIVER);
    let wanted = normalize_pci(&gpu.pci);
    let by_address = gpus
        .clone()
        .find(|d| d.pci.as_deref().map(normalize_pci).as_ref() == Some(&wanted));
    by_address.or_else(|| {
        gpus.filter(|d| d.pci.is_none())
            .find(|d| d.index.and_then(|i| usize::try_from(i).ok()) == Some(gpu.ordinal))
    })
}

fn nic_device<'a>(devices: &'a [SliceDevice], nic: &NicRef) -> Option<&'a SliceDevice> {
    let address = nic.pci.as_deref().map(normalize_pci);
    devices.iter().filter(|d| d.driver != GPU_DRIVER).find(|d| {
        (address.is_some() && d.pci.as_deref().map(normalize_pci) == address)
            || d.rdma.as_deref() == Some(nic.name.as_str())
            || d.netdev.as_ref().is_some_and(|n| nic.netdevs.contains(n))
    })
}

/// One GPU or NIC in both views.
struct Seen<'a> {
    label: String,
    device: &'a SliceDevice,
    published: &'a str,
    tree: &'a str,
}

fn same(a: &str, b: &str) -> &'static str {
    if a == b { "one PCIe root" } else { "two PCIe roots" }
}

/// The finding for a rail whose two views disagree.
fn mismatch(node: &str, gpu: &Seen, nic: &Seen) -> RailFinding {
    let wrong: Vec<String> = [gpu, nic]
        .iter()
        .filter(|s| s.published != s.tree)
        .map(|s| {
            format!(
                "{} for {} ({}; the PCI tree says {})",
                s.device.driver, s.device.name, s.published, s.tree
            )
        })
        .collect();
    RailFinding {
        kind: RailFindingKind::PcieRootMismatch,
        status: Status::Warn,
        rail: None,
        text: format!(
            "node {node}: {} and {}: the ResourceSlices put them on {} ({}, {}), the node's PCI tree on {} ({}, {}); a DRA claim matching {PCIE_ROOT} pairs them by the slices",
            gpu.label,
            nic.label,
            same(gpu.published, nic.published),
            gpu.published,
            nic.published,
            same(gpu.tree, nic.tree),
            gpu.tree,
            nic.tree
        ),
        fix: Some(format!(
            "fix the {PCIE_ROOT} that the DRA driver publishes: {} (its value must be the device's host bridge under /sys/devices); until then pods on node {node} that claim a GPU with its NIC by that attribute get the wrong NIC",
            wrong.join(", ")
        )),
    }
}

/// Compares `devices` (node `info.node`'s slices) with its rail map and PCI tree: one finding
/// per rail whose GPU and NIC the two views place differently, and how many rails were compared.
pub fn compare(devices: &[SliceDevice], info: &NodeRailInfo) -> (Vec<RailFinding>, usize) {
    let mut findings = Vec::new();
    let mut compared = 0;
    for rail in &info.map.rails {
        let Some(gpu) = &rail.gpu else { continue };
        let (Some(gpu_device), Some(nic_device)) = (gpu_device(devices, gpu), nic_device(devices, &rail.nic)) else {
            continue;
        };
        let tree_root = |pci: Option<&str>| pci.and_then(|p| info.pcie_roots.get(&normalize_pci(p)));
        let (Some(gpu_published), Some(nic_published), Some(gpu_tree), Some(nic_tree)) = (
            gpu_device.pcie_root.as_deref(),
            nic_device.pcie_root.as_deref(),
            tree_root(Some(&gpu.pci)),
            tree_root(rail.nic.pci.as_deref()),
        ) else {
            continue;
        };
        compared += 1;
        if (gpu_published == nic_published) != (gpu_tree == nic_tree) {
            let gpu = Seen {
                label: format!("GPU {} ({})", gpu.ordinal, gpu.pci),
                device: gpu_device,
                published: gpu_published,
                tree: gpu_tree,
            };
            let nic = Seen {
                label: format!("NIC {}", rail.nic.name),
                device: nic_device,
                published: nic_published,
                tree: nic_tree,
            };
            findings.push(mismatch(&info.node, &gpu, &nic));
        }
    }
    (findings, compared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::rails::{Rail, RailMap};

    fn device(driver: &str, name: &str, root: &str, pci: &str) -> SliceDevice {
        SliceDevice {
            driver: driver.into(),
            name: name.into(),
            pcie_root: Some(root.into()),
            pci: Some(pci.into()),
            ..Default::default()
        }
    }

    /// Two rails: GPU k (0000:4k:00.0) with mlx5_k (0000:1k:00.0), both on pci0000:0k.
    fn node() -> NodeRailInfo {
        let rails = (0..2)
            .map(|k| Rail {
                index: k,
                gpu: Some(GpuRef {
                    ordinal: k,
                    pci: format!("0000:{:02x}:00.0", 0x41 + k),
                    numa_node: Some(0),
                }),
                nic: NicRef {
                    name: format!("mlx5_{k}"),
                    pci: Some(format!("0000:{:02x}:00.0", 0x11 + k)),
                    port: 1,
                    state: "ACTIVE/LinkUp".into(),
                    rate_gbps: None,
                    link_layer: None,
                    netdevs: vec![format!("rail{k}")],
                    numa_node: Some(0),
                },
                relation: None,
            })
            .collect();
        let pcie_roots = (0..2)
            .flat_map(|k| {
                let root = format!("pci0000:{k:02x}");
                [
                    (format!("0000:{:02x}:00.0", 0x41 + k), root.clone()),
                    (format!("0000:{:02x}:00.0", 0x11 + k), root),
                ]
            })
            .collect();
        NodeRailInfo {
            node: "n1".into(),
            map: RailMap {
                rails,
                ..Default::default()
            },
            devices: vec![],
            pcie_roots,
            readiness: None,
        }
    }

    fn published(nic1_root: &str) -> Vec<SliceDevice> {
        vec![
            device(GPU_DRIVER, "gpu-0", "pci0000:00", "0000:41:00.0"),
            device(GPU_DRIVER, "gpu-1", "pci0000:01", "00000000:42:00.0"),
            device("nic.example.com", "nic-0", "pci0000:00", "0000:11:00.0"),
            device("nic.example.com", "nic-1", nic1_root, "0000:12:00.0"),
        ]
    }

    #[test]
    fn agreeing_views_make_no_finding_and_count_the_rails_compared() {
        assert_eq!(compare(&published("pci0000:01"), &node()), (vec![], 2));
    }

    #[test]
    fn a_pair_the_slices_split_but_the_tree_joins_names_both_views_and_the_wrong_device() {
        let (findings, compared) = compare(&published("pci0000:7f"), &node());
        assert_eq!(compared, 2);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!((f.kind, f.status), (RailFindingKind::PcieRootMismatch, Status::Warn));
        assert_eq!(
            f.text,
            "node n1: GPU 1 (0000:42:00.0) and NIC mlx5_1: the ResourceSlices put them on two PCIe roots (pci0000:01, pci0000:7f), the node's PCI tree on one PCIe root (pci0000:01, pci0000:01); a DRA claim matching resource.kubernetes.io/pcieRoot pairs them by the slices"
        );
        let fix = f.fix.as_deref().unwrap();
        assert!(
            fix.contains("nic.example.com for nic-1 (pci0000:7f; the PCI tree says pci0000:01)")
                && !fix.contains("gpu-1"),
            "{fix}"
        );
    }

    #[test]
    fn the_reverse_a_pair_the_slices_join_but_the_tree_splits_is_a_finding_too() {
        let mut info = node();
        info.pcie_roots.insert("0000:12:00.0".into(), "pci0000:80".into());
        let (findings, _) = compare(&published("pci0000:01"), &info);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(
            findings[0]
                .text
                .contains("the ResourceSlices put them on one PCIe root"),
            "{}",
            findings[0].text
        );
    }

    #[test]
    fn what_either_view_does_not_show_is_not_compared() {
        // No slices for the NICs, a GPU without a root, a tree without roots: nothing compared.
        let gpus_only: Vec<SliceDevice> = published("pci0000:7f").into_iter().take(2).collect();
        assert_eq!(compare(&gpus_only, &node()), (vec![], 0));
        let mut rootless = published("pci0000:7f");
        rootless[1].pcie_root = None;
        rootless[0].pcie_root = None;
        assert_eq!(compare(&rootless, &node()), (vec![], 0));
        let mut treeless = node();
        treeless.pcie_roots.clear();
        assert_eq!(compare(&published("pci0000:7f"), &treeless), (vec![], 0));
    }

    #[test]
    fn devices_are_read_from_slices_by_short_or_qualified_attribute_names() {
        let json = serde_json::json!({
            "metadata": {"name": "s"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {
                    "resource.kubernetes.io/pcieRoot": {"string": "pci0000:16"},
                    "gpu.nvidia.com/pcieBusID": {"string": "00000000:19:00.0"},
                    "index": {"int": 0}}}]}
        });
        let slice: ResourceSlice = serde_json::from_value(json).unwrap();
        let d = &slice_devices(&[slice])[0];
        assert_eq!(d.pcie_root.as_deref(), Some("pci0000:16"));
        assert_eq!(d.pci.as_deref(), Some("0000:19:00.0"));
        assert_eq!(d.index, Some(0));
    }
}
