//! `ic-bench sweep --node-conditions` (issue 41): each node's fabric verdict as a node condition,
//! `ICBenchFabric`, beside the kubelet's own (`kubectl describe node` shows it; kube-state-metrics
//! exports it as `kube_node_status_condition`). The label (`crate::node_labels`) stays for
//! selectors; the condition carries the evidence: `True` (pass), `False` (fail) or `Unknown`
//! (not measured, unschedulable, suspect, inconclusive: never `True`), a CamelCase reason, a
//! one-line message, `lastHeartbeatTime` (this verdict's time) and `lastTransitionTime` (when
//! the status last changed: kept from the node when it did not).
//!
//! Written through the node's `status` subresource with a strategic merge patch, which merges
//! `status.conditions` by type (a JSON merge patch would replace the kubelet's conditions). Verbs:
//! `get` on nodes (the previous status, for `lastTransitionTime`; `clusterrole-nodes.yaml`) and
//! `patch` on `nodes/status` (`manifests/clusterrole-node-conditions.yaml`), nothing else.

use crate::access::Cluster;
use crate::error::KubeError;
use futures::stream::{self, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// The condition's type.
pub const CONDITION_TYPE: &str = "ICBenchFabric";
/// The manifest and ClusterRole a 403 names.
pub const CLUSTER_ROLE_FILE: &str = "manifests/clusterrole-node-conditions.yaml";
pub const CLUSTER_ROLE: &str = "ic-bench-node-conditions";

/// Patches in flight at once.
const CONCURRENCY: usize = 8;

/// A condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// What to write on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionMark {
    pub node: String,
    pub status: ConditionStatus,
    /// CamelCase, as Kubernetes reasons are (`FabricPass`, `NotMeasured`, …).
    pub reason: &'static str,
    /// One line of evidence (cut to 1 KiB).
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConditionError {
    /// The account may not patch the node's status.
    #[error(
        "cannot set condition {CONDITION_TYPE} on node {node}: forbidden (HTTP 403: {message}); --node-conditions needs the verb `patch` on nodes/status: apply {CLUSTER_ROLE_FILE} (ClusterRole {CLUSTER_ROLE}) for ic-bench's ServiceAccount, or drop --node-conditions"
    )]
    Forbidden { node: String, message: String },
    /// Any other failure (after the retry policy's retries of transient ones).
    #[error("cannot set condition {CONDITION_TYPE} on node {node}: {source}")]
    Api {
        node: String,
        #[source]
        source: KubeError,
    },
}

/// The strategic merge patch for one node; `previous` is the node's current status of this
/// condition (`None`: it has none), `at` the verdict's RFC 3339 time.
pub fn patch_for(mark: &ConditionMark, previous: Option<&str>, at: &str) -> serde_json::Value {
    let mut condition = json!({
        "type": CONDITION_TYPE,
        "status": mark.status.as_str(),
        "reason": mark.reason,
        "message": crate::node_labels::one_line(&mark.message, 1024),
        "lastHeartbeatTime": at,
    });
    // Left out, the strategic merge keeps the node's own: the status has not changed since then.
    if previous != Some(mark.status.as_str()) {
        condition["lastTransitionTime"] = json!(at);
    }
    json!({"status": {"conditions": [condition]}})
}

/// The status of this condition on `node` now, if it has one.
pub fn current_status(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == CONDITION_TYPE)
        .map(|c| c.status.clone())
}

fn classify(node: &str, err: KubeError) -> ConditionError {
    match err {
        KubeError::Api { code: 403, message, .. } => ConditionError::Forbidden {
            node: node.to_string(),
            message,
        },
        source => ConditionError::Api {
            node: node.to_string(),
            source,
        },
    }
}

/// Asks the API server, with a server-side dry run (RBAC applies; nothing is stored), whether
/// this account may patch `node`'s status, so a missing ClusterRole stops a sweep before its
/// pairs rather than after them.
pub async fn check_access(cluster: &Cluster, node: &str) -> Result<(), ConditionError> {
    let api: Api<Node> = Api::all(cluster.client().clone());
    let params = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let patch: Patch<serde_json::Value> = Patch::Strategic(json!({"status": {"conditions": []}}));
    let what = format!("set condition {CONDITION_TYPE} on node {node} (dry run)");
    cluster
        .call(&what, || api.patch_status(node, &params, &patch))
        .await
        .map(|_| ())
        .map_err(|e| classify(node, e))
}

/// Reads each node of `marks` and patches its condition (a few at once, each call under the
/// cluster's deadline and retry policy). Stops at the first failure; returns how many nodes were
/// written.
pub async fn set_conditions(cluster: &Cluster, marks: &[ConditionMark], at: &str) -> Result<usize, ConditionError> {
    let api: Api<Node> = Api::all(cluster.client().clone());
    stream::iter(marks)
        .map(|mark| {
            let api = api.clone();
            async move {
                let node = &mark.node;
                let current = cluster
                    .call(&format!("get node {node}"), || api.get(node))
                    .await
                    .map_err(|e| classify(node, e))?;
                let patch = Patch::Strategic(patch_for(mark, current_status(&current).as_deref(), at));
                let params = PatchParams::default();
                let what = format!("set condition {CONDITION_TYPE} on node {node}");
                cluster
                    .call(&what, || api.patch_status(node, &params, &patch))
                    .await
                    .map(|_| ())
                    .map_err(|e| classify(node, e))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_fold(0usize, |n, ()| async move { Ok(n + 1) })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(status: ConditionStatus) -> ConditionMark {
        ConditionMark {
            node: "n1".into(),
            status,
            reason: "FabricFail",
            message: "fail: 3/3 pairs\nfailed".into(),
        }
    }

    #[test]
    fn a_transition_is_stamped_only_when_the_status_changes() {
        let at = "2026-11-29T02:00:00Z";
        let p = patch_for(&mark(ConditionStatus::False), Some("True"), at);
        let c = &p["status"]["conditions"][0];
        assert_eq!(c["type"], CONDITION_TYPE);
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "FabricFail");
        assert_eq!(c["message"], "fail: 3/3 pairs failed");
        assert_eq!(c["lastHeartbeatTime"], at);
        assert_eq!(c["lastTransitionTime"], at);
        let same = patch_for(&mark(ConditionStatus::False), Some("False"), at);
        assert!(same["status"]["conditions"][0].get("lastTransitionTime").is_none());
        let first = patch_for(&mark(ConditionStatus::Unknown), None, at);
        assert_eq!(first["status"]["conditions"][0]["lastTransitionTime"], at);
        assert_eq!(p.as_object().unwrap().len(), 1, "status only");
    }

    #[test]
    fn forbidden_names_the_cluster_role_and_the_verb() {
        let e = ConditionError::Forbidden {
            node: "n1".into(),
            message: "nodes \"n1\" is forbidden".into(),
        };
        let text = e.to_string();
        assert!(!text.contains('\n'));
        assert!(
            text.contains(CLUSTER_ROLE_FILE) && text.contains("`patch` on nodes/status"),
            "{text}"
        );
    }
}
