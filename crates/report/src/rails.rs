//! The rail map of a `probe node` table: one row per rail (fits 100 columns), what was left out
//! and why, the notes, and a per-rank `UCX_NET_DEVICES` to paste into the workers.

use crate::format::View;
use crate::table::new_table;
use crate::wrap::push_wrapped;
use icb_core::rails::{NicRef, RailMap};
use std::fmt::Write as _;

fn nic_cell(nic: &NicRef) -> String {
    match &nic.pci {
        Some(pci) => format!("{} {pci}", nic.port_name()),
        None => nic.port_name(),
    }
}

fn numa(n: Option<u32>) -> String {
    n.map_or_else(|| "?".to_string(), |n| n.to_string())
}

fn rate(nic: &NicRef) -> String {
    nic.rate_gbps.map_or_else(|| "?".to_string(), |r| format!("{r} Gb/s"))
}

/// The rail map as text, for the table exporter.
pub(crate) fn render(map: &RailMap, view: View) -> String {
    let mut out = String::new();
    if map.rails.is_empty() {
        push_wrapped(&mut out, "rail map: no rails", view);
    } else {
        push_wrapped(
            &mut out,
            "rail map (GPU ordinals in PCI bus order, as CUDA_DEVICE_ORDER=PCI_BUS_ID and nvidia-smi; NUMA is GPU/NIC):",
            view,
        );
        let mut t = new_table(vec!["Rail", "GPU", "NIC", "PCIe", "Rate", "State", "NUMA"], view);
        for r in &map.rails {
            let gpu = r
                .gpu
                .as_ref()
                .map_or_else(|| "-".to_string(), |g| format!("{} {}", g.ordinal, g.pci));
            let gpu_numa = r.gpu.as_ref().map_or_else(|| "-".to_string(), |g| numa(g.numa_node));
            t.add_row(vec![
                r.index.to_string(),
                gpu,
                nic_cell(&r.nic),
                r.relation.map_or_else(
                    || if r.gpu.is_some() { "?" } else { "-" }.to_string(),
                    |x| x.to_string(),
                ),
                rate(&r.nic),
                r.nic.state.clone(),
                format!("{gpu_numa}/{}", numa(r.nic.numa_node)),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    for lo in &map.left_out {
        let why: Vec<String> = lo.reasons.iter().map(ToString::to_string).collect();
        let netdevs = if lo.nic.netdevs.is_empty() {
            String::new()
        } else {
            format!(" [{}]", lo.nic.netdevs.join(", "))
        };
        push_wrapped(
            &mut out,
            &format!(
                "left out: {}{netdevs}, {}: {}",
                nic_cell(&lo.nic),
                rate(&lo.nic),
                why.join("; ")
            ),
            view,
        );
    }
    for n in &map.notes {
        push_wrapped(&mut out, &format!("note: {n}"), view);
    }
    if !map.rails.is_empty() {
        let _ = writeln!(out, "per-rank UCX_NET_DEVICES (rank N uses GPU N):");
        // Never wrapped: these lines are pasted as they are.
        for line in map.ucx_net_devices() {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::rails::{GpuRef, LeftOutNic, LeftOutReason, PcieRelation, Rail};

    fn nic(name: &str, pci: &str, rate: f64) -> NicRef {
        NicRef {
            name: name.into(),
            pci: Some(pci.into()),
            port: 1,
            state: "ACTIVE/LinkUp".into(),
            rate_gbps: Some(rate),
            link_layer: Some("InfiniBand".into()),
            netdevs: vec![],
            numa_node: Some(1),
        }
    }

    #[test]
    fn eight_rails_fit_100_columns_and_print_paste_ready_lines() {
        let rails = (0..8)
            .map(|i| Rail {
                index: i,
                gpu: Some(GpuRef {
                    ordinal: i,
                    pci: format!("0000:{:02x}:00.0", 0x18 + i),
                    numa_node: Some(1),
                }),
                nic: nic(
                    &format!("mlx5_{}", i + 2),
                    &format!("0000:{:02x}:00.0", 0x90 + i),
                    400.0,
                ),
                relation: Some(PcieRelation::Pix),
            })
            .collect();
        let mut front = nic("mlx5_0", "0000:01:00.0", 25.0);
        front.netdevs = vec!["eno1np0".into()];
        let map = RailMap {
            rails,
            left_out: vec![LeftOutNic {
                nic: front,
                reasons: vec![
                    LeftOutReason::Bonded {
                        netdev: "eno1np0".into(),
                        master: Some("bond0".into()),
                    },
                    LeftOutReason::Slow { fastest_gbps: 400.0 },
                ],
            }],
            notes: vec!["GPU0 and GPU1 share mlx5_0:1".into()],
        };
        let text = render(
            &map,
            View {
                width: 100,
                wide: false,
            },
        );
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let row = text
            .lines()
            .find(|l| l.contains("mlx5_4:1"))
            .unwrap_or_else(|| panic!("{text}"));
        for cell in [
            "2 0000:1a:00.0",
            "mlx5_4:1 0000:92:00.0",
            "PIX",
            "400 Gb/s",
            "ACTIVE/LinkUp",
            "1/1",
        ] {
            assert!(row.contains(cell), "{cell} in {row}");
        }
        assert!(text.contains("\n  rank 7: UCX_NET_DEVICES=mlx5_9:1\n"), "{text}");
        assert!(
            text.contains(
                "left out: mlx5_0:1 0000:01:00.0 [eno1np0], 25 Gb/s: bonded (eno1np0 is a slave of bond0); slow"
            ),
            "{text}"
        );
        assert!(text.contains("note: GPU0 and GPU1 share mlx5_0:1"), "{text}");
    }

    #[test]
    fn no_rails_prints_no_ucx_lines() {
        let text = render(
            &RailMap {
                notes: vec!["no active, non-bonded RDMA port at full rate: no rails".into()],
                ..Default::default()
            },
            View::default(),
        );
        assert!(text.starts_with("rail map: no rails\n"), "{text}");
        assert!(!text.contains("UCX_NET_DEVICES"), "{text}");
    }
}
