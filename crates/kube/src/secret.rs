//! The per-run token Secret (issue 22): `pair` on Kubernetes makes one random token per run,
//! stores it in a Secret labelled like the run's pods (created before them, deleted with them,
//! found by `ic-bench gc`), and both bench pods read it as `IC_BENCH_TOKEN` through a
//! `secretKeyRef`: the token never appears in a pod spec, an argument list or `--dry-run` output.

use crate::access::Cluster;
use crate::error::KubeError;
use crate::podspec::{LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, Secret, SecretKeySelector};
use kube::api::{DeleteParams, ListParams, PostParams};
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

/// The run's Secret; `token: None` leaves the value out (what `--dry-run` prints).
pub fn token_secret(namespace: &str, run_id: &str, token: Option<&str>) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(secret_name(run_id));
    s.metadata.namespace = Some(namespace.to_string());
    s.metadata.labels = Some(labels(run_id));
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

/// Creates the run's Secret with a fresh token (before its pods).
pub async fn create(cluster: &Cluster, run_id: &str) -> Result<(), KubeError> {
    let api: kube::Api<Secret> = kube::Api::namespaced(cluster.client().clone(), cluster.namespace());
    let secret = token_secret(cluster.namespace(), run_id, Some(&new_token()));
    let pp = PostParams::default();
    cluster
        .call(&format!("create secret {}", secret_name(run_id)), || {
            api.create(&pp, &secret)
        })
        .await
        .map(|_| ())
}

/// Deletes run `run_id`'s Secret by name (no `list` on secrets needed); returns whether it was
/// there.
pub async fn delete_run(cluster: &Cluster, run_id: &str) -> Result<bool, KubeError> {
    let api: kube::Api<Secret> = kube::Api::namespaced(cluster.client().clone(), cluster.namespace());
    let name = secret_name(run_id);
    let dp = DeleteParams::default();
    match cluster
        .call(&format!("delete secret {name}"), || api.delete(&name, &dp))
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Deletes the Secrets matching `selector` in `namespace` (all namespaces: `None`); returns
/// how many. Gone already is fine.
pub async fn delete_matching(cluster: &Cluster, namespace: Option<&str>, selector: &str) -> Result<usize, KubeError> {
    delete_where(cluster, namespace, selector, |_| true).await
}

/// [`delete_matching`], only those `take` accepts (a sweep's own runs, old enough for gc).
pub async fn delete_where(
    cluster: &Cluster,
    namespace: Option<&str>,
    selector: &str,
    take: impl Fn(&Secret) -> bool,
) -> Result<usize, KubeError> {
    let api: kube::Api<Secret> = match namespace {
        Some(ns) => kube::Api::namespaced(cluster.client().clone(), ns),
        None => kube::Api::all(cluster.client().clone()),
    };
    let lp = ListParams::default().labels(selector);
    let found = cluster
        .call(&format!("list secrets -l {selector}"), || api.list(&lp))
        .await?
        .items;
    let mut deleted = 0;
    for s in found.into_iter().filter(|s| take(s)) {
        let (Some(name), Some(ns)) = (s.metadata.name.clone(), s.metadata.namespace.clone()) else {
            continue;
        };
        let napi: kube::Api<Secret> = kube::Api::namespaced(cluster.client().clone(), &ns);
        let dp = DeleteParams::default();
        match cluster
            .call(&format!("delete secret {ns}/{name}"), || napi.delete(&name, &dp))
            .await
        {
            Ok(_) => deleted += 1,
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_carries_the_runs_labels_and_a_dry_run_shows_no_value() {
        let s = token_secret("bench", "abc123", Some("t0ken-value"));
        assert_eq!(s.metadata.name.as_deref(), Some("ic-bench-abc123-token"));
        let labels = s.metadata.labels.clone().unwrap();
        let selector = crate::podspec::instance_selector("abc123");
        for part in selector.split(',') {
            let (k, v) = part.split_once('=').unwrap();
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "{selector}");
        }
        assert_eq!(s.data.unwrap()[TOKEN_KEY].0, b"t0ken-value");
        let shown = serde_json::to_string(&token_secret("bench", "abc123", None)).unwrap();
        assert!(!shown.contains("\"data\""), "{shown}");
        let env = token_env("abc123");
        assert_eq!(env.name, "IC_BENCH_TOKEN");
        assert!(env.value.is_none(), "never the value itself");
        assert_ne!(new_token(), new_token());
        assert_eq!(new_token().len(), 64);
    }
}
