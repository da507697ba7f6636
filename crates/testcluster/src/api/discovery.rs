//! API discovery (`/api`, `/api/v1`, `/apis`, `/apis/apps/v1`): what `kubectl` and kube-rs's
//! `Discovery` read first, listing exactly the resources this server serves, with the verbs it
//! answers. Without it `kubectl get nodes -L …` against the demo cluster fails before its request.

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

fn resource(name: &str, kind: &str, namespaced: bool, verbs: &[&str], short: &[&str]) -> Value {
    json!({"name": name, "singularName": kind.to_ascii_lowercase(), "namespaced": namespaced,
           "kind": kind, "verbs": verbs, "shortNames": short})
}

pub async fn core_versions() -> Response {
    axum::Json(json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}))
    .into_response()
}

pub async fn core_v1() -> Response {
    let pod_verbs = ["create", "delete", "deletecollection", "get", "list", "watch"];
    axum::Json(json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        resource("nodes", "Node", false, &["get", "list", "patch", "watch"], &["no"]),
        json!({"name": "nodes/status", "singularName": "", "namespaced": false, "kind": "Node",
               "verbs": ["get", "patch"]}),
        resource("namespaces", "Namespace", false, &["get", "list"], &["ns"]),
        resource("pods", "Pod", true, &pod_verbs, &["po"]),
        json!({"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]}),
        json!({"name": "pods/exec", "singularName": "", "namespaced": true, "kind": "PodExecOptions",
               "verbs": ["create", "get"]}),
        json!({"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]}),
        resource("configmaps", "ConfigMap", true, &["create", "delete", "get", "list", "update"], &["cm"]),
    ]}))
    .into_response()
}

pub async fn groups() -> Response {
    let apps = json!({"groupVersion": "apps/v1", "version": "v1"});
    let resource = json!({"groupVersion": "resource.k8s.io/v1", "version": "v1"});
    axum::Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "apps", "versions": [apps.clone()], "preferredVersion": apps},
        {"name": "resource.k8s.io", "versions": [resource.clone()], "preferredVersion": resource}
    ]}))
    .into_response()
}

pub async fn apps_v1() -> Response {
    axum::Json(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1", "resources": [
            resource("deployments", "Deployment", true, &["create", "delete", "get", "list"], &["deploy"]),
        ]}),
    )
    .into_response()
}

pub async fn resource_v1() -> Response {
    let rw = ["create", "delete", "get", "list"];
    axum::Json(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "resource.k8s.io/v1", "resources": [
            resource("resourceslices", "ResourceSlice", false, &["get", "list"], &[]),
            resource("deviceclasses", "DeviceClass", false, &["get", "list"], &[]),
            resource("resourceclaims", "ResourceClaim", true, &rw, &[]),
            resource("resourceclaimtemplates", "ResourceClaimTemplate", true, &rw, &[]),
        ]}),
    )
    .into_response()
}
