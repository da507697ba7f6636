//! `pair` between DRA-only GPU nodes (no `nvidia.com/gpu` capacity; GPUs and NICs published as
//! `resource.k8s.io/v1` ResourceSlices): each bench pod claims a GPU and the NIC on its PCIe root
//! through a ResourceClaimTemplate named like the pod, and the run leaves no template, claim or pod.

use crate::pair_kube_support as support;

use icb_kube::k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, PCIE_ROOT, TestCluster};
use std::time::Duration;
use support::*;

fn dra_cluster() -> TestCluster {
    let config = ClusterConfig::new()
        .node(NodeConfig::dra_gpu("dra-1", 2))
        .node(NodeConfig::dra_gpu("dra-2", 2))
        .program(BIN)
        .isolation(Isolation::Host);
    TestCluster::start_blocking(config).expect("the emulated cluster starts")
}

fn posted_templates(run: &PairRun) -> Vec<ResourceClaimTemplate> {
    run.requests
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/resourceclaimtemplates") && r.status < 300)
        .map(|r| serde_json::from_slice(&r.body).expect("a template body"))
        .collect()
}

#[test]
fn pair_between_dra_only_nodes_claims_rail_devices_and_cleans_them_up() {
    let cluster = dra_cluster();
    let mut args = vec!["--prefill", "node/dra-1", "--decode", "node/dra-2", "-o", "json"];
    args.extend_from_slice(FAST);
    let run = run_pair(&cluster, &args, Duration::from_secs(120));
    assert!(run.code == 0 || run.code == 1, "{run:#?}");
    run.report();

    let pods = run.created_pods();
    assert_eq!(pods.len(), 2, "{run:#?}");
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap();
        let spec = pod.spec.as_ref().unwrap();
        let claims = spec.resource_claims.as_ref().expect("the pod claims its devices");
        assert_eq!(claims[0].resource_claim_template_name.as_deref(), Some(name.as_str()));
        let res = spec.containers[0].resources.as_ref().unwrap();
        assert_eq!(res.claims.as_ref().unwrap()[0].name, claims[0].name);
        let limits = res.limits.clone().unwrap_or_default();
        assert!(
            !limits.contains_key("nvidia.com/gpu") && !limits.contains_key("rdma/ib"),
            "no extended resource on a DRA-only node: {limits:?}"
        );
    }
    let templates = posted_templates(&run);
    assert_eq!(templates.len(), 2);
    let devices = templates[0]
        .spec
        .as_ref()
        .unwrap()
        .spec
        .as_ref()
        .unwrap()
        .devices
        .as_ref()
        .unwrap();
    let constraint = &devices.constraints.as_ref().unwrap()[0];
    assert_eq!(constraint.match_attribute.as_deref(), Some(PCIE_ROOT));

    // Both claims were allocated, each GPU with the NIC on its own PCIe root, on its node.
    let allocations = cluster.dra_allocations();
    let mut nodes: Vec<&str> = allocations.iter().map(|a| a.node.as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, ["dra-1", "dra-2"], "{allocations:#?}");
    for a in &allocations {
        let device = |request: &str| a.devices.iter().find(|d| d.0 == request).map(|d| d.2.clone()).unwrap();
        assert_eq!(device("gpu-0")[4..], device("nic-0")[4..], "{a:?}");
    }
    // Nothing left: no pod, no claim (owned by its pod), no template (deleted by name).
    assert!(cluster.pods().is_empty(), "{:#?}", cluster.pods());
    assert!(cluster.resource_claims().is_empty(), "{:#?}", cluster.resource_claims());
    assert!(
        cluster.resource_claim_templates().is_empty(),
        "{:#?}",
        cluster.resource_claim_templates()
    );
    let deletes = run
        .requests
        .iter()
        .filter(|r| r.method == "DELETE" && r.path.contains("/resourceclaimtemplates/"))
        .count();
    assert_eq!(deletes, 2, "{run:#?}");
}

