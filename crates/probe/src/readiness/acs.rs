//! ACS on the PCIe switch between a GPU and its rail NIC. With P2P Request/Completion Redirect
//! or Egress Control on, the switch sends GPU↔NIC peer traffic up to the root complex: GPUDirect
//! RDMA gets slow or fails (UCX PR 11412, NCCL's "disable ACS" advice).
//!
//! Read two ways: the ACS control register in each bridge's config space, where the extended
//! space is readable (root); else the IOMMU groups of the GPU and the NIC (unprivileged): behind
//! one switch, separate groups mean the kernel found ACS isolating them, one group that it did
//! not. Neither readable: unknown, never ok.

use crate::rails::PciPath;
use crate::source::NodeSource;

/// The ACS extended capability ID (PCIe base spec; `PCI_EXT_CAP_ID_ACS`).
const ACS_CAP_ID: u16 = 0x000d;
/// Where the extended capabilities start.
const EXT_CAP_START: usize = 0x100;
/// ACS control bits that send peer traffic upstream: P2P Request Redirect (2), P2P Completion
/// Redirect (3), P2P Egress Control (5).
pub const ACS_P2P_REDIRECT: u16 = (1 << 2) | (1 << 3) | (1 << 5);

/// One bridge's config space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcsRead {
    /// Only the first bytes could be read (unprivileged reads stop at 64).
    NotReadable,
    /// The bridge has no ACS capability: it cannot redirect.
    NoCapability,
    /// The ACS control register.
    Control(u16),
}

/// Decodes a bridge's `config` file: walks the extended capability list for ACS.
pub fn decode(config: &[u8]) -> AcsRead {
    if config.len() < EXT_CAP_START + 4 {
        return AcsRead::NotReadable;
    }
    let mut at = EXT_CAP_START;
    for _ in 0..64 {
        let Some(h) = config.get(at..at + 4) else {
            return AcsRead::NoCapability;
        };
        let header = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        if header == 0 || header == u32::MAX {
            return AcsRead::NoCapability;
        }
        if (header & 0xffff) as u16 == ACS_CAP_ID {
            return match config.get(at + 6..at + 8) {
                Some(c) => AcsRead::Control(u16::from_le_bytes([c[0], c[1]])),
                None => AcsRead::NotReadable,
            };
        }
        let next = ((header >> 20) & 0xffc) as usize;
        if next < EXT_CAP_START {
            return AcsRead::NoCapability;
        }
        at = next;
    }
    AcsRead::NoCapability
}

/// What was found between one GPU and its NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcsState {
    /// A bridge on the way redirects peer traffic (its ACS control register).
    Redirects { bridge: String, control: u16 },
    /// Every bridge's config space read: none redirects.
    Off,
    /// Config space not readable; the two are in separate IOMMU groups.
    SeparateGroups { gpu: String, nic: String },
    /// Config space not readable; the two share an IOMMU group.
    SameGroup { group: String },
    /// Neither config space nor IOMMU groups readable.
    Unknown,
}

/// One GPU and its rail NIC behind one switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcsSeen {
    pub gpu: String,
    pub nic: String,
    pub state: AcsState,
}

/// Reads ACS between the devices at `gpu.1` and `nic.1` (node paths linking to them).
pub fn seen(src: &dyn NodeSource, gpu: (&str, &str), nic: (&str, &str)) -> AcsSeen {
    let path = |base: &str| src.resolve(base).and_then(|r| PciPath::parse(&r));
    let state = match (path(gpu.1), path(nic.1)) {
        (Some(g), Some(n)) => from_config(src, &g, &n),
        _ => None,
    }
    .unwrap_or_else(|| from_groups(src, gpu.1, nic.1));
    AcsSeen {
        gpu: gpu.0.to_string(),
        nic: nic.0.to_string(),
        state,
    }
}

/// The bridges below the deepest shared one on both sides: the switch's downstream ports,
/// where ACS acts on peer traffic. `None` unless there is one and every one's config space was
/// read.
fn from_config(src: &dyn NodeSource, a: &PciPath, b: &PciPath) -> Option<AcsState> {
    if a.root != b.root {
        return None;
    }
    let shared = a.chain.iter().zip(&b.chain).take_while(|(x, y)| x == y).count();
    if shared == 0 {
        return None;
    }
    let mut bridges: Vec<(String, String)> = Vec::new();
    for p in [a, b] {
        for i in shared..p.chain.len().saturating_sub(1) {
            let node = format!("/sys/devices/{}/{}", p.root, p.chain[..=i].join("/"));
            if !bridges.iter().any(|(n, _)| *n == node) {
                bridges.push((node, p.chain[i].clone()));
            }
        }
    }
    if bridges.is_empty() {
        return None;
    }
    for (node, addr) in &bridges {
        match decode(&src.read_bytes(&format!("{node}/config"))?) {
            AcsRead::NotReadable => return None,
            AcsRead::NoCapability => {}
            AcsRead::Control(c) if c & ACS_P2P_REDIRECT != 0 => {
                return Some(AcsState::Redirects {
                    bridge: addr.clone(),
                    control: c,
                });
            }
            AcsRead::Control(_) => {}
        }
    }
    Some(AcsState::Off)
}

fn from_groups(src: &dyn NodeSource, gpu: &str, nic: &str) -> AcsState {
    let group = |base: &str| {
        src.resolve(&format!("{base}/iommu_group"))
            .and_then(|r| r.rsplit('/').next().map(str::to_string))
            .filter(|g| !g.is_empty())
    };
    match (group(gpu), group(nic)) {
        (Some(g), Some(n)) if g == n => AcsState::SameGroup { group: g },
        (Some(gpu), Some(nic)) => AcsState::SeparateGroups { gpu, nic },
        _ => AcsState::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4 KiB config space with one capability before ACS and ACS control `ctl`.
    fn config(ctl: Option<u16>) -> Vec<u8> {
        let mut c = vec![0u8; 4096];
        // AER (0x0001) at 0x100, next at 0x148.
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | (1 << 16) | (0x148 << 20)).to_le_bytes());
        if let Some(ctl) = ctl {
            c[0x148..0x14c].copy_from_slice(&(0x000du32 | (1 << 16)).to_le_bytes());
            c[0x14e..0x150].copy_from_slice(&ctl.to_le_bytes());
        }
        c
    }

    #[test]
    fn decodes_the_acs_control_register() {
        assert_eq!(decode(&config(Some(0x001d))), AcsRead::Control(0x001d));
        assert_ne!(0x001d & ACS_P2P_REDIRECT, 0, "RR and CR set");
        assert_eq!(decode(&config(Some(0x0011))), AcsRead::Control(0x0011));
        assert_eq!(0x0011 & ACS_P2P_REDIRECT, 0, "SV and UF only: peers are not redirected");
        assert_eq!(decode(&config(None)), AcsRead::NoCapability);
    }

    #[test]
    fn an_unprivileged_read_is_not_readable() {
        assert_eq!(decode(&[0u8; 64]), AcsRead::NotReadable);
        assert_eq!(decode(&[]), AcsRead::NotReadable);
        // All ones: the device is gone.
        assert_eq!(decode(&[0xffu8; 4096]), AcsRead::NoCapability);
    }
}
