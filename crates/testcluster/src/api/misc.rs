//! Namespaces and `/version`: read-only views of the cluster's configuration.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::cluster::Shared;
use crate::status::ApiError;

pub async fn version() -> Response {
    axum::Json(json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-icb-testcluster",
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "", "compiler": "emulated", "platform": "linux/amd64",
    }))
    .into_response()
}

/// A namespace with its labels (every real namespace carries `kubernetes.io/metadata.name`).
fn namespace_json(shared: &Shared, name: &str) -> Value {
    let mut labels = shared.config.namespace_labels.get(name).cloned().unwrap_or_default();
    labels.insert("kubernetes.io/metadata.name".into(), name.into());
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "uid": format!("ns-{name}"), "resourceVersion": "1",
                        "creationTimestamp": "2025-01-01T00:00:00Z", "labels": labels},
           "status": {"phase": "Active"}})
}

pub async fn list_namespaces(State(shared): State<Arc<Shared>>) -> Response {
    let items: Vec<Value> = shared
        .config
        .namespaces
        .iter()
        .map(|n| namespace_json(&shared, n))
        .collect();
    axum::Json(
        json!({"kind": "NamespaceList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}),
    )
    .into_response()
}

pub async fn get_namespace(State(shared): State<Arc<Shared>>, Path(ns): Path<String>) -> Response {
    if shared.config.namespaces.contains(&ns) {
        axum::Json(namespace_json(&shared, &ns)).into_response()
    } else {
        ApiError::not_found("namespaces", &ns).into_response()
    }
}
