//! Init containers as a kubelet runs them (issue 41): in order, each to completion, then the
//! main containers; a failing one under `restartPolicy: Never` leaves the pod Failed with the
//! init container's exit code in `status.initContainerStatuses` (`kubectl get`'s `Init:Error`),
//! its main containers never started; under OnFailure it is restarted; a native sidecar runs
//! beside the main containers and is stopped after them.

use crate::common;

use common::*;
use icb_testcluster::{ClusterConfig, Isolation, TestCluster};
use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Pod};
use kube::Api;
use serde_json::json;

async fn cluster() -> (TestCluster, Api<Pod>) {
    let cluster = TestCluster::start(ClusterConfig::two_gpu_nodes().isolation(Isolation::Host))
        .await
        .expect("start cluster");
    let pods = Api::default_namespaced(cluster.client().expect("client"));
    (cluster, pods)
}

/// `sh_pod(name, main)` with these init containers (name, script, restartPolicy).
fn with_init(name: &str, main: &str, policy: &str, init: &[(&str, &str, Option<&str>)]) -> Pod {
    let init: Vec<serde_json::Value> = init
        .iter()
        .map(|(n, script, restart)| {
            let mut c = json!({"name": n, "image": "busybox:1", "command": ["sh", "-c", script]});
            if let Some(r) = restart {
                c["restartPolicy"] = json!(r);
            }
            c
        })
        .collect();
    with_spec(
        sh_pod(name, main),
        json!({"initContainers": init, "restartPolicy": policy}),
    )
}

fn init_status<'a>(p: &'a Pod, name: &str) -> &'a ContainerStatus {
    p.status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref())
        .and_then(|s| s.iter().find(|c| c.name == name))
        .unwrap_or_else(|| panic!("no init status {name}: {:#?}", p.status))
}

fn state(s: &ContainerStatus) -> ContainerState {
    s.state.clone().unwrap_or_default()
}

fn condition(p: &Pod, kind: &str) -> Option<String> {
    let conditions = p.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == kind).map(|c| c.status.clone())
}

async fn log(pods: &Api<Pod>, pod: &str, container: &str) -> String {
    let params = kube::api::LogParams {
        container: Some(container.into()),
        ..Default::default()
    };
    pods.logs(pod, &params).await.expect("logs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_in_order_to_completion_before_the_main_ones() {
    let (_cluster, pods) = cluster().await;
    let pod = with_init(
        "ordered",
        "echo main >> order; cat order",
        "Never",
        &[
            ("first", "sleep 0.3; echo first >> order; echo one", None),
            ("second", "echo second >> order", None),
        ],
    );
    create(&pods, &pod).await;
    let done = wait_for(&pods, "ordered", "done", is_done).await;
    assert_eq!(phase(&done), "Succeeded", "{:#?}", done.status);
    for name in ["first", "second"] {
        let t = state(init_status(&done, name)).terminated.expect("terminated");
        assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")), "{name}");
    }
    assert_eq!(condition(&done, "Initialized").as_deref(), Some("True"));
    // The second started after the first ended, the main container after both.
    assert_eq!(log(&pods, "ordered", "main").await, "first\nsecond\nmain\n");
    assert_eq!(log(&pods, "ordered", "first").await, "one\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_init_container_under_never_fails_the_pod_as_init_error() {
    let (_cluster, pods) = cluster().await;
    let pod = with_init(
        "init-error",
        "echo main ran",
        "Never",
        &[
            ("check", "echo fabric fails; exit 1", None),
            ("after", "echo after", None),
        ],
    );
    create(&pods, &pod).await;
    let done = wait_for(&pods, "init-error", "failed", |p| phase(p) == "Failed").await;
    let t = state(init_status(&done, "check")).terminated.expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (1, Some("Error")));
    // Neither the next init container nor the main one ever started.
    let after = state(init_status(&done, "after"));
    assert_eq!(after.waiting.and_then(|w| w.reason).as_deref(), Some("PodInitializing"));
    assert_eq!(waiting_reason(&done).as_deref(), Some("PodInitializing"));
    assert_eq!(condition(&done, "Initialized").as_deref(), Some("False"));
    assert_eq!(log(&pods, "init-error", "check").await, "fabric fails\n");
    // It stays so: nothing restarts it.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let later = pods.get("init-error").await.expect("get");
    assert_eq!(phase(&later), "Failed");
    assert_eq!(init_status(&later, "check").restart_count, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_init_container_is_restarted_under_on_failure() {
    let (_cluster, pods) = cluster().await;
    let pod = with_init(
        "retried",
        "echo main ran",
        "OnFailure",
        &[("flaky", "if [ -f tried ]; then exit 0; fi; touch tried; exit 3", None)],
    );
    create(&pods, &pod).await;
    let done = wait_for(&pods, "retried", "done", is_done).await;
    assert_eq!(phase(&done), "Succeeded", "{:#?}", done.status);
    let flaky = init_status(&done, "flaky");
    assert_eq!(flaky.restart_count, 1);
    let last = flaky
        .last_state
        .clone()
        .unwrap_or_default()
        .terminated
        .expect("last state");
    assert_eq!(last.exit_code, 3);
    assert_eq!(exit_code(&done), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_sidecar_runs_beside_the_main_container_and_stops_after_it() {
    let (_cluster, pods) = cluster().await;
    let pod = with_init(
        "sidecar",
        "sleep 0.3; cat sidecar-up",
        "Never",
        &[("side", "echo up > sidecar-up; exec sleep 60", Some("Always"))],
    );
    create(&pods, &pod).await;
    let done = wait_for(&pods, "sidecar", "done", is_done).await;
    assert_eq!(phase(&done), "Succeeded", "{:#?}", done.status);
    assert_eq!(log(&pods, "sidecar", "main").await, "up\n");
    // Stopped once the main container ended, long before its 60 s sleep.
    let stopped = wait_for(&pods, "sidecar", "its sidecar stopped", |p| {
        let s = p
            .status
            .as_ref()
            .and_then(|s| s.init_container_statuses.as_ref())
            .and_then(|s| s.first().cloned())
            .unwrap_or_default();
        state(&s).terminated.is_some()
    })
    .await;
    assert_eq!(condition(&stopped, "Initialized").as_deref(), Some("True"));
}
