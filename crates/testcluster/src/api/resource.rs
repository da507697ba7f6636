//! `resource.k8s.io/v1`: ResourceSlices and DeviceClasses (cluster-scoped, read-only: the node
//! configs' DRA drivers publish them), ResourceClaims and ResourceClaimTemplates (namespaced:
//! create, get, list, delete). Allocation happens when a pod using them is scheduled
//! (`crate::claims`). A claim still reserved for a pod is marked for deletion and goes when the
//! pod does, as the API server's finalizer makes it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use serde::Serialize;
use serde_json::json;

use super::pods::{check_namespace, new_uid};
use super::{param, query_params};
use crate::cluster::{Shared, lock};
use crate::selector::LabelSelector;
use crate::status::ApiError;
use crate::store::now;

const GROUP_VERSION: &str = "resource.k8s.io/v1";

fn list_response(shared: &Shared, kind: &str, items: Vec<impl Serialize>) -> Response {
    let rv = lock(&shared.store).resource_version().to_string();
    axum::Json(json!({"kind": kind, "apiVersion": GROUP_VERSION, "metadata": {"resourceVersion": rv}, "items": items}))
        .into_response()
}

/// `spec.nodeName=` and `spec.driver=` field selectors (what the real API server supports for
/// slices), and label selectors.
pub async fn list_slices(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let params = query_params(&uri);
    let mut fields = Vec::new();
    for term in param(&params, "fieldSelector")
        .unwrap_or("")
        .split(',')
        .filter(|t| !t.is_empty())
    {
        match term.split_once('=') {
            Some((k @ ("spec.nodeName" | "spec.driver"), v)) => fields.push((k.to_string(), v.to_string())),
            _ => {
                return ApiError::bad_request(format!(
                    "field label not supported for resourceslices: {term:?} (spec.nodeName, spec.driver)"
                ))
                .into_response();
            }
        }
    }
    let items: Vec<_> = crate::claims::slices(&shared.config.nodes)
        .into_iter()
        .filter(|s| {
            fields.iter().all(|(k, v)| match k.as_str() {
                "spec.nodeName" => s.spec.node_name.as_deref() == Some(v.as_str()),
                _ => s.spec.driver == *v,
            })
        })
        .collect();
    list_response(&shared, "ResourceSliceList", items)
}

pub async fn get_slice(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match crate::claims::slices(&shared.config.nodes)
        .into_iter()
        .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
    {
        Some(s) => axum::Json(s).into_response(),
        None => ApiError::not_found("resourceslices.resource.k8s.io", &name).into_response(),
    }
}

pub async fn list_classes(State(shared): State<Arc<Shared>>) -> Response {
    let items: Vec<_> = crate::claims::classes(&shared.config.nodes).into_values().collect();
    list_response(&shared, "DeviceClassList", items)
}

pub async fn get_class(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match crate::claims::classes(&shared.config.nodes).remove(&name) {
        Some(c) => axum::Json(c).into_response(),
        None => ApiError::not_found("deviceclasses.resource.k8s.io", &name).into_response(),
    }
}

/// Fills what the API server fills on create.
fn stamp(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, shared: &Shared, ns: &str) {
    meta.namespace = Some(ns.to_string());
    meta.uid = Some(new_uid());
    meta.creation_timestamp = Some(now());
    meta.resource_version = Some(lock(&shared.store).next_version().to_string());
}

fn named(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, kind: &str) -> Result<String, ApiError> {
    meta.name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid(kind, "", "metadata.name: Required value"))
}

pub async fn create_claim(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, body: Bytes) -> Response {
    let result = store_claim(&shared, &ns, &body);
    created(&shared, result)
}

fn store_claim(shared: &Shared, ns: &str, body: &[u8]) -> Result<ResourceClaim, ApiError> {
    check_namespace(shared, ns)?;
    let mut claim: ResourceClaim = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not a valid ResourceClaim: {e}")))?;
    let name = named(&claim.metadata, "ResourceClaim")?;
    if let Some(spec) = &claim.spec {
        crate::dra::validate_spec(spec).map_err(|e| ApiError::invalid("ResourceClaim", &name, e))?;
    }
    claim.status = None;
    stamp(&mut claim.metadata, shared, ns);
    let mut dra = lock(&shared.dra);
    let key = (ns.to_string(), name.clone());
    if dra.claims.contains_key(&key) {
        return Err(ApiError::already_exists("resourceclaims.resource.k8s.io", &name));
    }
    dra.claims.insert(key, claim.clone());
    Ok(claim)
}

