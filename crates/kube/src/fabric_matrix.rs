//! `ic-bench sweep --matrix-configmap NAME` (issue 41 item 4): the sweep's node-pair matrix
//! (`ic-bench.fabric-matrix/v1`, built by `icb_sweep::matrix`) in a ConfigMap of the bench
//! namespace, for topology-aware routers and schedulers that read the Kubernetes API rather than
//! Prometheus. Key [`DATA_KEY`]; labels say who wrote it and which sweep, so `kubectl get cm -l`
//! finds it.
//!
//! Written as a create, or when it exists a replace carrying the resourceVersion just read (a
//! writer in between is a 409, retried once from a fresh read rather than overwritten blind).
//! Verbs: `get`, `create` and `update` on ConfigMaps of the namespace
//! (`manifests/role-fabric-matrix.yaml`), nothing else: no `list`, no other resource.

use crate::access::Cluster;
use crate::error::KubeError;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use std::collections::BTreeMap;

/// The ConfigMap key that holds the matrix JSON.
pub const DATA_KEY: &str = "matrix.json";
/// The manifest and Role a 403 names.
pub const ROLE_FILE: &str = "manifests/role-fabric-matrix.yaml";
pub const ROLE: &str = "ic-bench-fabric-matrix";
/// ConfigMaps hold at most 1 MiB; a matrix over that is refused before the call, naming why.
const MAX_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The account may not write ConfigMaps in the namespace.
    #[error(
        "cannot write the node-pair matrix to ConfigMap {namespace}/{name}: forbidden (HTTP 403: {message}); --matrix-configmap needs `get`, `create` and `update` on configmaps: apply {ROLE_FILE} (Role {ROLE}) for ic-bench's ServiceAccount, or drop --matrix-configmap"
    )]
    Forbidden {
        namespace: String,
        name: String,
        message: String,
    },
    /// The matrix does not fit one ConfigMap.
    #[error(
        "the node-pair matrix is {bytes} bytes, over the 1 MiB a ConfigMap holds: sweep fewer nodes per run, or read the matrix from the results file or the Prometheus export instead of --matrix-configmap"
    )]
    TooLarge { bytes: usize },
    /// Any other failure (after the retry policy's retries of transient ones).
    #[error("cannot write the node-pair matrix to ConfigMap {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: KubeError,
    },
}

/// `--matrix-configmap NAME`: a ConfigMap name (a DNS-1123 subdomain), for clap.
pub fn parse_name(name: &str) -> Result<String, crate::error::InvalidName> {
    crate::target::check_name(name).map(|()| name.to_string())
}

/// What the ConfigMap will hold: its labels and its one key.
pub fn config_map(name: &str, sweep_id: &str, matrix_json: &str) -> ConfigMap {
    let labels = BTreeMap::from([
        ("app.kubernetes.io/managed-by".to_string(), "ic-bench".to_string()),
        ("app.kubernetes.io/component".to_string(), "fabric-matrix".to_string()),
        ("ic-bench.dev/sweep".to_string(), label_value(sweep_id)),
    ]);
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(DATA_KEY.to_string(), matrix_json.to_string())])),
        ..Default::default()
    }
}

/// A label value from a sweep id: at most 63 characters of `[A-Za-z0-9._-]` (sweep ids are
/// generated so; a hand-given one is cut and its other characters replaced).
fn label_value(text: &str) -> String {
    let value: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    value.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string()
}

fn classify(cluster: &Cluster, name: &str, err: KubeError) -> MatrixError {
    let namespace = cluster.namespace().to_string();
    let name = name.to_string();
    match err {
        KubeError::Api { code: 403, message, .. } => MatrixError::Forbidden {
            namespace,
            name,
            message,
        },
        source => MatrixError::Api {
            namespace,
            name,
            source,
        },
    }
}

/// Asks the API server, with a server-side dry-run create (RBAC applies; nothing is stored),
/// whether this account may write the ConfigMap, so a missing Role stops a sweep before its
/// pairs rather than after them. `AlreadyExists` means the create was authorized: fine.
pub async fn check_access(cluster: &Cluster, name: &str) -> Result<(), MatrixError> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client().clone(), cluster.namespace());
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let probe = config_map(name, "access-check", "{}");
    let what = format!("write ConfigMap {name} (dry run)");
    match cluster.call(&what, || api.create(&params, &probe)).await {
        Ok(_) | Err(KubeError::Api { code: 409, .. }) => Ok(()),
        Err(e) => Err(classify(cluster, name, e)),
    }
}

/// Creates or replaces the ConfigMap `name` with the matrix; returns the line that says so.
pub async fn write(cluster: &Cluster, name: &str, sweep_id: &str, matrix_json: &str) -> Result<String, MatrixError> {
    if matrix_json.len() > MAX_BYTES {
        return Err(MatrixError::TooLarge {
            bytes: matrix_json.len(),
        });
    }
    let api: Api<ConfigMap> = Api::namespaced(cluster.client().clone(), cluster.namespace());
    let mut wanted = config_map(name, sweep_id, matrix_json);
    let params = PostParams::default();
    // One retry: a 409 on replace means someone wrote in between; read again and replace that.
    let mut retried = false;
    loop {
        let current = match cluster
            .call(&format!("get ConfigMap {name}"), || api.get_opt(name))
            .await
        {
            Ok(current) => current,
            Err(e) => return Err(classify(cluster, name, e)),
        };
        let written = match current {
            None => {
                let what = format!("create ConfigMap {name}");
                cluster.call(&what, || api.create(&params, &wanted)).await
            }
            Some(existing) => {
                wanted.metadata.resource_version = existing.metadata.resource_version;
                let what = format!("replace ConfigMap {name}");
                cluster.call(&what, || api.replace(name, &params, &wanted)).await
            }
        };
        match written {
            Ok(_) => {
                return Ok(format!(
                    "wrote the node-pair matrix of sweep {sweep_id} to ConfigMap {}/{name} (key {DATA_KEY}, {} bytes)",
                    cluster.namespace(),
                    matrix_json.len()
                ));
            }
            Err(KubeError::Api { code: 409, .. }) if !retried => retried = true,
            Err(e) => return Err(classify(cluster, name, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_map_has_one_key_and_says_who_wrote_it() {
        let cm = config_map("fabric", "sw1", "{\"schema\":\"x\"}");
        assert_eq!(cm.metadata.name.as_deref(), Some("fabric"));
        let data = cm.data.unwrap();
        assert_eq!(data.len(), 1);
        assert_eq!(data[DATA_KEY], "{\"schema\":\"x\"}");
        let labels = cm.metadata.labels.unwrap();
        assert_eq!(labels["app.kubernetes.io/managed-by"], "ic-bench");
        assert_eq!(labels["ic-bench.dev/sweep"], "sw1");
    }

    #[test]
    fn forbidden_names_the_role_and_the_verbs() {
        let e = MatrixError::Forbidden {
            namespace: "bench".into(),
            name: "fabric".into(),
            message: "configmaps is forbidden".into(),
        };
        let text = e.to_string();
        assert!(text.contains(ROLE_FILE) && text.contains("`update`"), "{text}");
        assert!(!text.contains('\n'));
    }

    #[test]
    fn a_hand_given_sweep_id_becomes_a_valid_label_value() {
        assert_eq!(label_value("swk3f9"), "swk3f9");
        assert_eq!(label_value("night of 29/11!"), "night_of_29_11");
        assert_eq!(label_value(&"x".repeat(80)).len(), 63);
    }
}
