//! The HTTP side: routes kube-rs calls to handlers, and wraps every request in the recorder and
//! the fault knobs.

mod admission;
mod configmaps;
mod custom;
mod deployments;
mod discovery;
pub(crate) mod exec;
mod logs;
mod misc;
mod node_status;
mod nodes;
mod pods;
mod resource;
pub(crate) mod secrets;
mod watch;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::cluster::{Shared, lock};
use crate::record::{RecordedRequest, parse_query};
use crate::status::ApiError;

pub(crate) use pods::new_uid;

/// Largest request body accepted (a Pod is a few KiB).
const MAX_BODY: usize = 16 * 1024 * 1024;

pub fn router(shared: Arc<Shared>) -> Router {
    let pod = "/api/v1/namespaces/{ns}/pods/{name}";
    Router::new()
        .route("/version", get(misc::version))
        .route("/api", get(discovery::core_versions))
        .route("/api/v1", get(discovery::core_v1))
        .route("/apis", get(discovery::groups))
        .route("/apis/apps/v1", get(discovery::apps_v1))
        .route("/api/v1/nodes", get(nodes::list_nodes))
        .route("/api/v1/nodes/{name}", get(nodes::get_node).patch(nodes::patch_node))
        .route(
            "/api/v1/nodes/{name}/status",
            get(node_status::get).patch(node_status::patch),
        )
        .route("/api/v1/namespaces", get(misc::list_namespaces))
        .route("/api/v1/namespaces/{ns}", get(misc::get_namespace))
        .route("/api/v1/pods", get(pods::list_all))
        .route(
            "/api/v1/namespaces/{ns}/pods",
            get(pods::list_namespaced)
                .post(pods::create)
                .delete(pods::delete_collection),
        )
        .route(pod, get(pods::get).delete(pods::delete))
        .route("/api/v1/secrets", get(secrets::list_all))
        .route(
            "/api/v1/namespaces/{ns}/secrets",
            get(secrets::list_namespaced).post(secrets::create),
        )
        .route(
            "/api/v1/namespaces/{ns}/secrets/{name}",
            get(secrets::get).delete(secrets::delete),
        )
        .route(
            "/api/v1/namespaces/{ns}/configmaps",
            get(configmaps::list).post(configmaps::create),
        )
        .route(
            "/api/v1/namespaces/{ns}/configmaps/{name}",
            get(configmaps::get).put(configmaps::replace).delete(configmaps::delete),
        )
        .route(&format!("{pod}/status"), get(pods::get))
        .route(&format!("{pod}/log"), get(logs::logs))
        .route(&format!("{pod}/exec"), get(exec::exec).post(exec::exec))
        .route(
            "/apis/apps/v1/namespaces/{ns}/deployments",
            get(deployments::list).post(deployments::create),
        )
        .route(
            "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
            get(deployments::get).delete(deployments::delete),
        )
        .route("/apis/resource.k8s.io/v1", get(discovery::resource_v1))
        .route("/apis/resource.k8s.io/v1/resourceslices", get(resource::list_slices))
        .route(
            "/apis/resource.k8s.io/v1/resourceslices/{name}",
            get(resource::get_slice),
        )
        .route("/apis/resource.k8s.io/v1/deviceclasses", get(resource::list_classes))
        .route(
            "/apis/resource.k8s.io/v1/deviceclasses/{name}",
            get(resource::get_class),
        )
        .route(
            "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims",
            get(resource::list_claims).post(resource::create_claim),
        )
        .route(
            "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}",
            get(resource::get_claim).delete(resource::delete_claim),
        )
        .route(
            "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
            get(resource::list_templates).post(resource::create_template),
        )
        .route(
            "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates/{name}",
            get(resource::get_template).delete(resource::delete_template),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{ns}/{plural}",
            get(custom::list).post(custom::create),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}",
            get(custom::get),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), record_and_inject))
        .with_state(shared)
}

async fn not_found(req: Request) -> Response {
    ApiError::new(
        404,
        "NotFound",
        format!(
            "the server could not find the requested resource ({})",
            req.uri().path()
        ),
    )
    .into_response()
}

async fn method_not_allowed(req: Request) -> Response {
    ApiError::new(
        405,
        "MethodNotAllowed",
        format!(
            "{} is not supported on {} by the emulated cluster",
            req.method(),
            req.uri().path()
        ),
    )
    .into_response()
}

/// Records the request, then applies latency and injected errors before the real handler.
async fn record_and_inject(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => return ApiError::bad_request(format!("cannot read request body: {e}")).into_response(),
    };
    let method = parts.method.to_string();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let decision = lock(&shared.faults).decide(&method, &path, &query);
    let index = {
        let mut log = lock(&shared.requests);
        log.push(RecordedRequest {
            method,
            path,
            params: parse_query(&query),
            query,
            body: bytes.to_vec(),
            status: 0,
            injected: decision.error.is_some(),
        });
        log.len() - 1
    };
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    let response = match decision.error {
        Some(error) => error.into_response(),
        None => next.run(Request::from_parts(parts, Body::from(bytes))).await,
    };
    if let Some(entry) = lock(&shared.requests).get_mut(index) {
        entry.status = response.status().as_u16();
    }
    response
}

/// The `(name, value)` query pairs of a request (kube-rs repeats `command`).
pub type Params = Vec<(String, String)>;

pub fn param<'a>(params: &'a Params, name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

pub fn flag(params: &Params, name: &str) -> bool {
    matches!(param(params, name), Some("true" | "1"))
}

pub fn query_params(uri: &axum::http::Uri) -> Params {
    parse_query(uri.query().unwrap_or(""))
}
