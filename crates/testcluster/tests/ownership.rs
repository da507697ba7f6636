//! Owner references, as Kubernetes' garbage collector honours them (issue 41): a Secret owned by
//! a pod goes when that pod goes, matched by uid; a Secret without owners stays. ic-bench relies
//! on this to leave no token Secret behind without ever listing Secrets.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use icb_testcluster::{ClusterConfig, Isolation, TestCluster};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

fn secret(name: &str, owner: Option<(&str, &str)>) -> Secret {
    let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                       "stringData": {"token": "t0ken"}});
    if let Some((pod, uid)) = owner {
        s["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}]);
    }
    serde_json::from_value(s).expect("static secret json")
}

async fn exists(api: &Api<Secret>, name: &str) -> bool {
    match api.get(name).await {
        Ok(_) => true,
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => panic!("get secret {name}: {e}"),
    }
}

#[tokio::test]
async fn a_secret_owned_by_a_pod_is_collected_with_it_and_only_then() {
    let cluster = TestCluster::start(ClusterConfig::two_gpu_nodes().isolation(Isolation::Host))
        .await
        .expect("start cluster");
    let client = cluster.client().expect("client");
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let secrets: Api<Secret> = Api::default_namespaced(client);
    let pp = PostParams::default();

    // The pod first, as ic-bench does: it reads a Secret that exists only once the pod's uid does.
    let mut pod = sh_pod("owner", "echo \"$TOKEN\"; sleep 30");
    pod.spec.as_mut().unwrap().containers[0].env = Some(vec![
        serde_json::from_value(
            json!({"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "token"}}}),
        )
        .unwrap(),
    ]);
    let created = create(&pods, &pod).await;
    let uid = created.metadata.uid.clone().expect("a created pod has a uid");
    secrets
        .create(&pp, &secret("tok", Some(("owner", &uid))))
        .await
        .expect("create tok");
    secrets
        .create(&pp, &secret("unowned", None))
        .await
        .expect("create unowned");
    // The kubelet retried the container until its Secret was there.
    wait_for(&pods, "owner", "running", |p| phase(p) == "Running").await;
    assert!(exists(&secrets, "tok").await, "collected while its owner runs");

    pods.delete("owner", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete the owner");
    let deadline = Instant::now() + Duration::from_secs(20);
    while exists(&secrets, "tok").await {
        assert!(Instant::now() < deadline, "the owned Secret outlived its pod by 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        exists(&secrets, "unowned").await,
        "a Secret without owners is never collected"
    );

    // Owners are matched by uid: a new pod of the same name does not own the old pod's Secret.
    let deadline = Instant::now() + Duration::from_secs(20);
    while pods.get_opt("owner").await.expect("get owner").is_some() {
        assert!(Instant::now() < deadline, "the owner pod was never removed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let again = create(&pods, &sh_pod("owner", "sleep 30")).await;
    assert_ne!(again.metadata.uid.as_deref(), Some(uid.as_str()));
    secrets
        .create(&pp, &secret("stale", Some(("owner", &uid))))
        .await
        .expect("create stale");
    assert!(
        !exists(&secrets, "stale").await,
        "a Secret whose owner is gone is collected"
    );
    cluster.shutdown().await;
}
