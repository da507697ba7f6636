//! `nvidia-smi topo -m`: a tab-separated matrix (header row wrapped in `ESC[4m … ESC[0m`), a
//! legend, and a `NIC Legend` mapping `NIC<n>` to RDMA device names (bonds and gaps included).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How two devices are connected, best first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    SelfLink,
    NvLink(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
    Other(String),
}

impl Link {
    pub fn parse(cell: &str) -> Link {
        let c = cell.trim();
        match c {
            "X" => Link::SelfLink,
            "PIX" => Link::Pix,
            "PXB" => Link::Pxb,
            "PHB" => Link::Phb,
            "NODE" => Link::Node,
            "SYS" => Link::Sys,
            _ => match c.strip_prefix("NV").and_then(|n| n.parse().ok()) {
                Some(n) => Link::NvLink(n),
                None => Link::Other(c.to_string()),
            },
        }
    }

    /// Lower is closer; used to pick a GPU's best NIC.
    pub fn rank(&self) -> u32 {
        match self {
            Link::SelfLink => 0,
            Link::NvLink(_) => 1,
            Link::Pix => 2,
            Link::Pxb => 3,
            Link::Phb => 4,
            Link::Node => 5,
            Link::Sys => 6,
            Link::Other(_) => 7,
        }
    }

