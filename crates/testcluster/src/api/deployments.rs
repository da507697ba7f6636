//! Deployments (apps/v1), enough for `deployment/NAME` targets: create makes `replicas` pods from
//! the template once (no controller loop re-creates them), get/list report replica counts from
//! the pods that match the selector, delete removes the deployment and its pods.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::json;

use super::pods::{admit, check_namespace, new_uid, random_suffix};
use super::{param, query_params};
use crate::agent::is_pod_ready;
use crate::cluster::{Shared, lock};
use crate::field::FieldError;
use crate::selector::LabelSelector;
use crate::status::ApiError;
use crate::store::{key_of, now};

/// The deployment's pod selector as a label selector (matchLabels and matchExpressions).
fn pod_selector(d: &Deployment) -> Result<LabelSelector, FieldError> {
    let spec = &d.spec;
    let mut parts: Vec<String> = spec
        .selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in spec.selector.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => {
                return Err(FieldError::invalid(
                    "spec.selector",
                    format_args!("unsupported operator {other:?}"),
                ));
            }
        });
    }
    if parts.is_empty() {
        return Err(FieldError::invalid(
            "spec.selector",
            "Invalid value: empty selector is invalid for deployment",
        ));
    }
    LabelSelector::parse(&parts.join(",")).map_err(|e| FieldError::invalid("spec.selector", e))
}

/// Replica counts from the pods the selector matches right now.
fn with_status(shared: &Shared, mut d: Deployment) -> Deployment {
    let ns = d.metadata.namespace.clone().unwrap_or_default();
    let desired = d.spec.replicas.unwrap_or(1);
    let (total, ready) = match pod_selector(&d) {
        Ok(selector) => {
            let store = lock(&shared.store);
            let pods: Vec<&Pod> = store
                .pods()
                .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| selector.matches(p.metadata.labels.as_ref()))
                .collect();
            (
                pods.len() as i32,
                pods.iter().filter(|p| is_pod_ready(p)).count() as i32,
            )
        }
        Err(_) => (0, 0),
    };
    let available = if ready >= desired { "True" } else { "False" };
    d.status = Some(DeploymentStatus {
        replicas: Some(total),
        updated_replicas: Some(total),
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        unavailable_replicas: Some((desired - ready).max(0)),
        observed_generation: d.metadata.generation,
        conditions: Some(vec![DeploymentCondition {
            type_: Some("Available".into()),
            status: Some(available.into()),
            reason: Some(
                if available == "True" {
                    "MinimumReplicasAvailable"
                } else {
                    "MinimumReplicasUnavailable"
                }
                .into(),
            ),
            ..Default::default()
        }]),
        ..Default::default()
    });
    d
}

pub async fn create(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, body: Bytes) -> Response {
    match create_inner(&shared, &ns, &body) {
        Ok(d) => (StatusCode::CREATED, axum::Json(with_status(&shared, d))).into_response(),
        Err(e) => e.into_response(),
    }
}

fn create_inner(shared: &Arc<Shared>, ns: &str, body: &[u8]) -> Result<Deployment, ApiError> {
    check_namespace(shared, ns)?;
    let mut d: Deployment = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not a valid Deployment: {e}")))?;
    let name = d
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("Deployment", "", "metadata.name: Required value"))?;
    let selector = pod_selector(&d).map_err(|e| ApiError::invalid("Deployment", &name, e))?;
    let spec = d.spec.clone();
    let template_labels = spec.template.metadata.as_ref().and_then(|m| m.labels.clone());
    if !selector.matches(template_labels.as_ref()) {
        return Err(ApiError::invalid(
            "Deployment",
            &name,
            "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`",
        ));
    }
    let key = (ns.to_string(), name.clone());
    let uid = new_uid();
    {
        let mut deployments = lock(&shared.deployments);
        if deployments.contains_key(&key) {
            return Err(ApiError::already_exists("deployments.apps", &name));
        }
        d.metadata.namespace = Some(ns.to_string());
        d.metadata.uid = Some(uid.clone());
        d.metadata.creation_timestamp = Some(now());
        d.metadata.generation = Some(1);
        d.metadata.resource_version = Some(lock(&shared.store).next_version().to_string());
        deployments.insert(key, d.clone());
    }
    let hash: String = (0..10)
        .map(|_| char::from(b"bcdfghjkmnpqrstvwxz2456789"[rand::random_range(0..26)]))
        .collect();
    let replica_set = format!("{name}-{hash}");
    for _ in 0..spec.replicas.unwrap_or(1).max(0) {
        let mut meta = spec.template.metadata.clone().unwrap_or_default();
        meta.name = Some(format!("{replica_set}-{}", random_suffix()));
        meta.namespace = Some(ns.to_string());
        meta.labels
            .get_or_insert_with(Default::default)
            .insert("pod-template-hash".into(), hash.clone());
        meta.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: replica_set.clone(),
            uid: uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        let pod = Pod {
            metadata: meta,
            spec: spec.template.spec.clone(),
            status: None,
        };
        let body = serde_json::to_vec(&pod).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let pod = admit(shared, ns, &body)?;
        let mut store = lock(&shared.store);
        if store.get(&key_of(&pod)).is_none() {
            store.insert(pod);
        }
    }
    shared.schedule_pending();
    Ok(d)
}

pub async fn get(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    let found = lock(&shared.deployments).get(&(ns, name.clone())).cloned();
    match found {
        Some(d) => axum::Json(with_status(&shared, d)).into_response(),
        None => ApiError::not_found("deployments.apps", &name).into_response(),
    }
}

pub async fn list(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, uri: Uri) -> Response {
    let params = query_params(&uri);
    let labels = match LabelSelector::parse(param(&params, "labelSelector").unwrap_or("")) {
        Ok(l) => l,
        Err(e) => return ApiError::bad_request(format!("unable to parse labelSelector: {e}")).into_response(),
    };
    let items: Vec<Deployment> = lock(&shared.deployments)
        .iter()
        .filter(|((n, _), d)| *n == ns && labels.matches(d.metadata.labels.as_ref()))
        .map(|(_, d)| d.clone())
        .collect();
    let items: Vec<Deployment> = items.into_iter().map(|d| with_status(&shared, d)).collect();
    let rv = lock(&shared.store).resource_version().to_string();
    axum::Json(
        json!({"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": {"resourceVersion": rv}, "items": items}),
    )
    .into_response()
}

pub async fn delete(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    let Some(d) = lock(&shared.deployments).remove(&(ns.clone(), name.clone())) else {
        return ApiError::not_found("deployments.apps", &name).into_response();
    };
    let uid = d.metadata.uid.clone().unwrap_or_default();
    let owned: Vec<_> = lock(&shared.store)
        .pods()
        .filter(|p| p.metadata.owner_references.iter().flatten().any(|o| o.uid == uid))
        .map(key_of)
        .collect();
    let shared2 = shared.clone();
    // Background propagation, as the garbage collector does it.
    tokio::spawn(async move {
        for key in owned {
            let _ = shared2.delete_pod(&key, None, None).await;
        }
    });
    axum::Json(
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                      "details": {"name": name, "group": "apps", "kind": "deployments", "uid": uid}}),
    )
    .into_response()
}
