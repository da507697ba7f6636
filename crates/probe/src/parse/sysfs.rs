//! Files under `/sys/class/infiniband/<dev>/ports/<n>/` (formats from the kernel's
//! `drivers/infiniband/core/sysfs.c`).

use serde::{Deserialize, Serialize};

/// Logical port state. Only `Active` carries traffic, and only together with a physical `LinkUp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortState {
    Down,
    Init,
    Armed,
    Active,
    ActiveDefer,
    Other(String),
}

impl PortState {
    /// Accepts every spelling the tools use: sysfs `4: ACTIVE`, ibstat `Active`/`Initializing`,
    /// ibv_devinfo `PORT_ACTIVE (4)`.
    pub fn parse(text: &str) -> Option<PortState> {
        let t = strip_code(text);
        let t = t.strip_prefix("PORT_").unwrap_or(t);
        if t.is_empty() {
            return None;
        }
        Some(match t.to_ascii_uppercase().as_str() {
            "DOWN" => PortState::Down,
            "INIT" | "INITIALIZING" | "INITIALIZE" => PortState::Init,
            "ARMED" => PortState::Armed,
            "ACTIVE" => PortState::Active,
            "ACTIVE_DEFER" => PortState::ActiveDefer,
            _ => PortState::Other(t.to_string()),
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            PortState::Down => "DOWN",
            PortState::Init => "INIT",
            PortState::Armed => "ARMED",
            PortState::Active => "ACTIVE",
            PortState::ActiveDefer => "ACTIVE_DEFER",
            PortState::Other(s) => s,
        }
    }
}

/// Physical port state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhysState {
    LinkUp,
    Polling,
    Disabled,
    Sleep,
    Other(String),
}

