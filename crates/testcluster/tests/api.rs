//! The API as kube-rs sees it, with real processes but without namespaces (no root needed):
//! lifecycle, logs, watch, selectors, scheduling, exec, faults, request log.

use crate::common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RequestMatch, TestCluster};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{AttachParams, DeleteParams, ListParams, LogParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::io::AsyncReadExt;

async fn host_cluster(config: ClusterConfig) -> (TestCluster, Client) {
    let cluster = TestCluster::start(config.isolation(Isolation::Host))
        .await
        .expect("start cluster");
    let client = cluster.client().expect("client");
    (cluster, client)
}

fn two_nodes() -> ClusterConfig {
    ClusterConfig::two_gpu_nodes()
}

fn gpu_pod(name: &str, gpus: u32) -> Pod {
    let mut pod = sh_pod(name, "sleep 30");
    let c = &mut pod.spec.as_mut().expect("spec").containers[0];
    c.resources = Some(serde_json::from_value(json!({"limits": {"nvidia.com/gpu": gpus.to_string()}})).expect("res"));
    pod
}

#[tokio::test]
async fn pod_runs_and_reports_logs_and_exit_code() {
    let (cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let created = create(&pods, &sh_pod("hello", "echo hi; echo oops >&2; exit 3")).await;
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert!(
        created
            .metadata
            .resource_version
            .as_deref()
            .is_some_and(|rv| !rv.is_empty())
    );
    let done = wait_for(&pods, "hello", "finished", is_done).await;
    assert_eq!(phase(&done), "Failed");
    assert_eq!(exit_code(&done), Some(3));
    let term = done.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0]
        .state
        .as_ref()
        .unwrap();
    assert_eq!(term.terminated.as_ref().unwrap().reason.as_deref(), Some("Error"));
    let logs = pods.logs("hello", &LogParams::default()).await.expect("logs");
    assert_eq!(logs, "hi\noops\n");
    let tail = pods
        .logs(
            "hello",
            &LogParams {
                tail_lines: Some(1),
                ..Default::default()
            },
        )
        .await
        .expect("tail");
    assert_eq!(tail, "oops\n");
    let stamped = pods
        .logs(
            "hello",
            &LogParams {
                timestamps: true,
                ..Default::default()
            },
        )
        .await
        .expect("ts");
    assert!(stamped.lines().all(|l| l.contains("Z ")), "{stamped}");

    create(&pods, &sh_pod("ok", "exit 0")).await;
    let ok = wait_for(&pods, "ok", "finished", is_done).await;
    assert_eq!(phase(&ok), "Succeeded");
    assert_eq!(exit_code(&ok), Some(0));
    drop(cluster);
}

#[tokio::test]
async fn running_pod_has_ip_ready_and_env() {
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod = with_spec(
        sh_pod("envy", "echo \"A=$A B=$B NODE=$NODE\"; sleep 30"),
        json!({"containers": [{"name": "main", "image": "x", "command": ["sh", "-c", "echo \"A=$A B=$B NODE=$NODE\"; sleep 30"],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)-2"},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]}),
    );
    create(&pods, &pod).await;
    let running = wait_for(&pods, "envy", "running", |p| phase(p) == "Running").await;
    let st = running.status.clone().unwrap();
    assert_eq!(st.pod_ip.as_deref(), Some("127.0.0.1"));
    let ready = st.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "True");
    assert!(
        st.container_statuses.unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .running
            .is_some()
    );
    let node = node_of(&running).unwrap();
    let mut lines = pods
        .log_stream(
            "envy",
            &LogParams {
                follow: true,
                ..Default::default()
            },
        )
        .await
        .expect("stream");
    let mut first = String::new();
    let mut buf = [0u8; 256];
    use futures::AsyncReadExt as _;
    while !first.contains('\n') {
        let n = tokio::time::timeout(Duration::from_secs(10), lines.read(&mut buf))
            .await
            .expect("log line")
            .expect("read");
        assert!(n > 0, "log ended early");
        first.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert_eq!(first, format!("A=1 B=1-2 NODE={node}\n"));
    pods.delete(
        "envy",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .expect("delete");
    // A followed log ends when the container ends.
    let rest = tokio::time::timeout(Duration::from_secs(10), async {
        let mut rest = Vec::new();
        lines.read_to_end(&mut rest).await.map(|_| rest)
    })
    .await
    .expect("follow ends after delete");
    assert!(rest.is_ok());
    assert!(
        pods.get_opt("envy").await.expect("get").is_none(),
        "grace 0 delete removes the pod"
    );
}

#[tokio::test]
async fn watch_delivers_added_modified_deleted() {
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    create(&pods, &sh_pod("other", "sleep 30")).await;
    let params = WatchParams::default().fields("metadata.name=w").timeout(20);
    let mut stream = pods.watch(&params, "0").await.expect("watch").boxed();
    create(&pods, &sh_pod("w", "sleep 30")).await;
    let mut kinds = Vec::new();
    let mut last_rv = 0u64;
    let mut deleted = false;
    while !deleted {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .expect("event in time");
        let event = event.expect("watch ok").expect("stream open");
        let (kind, pod) = match event {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(
            pod.metadata.name.as_deref(),
            Some("w"),
            "field selector filters the watch"
        );
        let rv: u64 = pod.metadata.resource_version.as_deref().unwrap().parse().unwrap();
        assert!(rv > last_rv, "resourceVersion increases");
        last_rv = rv;
        if kind == "MODIFIED" && phase(&pod) == "Running" && !kinds.contains(&"DELETE-SENT") {
            pods.delete(
                "w",
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await
            .expect("delete");
            kinds.push("DELETE-SENT");
        }
        deleted = kind == "DELETED";
        kinds.push(kind);
    }
    assert_eq!(kinds[0], "ADDED");
    assert!(kinds.contains(&"MODIFIED"));
    assert_eq!(*kinds.last().unwrap(), "DELETED");

    // Resuming from a version replays only what came after it.
    let list = pods.list(&ListParams::default()).await.expect("list");
    let rv = list.metadata.resource_version.clone().unwrap();
    create(&pods, &sh_pod("w", "exit 0")).await;
    let mut resumed = pods
        .watch(&WatchParams::default().fields("metadata.name=w").timeout(5), &rv)
        .await
        .expect("watch")
        .boxed();
    let first = resumed.try_next().await.expect("ok").expect("event");
    assert!(matches!(first, WatchEvent::Added(_)), "{first:?}");
}

#[tokio::test]
async fn watch_times_out_cleanly_and_reports_expired_versions() {
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let started = std::time::Instant::now();
    let mut stream = pods
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .expect("watch")
        .boxed();
    assert!(
        tokio::time::timeout(Duration::from_secs(5), stream.try_next())
            .await
            .expect("ends")
            .expect("clean end")
            .is_none()
    );
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn selectors_and_paging() {
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    for (name, tier) in [("a", "web"), ("b", "db"), ("c", "cache")] {
        let mut p = sh_pod(name, "sleep 30");
        p.metadata.labels = Some([("tier".to_string(), tier.to_string())].into());
        if name == "c" {
            p.metadata.labels.as_mut().unwrap().insert("extra".into(), "1".into());
        }
        create(&pods, &p).await;
    }
    let names = |list: kube::core::ObjectList<Pod>| -> Vec<String> {
        list.items.into_iter().map(|p| p.metadata.name.unwrap()).collect()
    };
    let by = |sel: &str| ListParams::default().labels(sel);
    assert_eq!(names(pods.list(&by("tier=web")).await.unwrap()), ["a"]);
    assert_eq!(names(pods.list(&by("tier!=web")).await.unwrap()), ["b", "c"]);
    assert_eq!(names(pods.list(&by("extra")).await.unwrap()), ["c"]);
    assert_eq!(names(pods.list(&by("!extra")).await.unwrap()), ["a", "b"]);
    assert_eq!(names(pods.list(&by("tier in (db,cache)")).await.unwrap()), ["b", "c"]);
    let fields = |sel: &str| ListParams::default().fields(sel);
    assert_eq!(names(pods.list(&fields("metadata.name=b")).await.unwrap()), ["b"]);
    assert_eq!(
        names(
            pods.list(&fields("metadata.namespace=default,metadata.name!=b"))
                .await
                .unwrap()
        ),
        ["a", "c"]
    );
    wait_for(&pods, "a", "running", |p| phase(p) == "Running").await;
    let node = node_of(&pods.get("a").await.unwrap()).unwrap();
    let on_node = names(pods.list(&fields(&format!("spec.nodeName={node}"))).await.unwrap());
    let off_node = names(pods.list(&fields(&format!("spec.nodeName!={node}"))).await.unwrap());
    assert_eq!(on_node.len() + off_node.len(), 3);
    assert!(on_node.contains(&"a".to_string()));
    let bad = pods.list(&fields("spec.bogus=1")).await.unwrap_err();
    assert!(matches!(bad, kube::Error::Api(ref s) if s.code == 400), "{bad:?}");

    let page1 = pods.list(&ListParams::default().limit(2)).await.unwrap();
    let token = page1.metadata.continue_.clone().expect("continue token");
    assert_eq!(names(page1), ["a", "b"]);
    let page2 = pods
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert!(page2.metadata.continue_.as_deref().unwrap_or("").is_empty());
    assert_eq!(names(page2), ["c"]);

    let deleted = pods
        .delete_collection(
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
            &by("tier in (web,db)"),
        )
        .await
        .unwrap();
    let gone: Vec<String> = deleted
        .left()
        .expect("list of deleted")
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(gone, ["a", "b"]);
    assert_eq!(names(pods.list(&ListParams::default()).await.unwrap()), ["c"]);
}

#[tokio::test]
async fn gpu_capacity_leaves_pods_unschedulable_until_room_frees() {
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let nodes: Api<Node> = Api::all(client);
    let listed = nodes.list(&ListParams::default()).await.expect("nodes");
    assert_eq!(listed.items.len(), 2);
    let gpu = &listed.items[0].status.as_ref().unwrap().allocatable.as_ref().unwrap()["nvidia.com/gpu"];
    assert_eq!(gpu.0, "8");

    create(&pods, &gpu_pod("too-big", 9)).await;
    let pending = wait_for(&pods, "too-big", "unschedulable", |p| {
        p.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
            c.iter().any(|c| {
                c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
            })
        })
    })
    .await;
    assert_eq!(phase(&pending), "Pending");
    let cond = pending
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(
        cond.message.as_deref(),
        Some("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    );

    create(&pods, &gpu_pod("full-1", 8)).await;
    create(&pods, &gpu_pod("full-2", 8)).await;
    let a = wait_for(&pods, "full-1", "running", |p| phase(p) == "Running").await;
    let b = wait_for(&pods, "full-2", "running", |p| phase(p) == "Running").await;
    assert_ne!(node_of(&a), node_of(&b), "8 GPUs each: one pod per node");
    create(&pods, &gpu_pod("waiter", 1)).await;
    wait_for(&pods, "waiter", "unschedulable", |p| {
        p.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
            c.iter()
                .any(|c| c.message.as_deref() == Some("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."))
        })
    })
    .await;
    pods.delete(
        "full-1",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let placed = wait_for(&pods, "waiter", "running", |p| phase(p) == "Running").await;
    assert_eq!(node_of(&placed), node_of(&a), "the freed node takes the waiting pod");
}

#[tokio::test]
async fn node_selector_affinity_and_node_name_place_pods() {
    let config = ClusterConfig::new()
        .node(NodeConfig::gpu("g1", 8).label("zone", "a"))
        .node(NodeConfig::gpu("g2", 8).label("zone", "b").label("fast", "yes"));
    let (_cluster, client) = host_cluster(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let sel = with_spec(sh_pod("sel", "sleep 30"), json!({"nodeSelector": {"zone": "b"}}));
    let aff = with_spec(
        sh_pod("aff", "sleep 30"),
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "fast", "operator": "DoesNotExist"}, {"key": "zone", "operator": "In", "values": ["a", "c"]}]}
        ]}}}}),
    );
    let named = with_spec(sh_pod("named", "sleep 30"), json!({"nodeName": "g2"}));
    let nowhere = with_spec(sh_pod("nowhere", "sleep 30"), json!({"nodeSelector": {"zone": "z"}}));
    for p in [&sel, &aff, &named, &nowhere] {
        create(&pods, p).await;
    }
    for (name, node) in [("sel", "g2"), ("aff", "g1"), ("named", "g2")] {
        let p = wait_for(&pods, name, "running", |p| phase(p) == "Running").await;
        assert_eq!(node_of(&p).as_deref(), Some(node), "{name}");
    }
    let p = wait_for(&pods, "nowhere", "unschedulable", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.status == "False"))
    })
    .await;
    let msg = p.status.unwrap().conditions.unwrap()[0].message.clone().unwrap();
    assert_eq!(
        msg,
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    );

    // Bound by nodeName past capacity: the kubelet rejects it.
    let mut over = gpu_pod("over", 9);
    over.spec.as_mut().unwrap().node_name = Some("g1".into());
    create(&pods, &over).await;
    let rejected = wait_for(&pods, "over", "rejected", is_done).await;
    assert_eq!(rejected.status.unwrap().reason.as_deref(), Some("OutOfnvidia.com/gpu"));
}

