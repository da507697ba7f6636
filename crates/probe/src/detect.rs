//! `detect-env`: KServe's RoCE auto-detection (`config-llm-worker-data-parallel.yaml`) rebuilt
//! without its bugs. Every ACTIVE+LinkUp port of every HCA is joined (KServe's `${ucx_hcas}`
//! kept only the first), every port is looked at (not only port 1), InfiniBand fabrics are
//! handled (no GID index needed), and the IPv4-mapped test uses the full
//! `0000:0000:0000:0000:0000:ffff:` prefix. Preset variables win, as in KServe.

use crate::envspec::TransportEnv;
use crate::facts::{PortFacts, read_ports};
use crate::parse::{GidType, LinkLayer};
use crate::source::NodeSource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const DETECT_SCHEMA: &str = "ic-bench.detect-env/v1";

/// The index KServe prefers on a tie ("SR-IOV standard").
pub const SRIOV_GID_INDEX: u32 = 3;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetectedPort {
    /// `mlx5_0:1`.
    pub name: String,
    pub link_layer: String,
    /// First RoCE v2 IPv4-mapped GID index (RoCE only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
}

/// One `export NAME=VALUE` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Export {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GidChoice {
    pub index: u32,
    /// `preset` (NCCL_IB_GID_INDEX was set) or `detected`.
    pub source: String,
    /// How many ports had each index first.
    pub counts: BTreeMap<u32, usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetectedEnv {
    pub schema: String,
    /// `infiniband`, `roce` or `none`.
    pub fabric: String,
    pub ports: Vec<DetectedPort>,
    /// In the order they are printed.
    pub exports: Vec<Export>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<GidChoice>,
    /// Things worth knowing (e.g. "InfiniBand: no GID index needed").
    pub notes: Vec<String>,
    /// Choices made on the operator's behalf that may be wrong for some port (HCAs disagreeing
    /// on the GID index): exported anyway, as KServe does, but worth verifying.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Things that need fixing (ports without a usable GID, a preset that is invalid here).
    pub problems: Vec<String>,
    /// Ports on which the exported GID index does not name a RoCE v2 IPv4 GID: traffic over
    /// them would fail or fall back. `detect-env --require` fails on any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gid_index_invalid_on: Vec<String>,
}

impl DetectedEnv {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.exports.iter().find(|e| e.name == name).map(|e| e.value.as_str())
    }

    /// `export K=V` lines, notes, warnings and problems as `#` comments (safe to `source`).
    pub fn to_shell(&self) -> String {
        let mut out = String::new();
        for n in &self.notes {
            out.push_str(&format!("# {n}\n"));
        }
        for w in &self.warnings {
            out.push_str(&format!("# WARNING: {w}\n"));
        }
        for p in &self.problems {
            out.push_str(&format!("# ERROR: {p}\n"));
        }
        for e in &self.exports {
            out.push_str(&format!("export {}={}\n", e.name, crate::shell::quote(&e.value)));
        }
        out
    }

    /// Whether anything usable was found; warnings do not count against it.
    pub fn found_something(&self) -> bool {
        !self.ports.is_empty() && self.problems.is_empty()
    }

    /// Why what would be exported cannot be relied on (for `--require`), or `None` when it can.
    pub fn unusable_because(&self) -> Option<String> {
        if self.ports.is_empty() {
            return Some("no usable RDMA port".into());
        }
        if let Some(p) = self.problems.first() {
            return Some(p.clone());
        }
        match (&self.gid_index, self.gid_index_invalid_on.is_empty()) {
            (Some(g), false) => Some(format!(
                "the exported GID index {} is not RoCE v2 IPv4 on {}",
                g.index,
                self.gid_index_invalid_on.join(",")
            )),
            _ => None,
        }
    }
}

fn first_valid(p: &PortFacts) -> Option<u32> {
    p.roce_v2_ipv4_indices().first().copied()
}

/// Most common index; on a tie between several indices, 3 when it is among the most common
/// (KServe's SR-IOV rule), else the lowest.
pub fn choose_gid_index(counts: &BTreeMap<u32, usize>) -> Option<u32> {
    let max = *counts.values().max()?;
    if counts.len() > 1 && counts.get(&SRIOV_GID_INDEX) == Some(&max) {
        return Some(SRIOV_GID_INDEX);
    }
    counts.iter().find(|(_, n)| **n == max).map(|(i, _)| *i)
}

