//! The fleet view of a sweep (issue 40 item 3): the NIC firmware and MTUs of every node, each as
//! its node read it in the pairs it ran (a pair side reads its own readiness and sends it in its
//! hello: `icb_core::readiness::PairReadiness`), and the odd ones out named — a node whose value
//! differs from the one most nodes have. A pair compares two nodes; only the fleet shows which of
//! the two is the odd one.

use icb_core::readiness::{Readiness, ReadinessField};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The values compared across the fleet, per port name: what a node alone cannot get wrong but a
/// node against the others can.
pub const FLEET_FIELDS: [ReadinessField; 3] = [
    ReadinessField::Firmware,
    ReadinessField::ActiveMtu,
    ReadinessField::NetdevMtu,
];

/// The sweep's `fleet`: one row per (field, port) that some node read, and the nodes none of
/// whose pairs read their readiness (never counted with the majority).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetView {
    #[serde(default)]
    pub values: Vec<FleetValue>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_read: Vec<String>,
}

/// One value across the nodes that read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetValue {
    pub field: ReadinessField,
    /// `mlx5_0:1`.
    pub port: String,
    /// Each value seen, with its nodes (sorted).
    pub nodes: BTreeMap<String, Vec<String>>,
    /// The value more nodes have than any other; absent on a tie (no odd one can be told).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub majority: Option<String>,
    /// The nodes whose value is not the majority's, each with its value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub odd_ones_out: Vec<(String, String)>,
    /// Nodes read whose port showed no value for it (absent, or this port not on the node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_read: Vec<String>,
}

impl FleetValue {
    /// Nodes that read a value.
    pub fn read(&self) -> usize {
        self.nodes.values().map(Vec::len).sum()
    }
}

fn value_of(r: &Readiness, field: ReadinessField, port: &str) -> Option<String> {
    let p = r.ports.iter().find(|p| p.port == port)?;
    match field {
        ReadinessField::Firmware => p.firmware.clone(),
        ReadinessField::ActiveMtu => p.active_mtu.map(|v| v.to_string()),
        ReadinessField::NetdevMtu => p.netdev_mtu.map(|v| v.to_string()),
        _ => None,
    }
}

/// The fleet view of `nodes`, from what each node's pairs read (`read`, by node name).
pub fn fleet_view(nodes: &[String], read: &BTreeMap<String, Readiness>) -> FleetView {
    let not_read: Vec<String> = nodes.iter().filter(|n| !read.contains_key(*n)).cloned().collect();
    let seen: Vec<(&String, &Readiness)> = nodes.iter().filter_map(|n| Some((n, read.get(n)?))).collect();
    let mut ports: Vec<&str> = seen
        .iter()
        .flat_map(|(_, r)| r.ports.iter().map(|p| p.port.as_str()))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    let mut values = Vec::new();
    for field in FLEET_FIELDS {
        for port in &ports {
            let mut by_value: BTreeMap<String, Vec<String>> = BTreeMap::new();
            let mut unread = Vec::new();
            for (node, r) in &seen {
                match value_of(r, field, port) {
                    Some(v) => by_value.entry(v).or_default().push((*node).clone()),
                    None => unread.push((*node).clone()),
                }
            }
            if by_value.is_empty() {
                continue; // No node read it: nothing to show but the not-read lines elsewhere.
            }
            values.push(row(field, port, by_value, unread));
        }
    }
    FleetView { values, not_read }
}

fn row(field: ReadinessField, port: &str, nodes: BTreeMap<String, Vec<String>>, not_read: Vec<String>) -> FleetValue {
    let most = nodes.values().map(Vec::len).max().unwrap_or(0);
    let leaders: Vec<&String> = nodes.iter().filter(|(_, n)| n.len() == most).map(|(v, _)| v).collect();
    let majority = (leaders.len() == 1).then(|| leaders[0].clone());
    let odd_ones_out = match &majority {
        Some(m) => nodes
            .iter()
            .filter(|(v, _)| *v != m)
            .flat_map(|(v, ns)| ns.iter().map(move |n| (n.clone(), v.clone())))
            .collect(),
        None => Vec::new(),
    };
    FleetValue {
        field,
        port: port.to_string(),
        nodes,
        majority,
        odd_ones_out,
        not_read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::readiness::PortReadiness;

    fn node(fw: &str, mtu: u32) -> Readiness {
        Readiness {
            ports: vec![PortReadiness {
                port: "mlx5_0:1".into(),
                netdev_mtu: Some(mtu),
                firmware: Some(fw.into()),
                ..Default::default()
            }],
            gdr_mode: None,
            pcie_links: vec![],
        }
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_node_that_differs_from_the_majority_is_named_with_its_value() {
        let nodes = names(&["a", "b", "c", "d"]);
        let read: BTreeMap<String, Readiness> = [
            ("a", node("28.39.1002", 9000)),
            ("b", node("28.39.1002", 9000)),
            ("c", node("28.38.1000", 9000)),
        ]
        .into_iter()
        .map(|(n, r)| (n.to_string(), r))
        .collect();
        let view = fleet_view(&nodes, &read);
        assert_eq!(view.not_read, ["d"]);
        let fw = &view.values[0];
        assert_eq!((fw.field, fw.port.as_str()), (ReadinessField::Firmware, "mlx5_0:1"));
        assert_eq!(fw.majority.as_deref(), Some("28.39.1002"));
        assert_eq!(fw.odd_ones_out, [("c".to_string(), "28.38.1000".to_string())]);
        assert_eq!(fw.read(), 3);
        // The active MTU no node read has no row; the netdev MTU agrees everywhere.
        assert_eq!(view.values.len(), 2, "{view:?}");
        let mtu = &view.values[1];
        assert_eq!(mtu.field, ReadinessField::NetdevMtu);
        assert!(mtu.odd_ones_out.is_empty());
        assert_eq!(mtu.nodes["9000"], ["a", "b", "c"]);
    }

    #[test]
    fn a_tie_names_no_odd_one_and_an_unread_port_is_not_a_value() {
        let nodes = names(&["a", "b", "c"]);
        let mut bare = node("28.39.1002", 1500);
        bare.ports[0].netdev_mtu = None;
        let read: BTreeMap<String, Readiness> = [
            ("a", node("28.39.1002", 9000)),
            ("b", node("28.39.1002", 1500)),
            ("c", bare),
        ]
        .into_iter()
        .map(|(n, r)| (n.to_string(), r))
        .collect();
        let view = fleet_view(&nodes, &read);
        let mtu = view
            .values
            .iter()
            .find(|v| v.field == ReadinessField::NetdevMtu)
            .unwrap();
        assert_eq!(mtu.majority, None);
        assert!(mtu.odd_ones_out.is_empty());
        assert_eq!(mtu.not_read, ["c"]);
        assert!(view.not_read.is_empty());
    }
}
