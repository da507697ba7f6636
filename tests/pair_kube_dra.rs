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
