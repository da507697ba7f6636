//! The NIC's own error and congestion counters around a case or a rail phase: why a rail on the
//! right transport is slow. [`vocabulary`] names and explains every counter; a
//! [`HealthSnapshot`] is what one side read at one instant (beside the byte counters of
//! [`super::counters`]); [`deltas`] gives what moved between two, where a counter absent or
//! unreadable in either reading is "not read", never zero; [`rules`] turns deltas into findings
//! (congested, lossy link, RDMA confirmed or contradicted). Pure.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod case;
pub mod rail;
pub mod rules;
pub mod vocabulary;

pub use vocabulary::{CounterDef, CounterPath, Driver, Indicates, VOCABULARY, lookup};

/// One device's health counters at one instant: an RDMA port (`mlx5_0:1`, `efa_0:1`) or a netdev
/// (`eth2`, for its pause counters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortHealth {
    pub device: String,
    /// Whose counters it has: `[ib_core, mlx5]` for an mlx5 port, `[efa]`, `[netdev]`.
    pub drivers: Vec<Driver>,
    /// Counters read, by name.
    #[serde(default)]
    pub values: BTreeMap<String, u64>,
    /// Counters that exist but could not be read, with why.
    #[serde(default)]
    pub unreadable: BTreeMap<String, String>,
}

/// Every device's health counters of one side at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthSnapshot {
    pub ports: Vec<PortHealth>,
    /// The whole reading failed (the node's sysfs, the agent or pod that reads it), with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

impl HealthSnapshot {
    /// A reading that failed as a whole: every port's counters are "not read", saying `why`.
    pub fn unread(why: impl Into<String>) -> HealthSnapshot {
        HealthSnapshot {
            ports: Vec::new(),
            unreadable: Some(why.into()),
        }
    }

    pub fn port(&self, device: &str) -> Option<&PortHealth> {
        self.ports.iter().find(|p| p.device == device)
    }
}

/// What one counter did between two readings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Delta {
    /// Read both times: it moved by this much (zero included).
    Moved { by: u64 },
    /// Lower after than before: cleared or wrapped in between, so no delta can be told.
    WentBack,
    /// Absent or unreadable in either reading: not read, never zero.
    NotRead { why: String },
}

impl Delta {
    /// The amount, where it was read.
    pub fn read(&self) -> Option<u64> {
        match self {
            Delta::Moved { by } => Some(*by),
            _ => None,
        }
    }
}

/// One device's deltas: every vocabulary counter of its drivers, plus any other counter both
/// readings have.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortDeltas {
    pub device: String,
    pub drivers: Vec<Driver>,
    pub deltas: BTreeMap<String, Delta>,
}

impl PortDeltas {
    pub fn get(&self, name: &str) -> Option<&Delta> {
        self.deltas.get(name)
    }

    /// `(name, delta)` of the counters that moved and indicate `what`, in name order.
    pub fn moved(&self, what: Indicates) -> Vec<(String, u64)> {
        self.deltas
            .iter()
            .filter_map(|(n, d)| Some((n, d.read().filter(|v| *v > 0)?)))
            .filter(|(n, _)| self.def(n).is_some_and(|d| d.indicates == what))
            .map(|(n, v)| (n.clone(), v))
            .collect()
    }

    /// `(name, delta)` of every counter indicating `what` that was read, zero included.
    pub fn read_of(&self, what: Indicates) -> Vec<(String, u64)> {
        self.deltas
            .iter()
            .filter_map(|(n, d)| Some((n, d.read()?)))
            .filter(|(n, _)| self.def(n).is_some_and(|d| d.indicates == what))
            .map(|(n, v)| (n.clone(), v))
            .collect()
    }

    /// The names of the counters indicating `what` that were not read (or went back).
    pub fn not_read(&self, what: Indicates) -> Vec<String> {
        self.deltas
            .iter()
            .filter(|(_, d)| d.read().is_none())
            .filter(|(n, _)| self.def(n).is_some_and(|d| d.indicates == what))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Whether any counter indicating `what` was read.
    pub fn any_read(&self, what: Indicates) -> bool {
        self.deltas
            .iter()
            .any(|(n, d)| d.read().is_some() && self.def(n).is_some_and(|d| d.indicates == what))
    }

    fn def(&self, name: &str) -> Option<&'static CounterDef> {
        self.drivers.iter().find_map(|d| lookup(*d, name))
    }
}

/// What `device`'s counters did from `before` to `after`. Every vocabulary counter of its
/// drivers is there (templates by the names either reading has); a counter missing from a
/// reading is `NotRead` with why. `None` when neither reading has the device.
pub fn deltas(before: &HealthSnapshot, after: &HealthSnapshot, device: &str) -> Option<PortDeltas> {
    let (b, a) = (before.port(device), after.port(device));
    let drivers = b.or(a)?.drivers.clone();
    let mut names: Vec<String> = vocabulary::for_drivers(&drivers)
        .filter(|d| !d.name.contains("{p}"))
        .map(|d| d.name.to_string())
        .collect();
    for p in [b, a].into_iter().flatten() {
        names.extend(p.values.keys().cloned());
        names.extend(p.unreadable.keys().cloned());
    }
    names.sort();
    names.dedup();
    let deltas = names
        .into_iter()
        .map(|n| {
            let d = delta_of(b, a, &n);
            (n, d)
        })
        .collect();
    Some(PortDeltas {
        device: device.to_string(),
        drivers,
        deltas,
    })
}

fn delta_of(b: Option<&PortHealth>, a: Option<&PortHealth>, name: &str) -> Delta {
    let side = |p: Option<&PortHealth>, when: &str| -> Result<u64, String> {
        let Some(p) = p else {
            return Err(format!("the device was not in the {when} reading"));
        };
        if let Some(v) = p.values.get(name) {
            return Ok(*v);
        }
        Err(match p.unreadable.get(name) {
            Some(why) => format!("{when}: {why}"),
            None => format!("absent {when}"),
        })
    };
    match (side(b, "before"), side(a, "after")) {
        (Ok(x), Ok(y)) if y >= x => Delta::Moved { by: y - x },
        (Ok(_), Ok(_)) => Delta::WentBack,
        (Err(why), _) | (_, Err(why)) => Delta::NotRead { why },
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
