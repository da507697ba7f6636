//! The per-run token Secret (issue 22): `pair` on Kubernetes makes one random token per run,
//! stores it in a Secret labelled like the run's pods, and both bench pods read it as
//! `IC_BENCH_TOKEN` through a `secretKeyRef`: the token never appears in a pod spec, an argument
//! list or `--dry-run` output.
//!
//! The Secret is owned by the run's server pod (issue 41: an `ownerReference` with the pod's
//! uid), so Kubernetes' garbage collector deletes it when that pod goes, however the run ended:
//! a killed `pair` leaves no Secret that only a `list` on Secrets could find, and `list` on
//! Secrets (which returns every Secret's data in the namespace) is not granted. It is created
//! right after the server pod (the uid exists only then); the kubelet retries a container whose
//! Secret is not there yet (`CreateContainerConfigError`), and `crate::lifecycle` gives that a
//! grace period. `pair` and `gc` delete it by name only (`create` and `delete` are the verbs).

use crate::access::Cluster;
use crate::error::KubeError;
use crate::podspec::{LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, Pod, Secret, SecretKeySelector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, PostParams};
use std::collections::BTreeMap;

/// The key inside the Secret.
pub const TOKEN_KEY: &str = "token";

/// `ic-bench-<run>-token`.
pub fn secret_name(run_id: &str) -> String {
    format!("ic-bench-{run_id}-token")
}

/// A fresh random token (two v4 UUIDs: 244 random bits as 64 hex characters).
pub fn new_token() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

fn labels(run_id: &str) -> BTreeMap<String, String> {
    [
        (LABEL_NAME, "ic-bench"),
        (LABEL_INSTANCE, run_id),
        (LABEL_MANAGED_BY, "ic-bench"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The reference that makes `pod` the Secret's owner; `None` for a pod the API server has not
/// created (no uid: a dry run's).
pub fn owned_by(pod: &Pod) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone()?,
        uid: pod.metadata.uid.clone().filter(|u| !u.is_empty())?,
        // Not a controller, and no blockOwnerDeletion: setting it needs `update` on the pod's
        // finalizers, which ic-bench is not granted (and deleting the pod need not wait).
        controller: None,
        block_owner_deletion: None,
    })
}

/// The run's Secret, owned by `owner` when given; `token: None` leaves the value out (what
/// `--dry-run` prints: there is no pod uid to own it yet either).
pub fn token_secret(namespace: &str, run_id: &str, token: Option<&str>, owner: Option<OwnerReference>) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(secret_name(run_id));
    s.metadata.namespace = Some(namespace.to_string());
    s.metadata.labels = Some(labels(run_id));
    s.metadata.owner_references = owner.map(|o| vec![o]);
    s.type_ = Some("Opaque".into());
    s.data = token.map(|t| [(TOKEN_KEY.to_string(), ByteString(t.as_bytes().to_vec()))].into());
    s
}

/// `IC_BENCH_TOKEN` from the run's Secret, for both pods.
pub fn token_env(run_id: &str) -> EnvVar {
    EnvVar {
        name: icb_core::protocol::TOKEN_ENV.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret_name(run_id),
                key: TOKEN_KEY.into(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates the run's Secret with a fresh token, owned by `server` (the created server pod, with
/// its uid).
pub async fn create(cluster: &Cluster, run_id: &str, server: &Pod) -> Result<(), KubeError> {
    let owner = owned_by(server).ok_or_else(|| {
        KubeError::Pod(format!(
            "the API server returned pod {} without a uid: the token Secret cannot be owned by it",
            server.metadata.name.as_deref().unwrap_or("?")
        ))
    })?;
    let api: kube::Api<Secret> = kube::Api::namespaced(cluster.client().clone(), cluster.namespace());
    let secret = token_secret(cluster.namespace(), run_id, Some(&new_token()), Some(owner));
    let pp = PostParams::default();
    cluster
        .call(&format!("create secret {}", secret_name(run_id)), || {
            api.create(&pp, &secret)
        })
        .await
        .map(|_| ())
}

/// Deletes run `run_id`'s Secret in the cluster's namespace by name (no `list` on secrets
/// needed); returns whether it was there.
pub async fn delete_run(cluster: &Cluster, run_id: &str) -> Result<bool, KubeError> {
    delete_named(cluster, cluster.namespace(), run_id).await
}

/// Deletes run `run_id`'s Secret in `namespace` by name; returns whether it was there. Gone
/// already (collected with its pod) is fine.
pub async fn delete_named(cluster: &Cluster, namespace: &str, run_id: &str) -> Result<bool, KubeError> {
    let api: kube::Api<Secret> = kube::Api::namespaced(cluster.client().clone(), namespace);
    let name = secret_name(run_id);
    let dp = DeleteParams::default();
    match cluster
        .call(&format!("delete secret {namespace}/{name}"), || api.delete(&name, &dp))
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_carries_the_runs_labels_and_a_dry_run_shows_no_value() {
        let s = token_secret("bench", "abc123", Some("t0ken-value"), None);
        assert_eq!(s.metadata.name.as_deref(), Some("ic-bench-abc123-token"));
        let labels = s.metadata.labels.clone().unwrap();
        let selector = crate::podspec::instance_selector("abc123");
        for part in selector.split(',') {
            let (k, v) = part.split_once('=').unwrap();
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "{selector}");
        }
        assert_eq!(s.data.unwrap()[TOKEN_KEY].0, b"t0ken-value");
        let shown = serde_json::to_string(&token_secret("bench", "abc123", None, None)).unwrap();
        assert!(!shown.contains("\"data\""), "{shown}");
        let env = token_env("abc123");
        assert_eq!(env.name, "IC_BENCH_TOKEN");
        assert!(env.value.is_none(), "never the value itself");
        assert_ne!(new_token(), new_token());
        assert_eq!(new_token().len(), 64);
    }

    #[test]
    fn the_secret_is_owned_by_the_created_pod_only() {
        let created: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "ic-bench-abc123-server", "uid": "u-1"}
        }))
        .unwrap();
        let owner = owned_by(&created).expect("a created pod has a uid");
        assert_eq!((owner.kind.as_str(), owner.api_version.as_str()), ("Pod", "v1"));
        assert_eq!(
            (owner.name.as_str(), owner.uid.as_str()),
            ("ic-bench-abc123-server", "u-1")
        );
        assert_eq!(owner.block_owner_deletion, None, "needs update on pods/finalizers");
        let s = token_secret("bench", "abc123", Some("t"), Some(owner));
        assert_eq!(s.metadata.owner_references.map(|o| o.len()), Some(1));
        let planned: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}})).unwrap();
        assert!(owned_by(&planned).is_none(), "no uid, no owner");
    }
}
