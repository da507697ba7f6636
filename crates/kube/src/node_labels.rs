//! `ic-bench sweep --label-nodes`: writes each judged node's fabric verdict onto the node, so
//! schedulers (`nodeAffinity` on `ic-bench.dev/fabric=pass`) and humans (`kubectl get nodes -L
//! ic-bench.dev/fabric`) can act on it. One JSON merge patch per node sets the label and three
//! annotations (when, which sweep, why); nothing else is written, never a taint. The only verb
//! used is `patch` on nodes, which is what `manifests/clusterrole-label-nodes.yaml` grants.
//!
//! Nodes without a pass/fail verdict in a sweep (unschedulable, unknown, still suspect) are not
//! patched at all: their label, if any, is an earlier sweep's, and its `…/fabric-checked-at`
//! annotation says how old it is. Removing it instead would strip `pass` from every node that was
//! merely too busy to take bench pods tonight.

use crate::access::Cluster;
use crate::error::KubeError;
use futures::stream::{self, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// `pass` or `fail`.
pub const FABRIC_LABEL: &str = "ic-bench.dev/fabric";
/// RFC 3339 time of the verdict.
pub const CHECKED_AT_ANNOTATION: &str = "ic-bench.dev/fabric-checked-at";
/// The sweep id (the results file's `sweep_id`).
pub const RUN_ANNOTATION: &str = "ic-bench.dev/fabric-run";
/// One line of evidence.
pub const REASON_ANNOTATION: &str = "ic-bench.dev/fabric-reason";
/// The rails a `sweep --rails` blamed on this node (`rail:PCI`, comma separated); removed when
/// none is.
pub const BAD_RAILS_ANNOTATION: &str = "ic-bench.dev/fabric-bad-rails";

/// The manifest and ClusterRole a 403 names.
pub const CLUSTER_ROLE_FILE: &str = "manifests/clusterrole-label-nodes.yaml";
pub const CLUSTER_ROLE: &str = "ic-bench-label-nodes";

/// Longest reason written (annotations are small by convention; the results file has the rest).
const MAX_REASON: usize = 512;
/// Patches in flight at once.
const CONCURRENCY: usize = 8;

/// A node's fabric verdict as a label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fabric {
    Pass,
    Fail,
}

impl Fabric {
    pub fn as_str(self) -> &'static str {
        match self {
            Fabric::Pass => "pass",
            Fabric::Fail => "fail",
        }
    }
}

/// What to write on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMark {
    pub node: String,
    pub fabric: Fabric,
    pub reason: String,
    /// The blamed rails (`5:0000:9a:00.0`); `None` removes an earlier sweep's annotation.
    pub bad_rails: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    /// The account may not patch nodes.
    #[error(
        "cannot label node {node}: forbidden (HTTP 403: {message}); --label-nodes needs the verb `patch` on nodes: apply {CLUSTER_ROLE_FILE} (ClusterRole {CLUSTER_ROLE}) for ic-bench's ServiceAccount, or drop --label-nodes"
    )]
    Forbidden { node: String, message: String },
    /// Any other failure (after the retry policy's retries of transient ones).
    #[error("cannot label node {node}: {source}")]
    Api {
        node: String,
        #[source]
        source: KubeError,
    },
}

/// The merge patch for one node.
pub fn patch_for(mark: &NodeMark, run_id: &str, at: &str) -> serde_json::Value {
    json!({"metadata": {
        "labels": {FABRIC_LABEL: mark.fabric.as_str()},
        "annotations": {
            CHECKED_AT_ANNOTATION: at,
            RUN_ANNOTATION: run_id,
            REASON_ANNOTATION: one_line(&mark.reason, MAX_REASON),
            // A JSON merge patch removes a key set to null.
            BAD_RAILS_ANNOTATION: mark.bad_rails,
        },
    }})
}

