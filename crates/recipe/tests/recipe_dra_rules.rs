//! Issue 41: `probe env` judges devices claimed through DRA (`resourceClaims`,
//! ResourceClaimTemplates, ComputeDomains) like the extended-resource requests. Each rule has a
//! fixture that triggers it and one that does not, and its findings read whole at 100 columns.

use icb_core::checks::{Check, ProbeReport};
use icb_core::model::Status;
use icb_recipe::{Input, probe_env};
use icb_report::{Format, View, render_probe_in};
use std::collections::HashSet;
use std::path::PathBuf;

fn probe(rel: &str) -> ProbeReport {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/recipes")
        .join(rel);
    probe_env(&[Input::Path(path)]).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn probe_text(text: &str) -> ProbeReport {
    probe_env(&[Input::Text {
        name: "dra.yaml".into(),
        content: text.into(),
    }])
    .unwrap()
}

fn found<'a>(r: &'a ProbeReport, id: &str) -> Vec<&'a Check> {
    r.checks.iter().filter(|c| c.id == id).collect()
}

fn statuses(r: &ProbeReport, id: &str) -> Vec<Status> {
    found(r, id).iter().map(|c| c.status).collect()
}

/// Every word of each finding's detail and hint is a whole word of the 100-column rendering.
fn reads_whole_at_100_columns(r: &ProbeReport, id: &str) {
    let out = render_probe_in(
        r,
        Format::Table,
        View {
            width: 100,
            wide: false,
        },
    )
    .unwrap();
    for line in out.lines() {
        assert!(
            line.chars().count() <= 100 || line.split_whitespace().count() == 1,
            "{line:?} is too wide:\n{out}"
        );
    }
    let words: HashSet<&str> = out.split_whitespace().collect();
    let findings: Vec<&Check> = found(r, id).into_iter().filter(|c| c.status != Status::Ok).collect();
    assert!(!findings.is_empty(), "no {id} finding to render");
    for c in findings {
        assert!(
            c.detail.chars().count() <= 200,
            "{id} is clipped in a table: {}",
            c.detail
        );
        for word in c
            .detail
            .split_whitespace()
            .chain(c.hint.iter().flat_map(|h| h.split_whitespace()))
        {
            assert!(words.contains(word), "{word:?} of {id} is broken or missing:\n{out}");
        }
    }
}

#[test]
fn a_gpu_claim_without_a_nic_fails_like_a_gpu_without_rdma() {
    let r = probe("fail/dra-gpu-no-nic.yaml");
    assert_eq!(statuses(&r, "pod.rdma_resource"), vec![Status::Fail; 2]);
    let c = found(&r, "pod.rdma_resource")[0];
    assert!(c.detail.contains("GPUs claimed through DRA (gpu)"), "{}", c.detail);
    assert!(c.hint.as_deref().unwrap().contains("ResourceClaimTemplate"), "{c:?}");
    assert_eq!(r.status, Status::Fail);
    reads_whole_at_100_columns(&r, "pod.rdma_resource");
    // The same claim with a NIC in it gives the pod an RDMA NIC.
    let ok = probe("pass/dra-gpu-nic-tied.yaml");
    assert_eq!(statuses(&ok, "pod.rdma_resource"), vec![Status::Ok; 2]);
    assert!(
        found(&ok, "pod.rdma_resource")[0]
            .detail
            .contains("resourceClaim devices")
    );
}

#[test]
fn a_gpu_and_nic_not_tied_by_pcie_root_warns_naming_the_template() {
    let r = probe("warn/dra-gpu-nic-untied.yaml");
    assert_eq!(statuses(&r, "pod.dra_rail"), vec![Status::Warn; 2]);
    let c = found(&r, "pod.dra_rail")[0];
    assert!(c.detail.contains("gpu-and-nic (requests gpu and nic)"), "{}", c.detail);
    assert!(c.detail.contains("resource.kubernetes.io/pcieRoot"), "{}", c.detail);
    assert!(c.hint.as_deref().unwrap().contains("matchAttribute"), "{c:?}");
    reads_whole_at_100_columns(&r, "pod.dra_rail");
    let ok = probe("pass/dra-gpu-nic-tied.yaml");
    assert_eq!(statuses(&ok, "pod.dra_rail"), vec![Status::Ok; 2]);
    assert!(found(&ok, "pod.dra_rail")[0].detail.contains("gpu-and-rail-nic"));
    assert_ne!(ok.status, Status::Fail, "{:?}", ok.checks);
}

