//! A node's `status` subresource (`GET`/`PATCH /api/v1/nodes/{name}/status`), as far as ic-bench
//! writes it: conditions besides the kubelet's own `Ready` (`sweep --node-conditions`).
//!
//! A real API server merges `status.conditions` by `type` under a strategic merge patch (what
//! `kubectl patch --subresource=status` and kube-rs's `Patch::Strategic` send): an element with a
//! known type is merged into that condition (fields it leaves out, e.g. `lastTransitionTime`,
//! keep their value), a new type is appended, `"$patch": "delete"` removes one. A JSON merge patch
//! would replace the whole list, the kubelet's conditions with it, so it is refused here (415):
//! a product change that sends one fails a test instead of wiping `Ready` on a real cluster.
//! Anything but `status.conditions` in the patch, a condition without a type, a status other than
//! True/False/Unknown, an unparseable time, or a write to `Ready` (the emulated kubelet's) is
//! refused with 422. `?dryRun=All` answers without storing.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::NodeCondition;
use serde_json::Value;

use super::nodes::{merge, node_json};
use super::{param, query_params};
use crate::cluster::{Shared, lock};
use crate::field::FieldError;
use crate::status::ApiError;

const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// `GET /api/v1/nodes/{name}/status`: the node, as a real server answers it.
pub async fn get(state: State<Arc<Shared>>, name: Path<String>) -> Response {
    super::nodes::get_node(state, name).await
}

/// `PATCH /api/v1/nodes/{name}/status` with a strategic merge patch of `status.conditions`.
pub async fn patch(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if content_type != STRATEGIC {
        let message = format!(
            "the emulated cluster patches a node's status with {STRATEGIC} only, not '{content_type}' (conditions merge by type; a JSON merge patch would replace the kubelet's)"
        );
        return ApiError::new(415, "UnsupportedMediaType", message).into_response();
    }
    let Some((idx, node)) = shared.node(&name) else {
        return ApiError::not_found("nodes", &name).into_response();
    };
    let patch: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return ApiError::bad_request("a strategic merge patch must be a JSON object").into_response(),
        Err(e) => return ApiError::bad_request(format!("cannot parse the patch: {e}")).into_response(),
    };
    let meta = lock(&shared.node_meta).get(idx).cloned().unwrap_or_default();
    let conditions = match patched_conditions(&meta.conditions, &patch) {
        Ok(c) => c,
        Err(message) => return ApiError::invalid("nodes", &name, message).into_response(),
    };
    let mut updated = meta.clone();
    updated.conditions = conditions;
    let dry_run = param(&query_params(&uri), "dryRun").is_some();
    if updated.conditions != meta.conditions && !dry_run {
        // The store's counter first, then the node table: never both locks at once.
        updated.resource_version = lock(&shared.store).next_version();
        if let Some(slot) = lock(&shared.node_meta).get_mut(idx) {
            *slot = updated.clone();
        }
    }
    axum::Json(node_json(node, &updated)).into_response()
}

/// The written conditions after `patch`, or why it is refused.
fn patched_conditions(current: &[Value], patch: &Value) -> Result<Vec<Value>, FieldError> {
    let only =
        || FieldError::Unsupported("the emulated cluster patches only status.conditions of a node's status".into());
    let top = patch.as_object().ok_or_else(only)?;
    if top.keys().any(|k| k != "status") {
        return Err(only());
    }
    let Some(status) = top.get("status") else {
        return Ok(current.to_vec());
    };
    let status = status.as_object().ok_or_else(only)?;
    // kubectl may send the list's order as a directive; the order kept here is insertion order.
    if status
        .keys()
        .any(|k| k != "conditions" && k != "$setElementOrder/conditions")
    {
        return Err(only());
    }
    let Some(items) = status.get("conditions") else {
        return Ok(current.to_vec());
    };
    let items = items
        .as_array()
        .ok_or_else(|| FieldError::invalid("status.conditions", "must be a list"))?;
    let mut out = current.to_vec();
    for item in items {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| FieldError::invalid("status.conditions[].type", "Required value"))?;
        if kind == "Ready" {
            return Err(FieldError::invalid(
                "status.conditions",
                "Ready is the (emulated) kubelet's condition",
            ));
        }
        let at = out.iter().position(|c| c["type"] == kind);
        match (item.get("$patch").and_then(Value::as_str), at) {
            (Some("delete"), Some(i)) => {
                out.remove(i);
            }
            (Some("delete"), None) => {}
            (Some(other), _) => {
                return Err(FieldError::Unsupported(format!(
                    "status.conditions: unsupported $patch '{other}'"
                )));
            }
            (None, Some(i)) => merge(&mut out[i], item),
            (None, None) => out.push(item.clone()),
        }
    }
    for c in &out {
        check_condition(c)?;
    }
    Ok(out)
}

/// A condition as the API's types allow it: its fields parse (RFC 3339 times) and its status is
/// True, False or Unknown.
fn check_condition(c: &Value) -> Result<(), FieldError> {
    let parsed: NodeCondition = serde_json::from_value(c.clone())
        .map_err(|e| FieldError::invalid("status.conditions", format_args!("Invalid value: {e}")))?;
    if !matches!(parsed.status.as_str(), "True" | "False" | "Unknown") {
        return Err(FieldError::invalid(
            format!("status.conditions[type={}].status", parsed.type_),
            format_args!(
                "Unsupported value: \"{}\": supported values: \"True\", \"False\", \"Unknown\"",
                parsed.status
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_merge_by_type_and_keep_what_a_patch_leaves_out() {
        let first = json!({"status": {"conditions": [{"type": "X", "status": "True", "reason": "A",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        let one = patched_conditions(&[], &first).unwrap();
        assert_eq!(one.len(), 1);
        let again = json!({"status": {"conditions": [{"type": "X", "status": "True", "reason": "B"},
            {"type": "Y", "status": "Unknown"}]}});
        let two = patched_conditions(&one, &again).unwrap();
        assert_eq!(two[0]["reason"], "B");
        assert_eq!(two[0]["lastTransitionTime"], "2026-01-01T00:00:00Z", "kept");
        assert_eq!(two[1]["type"], "Y");
        let gone = patched_conditions(
            &two,
            &json!({"status": {"conditions": [{"type": "X", "$patch": "delete"}]}}),
        );
        assert_eq!(gone.unwrap().len(), 1);
    }

    #[test]
    fn what_a_real_server_or_this_emulation_refuses_is_refused() {
        // What a real server refuses too, then what only this emulation does not implement.
        let invalid = [
            json!({"status": {"conditions": [{"type": "X", "status": "Maybe"}]}}),
            json!({"status": {"conditions": [{"status": "True"}]}}),
            json!({"status": {"conditions": [{"type": "X", "status": "True", "lastTransitionTime": "yesterday"}]}}),
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        ];
        for p in invalid {
            let e = patched_conditions(&[], &p).unwrap_err();
            assert!(matches!(e, FieldError::Invalid { .. }), "{p}: {e}");
        }
        let unsupported = [
            json!({"status": {"capacity": {"cpu": "1"}}}),
            json!({"metadata": {"labels": {"a": "b"}}}),
        ];
        for p in unsupported {
            let e = patched_conditions(&[], &p).unwrap_err();
            assert!(matches!(e, FieldError::Unsupported(_)), "{p}: {e}");
        }
    }
}