#[tokio::test]
async fn node_labels_and_annotations_take_a_merge_patch() {
    use kube::api::{Patch, PatchParams};
    let (cluster, client) = host_cluster(two_nodes()).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let before = nodes.get("gpu-1").await.expect("get");
    let patched = nodes
        .patch(
            "gpu-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "labels": {"ic-bench.dev/fabric": "fail"},
                "annotations": {"ic-bench.dev/fabric-reason": "tcp carried the data: node-1 > node-2"}}})),
        )
        .await
        .expect("merge patch");
    let labels = patched.metadata.labels.clone().unwrap();
    assert_eq!(labels["ic-bench.dev/fabric"], "fail");
    assert_eq!(labels["kubernetes.io/hostname"], "gpu-1", "other labels kept");
    assert_eq!(
        patched.metadata.annotations.clone().unwrap()["ic-bench.dev/fabric-reason"],
        "tcp carried the data: node-1 > node-2"
    );
    let rv = |n: &Node| n.metadata.resource_version.clone().unwrap().parse::<u64>().unwrap();
    assert!(rv(&patched) > rv(&before), "a change bumps the version");
    // What was stored is what get and a label selector see; the other node is untouched.
    let got = nodes.get("gpu-1").await.unwrap();
    assert_eq!(got.metadata.labels, patched.metadata.labels);
    let failed = nodes
        .list(&ListParams::default().labels("ic-bench.dev/fabric=fail"))
        .await
        .unwrap();
    let names: Vec<String> = failed.items.iter().filter_map(|n| n.metadata.name.clone()).collect();
    assert_eq!(names, ["gpu-1"]);
    assert!(nodes.get("gpu-2").await.unwrap().metadata.annotations.is_none());

    // A strategic merge patch means the same on these maps; null removes a key.
    let cleared = nodes
        .patch(
            "gpu-1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"ic-bench.dev/fabric": null}}})),
        )
        .await
        .expect("strategic merge patch");
    assert!(!cleared.metadata.labels.unwrap().contains_key("ic-bench.dev/fabric"));

    // The scheduler places by the current labels.
    nodes
        .patch(
            "gpu-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"pool": "decode"}}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client);
    create(
        &pods,
        &with_spec(
            sh_pod("placed", "sleep 30"),
            json!({"nodeSelector": {"pool": "decode"}}),
        ),
    )
    .await;
    let p = wait_for(&pods, "placed", "running", |p| phase(p) == "Running").await;
    assert_eq!(node_of(&p).as_deref(), Some("gpu-2"));

    // Refused: a label value Kubernetes would refuse, anything but labels/annotations (a taint),
    // server-side apply, an unknown node. Nothing changes.
    let refuse = |patch: Patch<serde_json::Value>, pp: PatchParams, name: &'static str| {
        let nodes = nodes.clone();
        async move {
            match nodes.patch(name, &pp, &patch).await {
                Err(kube::Error::Api(s)) => (s.code, s.message),
                other => panic!("expected an API error, got {other:?}"),
            }
        }
    };
    let (code, msg) = refuse(
        Patch::Merge(json!({"metadata": {"labels": {"ic-bench.dev/fabric": "failed: tcp"}}})),
        PatchParams::default(),
        "gpu-1",
    )
    .await;
    assert_eq!(code, 422, "{msg}");
    assert!(msg.contains("metadata.labels"), "{msg}");
    let (code, msg) = refuse(
        Patch::Merge(json!({"spec": {"taints": [{"key": "bad", "effect": "NoSchedule"}]}})),
        PatchParams::default(),
        "gpu-1",
    )
    .await;
    assert_eq!(code, 422, "{msg}");
    let (code, _) = refuse(
        Patch::Apply(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}})),
        PatchParams::apply("test"),
        "gpu-1",
    )
    .await;
    assert_eq!(code, 415);
    let (code, _) = refuse(Patch::Merge(json!({})), PatchParams::default(), "gpu-9").await;
    assert_eq!(code, 404);
    let now = nodes.get("gpu-1").await.unwrap();
    assert!(now.spec.unwrap().taints.is_none());
    assert!(!now.metadata.labels.unwrap().contains_key("ic-bench.dev/fabric"));
    let refused = cluster
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.status >= 400)
        .count();
    assert_eq!(refused, 4, "each refusal was answered, not dropped");
}