/// `text` on one line, cut to `max` bytes on a character boundary (`…` marks a cut).
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let mut s = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.len() > max {
        let mut cut = max - '…'.len_utf8();
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Asks the API server whether this account may patch `node`, with a server-side dry run (RBAC is
/// enforced on dry runs; nothing is stored), so a missing ClusterRole stops a sweep before its
/// hours of pairs rather than after them.
pub async fn check_access(cluster: &Cluster, node: &str) -> Result<(), LabelError> {
    let api: Api<Node> = Api::all(cluster.client().clone());
    let params = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let patch = Patch::Merge(json!({"metadata": {"labels": {}}}));
    let what = format!("label node {node} (dry run)");
    cluster
        .call(&what, || api.patch(node, &params, &patch))
        .await
        .map(|_| ())
        .map_err(|e| classify(node, e))
}

fn classify(node: &str, err: KubeError) -> LabelError {
    match err {
        KubeError::Api { code: 403, message, .. } => LabelError::Forbidden {
            node: node.to_string(),
            message,
        },
        source => LabelError::Api {
            node: node.to_string(),
            source,
        },
    }
}

/// Patches every node in `marks` (a few at once, each call under the cluster's deadline and
/// retry policy). Stops at the first failure; returns how many nodes were labelled.
pub async fn label_nodes(cluster: &Cluster, marks: &[NodeMark], run_id: &str, at: &str) -> Result<usize, LabelError> {
    let api: Api<Node> = Api::all(cluster.client().clone());
    let params = PatchParams::default();
    stream::iter(marks)
        .map(|mark| {
            let api = api.clone();
            let params = params.clone();
            let patch = Patch::Merge(patch_for(mark, run_id, at));
            async move {
                let what = format!("label node {}", mark.node);
                cluster
                    .call(&what, || api.patch(&mark.node, &params, &patch))
                    .await
                    .map(|_| ())
                    .map_err(|e| classify(&mark.node, e))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_fold(0usize, |n, ()| async move { Ok(n + 1) })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_sets_one_label_and_its_annotations() {
        let mark = NodeMark {
            node: "node-2".into(),
            fabric: Fabric::Fail,
            reason: "2 of 3 pairs failed\nor slow".into(),
            bad_rails: Some("5:0000:9a:00.0".into()),
        };
        let p = patch_for(&mark, "swab12", "2026-01-01T02:00:00Z");
        assert_eq!(p["metadata"]["labels"], json!({"ic-bench.dev/fabric": "fail"}));
        let ann = &p["metadata"]["annotations"];
        assert_eq!(ann[CHECKED_AT_ANNOTATION], "2026-01-01T02:00:00Z");
        assert_eq!(ann[RUN_ANNOTATION], "swab12");
        assert_eq!(ann[REASON_ANNOTATION], "2 of 3 pairs failed or slow");
        assert_eq!(ann[BAD_RAILS_ANNOTATION], "5:0000:9a:00.0");
        let clean = NodeMark {
            bad_rails: None,
            ..mark
        };
        assert!(patch_for(&clean, "r", "t")["metadata"]["annotations"][BAD_RAILS_ANNOTATION].is_null());
        assert_eq!(p.as_object().unwrap().len(), 1, "metadata only: never a taint");
    }

    #[test]
    fn long_reasons_are_cut_on_a_character_boundary() {
        let r = one_line(&"é".repeat(600), MAX_REASON);
        assert!(r.len() <= MAX_REASON && r.ends_with('…'), "{}", r.len());
    }

    #[test]
    fn forbidden_names_the_cluster_role_and_the_verb() {
        let e = LabelError::Forbidden {
            node: "node-1".into(),
            message: "nodes \"node-1\" is forbidden".into(),
        };
        let text = e.to_string();
        assert!(!text.contains('\n'));
        assert!(text.contains("manifests/clusterrole-label-nodes.yaml") && text.contains("`patch` on nodes"));
    }
}
