//! Pods: create, get, list (selectors, paging), delete and deletecollection.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::{Value, json};

use super::{Params, flag, param, query_params};
use crate::cluster::{Shared, lock};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{key_of, now};

pub const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
];

/// A pod's value for a field selector ("" when unset, like the API server).
pub fn pod_field(pod: &Pod, field: &str) -> String {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let s = |v: Option<&String>| v.cloned().unwrap_or_default();
    match field {
        "metadata.name" => s(pod.metadata.name.as_ref()),
        "metadata.namespace" => s(pod.metadata.namespace.as_ref()),
        "status.phase" => s(status.and_then(|st| st.phase.as_ref())),
        "status.podIP" => s(status.and_then(|st| st.pod_ip.as_ref())),
        "status.nominatedNodeName" => s(status.and_then(|st| st.nominated_node_name.as_ref())),
        "spec.nodeName" => s(spec.and_then(|sp| sp.node_name.as_ref())),
        "spec.restartPolicy" => s(spec.and_then(|sp| sp.restart_policy.as_ref())),
        "spec.schedulerName" => s(spec.and_then(|sp| sp.scheduler_name.as_ref())),
        "spec.serviceAccountName" => s(spec.and_then(|sp| sp.service_account_name.as_ref())),
        "spec.hostNetwork" => spec.and_then(|sp| sp.host_network).unwrap_or(false).to_string(),
        _ => String::new(),
    }
}

/// Namespace, label and field selection of a list or watch.
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn from_params(namespace: Option<String>, params: &Params) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(param(params, "labelSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(format!("unable to parse labelSelector: {e}")))?;
        let fields = FieldSelector::parse(param(params, "fieldSelector").unwrap_or(""), POD_FIELDS)
            .map_err(|e| ApiError::bad_request(format!("unable to parse fieldSelector: {e}")))?;
        Ok(Filter {
            namespace,
            labels,
            fields,
        })
    }

    pub fn matches(&self, pod: &Pod) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| pod.metadata.namespace.as_deref() == Some(ns))
            && self.labels.matches(pod.metadata.labels.as_ref())
            && self.fields.matches(|f| pod_field(pod, f))
    }
}

pub fn check_namespace(shared: &Shared, ns: &str) -> Result<(), ApiError> {
    if shared.config.namespaces.iter().any(|n| n == ns) {
        Ok(())
    } else {
        Err(ApiError::not_found("namespaces", ns))
    }
}

fn json_response(code: StatusCode, value: &impl serde::Serialize) -> Response {
    (code, axum::Json(value)).into_response()
}

pub async fn list_all(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    list_or_watch(shared, None, uri).await
}

pub async fn list_namespaced(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, uri: Uri) -> Response {
    list_or_watch(shared, Some(ns), uri).await
}

async fn list_or_watch(shared: Arc<Shared>, ns: Option<String>, uri: Uri) -> Response {
    let params = query_params(&uri);
    let filter = match Filter::from_params(ns, &params) {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    if flag(&params, "watch") {
        return super::watch::watch(shared, filter, &params);
    }
    match list(&shared, &filter, &params) {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => e.into_response(),
    }
}

/// A PodList page; `continue` is the key of the last item returned.
fn list(shared: &Shared, filter: &Filter, params: &Params) -> Result<Value, ApiError> {
    let limit = match param(params, "limit") {
        Some(l) => Some(
            l.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        ),
        None => None,
    }
    .filter(|l| *l > 0);
    let after = param(params, "continue").filter(|c| !c.is_empty()).map(|c| {
        let (ns, name) = c.split_once('/').unwrap_or(("", c));
        (ns.to_string(), name.to_string())
    });
    let store = lock(&shared.store);
    let matching: Vec<&Pod> = store
        .pods()
        .filter(|p| after.as_ref().is_none_or(|a| key_of(p) > *a))
        .filter(|p| filter.matches(p))
        .collect();
    let take = limit.unwrap_or(matching.len()).min(matching.len());
    let mut metadata = json!({"resourceVersion": store.resource_version().to_string()});
    if take < matching.len() {
        let (ns, name) = key_of(matching[take - 1]);
        metadata["continue"] = json!(format!("{ns}/{name}"));
        metadata["remainingItemCount"] = json!(matching.len() - take);
    }
    Ok(json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": metadata,
        "items": matching[..take],
    }))
}