#[tokio::test]
async fn a_tcp_only_node_forces_ucx_tls_into_its_containers() {
    let config = ClusterConfig::new()
        .node(NodeConfig::new("plain"))
        .node(NodeConfig::new("bad").tcp_only());
    let (_cluster, client) = host_cluster(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    for (name, node) in [("on-bad", "bad"), ("on-plain", "plain")] {
        let pod = with_spec(sh_pod(name, "echo \"UCX_TLS=$UCX_TLS\""), json!({"nodeName": node}));
        let mut pod = pod;
        pod.spec.as_mut().unwrap().containers[0].env = Some(vec![
            serde_json::from_value(json!({"name": "UCX_TLS", "value": "sm,self"})).unwrap(),
        ]);
        create(&pods, &pod).await;
    }
    for (name, want) in [("on-bad", "UCX_TLS=tcp\n"), ("on-plain", "UCX_TLS=sm,self\n")] {
        wait_for(&pods, name, "finished", is_done).await;
        let logs = pods.logs(name, &LogParams::default()).await.unwrap();
        assert_eq!(
            logs, want,
            "{name}: the node's runtime env wins over the pod's only on the bad node"
        );
    }
}

#[tokio::test]
async fn exec_returns_output_and_exit_code() {
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    create(&pods, &sh_pod("box", "sleep 30")).await;
    wait_for(&pods, "box", "running", |p| phase(p) == "Running").await;
    let mut attached = pods
        .exec(
            "box",
            ["sh", "-c", "echo out; echo err >&2; exit 5"],
            &AttachParams::default(),
        )
        .await
        .expect("exec");
    let (mut stdout, mut stderr) = (attached.stdout().unwrap(), attached.stderr().unwrap());
    let status = attached.take_status().unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    let (a, b) = tokio::join!(stdout.read_to_string(&mut out), stderr.read_to_string(&mut err));
    a.unwrap();
    b.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), status)
        .await
        .expect("status")
        .expect("some status");
    assert_eq!(out, "out\n");
    assert_eq!(err, "err\n");
    assert_eq!(status.status.as_deref(), Some("Failure"));
    let code = status.details.unwrap().causes.unwrap()[0].message.clone();
    assert_eq!(code.as_deref(), Some("5"));

    let mut ok = pods
        .exec("box", ["true"], &AttachParams::default())
        .await
        .expect("exec");
    let status = ok.take_status().unwrap().await.expect("status");
    assert_eq!(status.status.as_deref(), Some("Success"));

    create(&pods, &sh_pod("done", "exit 0")).await;
    wait_for(&pods, "done", "finished", is_done).await;
    let err = pods
        .exec("done", ["true"], &AttachParams::default())
        .await
        .err()
        .expect("completed pod refuses exec");
    assert!(format!("{err:?}").contains("completed pod"), "{err:?}");
}

