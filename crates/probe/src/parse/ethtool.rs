//! `ethtool -S IF`: a netdev's driver statistics, one `name: value` per line under a
//! `NIC statistics:` header. Only the pause counters of the NIC health vocabulary are kept
//! (mlx5e's `rx_pause_ctrl_phy`, `tx_prio3_pause` …), as a [`PortHealth`] of the netdev: a
//! driver that does not expose them gives none, which the deltas read as "not read".

use icb_core::rails::nic_health::{Driver, PortHealth, lookup};

/// The pause counters of `netdev` in `ethtool -S` output; a vocabulary name whose value is not
/// a count is recorded as unreadable.
pub fn parse_ethtool_pause(netdev: &str, text: &str) -> PortHealth {
    let mut health = PortHealth {
        device: netdev.to_string(),
        drivers: vec![Driver::Netdev],
        ..Default::default()
    };
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        if lookup(Driver::Netdev, name).is_none() {
            continue;
        }
        match value.trim().parse::<u64>() {
            Ok(v) => {
                health.values.insert(name.to_string(), v);
            }
            Err(_) => {
                let shown: String = value.trim().chars().take(40).collect();
                health
                    .unreadable
                    .insert(name.to_string(), format!("ethtool -S reads {shown:?}, not a count"));
            }
        }
    }
    health
}

#[cfg(test)]
mod tests {
    use super::*;

    const MLX5E: &str = "NIC statistics:\n     rx_packets: 1200\n     rx_pause_ctrl_phy: 0\n     tx_pause_ctrl_phy: 3\n     rx_prio3_pause: 17\n     tx_prio3_pause: 904\n     rx_prio3_pause_duration: 5500\n     rx_prio8_pause: 1\n     tx_prio0_pause: n/a\n";

    #[test]
    fn keeps_the_pause_counters_of_the_vocabulary() {
        let h = parse_ethtool_pause("eth1", MLX5E);
        assert_eq!(h.drivers, vec![Driver::Netdev]);
        let got: Vec<(&str, u64)> = h.values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        // Not rx_packets, not the duration, not a priority beyond 7.
        assert_eq!(
            got,
            vec![
                ("rx_pause_ctrl_phy", 0),
                ("rx_prio3_pause", 17),
                ("tx_pause_ctrl_phy", 3),
                ("tx_prio3_pause", 904)
            ]
        );
        assert_eq!(
            h.unreadable.get("tx_prio0_pause").map(String::as_str),
            Some("ethtool -S reads \"n/a\", not a count")
        );
    }

    #[test]
    fn a_driver_without_pause_counters_gives_none() {
        let h = parse_ethtool_pause("eth0", "NIC statistics:\n     rx_packets: 1\n     tx_bytes: 2\n");
        assert!(h.values.is_empty() && h.unreadable.is_empty());
        assert!(parse_ethtool_pause("eth0", "").values.is_empty());
        // "Operation not supported" and garbage are no counters.
        let h = parse_ethtool_pause("lo", "no stats available\n\u{0}:\n::::\n");
        assert!(h.values.is_empty() && h.unreadable.is_empty());
    }
}
