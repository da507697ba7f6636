//! ConfigMaps (v1), as `sweep --matrix-configmap` writes its node-pair matrix: create (with
//! `?dryRun=All`, which answers without storing, as the access check before a sweep uses it),
//! get, list (for `kubectl get configmaps`), replace and delete. A replace that names a
//! `resourceVersion` other than the stored one is a 409 Conflict, as the API server's optimistic
//! concurrency is; one that names none overwrites.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

use super::pods::{check_namespace, new_uid};
use super::{param, query_params};
use crate::cluster::{Shared, lock};
use crate::selector::LabelSelector;
use crate::status::ApiError;
use crate::store::now;

fn parse(body: &[u8], path_name: Option<&str>) -> Result<(ConfigMap, String), ApiError> {
    let cm: ConfigMap = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not a valid ConfigMap: {e}")))?;
    let name = cm
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("ConfigMap", "", "metadata.name: Required value"))?;
    if let Some(want) = path_name.filter(|want| *want != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({want})"
        )));
    }
    Ok((cm, name))
}

pub async fn create(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, uri: Uri, body: Bytes) -> Response {
    let dry_run = param(&query_params(&uri), "dryRun") == Some("All");
    let result = check_namespace(&shared, &ns).and_then(|()| parse(&body, None));
    let (mut cm, name) = match result {
        Ok(parsed) => parsed,
        Err(e) => return e.into_response(),
    };
    let key = (ns.clone(), name.clone());
    let mut maps = lock(&shared.config_maps);
    if maps.contains_key(&key) {
        return ApiError::already_exists("configmaps", &name).into_response();
    }
    cm.metadata.namespace = Some(ns);
    cm.metadata.uid = Some(new_uid());
    cm.metadata.creation_timestamp = Some(now());
    cm.metadata.resource_version = Some(lock(&shared.store).next_version().to_string());
    if !dry_run {
        maps.insert(key, cm.clone());
    }
    (StatusCode::CREATED, axum::Json(cm)).into_response()
}

pub async fn replace(
    State(shared): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let (mut cm, _) = match parse(&body, Some(&name)) {
        Ok(parsed) => parsed,
        Err(e) => return e.into_response(),
    };
    let mut maps = lock(&shared.config_maps);
    let Some(stored) = maps.get_mut(&(ns.clone(), name.clone())) else {
        return ApiError::not_found("configmaps", &name).into_response();
    };
    let current = stored.metadata.resource_version.clone();
    if cm.metadata.resource_version.is_some() && cm.metadata.resource_version != current {
        return ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on configmaps \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .into_response();
    }
    cm.metadata.namespace = Some(ns);
    cm.metadata.uid = stored.metadata.uid.clone();
    cm.metadata.creation_timestamp = stored.metadata.creation_timestamp.clone();
    cm.metadata.resource_version = Some(lock(&shared.store).next_version().to_string());
    *stored = cm.clone();
    axum::Json(cm).into_response()
}

pub async fn get(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match lock(&shared.config_maps).get(&(ns, name.clone())).cloned() {
        Some(cm) => axum::Json(cm).into_response(),
        None => ApiError::not_found("configmaps", &name).into_response(),
    }
}

pub async fn list(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, uri: Uri) -> Response {
    let params = query_params(&uri);
    let labels = match LabelSelector::parse(param(&params, "labelSelector").unwrap_or("")) {
        Ok(l) => l,
        Err(e) => return ApiError::bad_request(format!("unable to parse labelSelector: {e}")).into_response(),
    };
    let items: Vec<ConfigMap> = lock(&shared.config_maps)
        .iter()
        .filter(|((n, _), cm)| *n == ns && labels.matches(cm.metadata.labels.as_ref()))
        .map(|(_, cm)| cm.clone())
        .collect();
    let rv = lock(&shared.store).resource_version().to_string();
    axum::Json(
        json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": items}),
    )
    .into_response()
}

pub async fn delete(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match lock(&shared.config_maps).remove(&(ns, name.clone())) {
        Some(cm) => axum::Json(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "kind": "configmaps", "uid": cm.metadata.uid}}),
        )
        .into_response(),
        None => ApiError::not_found("configmaps", &name).into_response(),
    }
}