#[tokio::test]
async fn api_errors_are_json_statuses() {
    let (cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let err = pods.get("missing").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404 && s.reason == "NotFound"),
        "{err:?}"
    );
    create(&pods, &sh_pod("dup", "sleep 30")).await;
    let err = pods
        .create(&PostParams::default(), &sh_pod("dup", "true"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );
    let other: Api<Pod> = Api::namespaced(client.clone(), "nope");
    let err = other
        .create(&PostParams::default(), &sh_pod("x", "true"))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 404), "{err:?}");
    let mut invalid = sh_pod("Bad_Name", "true");
    invalid.metadata.name = Some("Bad_Name".into());
    let err = pods.create(&PostParams::default(), &invalid).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422 && s.reason == "Invalid"),
        "{err:?}"
    );
    // An unknown route answers a JSON 404 too.
    let raw = reqwest_free_get(&cluster, "/apis/apps/v1/namespaces/default/deployments/x").await;
    assert!(raw.starts_with("HTTP/1.1 404"), "{raw}");
    assert!(raw.contains("\"kind\":\"Status\""), "{raw}");
}

/// A plain HTTP/1.1 GET (to see the raw answer kube-rs would parse).
async fn reqwest_free_get(cluster: &TestCluster, path: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut s = tokio::net::TcpStream::connect(cluster.addr()).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn injected_faults_return_their_codes_then_recover() {
    let (cluster, _) = host_cluster(two_nodes()).await;
    let mut config = cluster.client_config().unwrap();
    config.default_retry = false;
    let client = Client::try_from(config).unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client);
    cluster.fail_requests(RequestMatch::new("POST", "/api/v1/namespaces/*/pods"), 500, 2);
    for _ in 0..2 {
        let err = pods
            .create(&PostParams::default(), &sh_pod("f", "true"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 500 && s.reason == "InternalError"),
            "{err:?}"
        );
    }
    create(&pods, &sh_pod("f", "sleep 30")).await;
    cluster.fail_requests_retry_after(RequestMatch::new("GET", "/api/v1/namespaces/default/pods/f"), 429, 1, 1);
    let err = pods.get("f").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 429 && s.reason == "TooManyRequests"),
        "{err:?}"
    );
    cluster.fail_requests(RequestMatch::path("*/pods/f"), 409, 1);
    let err = pods.delete("f", &DeleteParams::default()).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409), "{err:?}");
    cluster.add_latency(
        RequestMatch::new("GET", "*/pods/f"),
        Duration::from_millis(300),
        Some(1),
    );
    let t = std::time::Instant::now();
    pods.get("f").await.expect("recovered");
    assert!(t.elapsed() >= Duration::from_millis(300));

    let log = cluster.requests();
    let injected: Vec<u16> = log.iter().filter(|r| r.injected).map(|r| r.status).collect();
    assert_eq!(injected, [500, 500, 429, 409]);
    let creates: Vec<_> = log.iter().filter(|r| r.method == "POST").collect();
    assert_eq!(creates.len(), 3);
    assert_eq!(creates[2].status, 201);
    assert_eq!(creates[2].pod().unwrap().metadata.name.as_deref(), Some("f"));
    assert!(
        log.iter().any(|r| r.method == "DELETE" && r.injected),
        "the failed delete is recorded"
    );

    // With kube's default retry, a 429 with Retry-After is retried transparently.
    let retrying: Api<Pod> = Api::default_namespaced(cluster.client().unwrap());
    cluster.fail_requests_retry_after(RequestMatch::new("GET", "*/pods/f"), 429, 1, 0);
    retrying.get("f").await.expect("retried past the 429");
}

