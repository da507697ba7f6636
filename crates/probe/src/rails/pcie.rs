//! The PCIe relation of two devices, from their resolved sysfs paths
//! (`/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0/0000:19:00.0`: the root
//! complex, then every bridge down to the device). The relation is read off the tree — where the
//! two paths part — never off address prefixes, which say nothing about switches.

use icb_core::rails::PcieRelation;

/// A device's place in the PCI tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciPath {
    /// The host bridge (`pci0000:16`): one root complex.
    pub root: String,
    /// PCI addresses from the root port down to the device itself (never empty).
    pub chain: Vec<String>,
}

impl PciPath {
    /// Parses a resolved node path under `/sys/devices/pci…`; names after the last PCI address
    /// (`…/0000:19:00.0/infiniband/mlx5_0`) are ignored. `None` for anything else (virtual
    /// devices, a path that names no PCI device).
    pub fn parse(path: &str) -> Option<PciPath> {
        let rest = path.strip_prefix("/sys/devices/")?;
        let mut names = rest.split('/').filter(|n| !n.is_empty());
        let root = names.next().filter(|r| is_host_bridge(r))?.to_string();
        // Behind an Intel VMD the tree nests a second domain (`…/0000:00:0e.0/pci10000:e0/…`):
        // its host bridge is a name on the way, not a device.
        let chain: Vec<String> = names
            .take_while(|n| is_pci_address(n) || is_host_bridge(n))
            .filter(|n| is_pci_address(n))
            .map(|n| n.to_ascii_lowercase())
            .collect();
        (!chain.is_empty()).then_some(PciPath { root, chain })
    }

    /// The device's own address (the last name of the chain).
    pub fn address(&self) -> &str {
        self.chain.last().map(String::as_str).unwrap_or_default()
    }
}

/// `pci0000:16`, `pci10000:e0`.
fn is_host_bridge(name: &str) -> bool {
    name.strip_prefix("pci").is_some_and(|r| {
        r.split_once(':').is_some_and(|(dom, bus)| {
            !dom.is_empty() && bus.len() == 2 && (dom.chars().chain(bus.chars())).all(|c| c.is_ascii_hexdigit())
        })
    })
}

/// `0000:19:00.0`: domain (4+ hex digits), bus, device, function.
pub fn is_pci_address(name: &str) -> bool {
    let Some((head, func)) = name.rsplit_once('.') else {
        return false;
    };
    let parts: Vec<&str> = head.split(':').collect();
    let hex = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit());
    parts.len() == 3
        && parts[0].len() >= 4
        && parts[1].len() == 2
        && parts[2].len() == 2
        && parts.iter().all(|p| hex(p))
        && func.len() == 1
        && func.chars().all(|c| ('0'..='7').contains(&c))
}