impl PhysState {
    /// sysfs `5: LinkUp`, ibstat `LinkUp`, ibv_devinfo `LINK_UP (5)`.
    pub fn parse(text: &str) -> Option<PhysState> {
        let t = strip_code(text);
        if t.is_empty() {
            return None;
        }
        let key: String = t
            .chars()
            .filter(|c| *c != '_' && *c != ' ')
            .collect::<String>()
            .to_ascii_lowercase();
        Some(match key.as_str() {
            "linkup" => PhysState::LinkUp,
            "polling" => PhysState::Polling,
            "disabled" => PhysState::Disabled,
            "sleep" => PhysState::Sleep,
            _ => PhysState::Other(t.to_string()),
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            PhysState::LinkUp => "LinkUp",
            PhysState::Polling => "Polling",
            PhysState::Disabled => "Disabled",
            PhysState::Sleep => "Sleep",
            PhysState::Other(s) => s,
        }
    }
}

/// Removes a numeric code around a state name: `4: ACTIVE`, `PORT_ACTIVE (4)`.
fn strip_code(text: &str) -> &str {
    let t = text.trim();
    let t = match t.split_once(':') {
        Some((code, rest)) if !code.is_empty() && code.trim().chars().all(|c| c.is_ascii_digit()) => rest.trim(),
        _ => t,
    };
    match t.rfind(" (") {
        Some(i) if t.ends_with(')') => t[..i].trim(),
        _ => t,
    }
}

/// A port is up only when the logical state is Active AND the physical state is LinkUp:
/// `Initializing` + `LinkUp` (no subnet manager) carries nothing.
pub fn port_is_up(state: Option<&PortState>, phys: Option<&PhysState>) -> bool {
    matches!(state, Some(PortState::Active)) && matches!(phys, Some(PhysState::LinkUp))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkLayer {
    #[serde(rename = "infiniband")]
    InfiniBand,
    Ethernet,
    Other(String),
}

impl LinkLayer {
    pub fn parse(text: &str) -> Option<LinkLayer> {
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        Some(match t.to_ascii_lowercase().as_str() {
            "infiniband" | "ib" => LinkLayer::InfiniBand,
            "ethernet" | "eth" => LinkLayer::Ethernet,
            _ => LinkLayer::Other(t.to_string()),
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
            LinkLayer::Other(s) => s,
        }
    }
}

/// Port rate: sysfs `400 Gb/sec (4X NDR)`, ibstat `400` or `56 (FDR10)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub gbps: f64,
    pub text: String,
}

pub fn parse_rate(text: &str) -> Option<Rate> {
    let t = text.trim();
    let num: String = t.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    let gbps: f64 = num.parse().ok()?;
    if !gbps.is_finite() || gbps < 0.0 {
        return None;
    }
    Some(Rate {
        gbps,
        text: t.to_string(),
    })
}

/// A GID as written by sysfs (`0000:0000:0000:0000:0000:ffff:0a00:0105`).
pub fn parse_gid(text: &str) -> Option<String> {
    let t = text.trim();
    let groups: Vec<&str> = t.split(':').collect();
    if groups.len() != 8
        || !groups
            .iter()
            .all(|g| g.len() == 4 && g.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return None;
    }
    Some(t.to_ascii_lowercase())
}

/// The prefix of an IPv4-mapped GID, tested in full (KServe's `ffff:` substring also matches
/// link-local GIDs whose interface id contains `ffff`).
pub const IPV4_MAPPED_PREFIX: &str = "0000:0000:0000:0000:0000:ffff:";

pub fn gid_is_ipv4_mapped(gid: &str) -> bool {
    gid.trim().to_ascii_lowercase().starts_with(IPV4_MAPPED_PREFIX)
}

/// The all-zero GID fills unpopulated table slots.
pub fn gid_is_zero(gid: &str) -> bool {
    gid.chars().all(|c| c == '0' || c == ':')
}

/// The dotted IPv4 address inside an IPv4-mapped GID.
pub fn gid_ipv4(gid: &str) -> Option<String> {
    let rest = gid.trim().to_ascii_lowercase();
    let rest = rest.strip_prefix(IPV4_MAPPED_PREFIX)?.to_string();
    let (hi, lo) = rest.split_once(':')?;
    let hi = u16::from_str_radix(hi, 16).ok()?;
    let lo = u16::from_str_radix(lo, 16).ok()?;
    Some(format!("{}.{}.{}.{}", hi >> 8, hi & 0xff, lo >> 8, lo & 0xff))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GidType {
    RoceV2,
    RoceV1,
    Other(String),
}

impl GidType {
    /// `gid_attrs/types/<i>`: `RoCE v2` or `IB/RoCE v1`.
    pub fn parse(text: &str) -> Option<GidType> {
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        let l = t.to_ascii_lowercase();
        Some(if l == "roce v2" || l == "rocev2" {
            GidType::RoceV2
        } else if l == "ib/roce v1" || l == "roce v1" {
            GidType::RoceV1
        } else {
            GidType::Other(t.to_string())
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            GidType::RoceV2 => "RoCE v2",
            GidType::RoceV1 => "IB/RoCE v1",
            GidType::Other(s) => s,
        }
    }
}

/// A decimal counter file (`counters/link_downed`).
pub fn parse_counter(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_in_every_spelling() {
        assert_eq!(PortState::parse("4: ACTIVE\n"), Some(PortState::Active));
        assert_eq!(PortState::parse("2: INIT"), Some(PortState::Init));
        assert_eq!(PortState::parse("Initializing"), Some(PortState::Init));
        assert_eq!(PortState::parse("PORT_ACTIVE (4)"), Some(PortState::Active));
        assert_eq!(PortState::parse("PORT_DOWN (1)"), Some(PortState::Down));
        assert_eq!(PortState::parse("5: ACTIVE_DEFER"), Some(PortState::ActiveDefer));
        assert_eq!(PortState::parse(""), None);
        assert_eq!(PhysState::parse("5: LinkUp\n"), Some(PhysState::LinkUp));
        assert_eq!(PhysState::parse("LINK_UP (5)"), Some(PhysState::LinkUp));
        assert_eq!(PhysState::parse("2: Polling"), Some(PhysState::Polling));
    }

    #[test]
    fn init_plus_linkup_is_not_up() {
        assert!(!port_is_up(
            PortState::parse("2: INIT").as_ref(),
            PhysState::parse("5: LinkUp").as_ref()
        ));
        assert!(!port_is_up(
            PortState::parse("4: ACTIVE").as_ref(),
            PhysState::parse("2: Polling").as_ref()
        ));
        assert!(!port_is_up(PortState::parse("4: ACTIVE").as_ref(), None));
        assert!(port_is_up(
            PortState::parse("4: ACTIVE").as_ref(),
            PhysState::parse("5: LinkUp").as_ref()
        ));
    }

    #[test]
    fn rates_and_gids() {
        assert_eq!(parse_rate("400 Gb/sec (4X NDR)\n").map(|r| r.gbps), Some(400.0));
        assert_eq!(parse_rate("2.5 Gb/sec (1X SDR)").map(|r| r.gbps), Some(2.5));
        assert_eq!(parse_rate("56 (FDR10)").map(|r| r.gbps), Some(56.0));
        assert_eq!(parse_rate("fast"), None);
        let g = parse_gid("0000:0000:0000:0000:0000:ffff:0a00:0105\n").unwrap();
        assert!(gid_is_ipv4_mapped(&g));
        assert_eq!(gid_ipv4(&g).as_deref(), Some("10.0.1.5"));
        // A link-local GID whose interface id contains ffff is not IPv4-mapped.
        assert!(!gid_is_ipv4_mapped("fe80:0000:0000:0000:0abc:ffff:fe00:0001"));
        assert!(gid_is_zero("0000:0000:0000:0000:0000:0000:0000:0000"));
        assert_eq!(parse_gid("not a gid"), None);
        assert_eq!(GidType::parse("RoCE v2\n"), Some(GidType::RoceV2));
        assert_eq!(GidType::parse("IB/RoCE v1"), Some(GidType::RoceV1));
        assert_eq!(LinkLayer::parse("Ethernet\n"), Some(LinkLayer::Ethernet));
        assert_eq!(parse_counter("17\n"), Some(17));
        assert_eq!(parse_counter("x"), None);
    }
}