#[tokio::test]
async fn image_pull_failure_and_crashes() {
    let (cluster, client) = host_cluster(two_nodes().backoff(Duration::from_millis(100))).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    cluster.fail_image_pull("registry.example/bench");
    let mut p = sh_pod("pull", "sleep 30");
    p.spec.as_mut().unwrap().containers[0].image = Some("registry.example/bench:v1".into());
    create(&pods, &p).await;
    wait_for(&pods, "pull", "ErrImagePull", |p| {
        waiting_reason(p).as_deref() == Some("ErrImagePull")
    })
    .await;
    let backoff = wait_for(&pods, "pull", "ImagePullBackOff", |p| {
        waiting_reason(p).as_deref() == Some("ImagePullBackOff")
    })
    .await;
    assert_eq!(phase(&backoff), "Pending");
    let err = pods.logs("pull", &LogParams::default()).await.unwrap_err();
    assert!(format!("{err:?}").contains("waiting to start"), "{err:?}");
    cluster.allow_image_pull("registry.example/bench");
    wait_for(&pods, "pull", "running after the image is back", |p| {
        phase(p) == "Running"
    })
    .await;

    // restartPolicy Always: a crashing container loops.
    let mut looping = sh_pod("loop", "exit 2");
    looping.spec.as_mut().unwrap().restart_policy = Some("Always".into());
    create(&pods, &looping).await;
    let crashed = wait_for(&pods, "loop", "crash looping", |p| {
        waiting_reason(p).as_deref() == Some("CrashLoopBackOff")
            && p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0].restart_count >= 2
    })
    .await;
    let cs = &crashed.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code,
        2
    );
    let prev = pods
        .logs(
            "loop",
            &LogParams {
                previous: true,
                ..Default::default()
            },
        )
        .await;
    assert!(prev.is_ok(), "{prev:?}");

    // A crash knob kills a matching container after a delay; with Never the pod fails.
    cluster
        .crash_containers("role=victim", Duration::from_millis(300), 139, Some(1))
        .unwrap();
    let mut victim = sh_pod("victim", "echo started; sleep 30");
    victim.metadata.labels = Some([("role".to_string(), "victim".to_string())].into());
    let t = std::time::Instant::now();
    create(&pods, &victim).await;
    let dead = wait_for(&pods, "victim", "crashed", is_done).await;
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(phase(&dead), "Failed");
    assert_eq!(exit_code(&dead), Some(139));
    assert_eq!(pods.logs("victim", &LogParams::default()).await.unwrap(), "started\n");
}

