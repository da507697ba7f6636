//! Custom resources (DynamoGraphDeployment, LLMInferenceService, DisaggregatedSet, …) stored as
//! created and read back as stored: no controller acts on them. Enough for `probe env dgd/NAME`,
//! which reads an applied recipe back from the cluster.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::pods::check_namespace;
use crate::cluster::{CustomKey, Shared, lock};
use crate::status::ApiError;
use crate::store::now;

pub async fn create(
    State(shared): State<Arc<Shared>>,
    Path((group, version, ns, plural)): Path<(String, String, String, String)>,
    body: Bytes,
) -> Response {
    if let Err(e) = check_namespace(&shared, &ns) {
        return e.into_response();
    }
    let mut obj: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return ApiError::bad_request(format!("the body is not a JSON object: {e}")).into_response(),
    };
    let Some(name) = obj
        .pointer("/metadata/name")
        .and_then(|n| n.as_str())
        .map(str::to_string)
    else {
        return ApiError::invalid(&plural, "", "metadata.name: Required value").into_response();
    };
    let version_no = lock(&shared.store).next_version().to_string();
    if let Some(meta) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.insert("namespace".into(), ns.clone().into());
        meta.insert("resourceVersion".into(), version_no.into());
        meta.insert(
            "creationTimestamp".into(),
            serde_json::to_value(now()).unwrap_or_default(),
        );
    }
    let key: CustomKey = (group, version, plural.clone(), ns, name.clone());
    let mut custom = lock(&shared.custom);
    if custom.contains_key(&key) {
        return ApiError::already_exists(&plural, &name).into_response();
    }
    custom.insert(key, obj.clone());
    (StatusCode::CREATED, axum::Json(obj)).into_response()
}

pub async fn get(
    State(shared): State<Arc<Shared>>,
    Path((group, version, ns, plural, name)): Path<(String, String, String, String, String)>,
) -> Response {
    let key: CustomKey = (group.clone(), version, plural.clone(), ns, name.clone());
    match lock(&shared.custom).get(&key) {
        Some(obj) => axum::Json(obj.clone()).into_response(),
        None => ApiError::new(404, "NotFound", format!("{plural}.{group} \"{name}\" not found")).into_response(),
    }
}

pub async fn list(
    State(shared): State<Arc<Shared>>,
    Path((group, version, ns, plural)): Path<(String, String, String, String)>,
) -> Response {
    let items: Vec<serde_json::Value> = lock(&shared.custom)
        .iter()
        .filter(|((g, v, p, n, _), _)| *g == group && *v == version && *p == plural && *n == ns)
        .map(|(_, obj)| obj.clone())
        .collect();
    // Stored objects are never changed after creation: the list needs no version of its own.
    axum::Json(serde_json::json!({
        "apiVersion": format!("{group}/{version}"),
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": items,
    }))
    .into_response()
}