    pub fn as_string(&self) -> String {
        match self {
            Link::SelfLink => "X".into(),
            Link::NvLink(n) => format!("NV{n}"),
            Link::Pix => "PIX".into(),
            Link::Pxb => "PXB".into(),
            Link::Phb => "PHB".into(),
            Link::Node => "NODE".into(),
            Link::Sys => "SYS".into(),
            Link::Other(s) => s.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Topo {
    /// Device columns in order (`GPU0`, `NIC0`, or `mlx5_0` on old drivers).
    pub devices: Vec<String>,
    /// `links[row][col]` for the device rows that were printed.
    pub links: BTreeMap<String, BTreeMap<String, Link>>,
    pub cpu_affinity: BTreeMap<String, String>,
    /// `NIC0` → `mlx5_0`.
    pub nic_legend: BTreeMap<String, String>,
}

impl Topo {
    pub fn gpus(&self) -> Vec<&str> {
        self.devices.iter().map(String::as_str).filter(|d| is_gpu(d)).collect()
    }

    /// NIC columns (everything that is not a GPU).
    pub fn nics(&self) -> Vec<&str> {
        self.devices.iter().map(String::as_str).filter(|d| !is_gpu(d)).collect()
    }

    pub fn link(&self, a: &str, b: &str) -> Option<&Link> {
        self.links
            .get(a)
            .and_then(|r| r.get(b))
            .or_else(|| self.links.get(b).and_then(|r| r.get(a)))
    }

    /// The RDMA device name behind a NIC column (`NIC1` → `mlx5_3`); old drivers name the
    /// column after the device itself.
    pub fn nic_device<'a>(&'a self, nic: &'a str) -> &'a str {
        self.nic_legend.get(nic).map(String::as_str).unwrap_or(nic)
    }

    /// The NIC column for an RDMA device name.
    pub fn nic_for_device(&self, dev: &str) -> Option<&str> {
        self.nics().into_iter().find(|n| self.nic_device(n) == dev)
    }
}

fn is_gpu(name: &str) -> bool {
    name.strip_prefix("GPU")
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// Removes ANSI escape sequences (`ESC [ … letter`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for n in chars.by_ref() {
                    if n.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

const AFFINITY_HEADERS: [&str; 3] = ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"];

pub fn parse_topo(text: &str) -> Topo {
    let mut topo = Topo::default();
    let mut in_nic_legend = false;
    let mut in_matrix = false;
    for raw in text.lines() {
        let line = strip_ansi(raw);
        let trimmed = line.trim();
        if trimmed.is_empty() {
            in_matrix = false;
            continue;
        }
        if trimmed == "NIC Legend:" {
            in_nic_legend = true;
            continue;
        }
        if trimmed == "Legend:" {
            in_matrix = false;
            continue;
        }
        if in_nic_legend {
            if let Some((nic, dev)) = trimmed.split_once(':') {
                let (nic, dev) = (nic.trim(), dev.trim());
                if nic.starts_with("NIC") && !dev.is_empty() {
                    topo.nic_legend.insert(nic.to_string(), dev.to_string());
                }
            }
            continue;
        }
        // The header is the first line that starts with a tab (or spaces) and names GPU columns.
        if topo.devices.is_empty() {
            let cols: Vec<&str> = line.split('\t').map(str::trim).filter(|c| !c.is_empty()).collect();
            if line.starts_with(['\t', ' ']) && cols.iter().any(|c| is_gpu(c)) {
                topo.devices = cols
                    .iter()
                    .filter(|c| !AFFINITY_HEADERS.contains(c))
                    .map(|c| c.to_string())
                    .collect();
                in_matrix = true;
            }
            continue;
        }
        if !in_matrix {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let name = fields[0].trim();
        if !topo.devices.iter().any(|d| d == name) {
            continue;
        }
        let mut row = BTreeMap::new();
        for (col, cell) in topo.devices.iter().zip(fields.iter().skip(1)) {
            if !cell.trim().is_empty() {
                row.insert(col.clone(), Link::parse(cell));
            }
        }
        if let Some(aff) = fields
            .get(1 + topo.devices.len())
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
        {
            topo.cpu_affinity.insert(name.to_string(), aff.to_string());
        }
        topo.links.insert(name.to_string(), row);
    }
    topo
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "\u{1b}[4m\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\u{1b}[0m\nGPU0\t X \tNV18\tPIX\tSYS\t0-47\t0\t\tN/A\nGPU1\tNV18\t X \tSYS\tPIX\t48-95\t1\t\tN/A\nNIC0\tPIX\tSYS\t X \tSYS\nNIC1\tSYS\tPIX\tSYS\t X \n\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n  PIX  = Connection traversing at most a single PCIe bridge\n  NV#  = Connection traversing a bonded set of # NVLinks\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n";

    #[test]
    fn matrix_and_legend() {
        let t = parse_topo(TWO);
        assert_eq!(t.gpus(), vec!["GPU0", "GPU1"]);
        assert_eq!(t.nics(), vec!["NIC0", "NIC1"]);
        assert_eq!(t.link("GPU0", "GPU1"), Some(&Link::NvLink(18)));
        assert_eq!(t.link("GPU0", "NIC0"), Some(&Link::Pix));
        assert_eq!(t.link("GPU1", "NIC0"), Some(&Link::Sys));
        assert_eq!(t.link("GPU0", "GPU0"), Some(&Link::SelfLink));
        assert_eq!(t.nic_device("NIC1"), "mlx5_1");
        assert_eq!(t.nic_for_device("mlx5_0"), Some("NIC0"));
        assert_eq!(t.cpu_affinity.get("GPU1").map(String::as_str), Some("48-95"));
    }

    #[test]
    fn bonds_and_non_contiguous_names() {
        let text = TWO
            .replace("NIC0: mlx5_0", "NIC0: mlx5_bond_0")
            .replace("NIC1: mlx5_1", "NIC1: mlx5_3");
        let t = parse_topo(&text);
        assert_eq!(t.nic_device("NIC0"), "mlx5_bond_0");
        assert_eq!(t.nic_for_device("mlx5_3"), Some("NIC1"));
        assert_eq!(t.nic_for_device("mlx5_1"), None);
    }

    #[test]
    fn old_driver_names_columns_after_devices_and_single_gpu() {
        let text = "\tGPU0\tmlx5_0\tCPU Affinity\nGPU0\t X \tPXB\t0-15\nmlx5_0\tPXB\t X \n";
        let t = parse_topo(text);
        assert_eq!(t.gpus(), vec!["GPU0"]);
        assert_eq!(t.link("GPU0", "mlx5_0"), Some(&Link::Pxb));
        assert_eq!(t.nic_device("mlx5_0"), "mlx5_0");
        assert!(
            parse_topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
                .devices
                .is_empty()
        );
    }
}