#[tokio::test]
async fn active_deadline_fails_the_pod() {
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    create(
        &pods,
        &with_spec(sh_pod("slow", "sleep 30"), json!({"activeDeadlineSeconds": 1})),
    )
    .await;
    let t = std::time::Instant::now();
    let failed = wait_for(&pods, "slow", "failed", is_done).await;
    assert!(t.elapsed() < Duration::from_secs(10));
    let st = failed.status.unwrap();
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("DeadlineExceeded"));
}

#[tokio::test]
async fn graceful_delete_marks_then_removes() {
    let (_cluster, client) = host_cluster(two_nodes().max_grace(Duration::from_millis(500))).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    // Traps SIGTERM and exits by itself: the graceful path, not the SIGKILL one.
    create(
        &pods,
        &sh_pod(
            "polite",
            "trap 'echo bye; exit 0' TERM; while true; do sleep 0.05; done",
        ),
    )
    .await;
    wait_for(&pods, "polite", "running", |p| phase(p) == "Running").await;
    let answer = pods.delete("polite", &DeleteParams::default()).await.expect("delete");
    let marked = answer.left().expect("the pod, marked for deletion");
    assert!(marked.metadata.deletion_timestamp.is_some());
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        while pods.get_opt("polite").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "pod removed after its processes stopped");
}

