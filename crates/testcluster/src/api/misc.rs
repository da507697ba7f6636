//! Nodes, namespaces and `/version`: read-only views of the cluster's configuration.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{param, query_params};
use crate::cluster::{NodeRt, Shared, lock};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;

pub async fn version() -> Response {
    axum::Json(json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-icb-testcluster",
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "", "compiler": "emulated", "platform": "linux/amd64",
    }))
    .into_response()
}

fn node_json(node: &NodeRt, rv: u64) -> Value {
    let cfg = &node.config;
    let mut allocatable = cfg.capacity.clone();
    allocatable.extend(cfg.allocatable.clone());
    let taints: Vec<Value> = cfg
        .taints
        .iter()
        .map(|(k, v, e)| {
            let mut t = json!({"key": k, "effect": e});
            if let Some(v) = v {
                t["value"] = json!(v);
            }
            t
        })
        .collect();
    let mut spec = json!({});
    if !taints.is_empty() {
        spec["taints"] = json!(taints);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": cfg.name,
            "uid": format!("node-{}", cfg.name),
            "resourceVersion": rv.to_string(),
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": cfg.labels,
        },
        "spec": spec,
        "status": {
            "capacity": cfg.capacity,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "emulated kubelet is posting ready status",
                            "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                            "lastTransitionTime": "2025-01-01T00:00:00Z"}],
            "addresses": [{"type": "InternalIP", "address": node.ip.to_string()},
                          {"type": "Hostname", "address": cfg.name}],
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                         "osImage": "icb-testcluster", "containerRuntimeVersion": "emulated://1",
                         "kubeletVersion": "v1.33.0", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"},
        },
    })
}

pub async fn list_nodes(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let params = query_params(&uri);
    if matches!(param(&params, "watch"), Some("true" | "1")) {
        return ApiError::new(405, "MethodNotAllowed", "the emulated cluster does not watch nodes").into_response();
    }
    let labels = match LabelSelector::parse(param(&params, "labelSelector").unwrap_or("")) {
        Ok(l) => l,
        Err(e) => return ApiError::bad_request(format!("unable to parse labelSelector: {e}")).into_response(),
    };
    let fields = match FieldSelector::parse(param(&params, "fieldSelector").unwrap_or(""), &["metadata.name"]) {
        Ok(f) => f,
        Err(e) => return ApiError::bad_request(format!("unable to parse fieldSelector: {e}")).into_response(),
    };
    let rv = lock(&shared.store).resource_version();
    let items: Vec<Value> = shared
        .nodes
        .iter()
        .filter(|n| labels.matches(Some(&n.config.labels)) && fields.matches(|_| n.config.name.clone()))
        .map(|n| node_json(n, rv))
        .collect();
    axum::Json(json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}, "items": items}))
        .into_response()
}

pub async fn get_node(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let rv = lock(&shared.store).resource_version();
    match shared.node(&name) {
        Some((_, n)) => axum::Json(node_json(n, rv)).into_response(),
        None => ApiError::not_found("nodes", &name).into_response(),
    }
}

fn namespace_json(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "uid": format!("ns-{name}"), "resourceVersion": "1",
                        "creationTimestamp": "2025-01-01T00:00:00Z"},
           "status": {"phase": "Active"}})
}

pub async fn list_namespaces(State(shared): State<Arc<Shared>>) -> Response {
    let items: Vec<Value> = shared.config.namespaces.iter().map(|n| namespace_json(n)).collect();
    axum::Json(
        json!({"kind": "NamespaceList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}),
    )
    .into_response()
}

pub async fn get_namespace(State(shared): State<Arc<Shared>>, Path(ns): Path<String>) -> Response {
    if shared.config.namespaces.contains(&ns) {
        axum::Json(namespace_json(&ns)).into_response()
    } else {
        ApiError::not_found("namespaces", &ns).into_response()
    }
}