pub async fn get(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match lock(&shared.store).get(&(ns, name.clone())) {
        Some(pod) => json_response(StatusCode::OK, pod),
        None => ApiError::not_found("pods", &name).into_response(),
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

pub fn random_suffix() -> String {
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| CHARS[rand::random_range(0..CHARS.len())] as char)
        .collect()
}

pub fn new_uid() -> String {
    let v: u128 = rand::random();
    let h = format!("{v:032x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// Checks and fills a posted pod the way the API server's validation and defaulting would.
pub fn admit(shared: &Shared, ns: &str, body: &[u8]) -> Result<Pod, ApiError> {
    check_namespace(shared, ns)?;
    let mut pod: Pod =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the body is not a valid Pod: {e}")))?;
    if let Some(body_ns) = pod.metadata.namespace.as_deref()
        && !body_ns.is_empty()
        && body_ns != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let name = match (pod.metadata.name.as_deref(), pod.metadata.generate_name.as_deref()) {
        (Some(n), _) if !n.is_empty() => n.to_string(),
        (_, Some(prefix)) if !prefix.is_empty() => format!("{prefix}{}", random_suffix()),
        _ => {
            return Err(ApiError::invalid(
                "Pod",
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        }
    };
    if !valid_name(&name) {
        return Err(ApiError::invalid(
            "Pod",
            &name,
            "metadata.name: Invalid value: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
        ));
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    if spec.containers.is_empty() {
        return Err(ApiError::invalid("Pod", &name, "spec.containers: Required value"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in spec.containers.iter().enumerate() {
        if c.name.is_empty() || !valid_name(&c.name) || c.name.contains('.') {
            return Err(ApiError::invalid(
                "Pod",
                &name,
                format!("spec.containers[{i}].name: Invalid value: {:?}", c.name),
            ));
        }
        if !seen.insert(c.name.clone()) {
            return Err(ApiError::invalid(
                "Pod",
                &name,
                format!("spec.containers[{i}].name: Duplicate value: {:?}", c.name),
            ));
        }
        if c.image.as_deref().is_none_or(str::is_empty) {
            return Err(ApiError::invalid(
                "Pod",
                &name,
                format!("spec.containers[{i}].image: Required value"),
            ));
        }
    }
    if let Some(p) = spec.restart_policy.as_deref()
        && !matches!(p, "Always" | "OnFailure" | "Never")
    {
        return Err(ApiError::invalid(
            "Pod",
            &name,
            format!(
                "spec.restartPolicy: Unsupported value: {p:?}: supported values: \"Always\", \"OnFailure\", \"Never\""
            ),
        ));
    }
    if spec.active_deadline_seconds.is_some_and(|s| s <= 0) {
        return Err(ApiError::invalid(
            "Pod",
            &name,
            "spec.activeDeadlineSeconds: Invalid value: must be greater than 0",
        ));
    }
    default_requests_from_limits(spec);
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.scheduler_name.get_or_insert_with(|| "default-scheduler".into());
    spec.service_account_name.get_or_insert_with(|| "default".into());
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    pod.metadata.name = Some(name);
    pod.metadata.namespace = Some(ns.to_string());
    pod.metadata.uid = Some(new_uid());
    pod.metadata.creation_timestamp = Some(now());
    pod.metadata.deletion_timestamp = None;
    pod.metadata.generation = Some(1);
    pod.status = Some(PodStatus {
        phase: Some("Pending".into()),
        ..Default::default()
    });
    Ok(pod)
}

/// A container's requests default to its limits where it sets only limits (API defaulting).
fn default_requests_from_limits(spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    for c in spec.containers.iter_mut() {
        let Some(res) = c.resources.as_mut() else { continue };
        let Some(limits) = res.limits.clone() else { continue };
        let requests = res.requests.get_or_insert_with(Default::default);
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

/// `Warning` headers as the API server sends them (RFC 7234 code 299, agent `-`).
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {:?}", w);
        if let Ok(value) = axum::http::HeaderValue::from_str(&text) {
            response.headers_mut().append(axum::http::header::WARNING, value);
        }
    }
    response
}

pub async fn create(State(shared): State<Arc<Shared>>, Path(ns): Path<String>, uri: Uri, body: Bytes) -> Response {
    let params = query_params(&uri);
    let pod = match admit(&shared, &ns, &body) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let admitted = match super::admission::admit(&shared, &ns, &pod) {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    if param(&params, "dryRun") == Some("All") {
        return with_warnings(json_response(StatusCode::CREATED, &pod), &admitted.warnings);
    }
    let stored = {
        let mut store = lock(&shared.store);
        let key = key_of(&pod);
        if store.get(&key).is_some() {
            return ApiError::already_exists("pods", &key.1).into_response();
        }
        store.insert(pod)
    };
    shared.schedule_pending();
    with_warnings(json_response(StatusCode::CREATED, &stored), &admitted.warnings)
}

/// gracePeriodSeconds and preconditions.uid from the DeleteOptions body or the query.
fn delete_options(params: &Params, body: &[u8]) -> Result<(Option<i64>, Option<String>), ApiError> {
    let mut grace = match param(params, "gracePeriodSeconds") {
        Some(g) => Some(
            g.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}")))?,
        ),
        None => None,
    };
    let mut uid = None;
    if !body.iter().all(u8::is_ascii_whitespace) {
        let options: Value =
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
        if let Some(g) = options.get("gracePeriodSeconds").and_then(Value::as_i64) {
            grace = Some(g);
        }
        uid = options
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    Ok((grace, uid))
}

pub async fn delete(
    State(shared): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    uri: Uri,
    body: Bytes,
) -> Response {
    let params = query_params(&uri);
    let (grace, uid) = match delete_options(&params, &body) {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    match shared.delete_pod(&(ns, name), grace, uid).await {
        Ok(pod) => json_response(StatusCode::OK, &pod),
        Err(e) => e.into_response(),
    }
}

pub async fn delete_collection(
    State(shared): State<Arc<Shared>>,
    Path(ns): Path<String>,
    uri: Uri,
    body: Bytes,
) -> Response {
    let params = query_params(&uri);
    let (grace, _) = match delete_options(&params, &body) {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    let filter = match Filter::from_params(Some(ns), &params) {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    let keys: Vec<_> = lock(&shared.store)
        .pods()
        .filter(|p| filter.matches(p))
        .map(key_of)
        .collect();
    let deleted = futures::future::join_all(keys.iter().map(|k| shared.delete_pod(k, grace, None))).await;
    let items: Vec<Pod> = deleted.into_iter().filter_map(Result::ok).collect();
    let rv = lock(&shared.store).resource_version().to_string();
    json_response(
        StatusCode::OK,
        &json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": items}),
    )
}