pub async fn create_template(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, body: Bytes) -> Response {
    let result = store_template(&shared, &ns, &body);
    created(&shared, result)
}

fn store_template(shared: &Shared, ns: &str, body: &[u8]) -> Result<ResourceClaimTemplate, ApiError> {
    check_namespace(shared, ns)?;
    let mut template: ResourceClaimTemplate = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not a valid ResourceClaimTemplate: {e}")))?;
    let name = named(&template.metadata, "ResourceClaimTemplate")?;
    if let Some(spec) = template.spec.as_ref().and_then(|s| s.spec.as_ref()) {
        crate::dra::validate_spec(spec).map_err(|e| ApiError::invalid("ResourceClaimTemplate", &name, e))?;
    }
    stamp(&mut template.metadata, shared, ns);
    let mut dra = lock(&shared.dra);
    let key = (ns.to_string(), name.clone());
    if dra.templates.contains_key(&key) {
        return Err(ApiError::already_exists(
            "resourceclaimtemplates.resource.k8s.io",
            &name,
        ));
    }
    dra.templates.insert(key, template.clone());
    Ok(template)
}

/// 201 with the object; a pod waiting for this claim or template is scheduled now, and an
/// object whose owners are already gone is collected.
fn created(shared: &Arc<Shared>, result: Result<impl Serialize, ApiError>) -> Response {
    match result {
        Ok(obj) => {
            shared.release_claims();
            shared.schedule_pending();
            (StatusCode::CREATED, axum::Json(obj)).into_response()
        }
        Err(e) => e.into_response(),
    }
}

pub async fn get_claim(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match lock(&shared.dra).claims.get(&(ns, name.clone())) {
        Some(c) => axum::Json(c).into_response(),
        None => ApiError::not_found("resourceclaims.resource.k8s.io", &name).into_response(),
    }
}

pub async fn get_template(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match lock(&shared.dra).templates.get(&(ns, name.clone())) {
        Some(t) => axum::Json(t).into_response(),
        None => ApiError::not_found("resourceclaimtemplates.resource.k8s.io", &name).into_response(),
    }
}

fn labels(uri: &Uri) -> Result<LabelSelector, ApiError> {
    LabelSelector::parse(param(&query_params(uri), "labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("unable to parse labelSelector: {e}")))
}

pub async fn list_claims(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, uri: Uri) -> Response {
    let selector = match labels(&uri) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let items: Vec<ResourceClaim> = lock(&shared.dra)
        .claims
        .iter()
        .filter(|((n, _), c)| *n == ns && selector.matches(c.metadata.labels.as_ref()))
        .map(|(_, c)| c.clone())
        .collect();
    list_response(&shared, "ResourceClaimList", items)
}

pub async fn list_templates(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, uri: Uri) -> Response {
    let selector = match labels(&uri) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let items: Vec<ResourceClaimTemplate> = lock(&shared.dra)
        .templates
        .iter()
        .filter(|((n, _), t)| *n == ns && selector.matches(t.metadata.labels.as_ref()))
        .map(|(_, t)| t.clone())
        .collect();
    list_response(&shared, "ResourceClaimTemplateList", items)
}

pub async fn delete_claim(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    let mut dra = lock(&shared.dra);
    let key = (ns, name.clone());
    let Some(claim) = dra.claims.get_mut(&key) else {
        return ApiError::not_found("resourceclaims.resource.k8s.io", &name).into_response();
    };
    if crate::claims::is_reserved(claim) {
        // Still in use: marked, removed once its pod is gone (`crate::claims::release`).
        claim.metadata.deletion_timestamp.get_or_insert_with(now);
        return axum::Json(claim.clone()).into_response();
    }
    let claim = dra.claims.remove(&key);
    axum::Json(claim).into_response()
}

pub async fn delete_template(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match lock(&shared.dra).templates.remove(&(ns, name.clone())) {
        Some(t) => axum::Json(t).into_response(),
        None => ApiError::not_found("resourceclaimtemplates.resource.k8s.io", &name).into_response(),
    }
}
