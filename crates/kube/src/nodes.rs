//! The nodes a sweep may use: Ready and not cordoned, by label selector or all of them, sorted.

use crate::access::Cluster;
use crate::error::KubeError;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;

/// The names of the usable nodes ([`usable`]) that match `selector` (all without one), sorted.
pub async fn usable_nodes(cluster: &Cluster, selector: Option<&str>) -> Result<Vec<String>, KubeError> {
    let api: kube::Api<Node> = kube::Api::all(cluster.client().clone());
    let mut lp = ListParams::default();
    if let Some(s) = selector {
        lp = lp.labels(s);
    }
    let nodes = cluster.call("list nodes", || api.list(&lp)).await?.items;
    let mut names: Vec<String> = nodes
        .into_iter()
        .filter(usable)
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// One node (its taints and advertised devices).
pub async fn get_node(cluster: &Cluster, name: &str) -> Result<Node, KubeError> {
    let api: kube::Api<Node> = kube::Api::all(cluster.client().clone());
    cluster.call(&format!("get node {name}"), || api.get(name)).await
}

/// Ready and not cordoned.
pub fn usable(node: &Node) -> bool {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready && !cordoned
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ready: &str, cordoned: bool) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "spec": {"unschedulable": cordoned},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }))
        .expect("a node")
    }

    #[test]
    fn only_ready_uncordoned_nodes_are_usable() {
        assert!(usable(&node("True", false)));
        assert!(!usable(&node("True", true)));
        assert!(!usable(&node("False", false)));
        assert!(!usable(&node("Unknown", false)));
        let bare: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}})).unwrap();
        assert!(!usable(&bare));
    }
}
