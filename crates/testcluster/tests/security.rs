//! The node agent applies a container's securityContext to its process, as a kubelet does: a
//! restricted pod (runAsUser/runAsGroup/fsGroup 65532, drop ALL, allowPrivilegeEscalation false)
//! runs as that user with no capability and no_new_privs, and writes to its emptyDir; a root pod
//! that drops ALL and adds IPC_LOCK keeps only IPC_LOCK. Needs root (switching users), as a
//! kubelet does.

use crate::common;

use common::*;
use icb_testcluster::{ClusterConfig, Isolation, TestCluster};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::LogParams;
use serde_json::json;

const STATUS: &str = "grep -E '^(Uid|Gid|Groups|CapEff|CapBnd|NoNewPrivs):' /proc/self/status";

fn field<'a>(logs: &'a str, name: &str) -> &'a str {
    logs.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or_else(|| panic!("{name} in {logs}"))
}

/// A restricted bench pod's shape: uid/gid/fsGroup 65532, no capabilities, no privilege
/// escalation, a read-only root with an emptyDir scratch; it prints its credentials.
fn restricted_pod() -> Pod {
    let restricted = with_spec(
        sh_pod(
            "restricted",
            &format!("{STATUS}; echo ok > \"$SCRATCH/f\" && cat \"$SCRATCH/f\""),
        ),
        json!({
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532},
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }),
    );
    let mut restricted = restricted;
    let c = &mut restricted.spec.as_mut().expect("spec").containers[0];
    c.security_context = Some(
        serde_json::from_value(json!({
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": true,
        }))
        .expect("securityContext"),
    );
    // The emulation maps a mount path in environment values (no mount namespace).
    c.env = Some(vec![
        serde_json::from_value(json!({"name": "SCRATCH", "value": "/scratch"})).expect("env"),
    ]);
    c.volume_mounts = Some(vec![
        serde_json::from_value(json!({"name": "scratch", "mountPath": "/scratch"})).expect("mount"),
    ]);
    restricted
}

#[tokio::test]
async fn a_restricted_pod_runs_unprivileged_and_root_keeps_only_what_it_adds() {
    if !icb_isolate::privileged_tests_enabled("a_restricted_pod_runs_unprivileged") {
        return;
    }
    let cluster = TestCluster::start(ClusterConfig::two_gpu_nodes().isolation(Isolation::Namespaces))
        .await
        .expect("start cluster");
    let pods: Api<Pod> = Api::default_namespaced(cluster.client().expect("client"));
    let restricted = restricted_pod();
    let mut rdma = sh_pod("rdma", STATUS);
    rdma.spec.as_mut().expect("spec").containers[0].security_context =
        Some(serde_json::from_value(json!({"capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}})).expect("sc"));
    create(&pods, &restricted).await;
    create(&pods, &rdma).await;

    let done = wait_for(&pods, "restricted", "finished", is_done).await;
    let logs = pods.logs("restricted", &LogParams::default()).await.expect("logs");
    assert_eq!(phase(&done), "Succeeded", "{logs}");
    assert_eq!(field(&logs, "Uid:"), "65532\t65532\t65532\t65532", "{logs}");
    assert_eq!(field(&logs, "Gid:"), "65532\t65532\t65532\t65532", "{logs}");
    assert_eq!(field(&logs, "Groups:"), "65532", "{logs}");
    assert_eq!(field(&logs, "CapEff:"), "0000000000000000", "{logs}");
    assert_eq!(field(&logs, "CapBnd:"), "0000000000000000", "{logs}");
    assert_eq!(field(&logs, "NoNewPrivs:"), "1", "{logs}");
    assert!(logs.ends_with("ok\n"), "the emptyDir is writable for the user: {logs}");

    let done = wait_for(&pods, "rdma", "finished", is_done).await;
    let logs = pods.logs("rdma", &LogParams::default()).await.expect("logs");
    assert_eq!(phase(&done), "Succeeded", "{logs}");
    assert!(field(&logs, "Uid:").starts_with("0\t"), "{logs}");
    // CAP_IPC_LOCK is bit 14: the only one left, effective and bounding.
    assert_eq!(field(&logs, "CapEff:"), "0000000000004000", "{logs}");
    assert_eq!(field(&logs, "CapBnd:"), "0000000000004000", "{logs}");
    assert_eq!(field(&logs, "NoNewPrivs:"), "0", "{logs}");
}

#[tokio::test]
async fn host_isolation_pods_keep_the_clusters_user() {
    // Plain processes sharing the host's namespaces: a user of their own would be half a
    // container (UCX would pick shared memory between a root pod and a uid 65532 one, and fail).
    if !icb_isolate::privileged_tests_enabled("host_isolation_pods_keep_the_clusters_user") {
        return;
    }
    let cluster = TestCluster::start(ClusterConfig::two_gpu_nodes().isolation(Isolation::Host))
        .await
        .expect("start cluster");
    let pods: Api<Pod> = Api::default_namespaced(cluster.client().expect("client"));
    create(&pods, &restricted_pod()).await;
    let done = wait_for(&pods, "restricted", "finished", is_done).await;
    let logs = pods.logs("restricted", &LogParams::default()).await.expect("logs");
    assert_eq!(phase(&done), "Succeeded", "{logs}");
    assert!(field(&logs, "Uid:").starts_with("0\t"), "{logs}");
}
