//! `resource.k8s.io/v1` on the emulated cluster (no root needed): DRA-only nodes publish
//! ResourceSlices, a pod's claims are made from its template and allocated on scheduling (a GPU
//! and the NIC on its PCIe root), a pod whose claims cannot be satisfied stays Pending with the
//! scheduler's message, and deleting the pod frees its devices and collects its claim.

use crate::common;

use common::*;
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, PCIE_ROOT, TestCluster};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaimTemplate, ResourceSlice};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;

async fn dra_cluster() -> (TestCluster, kube::Client) {
    let config = ClusterConfig::new()
        .node(NodeConfig::dra_gpu("dra-1", 2))
        .isolation(Isolation::Host);
    let cluster = TestCluster::start(config).await.expect("start cluster");
    let client = cluster.client().expect("client");
    (cluster, client)
}

fn rail_template(name: &str) -> ResourceClaimTemplate {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                {"name": "nic", "exactly": {"deviceClassName": "nic.dra.example.com"}}
            ],
            "constraints": [{"matchAttribute": PCIE_ROOT, "requests": ["gpu", "nic"]}]
        }}}
    }))
    .expect("template json")
}

fn claiming_pod(name: &str, template: &str) -> Pod {
    let mut pod = with_spec(
        sh_pod(name, "sleep 30"),
        json!({"resourceClaims": [{"name": "devices", "resourceClaimTemplateName": template}]}),
    );
    pod.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(json!({"claims": [{"name": "devices"}]})).unwrap());
    pod
}

fn unschedulable_message(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"))?
        .message
        .clone()
}

#[tokio::test]
async fn claims_get_a_gpu_and_its_rail_nic_and_are_freed_with_their_pod() {
    let (cluster, client) = dra_cluster().await;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let on_node = slices
        .list(&ListParams::default().fields("spec.nodeName=dra-1"))
        .await
        .expect("list slices");
    let drivers: Vec<&str> = on_node.items.iter().map(|s| s.spec.driver.as_str()).collect();
    assert_eq!(drivers, ["gpu.nvidia.com", "nic.dra.example.com"]);
    let templates: Api<ResourceClaimTemplate> = Api::default_namespaced(client.clone());
    templates
        .create(&PostParams::default(), &rail_template("rail"))
        .await
        .expect("create template");
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for name in ["a", "b", "c"] {
        create(&pods, &claiming_pod(name, "rail")).await;
    }
    wait_for(&pods, "a", "running", |p| phase(p) == "Running").await;
    wait_for(&pods, "b", "running", |p| phase(p) == "Running").await;
    // Two GPUs: the third pod waits, as kube-scheduler's DynamicResources plugin says it.
    let c = wait_for(&pods, "c", "unschedulable", |p| unschedulable_message(p).is_some()).await;
    assert_eq!(
        unschedulable_message(&c).as_deref(),
        Some("0/1 nodes are available: 1 cannot allocate all claims.")
    );
    let allocations = cluster.dra_allocations();
    assert_eq!(allocations.len(), 2, "{allocations:#?}");
    for a in &allocations {
        let device = |request: &str| a.devices.iter().find(|d| d.0 == request).map(|d| d.2.clone()).unwrap();
        // gpu-K and nic-K share PCIe root K on NodeConfig::dra_gpu.
        assert_eq!(device("gpu")[4..], device("nic")[4..], "{a:?}");
    }
    let claims = cluster.resource_claims();
    assert_eq!(claims.len(), 3, "c's claim exists, unallocated");
    let a_claim = claims
        .iter()
        .find(|c| c.metadata.owner_references.as_ref().unwrap()[0].name == "a")
        .unwrap();
    let status = a_claim.status.as_ref().unwrap();
    assert_eq!(status.reserved_for.as_ref().unwrap()[0].name, "a");
    assert!(status.allocation.is_some());
    let a = pods.get("a").await.unwrap();
    let recorded = a.status.unwrap().resource_claim_statuses.unwrap();
    assert_eq!(recorded[0].resource_claim_name, a_claim.metadata.name);

    pods.delete("a", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete a");
    wait_for(&pods, "c", "running on a's devices", |p| phase(p) == "Running").await;
    let names: Vec<String> = cluster
        .resource_claims()
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with("a-")),
        "a's claim is collected: {names:?}"
    );
    assert_eq!(cluster.dra_allocations().last().unwrap().pod, "c");
}

#[tokio::test]
async fn extended_resources_do_not_fit_a_dra_only_node_and_unknown_cel_is_refused() {
    let (_cluster, client) = dra_cluster().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut gpu = sh_pod("old-style", "sleep 30");
    gpu.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(json!({"limits": {"nvidia.com/gpu": "1"}})).unwrap());
    create(&pods, &gpu).await;
    let p = wait_for(&pods, "old-style", "unschedulable", |p| {
        unschedulable_message(p).is_some()
    })
    .await;
    assert_eq!(
        unschedulable_message(&p).as_deref(),
        Some("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    );
    // A pod whose template does not exist yet waits, and runs once it is created.
    create(&pods, &claiming_pod("early", "later")).await;
    let p = wait_for(&pods, "early", "waiting", |p| unschedulable_message(p).is_some()).await;
    assert!(unschedulable_message(&p).unwrap().contains("\"later\" not found"));
    let templates: Api<ResourceClaimTemplate> = Api::default_namespaced(client.clone());
    templates
        .create(&PostParams::default(), &rail_template("later"))
        .await
        .expect("create template");
    wait_for(&pods, "early", "running", |p| phase(p) == "Running").await;
    let mut cel = rail_template("cel");
    cel.spec.as_mut().unwrap().spec.as_mut().unwrap().devices.as_mut().unwrap().requests.as_mut().unwrap()[0]
        .exactly
        .as_mut()
        .unwrap()
        .selectors = Some(vec![
        serde_json::from_value(json!({"cel": {"expression": "device.capacity[\"gpu.nvidia.com\"].memory.isGreaterThan(quantity(\"40Gi\"))"}}))
            .unwrap(),
    ]);
    let err = templates.create(&PostParams::default(), &cel).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
}