/// How far apart two devices are: the relation, then the number of PCI hops between them
/// (which of two equally related NICs is nearer). `None` when the paths cannot say: across
/// root complexes with a NUMA node unknown.
pub fn relation(a: &PciPath, numa_a: Option<u32>, b: &PciPath, numa_b: Option<u32>) -> Option<(PcieRelation, usize)> {
    if a.root != b.root {
        let hops = a.chain.len() + b.chain.len() + 2;
        return match (numa_a, numa_b) {
            (Some(x), Some(y)) if x == y => Some((PcieRelation::Node, hops)),
            (Some(_), Some(_)) => Some((PcieRelation::Sys, hops)),
            _ => None,
        };
    }
    let shared = a.chain.iter().zip(&b.chain).take_while(|(x, y)| x == y).count();
    // Names below the deepest shared bridge on each side, the device itself included.
    let (below_a, below_b) = (a.chain.len() - shared, b.chain.len() - shared);
    let hops = below_a + below_b;
    let rel = if shared == 0 {
        // They part at the root complex: each side has its own root port.
        PcieRelation::Phb
    } else if below_a <= 2 && below_b <= 2 {
        // The deepest shared bridge is a switch's upstream port and each device sits on one of
        // its downstream ports (or directly on the shared bridge): one switch between them.
        PcieRelation::Pix
    } else {
        PcieRelation::Pxb
    };
    Some((rel, hops))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PciPath {
        PciPath::parse(s).unwrap_or_else(|| panic!("{s} should parse"))
    }

    const GPU0: &str = "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0/0000:19:00.0";
    const NIC0: &str = "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:01.0/0000:1a:00.0";

    #[test]
    fn same_switch_is_pix() {
        let (rel, hops) = relation(&p(GPU0), Some(0), &p(NIC0), Some(0)).unwrap();
        assert_eq!(rel, PcieRelation::Pix);
        assert_eq!(hops, 4);
        // Two functions of one device: below the same bridge.
        let f1 = p("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:01.0/0000:1a:00.1");
        assert_eq!(
            relation(&p(NIC0), None, &f1, None).map(|r| r.0),
            Some(PcieRelation::Pix)
        );
    }

    #[test]
    fn two_switch_levels_is_pxb() {
        // GPU behind a second-level switch, NIC on the first-level switch.
        let gpu =
            p("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0/0000:19:00.0/0000:1a:08.0/0000:1b:00.0");
        let nic = p("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:04.0/0000:1c:00.0");
        assert_eq!(
            relation(&gpu, Some(0), &nic, Some(0)).map(|r| r.0),
            Some(PcieRelation::Pxb)
        );
        // Both behind the same second-level switch: PIX again.
        let nic2 =
            p("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0/0000:19:00.0/0000:1a:10.0/0000:1d:00.0");
        assert_eq!(
            relation(&gpu, Some(0), &nic2, Some(0)).map(|r| r.0),
            Some(PcieRelation::Pix)
        );
    }

    #[test]
    fn separate_root_ports_of_one_root_complex_is_phb() {
        let a = p("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0");
        let b = p("/sys/devices/pci0000:16/0000:16:03.0/0000:18:00.0");
        assert_eq!(relation(&a, Some(0), &b, Some(1)).map(|r| r.0), Some(PcieRelation::Phb));
    }

    #[test]
    fn across_root_complexes_the_numa_nodes_decide() {
        let a = p(GPU0);
        let b = p("/sys/devices/pci0000:37/0000:37:02.0/0000:38:00.0");
        assert_eq!(
            relation(&a, Some(0), &b, Some(0)).map(|r| r.0),
            Some(PcieRelation::Node)
        );
        assert_eq!(relation(&a, Some(0), &b, Some(1)).map(|r| r.0), Some(PcieRelation::Sys));
        assert_eq!(relation(&a, None, &b, Some(1)), None, "unknown NUMA: no guess");
        // The address prefixes are alike, the tree is not: 0000:16 and 0001:16 are other domains.
        let other_domain = p("/sys/devices/pci0001:16/0001:16:02.0/0001:17:00.0");
        assert_eq!(
            relation(&a, Some(0), &other_domain, Some(0)).map(|r| r.0),
            Some(PcieRelation::Node)
        );
    }

    #[test]
    fn paths_that_are_not_pci_devices() {
        assert_eq!(PciPath::parse("/sys/devices/virtual/net/bond0"), None);
        assert_eq!(PciPath::parse("/sys/devices/pci0000:16"), None);
        assert_eq!(PciPath::parse("relative/0000:19:00.0"), None);
        assert_eq!(PciPath::parse(""), None);
        let nic = p(&format!("{NIC0}/infiniband/mlx5_0"));
        assert_eq!(nic.address(), "0000:1a:00.0");
        let vmd = p("/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0");
        assert_eq!(vmd.chain, vec!["0000:00:0e.0", "10000:e0:06.0", "10000:e1:00.0"]);
        assert!(is_pci_address("0000:AB:1f.7") && !is_pci_address("0000:ab:1f.8"));
        assert!(!is_pci_address("000:ab:1f.0") && !is_pci_address("mlx5_0"));
    }
}
