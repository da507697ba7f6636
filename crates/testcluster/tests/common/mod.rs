//! Helpers shared by the emulated cluster's tests.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

/// A `restartPolicy: Never` pod running `sh -c script` (any image name runs commands as given).
pub fn sh_pod(name: &str, script: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "test"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1", "command": ["sh", "-c", script]}]
        }
    }))
    .expect("static pod json")
}

/// Patches a pod with a JSON merge of `extra` into its spec.
pub fn with_spec(mut pod: Pod, extra: serde_json::Value) -> Pod {
    let mut v = serde_json::to_value(&pod).expect("pod to json");
    if let (Some(spec), Some(extra)) = (v.get_mut("spec").and_then(|s| s.as_object_mut()), extra.as_object()) {
        for (k, val) in extra {
            spec.insert(k.clone(), val.clone());
        }
    }
    pod = serde_json::from_value(v).expect("json to pod");
    pod
}

pub async fn create(api: &Api<Pod>, pod: &Pod) -> Pod {
    api.create(&PostParams::default(), pod).await.expect("create pod")
}

/// Waits (20 s at most) until `cond` holds for the pod.
pub async fn wait_for(api: &Api<Pod>, name: &str, what: &str, cond: impl Fn(&Pod) -> bool + Send + 'static) -> Pod {
    let condition = move |p: Option<&Pod>| p.is_some_and(&cond);
    let waited = tokio::time::timeout(
        Duration::from_secs(20),
        kube::runtime::wait::await_condition(api.clone(), name, condition),
    )
    .await;
    match waited {
        Ok(Ok(Some(pod))) => pod,
        Ok(Ok(None)) => panic!("pod {name} vanished while waiting for {what}"),
        Ok(Err(e)) => panic!("waiting for pod {name} to be {what}: {e}"),
        Err(_) => {
            let now = api
                .get(name)
                .await
                .map(|p| format!("{:#?}", p.status))
                .unwrap_or_default();
            panic!("pod {name} not {what} within 20 s; status now: {now}")
        }
    }
}

pub fn phase(p: &Pod) -> String {
    p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

pub fn is_done(p: &Pod) -> bool {
    matches!(phase(p).as_str(), "Succeeded" | "Failed")
}

pub fn waiting_reason(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

pub fn exit_code(p: &Pod) -> Option<i32> {
    Some(
        p.status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .first()?
            .state
            .as_ref()?
            .terminated
            .as_ref()?
            .exit_code,
    )
}

pub fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref()?.node_name.clone()
}

pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
