//! `ibv_devinfo` (plain and `-v`) and `ibv_devinfo -l` (rdma-core `libibverbs/examples/devinfo.c`).

use super::sysfs::{LinkLayer, PhysState, PortState};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DevinfoHca {
    pub name: String,
    pub transport: Option<String>,
    pub fw_ver: Option<String>,
    /// 4123 = ConnectX-6, 4125 = ConnectX-6 Dx, 4129 = ConnectX-7, 4131 = ConnectX-8.
    pub vendor_part_id: Option<u32>,
    pub ports: Vec<DevinfoPort>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DevinfoPort {
    pub number: u32,
    pub state: Option<PortState>,
    /// Only with `-v`.
    pub phys_state: Option<PhysState>,
    pub active_mtu: Option<u32>,
    pub link_layer: Option<LinkLayer>,
    /// Only with `-v`.
    pub gids: Vec<DevinfoGid>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevinfoGid {
    pub index: u32,
    /// As printed: `::ffff:10.0.1.5` or `fe80:0000:…`.
    pub gid: String,
    /// `RoCE v2`, `RoCE v1`; absent on InfiniBand.
    pub gid_type: Option<String>,
}

pub fn parse_ibv_devinfo(text: &str) -> Vec<DevinfoHca> {
    let mut hcas: Vec<DevinfoHca> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if key == "hca_id" {
            hcas.push(DevinfoHca {
                name: value.to_string(),
                ..Default::default()
            });
            continue;
        }
        let Some(hca) = hcas.last_mut() else { continue };
        if key == "port" {
            if let Ok(n) = value.parse() {
                hca.ports.push(DevinfoPort {
                    number: n,
                    ..Default::default()
                });
            }
            continue;
        }
        if let Some(idx) = key.strip_prefix("GID[").and_then(|r| r.strip_suffix(']')) {
            if let (Ok(index), Some(port)) = (idx.trim().parse(), hca.ports.last_mut()) {
                let (gid, gid_type) = match value.split_once(',') {
                    Some((g, t)) => (g.trim(), Some(t.trim().to_string())),
                    None => (value, None),
                };
                port.gids.push(DevinfoGid {
                    index,
                    gid: gid.to_string(),
                    gid_type,
                });
            }
            continue;
        }
        match (key, hca.ports.last_mut()) {
            ("transport", None) => hca.transport = Some(value.to_string()),
            ("fw_ver", None) => hca.fw_ver = Some(value.to_string()),
            ("vendor_part_id", None) => hca.vendor_part_id = value.parse().ok(),
            ("state", Some(p)) => p.state = PortState::parse(value),
            ("phys_state", Some(p)) => p.phys_state = PhysState::parse(value),
            ("active_mtu", Some(p)) => {
                p.active_mtu = value.split_whitespace().next().and_then(|v| v.parse().ok());
            }
            ("link_layer", Some(p)) => p.link_layer = LinkLayer::parse(value),
            _ => {}
        }
    }
    hcas
}

/// What `ibv_devinfo -l` said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum DeviceList {
    Devices(Vec<String>),
    /// `No IB devices found` (stderr).
    NoDevices,
    /// `Failed to get IB devices list: …` or anything unrecognised.
    Error(String),
}

pub fn parse_ibv_devinfo_list(stdout: &str, stderr: &str) -> DeviceList {
    let all = format!("{stdout}\n{stderr}");
    if all.contains("No IB devices found") {
        return DeviceList::NoDevices;
    }
    if let Some(line) = all.lines().find(|l| l.contains("Failed to get IB devices list")) {
        return DeviceList::Error(line.trim().to_string());
    }
    let mut lines = stdout.lines();
    let header = lines.by_ref().find(|l| !l.trim().is_empty());
    match header.map(str::trim) {
        Some(h) if h.ends_with("HCAs found:") || h.ends_with("HCA found:") => {
            let devs: Vec<String> = lines
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            if devs.is_empty() {
                DeviceList::NoDevices
            } else {
                DeviceList::Devices(devs)
            }
        }
        Some(h) => DeviceList::Error(format!("unrecognised ibv_devinfo -l output: {h}")),
        None => DeviceList::Error(
            stderr
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output")
                .trim()
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n\tnode_guid:\t\t\t946d:ae03:001a:2b3c\n\tsys_image_guid:\t\t\t946d:ae03:001a:2b3c\n\tvendor_id:\t\t\t0x02c9\n\tvendor_part_id:\t\t\t4129\n\thw_ver:\t\t\t\t0x0\n\tboard_id:\t\t\tMT_0000000838\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t4096 (5)\n\t\t\tsm_lid:\t\t\t1\n\t\t\tport_lid:\t\t17\n\t\t\tport_lmc:\t\t0x00\n\t\t\tlink_layer:\t\tInfiniBand\n\nhca_id:\tmlx5_1\n\ttransport:\t\t\tInfiniBand (0)\n\tvendor_part_id:\t\t\t4125\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_INIT (2)\n\t\t\tphys_state:\t\tLINK_UP (5)\n\t\t\tlink_layer:\t\tEthernet\n\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0a00:00ff:fe00:0105, RoCE v1\n\t\t\tGID[  3]:\t\t::ffff:10.0.1.5, RoCE v2\n\n";

    #[test]
    fn two_hcas_with_gids() {
        let h = parse_ibv_devinfo(TWO);
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].name, "mlx5_0");
        assert_eq!(h[0].vendor_part_id, Some(4129));
        assert_eq!(h[0].fw_ver.as_deref(), Some("28.39.1002"));
        assert_eq!(h[0].ports[0].state, Some(PortState::Active));
        assert_eq!(h[0].ports[0].active_mtu, Some(4096));
        assert_eq!(h[0].ports[0].link_layer, Some(LinkLayer::InfiniBand));
        // RoCE: transport still says InfiniBand; the link layer tells.
        assert_eq!(h[1].transport.as_deref(), Some("InfiniBand (0)"));
        assert_eq!(h[1].ports[0].link_layer, Some(LinkLayer::Ethernet));
        assert_eq!(h[1].ports[0].state, Some(PortState::Init));
        assert_eq!(h[1].ports[0].phys_state, Some(PhysState::LinkUp));
        let g = &h[1].ports[0].gids;
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].index, 3);
        assert_eq!(g[1].gid, "::ffff:10.0.1.5");
        assert_eq!(g[1].gid_type.as_deref(), Some("RoCE v2"));
    }

    #[test]
    fn device_lists() {
        assert_eq!(
            parse_ibv_devinfo_list("2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n\n", ""),
            DeviceList::Devices(vec!["mlx5_0".into(), "mlx5_1".into()])
        );
        assert_eq!(
            parse_ibv_devinfo_list("1 HCA found:\n\tmlx5_bond_0\n", ""),
            DeviceList::Devices(vec!["mlx5_bond_0".into()])
        );
        assert_eq!(
            parse_ibv_devinfo_list("", "No IB devices found\n"),
            DeviceList::NoDevices
        );
        assert!(matches!(
            parse_ibv_devinfo_list("", "Failed to get IB devices list: Function not implemented\n"),
            DeviceList::Error(e) if e.contains("Function not implemented")
        ));
        assert!(matches!(parse_ibv_devinfo_list("", ""), DeviceList::Error(_)));
        assert!(parse_ibv_devinfo("No IB devices found\n").is_empty());
    }
}
