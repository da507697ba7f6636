//! Verdicts consistent within one run (issue 25): one place decides the KV backend and every rule
//! asks it; unresolved template parameters are refused; EFA beside rdma/* and MNNVL are said once.

use icb_core::checks::ProbeReport;
use icb_core::model::Status;
use icb_recipe::{EnvOptions, Input, RecipeError, probe_env, probe_env_with};

fn text(name: &str, content: &str) -> Input {
    Input::Text {
        name: name.into(),
        content: content.into(),
    }
}

fn checks<'a>(r: &'a ProbeReport, id: &str) -> Vec<&'a icb_core::checks::Check> {
    r.checks.iter().filter(|c| c.id == id).collect()
}

/// A Dynamo v1alpha1 vLLM P/D deployment (deploy/operator/api/v1alpha1 shape) with UCX tuned for
/// IB: get_zcopy rendezvous, as Dynamo's IB recipes set it.
fn dgd(extra_limits: &str) -> String {
    let svc = |role: &str, flag: &str| {
        format!(
            "    {role}:\n      componentType: worker\n      subComponentType: {role}\n      resources: {{limits: {{gpu: \"8\", custom: {{{extra_limits}}}}}}}\n      sharedMemory: {{size: 16Gi}}\n      extraPodSpec:\n        mainContainer:\n          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0\n          securityContext: {{capabilities: {{add: [IPC_LOCK]}}}}\n          args: [python3, -m, dynamo.vllm{flag}]\n"
        )
    };
    format!(
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata: {{name: pd}}\nspec:\n  envs:\n    - {{name: UCX_RNDV_SCHEME, value: get_zcopy}}\n    - {{name: UCX_RNDV_THRESH, value: \"0\"}}\n  services:\n{}{}",
        svc("prefill", ", --is-prefill-worker"),
        svc("decode", "")
    )
}

/// Dynamo's EFA provider profile switching KV to NIXL's LIBFABRIC backend.
const EFA_PROFILE: &str = "provider: aws\nfabric: efa\ntarget: {by: subComponentType, match: [prefill, decode]}\nkv_backend: LIBFABRIC\ndevice:\n  vpc.amazonaws.com/efa: \"32\"\nenv:\n  FI_PROVIDER: efa\n";

#[test]
fn the_efa_libfabric_profile_does_not_fail_a_ucx_rendezvous_rule() {
    let r = probe_env_with(
        &[text("deploy.yaml", &dgd("vpc.amazonaws.com/efa: \"32\""))],
        &EnvOptions {
            overlays: vec![text("aws-efa.yaml", EFA_PROFILE)],
            ..Default::default()
        },
    )
    .unwrap();
    for c in checks(&r, "env.rndv") {
        assert_eq!(c.status, Status::Ok, "{}", c.detail);
        assert!(c.detail.contains("LIBFABRIC"), "{}", c.detail);
    }
    assert!(r.checks.iter().all(|c| c.status != Status::Fail), "{}", r.verdict);
    assert!(checks(&r, "env.efa").iter().all(|c| c.status == Status::Ok));
    assert_ne!(r.status, Status::Fail, "{}", r.verdict);
    // Without the profile's backend switch the same settings fail on EFA: UCX carries KV.
    let ucx = probe_env(&[text("deploy.yaml", &dgd("vpc.amazonaws.com/efa: \"32\""))]).unwrap();
    assert!(checks(&ucx, "env.rndv").iter().all(|c| c.status == Status::Fail));
}

#[test]
fn the_dynamo_env_switch_to_libfabric_is_the_same_decision() {
    let deploy = dgd("vpc.amazonaws.com/efa: \"32\"").replace(
        "  envs:\n",
        "  envs:\n    - {name: DYN_KVBM_NIXL_BACKEND_LIBFABRIC, value: \"true\"}\n    - {name: DYN_KVBM_NIXL_BACKEND_UCX, value: \"false\"}\n    - {name: FI_PROVIDER, value: efa}\n",
    );
    let r = probe_env(&[text("deploy.yaml", &deploy)]).unwrap();
    assert!(checks(&r, "env.rndv").iter().all(|c| c.status == Status::Ok));
    assert!(checks(&r, "env.efa").iter().all(|c| c.status == Status::Ok));
}

#[test]
fn an_unresolved_template_parameter_is_refused_not_counted() {
    let profile = EFA_PROFILE.replace("\"32\"", "\"{{ gpus_per_worker * 4 }}\"");
    let err = probe_env_with(
        &[text("deploy.yaml", &dgd("vpc.amazonaws.com/efa: \"32\""))],
        &EnvOptions {
            overlays: vec![text("aws-efa.yaml", &profile)],
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, RecipeError::NeedsRender { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.starts_with("aws-efa.yaml:6"), "{msg}");
    assert!(
        msg.contains("gpus_per_worker") && msg.contains("unresolved template parameter"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
    let deploy = dgd("rdma/ib: \"{{ nics }}\"");
    assert!(matches!(
        probe_env(&[text("deploy.yaml", &deploy)]),
        Err(RecipeError::NeedsRender { .. })
    ));
}

#[test]
fn rdma_ib_beside_efa_is_a_finding() {
    let r = probe_env(&[text(
        "deploy.yaml",
        &dgd("vpc.amazonaws.com/efa: \"32\", rdma/ib: \"8\""),
    )])
    .unwrap();
    let rdma = checks(&r, "pod.rdma_resource");
    assert_eq!(rdma.len(), 2);
    for c in rdma {
        assert_eq!(c.status, Status::Warn, "{}", c.detail);
        assert!(c.detail.contains("rdma/ib requested beside EFA"), "{}", c.detail);
    }
}

#[test]
fn nccl_variables_are_not_asked_of_single_node_nixl_workers() {
    let r = probe_env(&[text("deploy.yaml", &dgd("rdma/ib: \"8\""))]).unwrap();
    for c in checks(&r, "env.critical_vars") {
        assert!(!c.detail.contains("NCCL_"), "{}", c.detail);
        assert!(c.detail.contains("UCX_TLS"), "{}", c.detail);
    }
    // Spanning nodes, NCCL runs the collectives between them: its variables matter.
    let multi = dgd("rdma/ib: \"8\"").replace(
        "      sharedMemory",
        "      multinode: {nodeCount: 2}\n      sharedMemory",
    );
    let r = probe_env(&[text("deploy.yaml", &multi)]).unwrap();
    assert!(
        checks(&r, "env.critical_vars")
            .iter()
            .all(|c| c.detail.contains("NCCL_IB_HCA"))
    );
}

#[test]
fn mnnvl_compute_domain_gets_one_statement_about_nvlink() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/recipes/pass/mnnvl-compute-domain.yaml");
    let r = probe_env(&[Input::Path(path)]).unwrap();
    assert!(
        r.checks.iter().all(|c| !c.detail.contains("no NVLink path")),
        "{:#?}",
        r.checks.iter().map(|c| &c.detail).collect::<Vec<_>>()
    );
    let x = checks(&r, "pod.cuda_ipc_xpod");
    assert_eq!(x.len(), 1);
    assert!(x[0].detail.contains("ComputeDomain"), "{}", x[0].detail);
    assert!(
        checks(&r, "pod.rdma_resource")
            .iter()
            .all(|c| c.detail.contains("NVLink fabric"))
    );
}

#[test]
fn a_pod_ip_field_ref_is_a_pod_fact_not_the_thing_to_fix_first() {
    // vLLM's multi-node docs set VLLM_HOST_IP from the downward API (fieldRef status.podIP).
    let deploy = dgd("rdma/ib: \"8\"").replace(
        "          args:",
        "          env:\n            - name: VLLM_HOST_IP\n              valueFrom: {fieldRef: {fieldPath: status.podIP}}\n          args:",
    );
    let r = probe_env(&[text("deploy.yaml", &deploy)]).unwrap();
    for c in checks(&r, "env.resolve") {
        assert_eq!(c.status, Status::Ok, "{}", c.detail);
        assert!(c.detail.contains("VLLM_HOST_IP <from status.podIP>"), "{}", c.detail);
    }
    let first = r
        .checks
        .iter()
        .find(|c| c.status == Status::Fail)
        .or_else(|| r.checks.iter().find(|c| c.status == Status::Warn))
        .unwrap();
    assert_ne!(first.id, "env.resolve", "{}", first.detail);
    // A transport variable from the downward API is still unknown at read time.
    let transport = deploy.replace("name: VLLM_HOST_IP", "name: UCX_NET_DEVICES");
    let r = probe_env(&[text("deploy.yaml", &transport)]).unwrap();
    assert!(checks(&r, "env.resolve").iter().all(|c| c.status == Status::Warn));
}