#[test]
fn a_gpu_claim_beside_a_nic_claim_cannot_be_tied() {
    let r = probe("warn/dra-gpu-nic-separate.yaml");
    assert_eq!(statuses(&r, "pod.dra_rail"), vec![Status::Warn; 2]);
    let c = found(&r, "pod.dra_rail")[0];
    assert!(
        c.detail.contains("GPU claim gpu") && c.detail.contains("NIC claim nic"),
        "{}",
        c.detail
    );
    // Still an RDMA NIC for the KV path: pod.rdma_resource is not what fails here.
    assert_eq!(statuses(&r, "pod.rdma_resource"), vec![Status::Ok; 2]);
    reads_whole_at_100_columns(&r, "pod.dra_rail");
}

#[test]
fn a_template_outside_the_inputs_is_not_known_never_ok() {
    let full = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/recipes/pass/dra-gpu-nic-tied.yaml"),
    )
    .unwrap();
    // The pods alone: the template they name is applied apart.
    let pods = &full[full
        .find("kind: Pod")
        .map(|i| full[..i].rfind("apiVersion").unwrap())
        .unwrap()..];
    let r = probe_text(pods);
    assert_eq!(statuses(&r, "pod.dra_rail"), vec![Status::Skipped; 2]);
    assert!(
        found(&r, "pod.dra_rail")[0]
            .detail
            .contains("gpu-and-rail-nic (not among the inputs)")
    );
}

#[test]
fn a_container_claim_the_pod_does_not_define_fails_naming_both() {
    let r = probe("fail/dra-claim-undefined.yaml");
    let prefill: Vec<&Check> = found(&r, "pod.dra_claims")
        .into_iter()
        .filter(|c| c.scope.as_deref().unwrap_or("").contains("vllm-prefill"))
        .collect();
    let statuses: Vec<Status> = prefill.iter().map(|c| c.status).collect();
    assert!(statuses.contains(&Status::Fail), "{prefill:?}");
    let fail = prefill.iter().find(|c| c.status == Status::Fail).unwrap();
    assert!(
        fail.detail.contains("`gpus`") && fail.detail.contains("only `devices`"),
        "{}",
        fail.detail
    );
    // The pod's own `devices` claim then reaches no container: a warning beside the failure.
    assert!(statuses.contains(&Status::Warn), "{prefill:?}");
    assert_eq!(r.status, Status::Fail);
    reads_whole_at_100_columns(&r, "pod.dra_claims");
    // decode names the claim its pod defines.
    let decode: Vec<Status> = found(&r, "pod.dra_claims")
        .into_iter()
        .filter(|c| c.scope.as_deref().unwrap_or("").contains("vllm-decode"))
        .map(|c| c.status)
        .collect();
    assert_eq!(decode, vec![Status::Ok]);
}

#[test]
fn a_compute_domain_channel_the_container_does_not_list_warns() {
    let r = probe("warn/dra-domain-channel-unlisted.yaml");
    let by_role = |part: &str| -> Vec<Status> {
        found(&r, "pod.dra_claims")
            .into_iter()
            .filter(|c| c.scope.as_deref().unwrap_or("").contains(part))
            .map(|c| c.status)
            .collect()
    };
    assert_eq!(by_role("decode"), vec![Status::Warn]);
    assert_eq!(by_role("prefill"), vec![Status::Ok]);
    let c = found(&r, "pod.dra_claims")
        .into_iter()
        .find(|c| c.status == Status::Warn)
        .unwrap();
    assert!(
        c.detail.contains("`channel`") && c.detail.contains("IMEX"),
        "{}",
        c.detail
    );
    reads_whole_at_100_columns(&r, "pod.dra_claims");
    let ok = probe("pass/mnnvl-compute-domain.yaml");
    assert_eq!(statuses(&ok, "pod.dra_claims"), vec![Status::Ok; 2]);
}

#[test]
fn a_compute_domain_no_role_claims_warns() {
    // The recipe creates a ComputeDomain, but the worker pod claims no channel of it.
    let text = r#"
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: gb200-domain}
spec:
  numNodes: 2
  channel:
    resourceClaimTemplate: {name: gb200-channel}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: trtllm-worker}
spec:
  template:
    spec:
      containers:
        - name: main
          image: nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1
          args: ["python3 -m dynamo.trtllm --disaggregation-mode decode"]
          resources: {limits: {nvidia.com/gpu: "4", rdma/ib: "4"}}
"#;
    let r = probe_text(text);
    assert_eq!(statuses(&r, "pod.dra_claims"), vec![Status::Warn]);
    let c = found(&r, "pod.dra_claims")[0];
    assert!(
        c.detail.contains("gb200-domain (channel template gb200-channel)"),
        "{}",
        c.detail
    );
    reads_whole_at_100_columns(&r, "pod.dra_claims");
    // Without the ComputeDomain, the same pod claims nothing and the rule says nothing.
    let plain = probe_text(&text[text.find("---").unwrap() + 3..]);
    assert!(statuses(&plain, "pod.dra_claims").is_empty());
}
