//! The API server stopped and started again (a crash and restart of a real apiserver backed by
//! etcd): open connections are dropped, the port refuses while it is down, the same address and
//! store come back, the node agents carry on meanwhile, and kube-rs clients reconnect.

use crate::common;

use std::time::Duration;

use common::*;
use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use icb_testcluster::{ClusterConfig, Isolation, RequestMatch, TestCluster};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, LogParams, WatchEvent, WatchParams};

fn phase(p: &Pod) -> String {
    p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_drops_connections_keeps_the_store_and_clients_reconnect() {
    let cluster = TestCluster::start(ClusterConfig::two_gpu_nodes().isolation(Isolation::Host))
        .await
        .expect("start cluster");
    let pods: Api<Pod> = Api::default_namespaced(cluster.client().expect("client"));
    create(&pods, &sh_pod("before", "echo up; sleep 30")).await;
    wait_for(&pods, "before", "running", |p| phase(p) == "Running").await;
    let rv = pods
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("list version");
    let mut watch = pods
        .watch(&WatchParams::default().timeout(120), &rv)
        .await
        .expect("watch")
        .boxed();
    let log = pods
        .log_stream(
            "before",
            &LogParams {
                follow: true,
                ..Default::default()
            },
        )
        .await
        .expect("log follow");
    let mut log = log.lines();
    assert_eq!(log.next().await.expect("a line").expect("read"), "up");
    let addr = cluster.addr();

    tokio::task::block_in_place(|| cluster.stop_api_server()).expect("stop");
    // Both streams are cut (an error or an early end, never a hang), and the port refuses.
    let cut = tokio::time::timeout(Duration::from_secs(5), watch.next()).await;
    assert!(matches!(cut, Ok(None | Some(Err(_)))), "the watch was dropped: {cut:?}");
    let cut = tokio::time::timeout(Duration::from_secs(5), log.next()).await;
    assert!(
        matches!(cut, Ok(None | Some(Err(_)))),
        "the log follow was dropped: {cut:?}"
    );
    let refused = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2));
    assert_eq!(
        refused.err().map(|e| e.kind()),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
    assert!(cluster.stop_api_server().is_err(), "already stopped");
    // The agents carry on while the API is down: the pod's container dies and is recorded.
    cluster.kill_pod_processes(cluster.namespace(), "before").expect("kill");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cluster
        .pod(cluster.namespace(), "before")
        .is_none_or(|p| phase(&p) != "Failed")
    {
        assert!(std::time::Instant::now() < deadline, "the agent recorded the kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    tokio::task::block_in_place(|| cluster.start_api_server()).expect("start again");
    assert_eq!(cluster.addr(), addr);
    // The same client reconnects; the store kept the pod and what happened to it meanwhile.
    assert_eq!(phase(&pods.get("before").await.expect("get after restart")), "Failed");
    // A watch resumed from the version before the outage replays the change made during it.
    let mut resumed = pods
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .expect("watch again")
        .boxed();
    let mut saw_failed = false;
    while let Some(event) = resumed.try_next().await.expect("watch ok") {
        if let WatchEvent::Modified(p) = event
            && p.metadata.name.as_deref() == Some("before")
            && phase(&p) == "Failed"
        {
            saw_failed = true;
            break;
        }
    }
    assert!(saw_failed, "the resumed watch saw the pod fail");
    cluster.shutdown().await;
}

#[tokio::test]
async fn random_errors_hit_only_matching_requests_and_stop_when_cleared() {
    let cluster = TestCluster::start(ClusterConfig::two_gpu_nodes().isolation(Isolation::Host))
        .await
        .expect("start cluster");
    let mut config = cluster.client_config().expect("config");
    config.default_retry = false;
    let client = kube::Client::try_from(config).expect("client");
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    assert!(
        cluster
            .fail_requests_randomly(RequestMatch::new("GET", "/api/v1/namespaces/*/pods"), 500, 1.5, 1)
            .is_err()
    );
    cluster
        .fail_requests_randomly(RequestMatch::new("GET", "/api/v1/namespaces/*/pods"), 500, 0.5, 42)
        .expect("a probability");
    let mut failed = 0;
    for _ in 0..60 {
        match pods.list(&ListParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 500 => failed += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!((10..=50).contains(&failed), "about half of 60 failed: {failed}");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    for _ in 0..20 {
        nodes
            .list(&ListParams::default())
            .await
            .expect("other paths never fail");
    }
    let injected = cluster.requests().iter().filter(|r| r.injected).count();
    assert_eq!(injected, failed, "every injected error is recorded as such");
    cluster.clear_faults();
    for _ in 0..20 {
        pods.list(&ListParams::default()).await.expect("cleared");
    }
    cluster.shutdown().await;
}