#[tokio::test]
async fn watch_from_a_forgotten_version_reports_expired() {
    let (_cluster, client) = host_cluster(two_nodes().watch_history(3)).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    for i in 0..3 {
        create(&pods, &sh_pod(&format!("churn-{i}"), "exit 0")).await;
    }
    // (No kube-rs waits here: with so short a history they would see 410s themselves.)
    let mut stream = pods
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .expect("watch")
        .boxed();
    let event = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match event {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 Expired event, got {other:?}"),
    }
}

#[tokio::test]
async fn kubeconfig_file_works_for_kube_rs() {
    let (cluster, _) = host_cluster(
        ClusterConfig::two_gpu_nodes()
            .namespace("bench")
            .default_namespace("bench"),
    )
    .await;
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig_path()).expect("parse kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    assert_eq!(config.default_namespace, "bench");
    config.proxy_url = None;
    let client = Client::try_from(config).unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client);
    create(&pods, &sh_pod("in-bench", "echo hello; exit 0")).await;
    wait_for(&pods, "in-bench", "finished", is_done).await;
    assert_eq!(
        cluster.pod("bench", "in-bench").map(|p| phase(&p)).as_deref(),
        Some("Succeeded")
    );
    assert_eq!(cluster.pod_log("bench", "in-bench", "main").as_deref(), Some("hello\n"));
    let status = pods.get_status("in-bench").await.expect("pods/status");
    assert_eq!(phase(&status), "Succeeded");
    let cut = pods
        .logs(
            "in-bench",
            &LogParams {
                limit_bytes: Some(3),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(cut, "hel");
    let creates: Vec<_> = cluster.requests().into_iter().filter(|r| r.method == "POST").collect();
    assert_eq!(creates.len(), 1);
    assert_eq!(creates[0].path, "/api/v1/namespaces/bench/pods");
}

#[tokio::test]
async fn readiness_probe_gates_ready() {
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod = with_spec(
        sh_pod("probed", "sleep 0.5; touch ready; sleep 30"),
        json!({"containers": [{"name": "main", "image": "x", "command": ["sh", "-c", "sleep 0.5; touch ready; sleep 30"],
            "readinessProbe": {"exec": {"command": ["test", "-f", "ready"]}, "periodSeconds": 1}}]}),
    );
    create(&pods, &pod).await;
    let running = wait_for(&pods, "probed", "running", |p| phase(p) == "Running").await;
    assert!(!is_ready(&running), "Running but not Ready until the probe passes");
    let ready = wait_for(&pods, "probed", "ready", is_ready).await;
    assert!(ready.status.unwrap().container_statuses.unwrap()[0].ready);
}

#[tokio::test]
async fn watcher_with_streaming_lists_and_with_list_watch() {
    use kube::runtime::{WatchStreamExt, watcher};
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    create(&pods, &sh_pod("early", "sleep 30")).await;
    for config in [watcher::Config::default(), watcher::Config::default().streaming_lists()] {
        let mut seen = watcher(pods.clone(), config.labels("app=test"))
            .applied_objects()
            .boxed();
        let first = tokio::time::timeout(Duration::from_secs(10), seen.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(first.metadata.name.as_deref(), Some("early"));
    }
}

#[tokio::test]
async fn deployments_make_their_pods_and_report_readiness() {
    use k8s_openapi::api::apps::v1::Deployment;
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client);
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "decode"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "decode"}},
                 "template": {"metadata": {"labels": {"app": "decode"}},
                              "spec": {"containers": [{"name": "w", "image": "x", "command": ["sleep", "30"]}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .expect("create deployment");
    let ready = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let d = deployments.get("decode").await.unwrap();
            if d.status.as_ref().and_then(|s| s.ready_replicas) == Some(2) {
                return d;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("two ready replicas");
    assert_eq!(ready.status.unwrap().replicas, Some(2));
    let owned = pods.list(&ListParams::default().labels("app=decode")).await.unwrap();
    assert_eq!(owned.items.len(), 2);
    assert!(
        owned
            .items
            .iter()
            .all(|p| p.metadata.name.as_deref().unwrap().starts_with("decode-"))
    );
    let bad = deployments.create(&PostParams::default(), &d).await.unwrap_err();
    assert!(matches!(bad, kube::Error::Api(ref s) if s.code == 409), "{bad:?}");
    deployments
        .delete("decode", &DeleteParams::default())
        .await
        .expect("delete");
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        while !pods
            .list(&ListParams::default().labels("app=decode"))
            .await
            .unwrap()
            .items
            .is_empty()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "the deployment's pods are deleted with it");
}

/// kube-rs's discovery (what kubectl reads before `get nodes -L …`) finds exactly what the
/// emulated server serves, and a dynamic list of nodes through it works.
#[tokio::test]
async fn discovery_lists_the_served_resources() {
    let (_cluster, client) = host_cluster(two_nodes()).await;
    let discovery = kube::Discovery::new(client.clone()).run().await.expect("discovery");
    let (nodes, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(r, _)| r.kind == "Node")
        .expect("nodes are discoverable");
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    assert!(
        discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .any(|(r, _)| r.kind == "Pod")
    );
    assert!(discovery.has_group("apps"));
    let api: Api<kube::core::DynamicObject> = Api::all_with(client, &nodes);
    let listed = api.list(&ListParams::default()).await.expect("list nodes dynamically");
    assert_eq!(listed.items.len(), 2);
}

/// The real kubectl works against the emulated server, as docs/sweep.md's demo promises
/// (`kubectl get nodes -L …` needs discovery first).
#[tokio::test]
async fn kubectl_gets_nodes_with_label_columns() {
    let (cluster, _client) = host_cluster(two_nodes()).await;
    let Some(kubectl) = which("kubectl") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "kubectl is required under CI (scripts/setup)"
        );
        eprintln!("kubectl not installed: skipped");
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--cache-dir", cache.path().to_str().unwrap()])
        .args([
            "get",
            "nodes",
            "-L",
            "nvidia.com/gpu.present",
            "--request-timeout",
            "20s",
        ])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.lines().next().unwrap_or("").contains("GPU.PRESENT"), "{stdout}");
    assert!(stdout.contains("gpu-1") && stdout.contains("gpu-2"), "{stdout}");
}

/// The first `name` on PATH.
fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}