pub fn detect_env(src: &dyn NodeSource, preset: &TransportEnv) -> DetectedEnv {
    let (devices, ports) = read_ports(src);
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let mut gid_index_invalid_on: Vec<String> = Vec::new();
    let up: Vec<&PortFacts> = ports.iter().filter(|p| p.is_up()).collect();
    for p in ports
        .iter()
        .filter(|p| !p.is_up() && p.state == Some(crate::parse::PortState::Active))
    {
        notes.push(format!(
            "{} skipped: ACTIVE but {} (not LinkUp)",
            p.name(),
            p.phys_state.as_ref().map_or("?", |s| s.as_str())
        ));
    }
    let ib: Vec<&PortFacts> = up
        .iter()
        .copied()
        .filter(|p| p.link_layer == Some(LinkLayer::InfiniBand))
        .collect();
    let roce_all: Vec<&PortFacts> = up.iter().copied().filter(|p| p.is_ethernet()).collect();
    let roce: Vec<&PortFacts> = roce_all
        .iter()
        .copied()
        .filter(|p| p.gids.iter().any(|g| g.gid_type == Some(GidType::RoceV2)))
        .collect();
    for p in roce_all.iter().filter(|p| !roce.iter().any(|r| r.name() == p.name())) {
        notes.push(format!("{} skipped: Ethernet port without a RoCE v2 GID", p.name()));
    }
    // One fabric: mixing InfiniBand and RoCE in one device list breaks connections.
    let (fabric, chosen): (&str, Vec<&PortFacts>) = match (ib.is_empty(), roce.is_empty()) {
        (true, true) => ("none", Vec::new()),
        (false, true) => ("infiniband", ib),
        (true, false) => ("roce", roce),
        (false, false) => {
            let keep_ib = ib.len() >= roce.len();
            let (kept, dropped, name) = if keep_ib {
                (ib, roce, "infiniband")
            } else {
                (roce, ib, "roce")
            };
            notes.push(format!(
                "mixed fabrics: kept {name} ({} port(s)), left out {}",
                kept.len(),
                dropped.iter().map(|p| p.name()).collect::<Vec<_>>().join(",")
            ));
            (name, kept)
        }
    };
    if chosen.is_empty() {
        if devices.is_empty() {
            notes.push(format!(
                "no RDMA devices in {}",
                src.display_path(crate::facts::IB_CLASS)
            ));
        } else {
            problems.push(format!("no ACTIVE+LinkUp RDMA port on {}", devices.join(",")));
        }
    }

    let mut hcas: Vec<String> = Vec::new();
    for p in &chosen {
        if !hcas.contains(&p.device) {
            hcas.push(p.device.clone());
        }
    }
    let dev_ports: Vec<String> = chosen.iter().map(|p| p.name()).collect();
    // Plain HCA names when they select exactly the chosen ports; `dev:port` when an HCA has an
    // up port of the other fabric; `=` when a name would prefix-match an unchosen device.
    let whole_hcas = hcas.iter().all(|h| {
        up.iter()
            .filter(|p| &p.device == h)
            .all(|p| chosen.iter().any(|c| c.name() == p.name()))
    });
    let entries = if whole_hcas { hcas.clone() } else { dev_ports.clone() };
    let spill = hcas.iter().any(|h| {
        devices
            .iter()
            .any(|d| d != h && d.starts_with(h.as_str()) && !hcas.contains(d))
    });
    let nccl_hca = if spill {
        format!("={}", entries.join(","))
    } else {
        entries.join(",")
    };

    let mut exports: Vec<Export> = Vec::new();
    let mut put = |k: &str, detected: Option<String>| {
        let v = preset.get(k).map(str::to_string).or(detected);
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            exports.push(Export {
                name: k.to_string(),
                value: v,
            });
        }
    };
    let some = |s: String| (!s.is_empty()).then_some(s);
    put("NCCL_IB_HCA", some(nccl_hca));
    put("NVSHMEM_HCA_LIST", some(dev_ports.join(",")));
    put("UCX_NET_DEVICES", some(dev_ports.join(",")));

    let mut detected_ports: Vec<DetectedPort> = chosen
        .iter()
        .map(|p| DetectedPort {
            name: p.name(),
            link_layer: p.link_layer.as_ref().map_or("?", |l| l.as_str()).to_string(),
            gid_index: if fabric == "roce" { first_valid(p) } else { None },
        })
        .collect();
    detected_ports.sort_by(|a, b| crate::source::natural_cmp(&a.name, &b.name));

    let preset_gid = preset.get("NCCL_IB_GID_INDEX").map(str::to_string);
    let mut gid_choice = None;
    if fabric == "infiniband" {
        notes.push("InfiniBand fabric: no GID index needed (LID routing)".into());
        if let Some(v) = &preset_gid {
            notes.push(format!(
                "NCCL_IB_GID_INDEX={v} is preset; it is not needed on InfiniBand"
            ));
        }
    }
    if fabric == "roce" {
        let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
        for p in &chosen {
            match first_valid(p) {
                Some(i) => *counts.entry(i).or_default() += 1,
                None => problems.push(format!("{} has no RoCE v2 IPv4-mapped GID", p.name())),
            }
        }
        match choose_gid_index(&counts) {
            Some(best) => {
                let off: Vec<String> = chosen
                    .iter()
                    .filter(|p| first_valid(p).is_some_and(|i| i != best) && !p.roce_v2_ipv4_indices().contains(&best))
                    .map(|p| p.name())
                    .collect();
                // KServe parity: one index is still exported (the node probe only warns here
                // too); a preset NCCL_IB_GID_INDEX overrides it, and the line says so.
                if !off.is_empty() && preset_gid.is_none() {
                    warnings.push(disagreement(&chosen, &counts, best, &off));
                    gid_index_invalid_on = off;
                }
                gid_choice = Some(GidChoice {
                    index: best,
                    source: "detected".into(),
                    counts,
                });
            }
            None if preset_gid.is_none() => problems.push("No valid IPv4 RoCE v2 GID_INDEX found".into()),
            None => {}
        }
    }
    if let Some(v) = &preset_gid
        && let Ok(i) = v.parse::<u32>()
    {
        let bad: Vec<String> = chosen
            .iter()
            .filter(|p| p.is_ethernet() && !p.roce_v2_ipv4_indices().contains(&i))
            .map(|p| p.name())
            .collect();
        if !bad.is_empty() {
            problems.push(format!(
                "preset NCCL_IB_GID_INDEX={v} is not RoCE v2 IPv4 on {}",
                bad.join(",")
            ));
        }
        let counts = gid_choice.as_ref().map(|g| g.counts.clone()).unwrap_or_default();
        gid_choice = Some(GidChoice {
            index: i,
            source: "preset".into(),
            counts,
        });
    }
    // A preset NCCL index is copied to NVSHMEM and UCX, as KServe does.
    let gid_value = preset_gid
        .clone()
        .or_else(|| gid_choice.as_ref().map(|g| g.index.to_string()));
    if let Some(v) = gid_value {
        for k in ["NCCL_IB_GID_INDEX", "NVSHMEM_IB_GID_INDEX", "UCX_IB_GID_INDEX"] {
            exports.push(Export {
                name: k.to_string(),
                value: v.clone(),
            });
        }
    }
    DetectedEnv {
        schema: DETECT_SCHEMA.into(),
        fabric: fabric.into(),
        ports: detected_ports,
        exports,
        gid_index: gid_choice,
        notes,
        warnings,
        gid_index_invalid_on,
        problems,
    }
}

