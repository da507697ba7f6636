//! NIC byte counters: what each NIC of a node says it moved, read before and after a rail run
//! (by `icb_probe::counters` from sysfs), and the difference. This is evidence independent of
//! UCX's own account of its protocol: it works for any engine and catches traffic that left
//! through another NIC than the rail's.

use serde::{Deserialize, Serialize};

/// Which counters a figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterKind {
    /// `infiniband/<dev>/ports/<port>/counters/port_{xmit,rcv}_data` (IB and RoCE): the port's
    /// own count of data octets divided by 4, so multiplied back by 4 here.
    IbPort,
    /// `infiniband/<dev>/ports/<port>/hw_counters/{tx,rx}_bytes` (EFA).
    EfaHw,
    /// `net/<dev>/statistics/{tx,rx}_bytes` of an Ethernet device (TCP traffic; on a real RDMA
    /// NIC the RDMA bytes bypass these).
    Netdev,
}

impl CounterKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CounterKind::IbPort => "ib_port",
            CounterKind::EfaHw => "efa_hw",
            CounterKind::Netdev => "netdev",
        }
    }
}

/// One device's counters at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicCounter {
    /// `mlx5_0:1` for an RDMA port, the interface name (`eth0`) for a network device.
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    pub kind: CounterKind,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

/// Every readable counter of one node at one instant, and what could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterSnapshot {
    pub counters: Vec<NicCounter>,
    /// Counters that could not be read, with why.
    #[serde(default)]
    pub unreadable: Vec<Unreadable>,
}

/// A counter that could not be read: one device's, or (`device` absent) the whole snapshot's
/// (the node's sysfs, the agent or the pod that reads it failed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreadable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// One line.
    pub why: String,
}

impl Unreadable {
    /// The whole snapshot failed.
    pub fn all(why: impl Into<String>) -> Unreadable {
        Unreadable {
            device: None,
            why: why.into(),
        }
    }

    /// Whether this explains `device`'s missing counters: its own entry, or the whole snapshot.
    pub fn concerns(&self, device: &str) -> bool {
        self.device.as_deref().is_none_or(|d| d == device)
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.device {
            Some(d) => write!(f, "{d}: {}", self.why),
            None => f.write_str(&self.why),
        }
    }
}

/// What one device moved between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicTraffic {
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    pub kind: CounterKind,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

impl NicTraffic {
    /// Bytes in both directions: a rail's payload leaves one side and enters the other, and
    /// which way depends on the operation (put and tag send from prefill, get pulls to it).
    pub fn bytes(&self) -> u64 {
        self.tx_bytes.saturating_add(self.rx_bytes)
    }
}

impl CounterSnapshot {
    /// What each device moved from `self` to `later`. A device missing from either snapshot or
    /// whose counter went backwards (a reset, a driver reload) is left out: no figure is better
    /// than a wrong one.
    pub fn traffic_until(&self, later: &CounterSnapshot) -> Vec<NicTraffic> {
        self.counters
            .iter()
            .filter_map(|before| {
                let after = later
                    .counters
                    .iter()
                    .find(|c| c.device == before.device && c.kind == before.kind)?;
                Some(NicTraffic {
                    device: before.device.clone(),
                    pci: before.pci.clone(),
                    kind: before.kind,
                    tx_bytes: after.tx_bytes.checked_sub(before.tx_bytes)?,
                    rx_bytes: after.rx_bytes.checked_sub(before.rx_bytes)?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(device: &str, tx: u64, rx: u64) -> NicCounter {
        NicCounter {
            device: device.into(),
            pci: None,
            kind: CounterKind::Netdev,
            tx_bytes: tx,
            rx_bytes: rx,
        }
    }

    #[test]
    fn traffic_is_the_difference_and_skips_resets_and_missing_devices() {
        let before = CounterSnapshot {
            counters: vec![
                counter("rail0", 100, 10),
                counter("rail1", 500, 0),
                counter("eth0", 7, 7),
            ],
            unreadable: vec![],
        };
        let after = CounterSnapshot {
            counters: vec![counter("rail0", 1100, 30), counter("rail1", 20, 0)],
            unreadable: vec![],
        };
        let t = before.traffic_until(&after);
        assert_eq!(t.len(), 1, "rail1 was reset, eth0 vanished: {t:?}");
        assert_eq!(t[0].device, "rail0");
        assert_eq!((t[0].tx_bytes, t[0].rx_bytes, t[0].bytes()), (1000, 20, 1020));
    }
}
