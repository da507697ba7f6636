//! `node_conditions` against the emulated API server: the condition lands through the status
//! subresource, a transient error is retried, and `lastTransitionTime` moves only when the status
//! does (the strategic merge keeps the node's own). Host isolation: no pods run.

use icb_kube::k8s_openapi::api::core::v1::{Node, NodeCondition};
use icb_kube::kube::Api;
use icb_kube::node_conditions::{self, CONDITION_TYPE, ConditionMark, ConditionStatus};
use icb_kube::{Cluster, ClusterOptions};
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RequestMatch, TestCluster};
use std::time::Duration;

async fn start() -> (TestCluster, Cluster) {
    let tc = TestCluster::start(
        ClusterConfig::new()
            .node(NodeConfig::new("n1"))
            .node(NodeConfig::new("n2"))
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

fn mark(node: &str, status: ConditionStatus) -> ConditionMark {
    ConditionMark {
        node: node.into(),
        status,
        reason: "FabricPass",
        message: "pass: 0/1 pairs failed".into(),
    }
}

async fn condition(cluster: &Cluster, node: &str) -> NodeCondition {
    let api: Api<Node> = Api::all(cluster.client().clone());
    let n = api.get(node).await.unwrap();
    let all = n.status.unwrap().conditions.unwrap();
    assert!(all.iter().any(|c| c.type_ == "Ready"), "the kubelet's condition stays");
    all.into_iter()
        .find(|c| c.type_ == CONDITION_TYPE)
        .expect("the condition")
}

fn time(c: &Option<icb_kube::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> String {
    c.as_ref().map(|t| t.0.to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transition_time_moves_only_when_the_status_does() {
    let (tc, cluster) = start().await;
    node_conditions::check_access(&cluster, "n1").await.unwrap();
    tc.fail_requests(RequestMatch::new("PATCH", "/api/v1/nodes/n1/status"), 500, 1);
    let (t1, t2, t3) = ("2026-11-27T02:00:00Z", "2026-11-28T02:00:00Z", "2026-11-29T02:00:00Z");
    let n = node_conditions::set_conditions(&cluster, &[mark("n1", ConditionStatus::True)], t1)
        .await
        .unwrap();
    assert_eq!(n, 1);
    let c = condition(&cluster, "n1").await;
    assert_eq!(
        (c.status.as_str(), time(&c.last_transition_time)),
        ("True", t1.to_string())
    );
    node_conditions::set_conditions(&cluster, &[mark("n1", ConditionStatus::True)], t2)
        .await
        .unwrap();
    let c = condition(&cluster, "n1").await;
    assert_eq!(time(&c.last_heartbeat_time), t2, "a fresh verdict");
    assert_eq!(time(&c.last_transition_time), t1, "the same status since t1");
    node_conditions::set_conditions(&cluster, &[mark("n1", ConditionStatus::False)], t3)
        .await
        .unwrap();
    let c = condition(&cluster, "n1").await;
    assert_eq!(
        (c.status.as_str(), time(&c.last_transition_time)),
        ("False", t3.to_string())
    );
    let api: Api<Node> = Api::all(cluster.client().clone());
    let n2 = api.get("n2").await.unwrap().status.unwrap().conditions.unwrap();
    assert!(n2.iter().all(|c| c.type_ != CONDITION_TYPE), "only the nodes given");
}