/// Why `best` was exported although some ports need another index.
fn disagreement(chosen: &[&PortFacts], counts: &BTreeMap<u32, usize>, best: u32, off: &[String]) -> String {
    let per: Vec<String> = counts
        .keys()
        .map(|i| {
            let ports: Vec<String> = chosen
                .iter()
                .filter(|p| first_valid(p) == Some(*i))
                .map(|p| p.name())
                .collect();
            format!("{i} on {}", ports.join(","))
        })
        .collect();
    let max = counts.values().max().copied().unwrap_or_default();
    let tie = counts.values().filter(|n| **n == max).count() > 1;
    let why = if !tie {
        "the most common"
    } else if best == SRIOV_GID_INDEX {
        "the SR-IOV convention on a tie"
    } else {
        "the lowest on a tie"
    };
    format!(
        "HCAs disagree on the RoCE v2 GID index ({}); exporting {best}, {why}, which is not RoCE v2 IPv4 on {} — verify, or set NCCL_IB_GID_INDEX yourself",
        per.join("; "),
        off.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tie_prefers_three_else_lowest() {
        let c = |v: &[(u32, usize)]| v.iter().copied().collect::<BTreeMap<u32, usize>>();
        assert_eq!(choose_gid_index(&c(&[(1, 2), (3, 2)])), Some(3));
        assert_eq!(choose_gid_index(&c(&[(3, 1), (5, 2)])), Some(5));
        assert_eq!(choose_gid_index(&c(&[(5, 2), (7, 2)])), Some(5));
        assert_eq!(choose_gid_index(&c(&[(3, 4)])), Some(3));
        assert_eq!(choose_gid_index(&BTreeMap::new()), None);
    }
}
