//! `ibstat` output (rdma-core `infiniband-diags/ibstat.c`): `CA 'name'`, then tab-indented
//! `key: value` lines, ports introduced by `Port N:`.

use super::sysfs::{LinkLayer, PhysState, PortState, Rate, parse_rate};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IbstatCa {
    pub name: String,
    pub ca_type: Option<String>,
    pub firmware: Option<String>,
    pub ports: Vec<IbstatPort>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IbstatPort {
    pub number: u32,
    pub state: Option<PortState>,
    pub phys_state: Option<PhysState>,
    pub rate: Option<Rate>,
    pub base_lid: Option<u32>,
    pub link_layer: Option<LinkLayer>,
}

/// Parses the whole output; unknown lines are ignored, so a newer ibstat with extra fields
/// (`Effective speed`) still parses.
pub fn parse_ibstat(text: &str) -> Vec<IbstatCa> {
    let mut cas: Vec<IbstatCa> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("CA '") {
            let name = rest.strip_suffix('\'').unwrap_or(rest).to_string();
            cas.push(IbstatCa {
                name,
                ..Default::default()
            });
            continue;
        }
        let Some(ca) = cas.last_mut() else { continue };
        if let Some(rest) = line.strip_prefix("Port ")
            && let Some(num) = rest.strip_suffix(':').and_then(|n| n.trim().parse().ok())
        {
            ca.ports.push(IbstatPort {
                number: num,
                ..Default::default()
            });
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match (key.trim(), ca.ports.last_mut()) {
            ("CA type", _) => ca.ca_type = Some(value.to_string()),
            ("Firmware version", _) => ca.firmware = Some(value.to_string()),
            ("State", Some(p)) => p.state = PortState::parse(value),
            ("Physical state", Some(p)) => p.phys_state = PhysState::parse(value),
            ("Rate", Some(p)) => p.rate = parse_rate(value),
            ("Base lid", Some(p)) => p.base_lid = value.parse().ok(),
            ("Link layer", Some(p)) => p.link_layer = LinkLayer::parse(value),
            _ => {}
        }
    }
    cas
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::sysfs::port_is_up;

    const IB: &str = "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n\tHardware version: 0\n\tNode GUID: 0x946dae03001a2b3c\n\tSystem image GUID: 0x946dae03001a2b3c\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: 17\n\t\tLMC: 0\n\t\tSM lid: 1\n\t\tCapability mask: 0xa751e848\n\t\tPort GUID: 0x946dae03001a2b3c\n\t\tLink layer: InfiniBand\n";

    #[test]
    fn healthy_ib_port() {
        let cas = parse_ibstat(IB);
        assert_eq!(cas.len(), 1);
        assert_eq!(cas[0].name, "mlx5_0");
        assert_eq!(cas[0].ca_type.as_deref(), Some("MT4129"));
        let p = &cas[0].ports[0];
        assert_eq!(p.number, 1);
        assert!(port_is_up(p.state.as_ref(), p.phys_state.as_ref()));
        assert_eq!(p.rate.as_ref().map(|r| r.gbps), Some(400.0));
        assert_eq!(p.base_lid, Some(17));
        assert_eq!(p.link_layer, Some(LinkLayer::InfiniBand));
    }

    #[test]
    fn initializing_with_linkup_is_not_up() {
        let text = IB.replace("State: Active", "State: Initializing");
        let cas = parse_ibstat(&text);
        let p = &cas[0].ports[0];
        assert_eq!(p.state, Some(PortState::Init));
        assert_eq!(p.phys_state, Some(PhysState::LinkUp));
        assert!(!port_is_up(p.state.as_ref(), p.phys_state.as_ref()));
    }

    #[test]
    fn roce_variant_and_two_cas() {
        let roce = IB
            .replace("Base lid: 17", "Base lid: 0")
            .replace("SM lid: 1", "SM lid: 0")
            .replace("Link layer: InfiniBand", "Link layer: Ethernet")
            .replace("Rate: 400", "Rate: 100\n\t\tEffective speed: 100")
            .replace("mlx5_0", "mlx5_1");
        let cas = parse_ibstat(&format!("{IB}\n{roce}"));
        assert_eq!(cas.len(), 2);
        assert_eq!(cas[1].name, "mlx5_1");
        assert_eq!(cas[1].ports[0].link_layer, Some(LinkLayer::Ethernet));
        assert_eq!(cas[1].ports[0].base_lid, Some(0));
        assert_eq!(cas[1].ports[0].rate.as_ref().map(|r| r.gbps), Some(100.0));
    }

    #[test]
    fn garbage_gives_nothing() {
        assert!(parse_ibstat("ibstat: command not found\n").is_empty());
        assert!(parse_ibstat("").is_empty());
    }
}