#[test]
fn a_dry_run_on_a_dra_node_prints_each_pods_template_before_the_pods() {
    let cluster = dra_cluster();
    let run = run_pair(
        &cluster,
        &[
            "--prefill",
            "node/dra-1",
            "--decode",
            "node/dra-2",
            "--dry-run",
            "-o",
            "yaml",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let docs = icb_kube::yaml::documents(&run.stdout).unwrap();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        ["Secret", "ResourceClaimTemplate", "ResourceClaimTemplate", "Pod", "Pod"]
    );
    let names = |kind: &str| -> Vec<String> {
        docs.iter()
            .filter(|d| d["kind"] == kind)
            .map(|d| d["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names("ResourceClaimTemplate"),
        names("Pod"),
        "one template per pod, named like it"
    );
    assert!(
        cluster.resource_claim_templates().is_empty(),
        "a dry run creates nothing"
    );
}

#[test]
fn pair_stopped_with_ctrl_c_leaves_no_template_or_claim() {
    let cluster = dra_cluster();
    let mut args = vec!["--prefill", "node/dra-1", "--decode", "node/dra-2", "-o", "json"];
    args.extend_from_slice(FAST);
    let child = pair_command(&cluster, &args).spawn().expect("ic-bench starts");
    // Once the server's template exists, the run is past the point that creates things.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while cluster.resource_claims().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no claim was made");
        std::thread::sleep(Duration::from_millis(20));
    }
    ctrl_c(child);
    assert!(cluster.resource_claims().is_empty(), "{:#?}", cluster.resource_claims());
    assert!(
        cluster.resource_claim_templates().is_empty(),
        "{:#?}",
        cluster.resource_claim_templates()
    );
}

/// `sweep` over DRA-only nodes: every pair's pods claim their GPU (and its rail NIC) instead of
/// asking for `nvidia.com/gpu`, so no node is unschedulable, and nothing is left.
#[test]
fn a_sweep_over_dra_only_nodes_claims_its_devices_and_leaves_nothing() {
    if !icb_isolate::privileged_tests_enabled("a_sweep_over_dra_only_nodes_claims_its_devices_and_leaves_nothing") {
        return;
    }
    let cluster = cluster_with(
        ClusterConfig::new()
            .node(NodeConfig::dra_gpu("dra-1", 1))
            .node(NodeConfig::dra_gpu("dra-2", 1))
            .node(NodeConfig::dra_gpu("dra-3", 1)),
    );
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, out, err) = run_sweep(
        &cluster,
        &["--gpus", "1", "--results", results.to_str().unwrap()],
        Duration::from_secs(600),
    );
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    assert_eq!(r["complete"], true, "{r:#}");
    for v in r["node_verdicts"].as_array().unwrap() {
        assert_ne!(v["status"], "unschedulable", "{v:#}");
    }
    let allocations = cluster.dra_allocations();
    assert!(
        allocations.len() >= 6,
        "two claims per pair, three pairs: {allocations:#?}"
    );
    assert!(
        allocations.iter().all(|a| a.devices.len() == 2),
        "a GPU and its NIC: {allocations:#?}"
    );
    assert!(leftover_bench_pods(&cluster).is_empty());
    assert!(cluster.resource_claims().is_empty(), "{:#?}", cluster.resource_claims());
    assert!(cluster.resource_claim_templates().is_empty());
}

/// A `pair` killed outright (SIGKILL: no cleanup) leaves its pods and templates; `ic-bench gc`
/// deletes the pods and, by name, the templates those pods name; their claims go with the pods.
#[test]
fn gc_after_a_killed_pair_deletes_the_templates_its_pods_name() {
    let cluster = dra_cluster();
    let mut args = vec!["--prefill", "node/dra-1", "--decode", "node/dra-2", "-o", "json"];
    args.extend_from_slice(FAST);
    let mut child = pair_command(&cluster, &args).spawn().expect("ic-bench starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while cluster.resource_claims().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no claim was made");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !cluster.resource_claim_templates().is_empty(),
        "a killed run cleans nothing up"
    );
    let gc = std::process::Command::new(BIN)
        .args(["gc", "--kubeconfig"])
        .arg(cluster.kubeconfig_path())
        .output()
        .unwrap();
    assert!(gc.status.success(), "{gc:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !cluster.pods().is_empty() || !cluster.resource_claims().is_empty() {
        assert!(std::time::Instant::now() < deadline, "{:#?}", cluster.resource_claims());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        cluster.resource_claim_templates().is_empty(),
        "{:#?}",
        cluster.resource_claim_templates()
    );
}

