//! Admission as a real API server does it, seen through kube-rs: Pod Security admission from the
//! namespace's labels (enforce refuses with a 403, warn answers a `Warning` header, audit is
//! logged) and ResourceQuota (pods must specify what a quota tracks and stay under it).

use crate::common;

use common::*;
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, TestCluster};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

async fn start(config: ClusterConfig) -> TestCluster {
    TestCluster::start(config.node(NodeConfig::new("n1")).isolation(Isolation::Host))
        .await
        .expect("start cluster")
}

/// A pod that meets `restricted`, writing to its emptyDir `/tmp` and failing to write to `$HOME`
/// on its read-only root filesystem.
fn restricted_pod(name: &str) -> Pod {
    let script = "echo x > \"$TMPDIR/f\" && cat \"$TMPDIR/f\" && ! mkdir -p \"$HOME/.cache\" 2>/dev/null";
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "main", "image": "busybox:1", "command": ["sh", "-c", script],
                "env": [{"name": "TMPDIR", "value": "/tmp"}],
                "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}],
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                    "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "scratch", "emptyDir": {}}]
        }
    }))
    .expect("static pod json")
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API status, got {other}"),
    }
}

#[tokio::test]
async fn enforce_restricted_refuses_as_a_real_server_and_admits_a_restricted_pod() {
    let cluster = start(ClusterConfig::new().namespace_labels(
        "locked",
        &[
            ("pod-security.kubernetes.io/enforce", "restricted"),
            ("pod-security.kubernetes.io/enforce-version", "latest"),
        ],
    ))
    .await;
    let pods: Api<Pod> = Api::namespaced(cluster.client().unwrap(), "locked");
    let refused = pods
        .create(&PostParams::default(), &sh_pod("x", "true"))
        .await
        .expect_err("a default pod is refused");
    let status = api_error(refused);
    assert_eq!(status.code, 403);
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(
        status.message,
        "pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false \
         (container \"main\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities \
         (container \"main\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or \
         container \"main\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"main\" \
         must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
    assert_eq!(status.details.map(|d| d.name), Some("x".to_string()));
    assert!(cluster.pod("locked", "x").is_none(), "nothing stored");

    create(&pods, &restricted_pod("ok")).await;
    let done = wait_for(&pods, "ok", "finished", |p| {
        matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
    })
    .await;
    let log = cluster.pod_log("locked", "ok", "main").unwrap_or_default();
    assert_eq!(
        done.status.unwrap().phase.as_deref(),
        Some("Succeeded"),
        "writes to the emptyDir work, writes to the read-only root fail: {log}"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn warn_answers_a_warning_header_and_audit_is_logged() {
    let cluster = start(ClusterConfig::new().namespace_labels(
        "watched",
        &[
            ("pod-security.kubernetes.io/warn", "baseline"),
            ("pod-security.kubernetes.io/audit", "restricted"),
        ],
    ))
    .await;
    let mut pod = sh_pod("priv", "true");
    pod.spec.as_mut().unwrap().host_ipc = Some(true);
    let body = serde_json::to_vec(&pod).unwrap();
    let request = axum::http::Request::post("/api/v1/namespaces/watched/pods")
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let response = cluster
        .client()
        .unwrap()
        .send(request.map(kube::client::Body::from))
        .await
        .expect("created");
    assert_eq!(response.status(), 201);
    let warnings: Vec<String> = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert_eq!(
        warnings,
        ["299 - \"would violate PodSecurity \\\"baseline:latest\\\": host namespaces (hostIPC=true)\""]
    );
    let audit = cluster.audit_log();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert!(
        audit[0].starts_with("watched/priv: would violate PodSecurity \"restricted:latest\""),
        "{audit:?}"
    );
    assert!(cluster.pod("watched", "priv").is_some(), "warn and audit never refuse");
    cluster.shutdown().await;
}

fn with_resources(mut pod: Pod, resources: serde_json::Value) -> Pod {
    pod.spec.as_mut().unwrap().containers[0].resources = Some(serde_json::from_value(resources).unwrap());
    pod
}

#[tokio::test]
async fn a_quota_needs_limits_and_is_not_exceeded() {
    let cluster = start(ClusterConfig::new().resource_quota(
        "quota",
        "compute",
        &[("limits.cpu", "4"), ("limits.memory", "4Gi"), ("requests.cpu", "4")],
    ))
    .await;
    let pods: Api<Pod> = Api::namespaced(cluster.client().unwrap(), "quota");
    let status = api_error(
        pods.create(&PostParams::default(), &sh_pod("bare", "sleep 5"))
            .await
            .expect_err("no limits"),
    );
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "pods \"bare\" is forbidden: failed quota: compute: must specify limits.cpu for: main; \
         limits.memory for: main; requests.cpu for: main"
    );
    // Requests default to the limits, as the API server's defaulting does.
    let sized = |name| {
        with_resources(
            sh_pod(name, "sleep 5"),
            json!({"limits": {"cpu": "3", "memory": "1Gi"}}),
        )
    };
    let created = create(&pods, &sized("a")).await;
    let requests = created.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    assert_eq!(requests["cpu"].0, "3");
    let status = api_error(
        pods.create(&PostParams::default(), &sized("b"))
            .await
            .expect_err("over quota"),
    );
    assert_eq!(status.code, 403);
    assert!(
        status
            .message
            .starts_with("pods \"b\" is forbidden: exceeded quota: compute, requested: "),
        "{}",
        status.message
    );
    cluster.shutdown().await;
}
