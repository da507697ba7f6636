//! Nodes: list and get (the configured nodes with their current labels), and PATCH of labels and
//! annotations with a JSON merge patch, which is what `sweep --label-nodes` sends through kube-rs
//! (`Patch::Merge`: `application/merge-patch+json`). A strategic merge patch means the same for
//! these string maps and is accepted too; JSON patches and server-side apply are refused with 415,
//! and a patch touching anything but labels/annotations with 422, so a product change that starts
//! writing elsewhere (a taint, a condition) fails a test instead of passing silently. Conditions
//! are written through the `status` subresource (`super::node_status`), as on a real API server.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{param, query_params};
use crate::cluster::{NodeMeta, NodeRt, Shared, lock};
use crate::field::{FieldError, NameError};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;

/// Content types whose meaning on labels/annotations is RFC 7386's merge.
pub(super) const MERGE_TYPES: &[&str] = &["application/merge-patch+json", "application/strategic-merge-patch+json"];

/// Kubernetes' bound on all annotations of one object together.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

pub(super) fn node_json(node: &NodeRt, meta: &NodeMeta) -> Value {
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
    let ready = json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "message": "emulated kubelet is posting ready status",
                       "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                       "lastTransitionTime": "2025-01-01T00:00:00Z"});
    let conditions: Vec<Value> = std::iter::once(ready).chain(meta.conditions.iter().cloned()).collect();
    let mut metadata = json!({
        "name": cfg.name,
        "uid": format!("node-{}", cfg.name),
        "resourceVersion": meta.resource_version.to_string(),
        "creationTimestamp": "2025-01-01T00:00:00Z",
        "labels": meta.labels,
    });
    if !meta.annotations.is_empty() {
        metadata["annotations"] = json!(meta.annotations);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": {
            "capacity": cfg.capacity,
            "allocatable": allocatable,
            "conditions": conditions,
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
    let meta = lock(&shared.node_meta).clone();
    let items: Vec<Value> = shared
        .nodes
        .iter()
        .zip(&meta)
        .filter(|(n, m)| labels.matches(Some(&m.labels)) && fields.matches(|_| n.config.name.clone()))
        .map(|(n, m)| node_json(n, m))
        .collect();
    axum::Json(json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}, "items": items}))
        .into_response()
}

pub async fn get_node(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match shared.node(&name) {
        Some((idx, n)) => {
            let meta = lock(&shared.node_meta).get(idx).cloned().unwrap_or_default();
            axum::Json(node_json(n, &meta)).into_response()
        }
        None => ApiError::not_found("nodes", &name).into_response(),
    }
}

/// `PATCH /api/v1/nodes/{name}`: a merge patch of `metadata.labels` / `metadata.annotations`
/// (`null` removes a key). `?dryRun=All` answers without storing.
pub async fn patch_node(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if !MERGE_TYPES.contains(&content_type.as_str()) {
        return ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the emulated cluster patches nodes with {} only, not '{content_type}'",
                MERGE_TYPES.join(" or ")
            ),
        )
        .into_response();
    }
    let Some((idx, node)) = shared.node(&name) else {
        return ApiError::not_found("nodes", &name).into_response();
    };
    let patch: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return ApiError::bad_request("a merge patch must be a JSON object").into_response(),
        Err(e) => return ApiError::bad_request(format!("cannot parse the patch: {e}")).into_response(),
    };
    let meta = lock(&shared.node_meta).get(idx).cloned().unwrap_or_default();
    let (labels, annotations) = match patched_metadata(node, &meta, &patch) {
        Ok(x) => x,
        Err(message) => return ApiError::invalid("nodes", &name, message).into_response(),
    };
    let dry_run = param(&query_params(&uri), "dryRun").is_some();
    let mut updated = NodeMeta {
        labels,
        annotations,
        ..meta.clone()
    };
    let changed = updated.labels != meta.labels || updated.annotations != meta.annotations;
    if changed && !dry_run {
        // The store's counter first, then the node table: never both locks at once.
        updated.resource_version = lock(&shared.store).next_version();
        if let Some(slot) = lock(&shared.node_meta).get_mut(idx) {
            *slot = updated.clone();
        }
    }
    axum::Json(node_json(node, &updated)).into_response()
}

/// Labels or annotations.
type StringMap = BTreeMap<String, String>;

