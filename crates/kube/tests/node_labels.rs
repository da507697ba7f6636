//! `node_labels` against the emulated API server: the label and annotations land on exactly the
//! nodes given, transient errors are retried, and a 403 is one line naming the ClusterRole.
//! Host isolation: no pods run, no root needed.

use icb_kube::k8s_openapi::api::core::v1::Node;
use icb_kube::kube::Api;
use icb_kube::node_labels::{self, Fabric, LabelError, NodeMark};
use icb_kube::{Cluster, ClusterOptions};
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RequestMatch, TestCluster};
use std::time::Duration;

async fn start() -> (TestCluster, Cluster) {
    let tc = TestCluster::start(
        ClusterConfig::new()
            .node(NodeConfig::new("n1"))
            .node(NodeConfig::new("n2"))
            .node(NodeConfig::new("n3"))
            .isolation(Isolation::Host),
    )
    .await
    .unwrap();
    let cluster = icb_kube::connect(&ClusterOptions {
        kubeconfig: Some(tc.kubeconfig_path().to_path_buf()),
        request_timeout: Duration::from_secs(10),
        ..Default::default()
    })
    .await
    .unwrap();
    (tc, cluster)
}

fn mark(node: &str, fabric: Fabric, reason: &str) -> NodeMark {
    NodeMark {
        bad_rails: None,
        node: node.into(),
        fabric,
        reason: reason.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_land_on_the_given_nodes_after_transient_errors() {
    let (tc, cluster) = start().await;
    tc.fail_requests(RequestMatch::new("PATCH", "/api/v1/nodes/n2"), 500, 2);
    let marks = [
        mark("n1", Fabric::Pass, "median 9.1 GB/s over 2 pairs"),
        mark("n2", Fabric::Fail, "2 of 2 pairs failed: tcp"),
    ];
    let n = node_labels::label_nodes(&cluster, &marks, "swabc123", "2026-11-24T02:00:00Z")
        .await
        .unwrap();
    assert_eq!(n, 2);
    let api: Api<Node> = Api::all(cluster.client().clone());
    for (node, value, reason) in [
        ("n1", "pass", "median 9.1 GB/s over 2 pairs"),
        ("n2", "fail", "2 of 2 pairs failed: tcp"),
    ] {
        let got = api.get(node).await.unwrap();
        assert_eq!(got.metadata.labels.unwrap()[node_labels::FABRIC_LABEL], value);
        let ann = got.metadata.annotations.unwrap();
        assert_eq!(ann[node_labels::RUN_ANNOTATION], "swabc123");
        assert_eq!(ann[node_labels::CHECKED_AT_ANNOTATION], "2026-11-24T02:00:00Z");
        assert_eq!(ann[node_labels::REASON_ANNOTATION], reason);
    }
    let n3 = api.get("n3").await.unwrap();
    assert!(n3.metadata.annotations.is_none() && !n3.metadata.labels.unwrap().contains_key(node_labels::FABRIC_LABEL));
    let patches: Vec<String> = tc
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| format!("{} {}", r.path, r.status))
        .collect();
    assert_eq!(
        patches.iter().filter(|p| p.starts_with("/api/v1/nodes/n2 ")).count(),
        3,
        "two 500s retried: {patches:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_is_one_line_naming_the_cluster_role() {
    let (tc, cluster) = start().await;
    tc.fail_requests_always(RequestMatch::new("PATCH", "/api/v1/nodes/*"), 403);
    let started = std::time::Instant::now();
    let err = node_labels::label_nodes(&cluster, &[mark("n1", Fabric::Pass, "ok")], "sw1", "t")
        .await
        .unwrap_err();
    assert!(
        matches!(err, LabelError::Forbidden { ref node, .. } if node == "n1"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(!text.contains('\n'), "{text}");
    assert!(text.contains("manifests/clusterrole-label-nodes.yaml"), "{text}");
    assert!(
        text.contains("ClusterRole ic-bench-label-nodes") && text.contains("`patch` on nodes"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "a 403 is not retried");
    let patches = tc.requests().into_iter().filter(|r| r.method == "PATCH").count();
    assert_eq!(patches, 1);
    // The dry-run access check says the same before anything ran.
    let err = node_labels::check_access(&cluster, "n2").await.unwrap_err();
    assert!(matches!(err, LabelError::Forbidden { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_access_check_stores_nothing() {
    let (tc, cluster) = start().await;
    node_labels::check_access(&cluster, "n1").await.unwrap();
    let check = tc.requests().into_iter().find(|r| r.method == "PATCH").unwrap();
    assert!(check.query.contains("dryRun=All"), "{}", check.query);
    let api: Api<Node> = Api::all(cluster.client().clone());
    let n1 = api.get("n1").await.unwrap();
    assert!(n1.metadata.annotations.is_none());
    let err = node_labels::check_access(&cluster, "nope").await.unwrap_err();
    assert!(
        matches!(err, LabelError::Api { .. }) && err.to_string().contains("nope"),
        "{err}"
    );
}