/// The worker a bench pod is modelled on: its engine container uses a claim made from the
/// ResourceClaimTemplate `worker-gpu` (one GPU), and it runs on `node`.
fn dra_worker(name: &str, node: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "worker"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "worker-gpu"}],
            "containers": [{"name": "engine", "image": "serving:1", "command": ["sleep", "600"],
                "resources": {"claims": [{"name": "gpu"}]}}]
        }
    })
}

fn create_worker_template(cluster: &TestCluster) {
    let template: ResourceClaimTemplate = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "worker-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": icb_testcluster::DRA_GPU_DRIVER, "allocationMode": "ExactCount", "count": 1}}]}}}
    }))
    .unwrap();
    block_on(async {
        let client = cluster.client().unwrap();
        let api: icb_kube::kube::Api<ResourceClaimTemplate> =
            icb_kube::kube::Api::namespaced(client, cluster.namespace());
        api.create(&Default::default(), &template).await.unwrap();
    });
}

/// Issue 41: a bench pod modelled on a DRA worker carries the worker's claim (a fresh claim from
/// the same template), is scheduled with it allocated, and the pair runs; the run and a later
/// `gc` leave the worker's template and claims alone and nothing of the bench pods.
#[test]
fn a_bench_pod_modelled_on_a_dra_worker_claims_from_the_workers_template() {
    let cluster = dra_cluster();
    create_worker_template(&cluster);
    create_reference_pod(&cluster, dra_worker("worker-a", "dra-1"));
    create_reference_pod(&cluster, dra_worker("worker-b", "dra-2"));
    let worker_claims = cluster.resource_claims().len();
    assert_eq!(worker_claims, 2, "{:#?}", cluster.resource_claims());

    let mut args = vec!["--prefill", "pod/worker-a", "--decode", "pod/worker-b", "-o", "json"];
    args.extend_from_slice(FAST);
    let run = run_pair(&cluster, &args, Duration::from_secs(120));
    assert!(run.code == 0 || run.code == 1, "{run:#?}");
    let report = run.report();
    assert!(report["verdict"]["status"].is_string(), "the pair ran: {report:#}");
    assert_eq!(report["placement"]["decode"]["host"], "dra-2", "{report:#}");
    let notes = format!("{report}{}", run.stderr);
    assert!(
        notes.contains("gpu (a fresh claim from template worker-gpu)"),
        "a note says what was copied: {notes}"
    );

    let pods = run.created_pods();
    assert_eq!(pods.len(), 2, "{run:#?}");
    for pod in &pods {
        let spec = pod.spec.as_ref().unwrap();
        let claims = spec.resource_claims.as_ref().expect("the worker's claim is copied");
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].name, "gpu");
        assert_eq!(claims[0].resource_claim_template_name.as_deref(), Some("worker-gpu"));
        let used = spec.containers[0].resources.as_ref().unwrap().claims.as_ref().unwrap();
        assert_eq!(used[0].name, "gpu");
    }
    assert!(posted_templates(&run).is_empty(), "no template of its own");
    // Four claims allocated: each worker's and each bench pod's, a GPU each on its own node.
    let allocations = cluster.dra_allocations();
    let bench: Vec<&icb_testcluster::DraAllocation> =
        allocations.iter().filter(|a| a.pod.starts_with("ic-bench-")).collect();
    let mut nodes: Vec<&str> = bench.iter().map(|a| a.node.as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, ["dra-1", "dra-2"], "{allocations:#?}");
    assert!(bench.iter().all(|a| a.devices.len() == 1), "{allocations:#?}");

    // The run left the worker's template and claims, and nothing of its own; gc takes nothing more.
    let gc = std::process::Command::new(BIN)
        .args(["gc", "--kubeconfig"])
        .arg(cluster.kubeconfig_path())
        .output()
        .unwrap();
    assert!(gc.status.success(), "{gc:?}");
    assert!(leftover_bench_pods(&cluster).is_empty());
    let claims = cluster.resource_claims();
    assert_eq!(claims.len(), worker_claims, "{claims:#?}");
    assert!(
        claims
            .iter()
            .all(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with("worker-"))),
        "{claims:#?}"
    );
    let templates = cluster.resource_claim_templates();
    assert_eq!(templates.len(), 1, "{templates:#?}");
    assert_eq!(templates[0].metadata.name.as_deref(), Some("worker-gpu"));
}
