//! Secrets (v1), as `pair` uses them for its per-run token: create, get, list (one namespace or
//! all, by label), delete. The agent resolves a container's `secretKeyRef` environment from here
//! (`crate::agent::spec`); a missing Secret or key keeps the container from starting, as the
//! kubelet's `CreateContainerConfigError` does.
//!
//! Owner references are honoured as Kubernetes' garbage collector does for the one owner kind
//! stored here: a Secret whose owners are all pods, none of which exists any more (matched by
//! uid, not name: a new pod of the same name owns nothing), is deleted ([`collect_orphans`]) when
//! such a pod is removed and when the Secret is created (an owner already gone). Background
//! propagation: the Secret goes once its owner is gone, not while it terminates.

use std::collections::HashSet;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

use super::pods::{check_namespace, new_uid};
use super::{param, query_params};
use crate::cluster::{Shared, lock};
use crate::selector::LabelSelector;
use crate::status::ApiError;
use crate::store::now;

pub async fn create(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, body: Bytes) -> Response {
    match create_inner(&shared, &ns, &body) {
        Ok(s) => {
            collect_orphans(&shared);
            (StatusCode::CREATED, axum::Json(s)).into_response()
        }
        Err(e) => e.into_response(),
    }
}

fn create_inner(shared: &Shared, ns: &str, body: &[u8]) -> Result<Secret, ApiError> {
    check_namespace(shared, ns)?;
    let mut s: Secret = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not a valid Secret: {e}")))?;
    let name = s
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("Secret", "", "metadata.name: Required value"))?;
    let key = (ns.to_string(), name.clone());
    let mut secrets = lock(&shared.secrets);
    if secrets.contains_key(&key) {
        return Err(ApiError::already_exists("secrets", &name));
    }
    // `stringData` is write-only: merged into `data`, as the API server does.
    if let Some(plain) = s.string_data.take() {
        let data = s.data.get_or_insert_with(Default::default);
        for (k, v) in plain {
            data.insert(k, k8s_openapi::ByteString(v.into_bytes()));
        }
    }
    s.metadata.namespace = Some(ns.to_string());
    s.metadata.uid = Some(new_uid());
    s.metadata.creation_timestamp = Some(now());
    s.metadata.resource_version = Some(lock(&shared.store).next_version().to_string());
    secrets.insert(key, s.clone());
    Ok(s)
}

pub async fn get(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match lock(&shared.secrets).get(&(ns, name.clone())).cloned() {
        Some(s) => axum::Json(s).into_response(),
        None => ApiError::not_found("secrets", &name).into_response(),
    }
}

pub async fn list_namespaced(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, uri: Uri) -> Response {
    list(&shared, Some(ns), &uri)
}

pub async fn list_all(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    list(&shared, None, &uri)
}

fn list(shared: &Shared, ns: Option<String>, uri: &Uri) -> Response {
    let params = query_params(uri);
    let labels = match LabelSelector::parse(param(&params, "labelSelector").unwrap_or("")) {
        Ok(l) => l,
        Err(e) => return ApiError::bad_request(format!("unable to parse labelSelector: {e}")).into_response(),
    };
    let items: Vec<Secret> = lock(&shared.secrets)
        .iter()
        .filter(|((n, _), s)| ns.as_ref().is_none_or(|want| want == n) && labels.matches(s.metadata.labels.as_ref()))
        .map(|(_, s)| s.clone())
        .collect();
    let rv = lock(&shared.store).resource_version().to_string();
    axum::Json(json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": items}))
        .into_response()
}

pub async fn delete(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match lock(&shared.secrets).remove(&(ns, name.clone())) {
        Some(s) => axum::Json(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "kind": "secrets", "uid": s.metadata.uid}}),
        )
        .into_response(),
        None => ApiError::not_found("secrets", &name).into_response(),
    }
}

/// Deletes the Secrets whose owners are all pods that no longer exist; returns how many.
pub fn collect_orphans(shared: &Shared) -> usize {
    // The store's lock, then the Secrets' (never both at once: create holds secrets → store).
    let live: HashSet<String> = lock(&shared.store)
        .pods()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    let orphaned = |s: &Secret| {
        let owners = s.metadata.owner_references.as_deref().unwrap_or_default();
        !owners.is_empty()
            && owners
                .iter()
                .all(|o| o.kind == "Pod" && o.api_version == "v1" && !live.contains(&o.uid))
    };
    let mut secrets = lock(&shared.secrets);
    let before = secrets.len();
    secrets.retain(|_, s| !orphaned(s));
    before - secrets.len()
}

/// A Secret value a container's env names that is not there (the kubelet's
/// CreateContainerConfigError, in its words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretRefError {
    #[error("secret \"{name}\" not found")]
    NoSecret { name: String },
    #[error("couldn't find key {key} in Secret {ns}/{name}")]
    NoKey { ns: String, name: String, key: String },
}

/// The value of `key` in Secret `name` of `ns`, as text; `Err` says what is missing.
pub fn resolve(shared: &Shared, ns: &str, name: &str, key: &str) -> Result<String, SecretRefError> {
    let secrets = lock(&shared.secrets);
    let s = secrets
        .get(&(ns.to_string(), name.to_string()))
        .ok_or_else(|| SecretRefError::NoSecret { name: name.to_string() })?;
    let v = s
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .ok_or_else(|| SecretRefError::NoKey {
            ns: ns.to_string(),
            name: name.to_string(),
            key: key.to_string(),
        })?;
    Ok(String::from_utf8_lossy(&v.0).into_owned())
}