/// The node's labels and annotations after `patch`, or why the patch is refused.
fn patched_metadata(node: &NodeRt, meta: &NodeMeta, patch: &Value) -> Result<(StringMap, StringMap), FieldError> {
    let before = node_json(node, meta);
    let mut after = before.clone();
    merge(&mut after, patch);
    // Only labels and annotations may differ (an optimistic resourceVersion in the patch is not
    // enforced: nothing else writes nodes here).
    let mut a = after.clone();
    let mut b = before;
    for v in [&mut a, &mut b] {
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in ["labels", "annotations", "resourceVersion"] {
                m.remove(k);
            }
        }
    }
    if a != b {
        return Err(FieldError::Unsupported(
            "the emulated cluster patches only metadata.labels and metadata.annotations of a node".into(),
        ));
    }
    let strings = |field: &str| -> Result<StringMap, FieldError> {
        let mut out = BTreeMap::new();
        let Some(map) = after.pointer(&format!("/metadata/{field}")) else {
            return Ok(out);
        };
        let map = match map {
            Value::Null => return Ok(out),
            Value::Object(m) => m,
            _ => {
                return Err(FieldError::invalid(
                    format!("metadata.{field}"),
                    "must be a map of strings",
                ));
            }
        };
        for (k, v) in map {
            let Value::String(s) = v else {
                return Err(FieldError::invalid(format!("metadata.{field}.{k}"), "must be a string"));
            };
            check_key(k).map_err(|e| {
                FieldError::invalid(format!("metadata.{field}"), format_args!("Invalid value: \"{k}\": {e}"))
            })?;
            out.insert(k.clone(), s.clone());
        }
        Ok(out)
    };
    let labels = strings("labels")?;
    let annotations = strings("annotations")?;
    for (k, v) in &labels {
        check_label_value(v).map_err(|e| {
            FieldError::invalid("metadata.labels", format_args!("Invalid value: \"{v}\" (key {k}): {e}"))
        })?;
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_ANNOTATIONS_BYTES {
        return Err(FieldError::invalid(
            "metadata.annotations",
            format_args!("Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes"),
        ));
    }
    Ok((labels, annotations))
}

/// RFC 7386 JSON merge patch.
pub(super) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in patch {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// `[A-Za-z0-9]` at both ends, `-_.` and alphanumerics inside, at most 63 characters.
fn check_name_part(s: &str) -> Result<(), NameError> {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if s.len() > 63 {
        return Err(NameError::TooLong);
    }
    if !s.starts_with(alnum) || !s.ends_with(alnum) || !s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.')) {
        return Err(NameError::Characters);
    }
    Ok(())
}

/// A label or annotation key: an optional DNS-subdomain prefix and `/`, then a name.
fn check_key(key: &str) -> Result<(), NameError> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            });
        if !ok {
            return Err(NameError::Prefix);
        }
    }
    check_name_part(name)
}

fn check_label_value(v: &str) -> Result<(), NameError> {
    if v.is_empty() { Ok(()) } else { check_name_part(v) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge(&mut doc, &json!({"a": "z", "c": {"f": null, "h": "i"}}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e", "h": "i"}}));
        let mut doc = json!({"a": [1, 2]});
        merge(&mut doc, &json!({"a": [3]}));
        assert_eq!(doc, json!({"a": [3]}), "arrays are replaced, not merged");
    }

    #[test]
    fn keys_and_values_are_checked_as_kubernetes_does() {
        assert!(check_key("ic-bench.dev/fabric").is_ok());
        assert!(check_key("kubernetes.io/hostname").is_ok());
        assert!(check_key("plain").is_ok());
        assert_eq!(check_key("Bad.Prefix/x"), Err(NameError::Prefix));
        assert_eq!(check_key("ic-bench.dev/"), Err(NameError::Characters));
        assert_eq!(check_key(&format!("x/{}", "a".repeat(64))), Err(NameError::TooLong));
        assert!(check_label_value("pass").is_ok());
        assert!(check_label_value("").is_ok());
        assert_eq!(check_label_value("two words"), Err(NameError::Characters));
        assert_eq!(check_label_value(&"a".repeat(64)), Err(NameError::TooLong));
        assert_eq!(check_label_value("-x"), Err(NameError::Characters));
    }
}
