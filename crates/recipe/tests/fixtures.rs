//! Every probe-env rule against a fixture that passes it and one that trips it, every recipe
//! shape, the seed-002 trap, and secret masking. Fixtures live in `tests/fixtures/recipes/`.

use icb_core::checks::{Check, ProbeReport};
use icb_core::model::Status;
use icb_recipe::{Input, RecipeError, Role, load_inputs, probe_env, recipe_transport_env, resolve};
use std::path::PathBuf;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/recipes")
        .join(rel)
}

fn probe(rels: &[&str]) -> ProbeReport {
    let inputs: Vec<Input> = rels.iter().map(|r| Input::Path(fixture(r))).collect();
    probe_env(&inputs).unwrap_or_else(|e| panic!("{rels:?}: {e}"))
}

fn checks<'a>(r: &'a ProbeReport, id: &str) -> Vec<&'a Check> {
    r.checks.iter().filter(|c| c.id == id).collect()
}

/// Every check with `id` has `status`, and there is at least one.
#[track_caller]
fn assert_all(r: &ProbeReport, id: &str, status: Status) {
    let found = checks(r, id);
    assert!(!found.is_empty(), "no {id} check in {}:\n{}", r.target, dump(r));
    for c in found {
        assert_eq!(c.status, status, "{id} in {}: {}\n{}", r.target, c.detail, dump(r));
    }
}

fn dump(r: &ProbeReport) -> String {
    r.checks
        .iter()
        .map(|c| {
            format!(
                "{} {} [{}] {}",
                c.status.as_str(),
                c.id,
                c.scope.as_deref().unwrap_or(""),
                c.detail
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const CLEAN: &[&str] = &[
    "good/dgd-v1alpha1-ib.yaml",
    "good/dgd-v1beta1-ib.yaml",
    "good/efa.yaml",
    "good/pods-sglang-ib.yaml",
];

#[test]
fn clean_recipes_pass_every_rule() {
    for f in CLEAN {
        let r = probe(&[f]);
        assert_eq!(r.status, Status::Ok, "{f}:\n{}", dump(&r));
        assert_eq!(r.verdict, "disaggregated transport can be trusted");
        for id in [
            "env.resolve",
            "env.backend",
            "env.role_symmetry",
            "env.ucx_tls.tcp_only",
            "env.ucx_tls.cuda",
            "env.rndv",
            "env.nccl_ib_disable",
            "env.nccl_debug_knobs",
            "env.gid_index",
            "pod.ipc_lock",
            "pod.rdma_resource",
            "pod.shm",
            "pod.cuda_ipc_xpod",
            "pod.placement",
        ] {
            assert_all(&r, id, Status::Ok);
        }
    }
    assert_all(
        &probe(&["good/dgd-v1alpha1-ib.yaml"]),
        "env.ucx_net_devices.fmt",
        Status::Ok,
    );
    assert_all(&probe(&["good/efa.yaml"]), "env.efa", Status::Ok);
}

#[test]
fn every_rule_has_a_failing_fixture() {
    let cases: &[(&str, &str, Status)] = &[
        ("fail/ucx-tls-tcp-only.yaml", "env.ucx_tls.tcp_only", Status::Fail),
        ("fail/ucx-tls-tcp-only.yaml", "env.ucx_tls.cuda", Status::Fail),
        ("fail/ucx-tls-no-cuda.yaml", "env.ucx_tls.cuda", Status::Fail),
        (
            "warn/ucx-net-devices-malformed.yaml",
            "env.ucx_net_devices.fmt",
            Status::Warn,
        ),
        ("fail/efa-get-zcopy.yaml", "env.rndv", Status::Fail),
        ("fail/efa-get-zcopy.yaml", "env.efa", Status::Warn),
        ("fail/nccl-ib-disable.yaml", "env.nccl_ib_disable", Status::Fail),
        ("warn/nccl-debug-knobs.yaml", "env.nccl_debug_knobs", Status::Warn),
        ("fail/gid-index-invalid.yaml", "env.gid_index", Status::Fail),
        ("warn/gid-index-mismatch.yaml", "env.gid_index", Status::Warn),
        // A warn since issue 9: memlock may be unlimited on the node (the hint says how to confirm).
        ("fail/no-ipc-lock.yaml", "pod.ipc_lock", Status::Warn),
        ("fail/no-rdma-resource.yaml", "pod.rdma_resource", Status::Fail),
        ("warn/hostnetwork-only.yaml", "pod.rdma_resource", Status::Warn),
        ("warn/shm-small.yaml", "pod.shm", Status::Warn),
        ("warn/role-asymmetry.yaml", "env.role_symmetry", Status::Warn),
        ("warn/backend-unknown.yaml", "env.backend", Status::Warn),
        ("warn/placement-unpinned.yaml", "pod.placement", Status::Warn),
        ("warn/computedomain-split.yaml", "pod.placement", Status::Warn),
        ("warn/env-unresolved.yaml", "env.resolve", Status::Warn),
        ("fail/no-workers.yaml", "env.resolve", Status::Fail),
        (
            "seed-002/prefill-decode-same-node.yaml",
            "pod.cuda_ipc_xpod",
            Status::Warn,
        ),
    ];
    for (file, id, status) in cases {
        let r = probe(&[file]);
        assert_all(&r, id, *status);
        if *status == Status::Fail {
            assert_eq!(r.status, Status::Fail, "{file}");
            assert_eq!(r.exit_code(), 1, "{file}");
            assert!(r.verdict.contains(id), "{file}: {}", r.verdict);
        }
    }
}

#[test]
fn each_failing_fixture_trips_only_what_it_is_about() {
    // The single-rule fixtures differ from good/pods-sglang-ib.yaml by one setting, so nothing
    // else may fail: a rule that fails everything would pass the test above.
    for (file, id) in [
        ("fail/ucx-tls-no-cuda.yaml", "env.ucx_tls.cuda"),
        ("fail/nccl-ib-disable.yaml", "env.nccl_ib_disable"),
        ("fail/gid-index-invalid.yaml", "env.gid_index"),
        ("fail/no-ipc-lock.yaml", "pod.ipc_lock"),
    ] {
        let r = probe(&[file]);
        let others: Vec<&Check> = r
            .checks
            .iter()
            .filter(|c| c.id != id && c.status != Status::Ok)
            .collect();
        assert!(others.is_empty(), "{file}: unexpected {others:#?}");
    }
}

#[test]
fn tcp_only_is_a_fail_even_though_the_variable_is_present() {
    // The skill this replaces scored `UCX_TLS=tcp` ok because the variable was present.
    let r = probe(&["fail/ucx-tls-tcp-only.yaml"]);
    let c = checks(&r, "env.ucx_tls.tcp_only")[0];
    assert!(c.detail.contains("UCX_TLS=tcp"), "{}", c.detail);
    assert!(c.hint.is_some());
    assert!(
        c.scope
            .as_deref()
            .unwrap_or("")
            .starts_with("prefill (sglang-prefill, "),
        "{:?}",
        c.scope
    );
}

#[test]
fn efa_with_correct_settings_keeps_nccl_ib_disable_ok_and_rndv_ok() {
    let r = probe(&["good/efa.yaml"]);
    assert_all(&r, "env.rndv", Status::Ok);
    assert_all(&r, "env.efa", Status::Ok);
}

#[test]
fn seed_002_is_flagged_for_cross_pod_nvlink_with_the_explanation() {
    let r = probe(&["seed-002/prefill-decode-same-node.yaml"]);
    let c = checks(&r, "pod.cuda_ipc_xpod");
    assert_eq!(c.len(), 1);
    let d = &c[0].detail;
    for needle in ["separate pods", "cuda_ipc", "hostIPC", "GPUs", "365 MB/s"] {
        assert!(d.contains(needle), "missing {needle:?} in {d}");
    }
    // The decoder had hostIPC: true, the prefill had nothing; neither sees the other's GPUs.
    // hostPID is not demanded: the field fix worked without it (field-evidence.md).
    assert!(
        d.contains("qwen25-72b-int4-dhzn-pd-decoder lacks visibility of the peer's GPUs"),
        "{d}"
    );
    assert!(
        d.contains("qwen25-72b-int4-dhzn-pd-prefill lacks hostIPC, visibility"),
        "{d}"
    );
    assert!(c[0].hint.as_deref().unwrap_or("").contains("RDMA"));
    assert_all(&r, "pod.rdma_resource", Status::Fail);
    // SGLang's transfer backend is read from the `bash -c` script.
    assert_all(&r, "env.backend", Status::Ok);
    assert!(checks(&r, "env.backend")[0].detail.contains("nixl"));
}

#[test]
fn cross_pod_cuda_ipc_passes_with_shared_namespaces_and_gpu_visibility() {
    let r = probe(&["pass/xpod-shared-namespaces.yaml"]);
    assert_all(&r, "pod.cuda_ipc_xpod", Status::Ok);
    assert_all(&r, "pod.shm", Status::Ok); // hostIPC shares the node's /dev/shm
}

#[test]
fn commented_out_variables_never_count() {
    let docs = load_inputs(&[Input::Path(fixture("shapes/commented-out.yaml"))]).unwrap();
    let res = resolve(&docs);
    assert_eq!(res.roles.len(), 1);
    let r = &res.roles[0];
    assert!(r.var("UCX_TLS").is_none());
    assert!(r.var("NCCL_IB_DISABLE").is_none());
    assert_eq!(r.literal("NCCL_SOCKET_IFNAME"), Some("eth0"));
    let report = probe(&["shapes/commented-out.yaml"]);
    assert!(checks(&report, "env.critical_vars")[0].detail.contains("UCX_TLS"));
    assert_all(&report, "env.ucx_tls.tcp_only", Status::Ok);
}

#[test]
fn value_before_name_items_and_plain_workload_shapes() {
    let docs = load_inputs(&[Input::Path(fixture("shapes/statefulset-job-lws.yaml"))]).unwrap();
    let res = resolve(&docs);
    let by = |c: &str| {
        res.roles
            .iter()
            .find(|r| r.component == c)
            .unwrap_or_else(|| panic!("no {c}"))
    };
    let sts = by("vllm-prefill");
    assert_eq!(sts.role, Role::Prefill); // from the llm-d.ai/role label
    assert_eq!(sts.workload, "StatefulSet/vllm-prefill");
    assert_eq!(sts.literal("UCX_TLS"), Some("rc,cuda_copy"));
    assert_eq!(sts.replicas.as_deref(), Some("2"));
    assert!(sts.resources.rdma.contains_key("nvidia.com/sriov_rdma_vf"));
    assert!(sts.has_capability("IPC_LOCK")); // written CAP_IPC_LOCK
    let job = by("vllm-decode");
    assert_eq!(job.role, Role::Decode); // from the name
    assert_eq!(job.workload, "Job/vllm-decode");
    assert_eq!(job.group, "namespace/llm");
    let leader = by("sglang-wide-ep/leader");
    let worker = by("sglang-wide-ep/worker");
    assert_eq!(leader.node_count, Some(4));
    assert_eq!(worker.workload, "LeaderWorkerSet/sglang-wide-ep worker");
    assert!(leader.privileged);
    assert!(leader.resources.rdma.contains_key("rdma/roce_gdr"));
    // The multi-node LWS leader forces NCCL onto sockets while requesting RDMA.
    let r = probe(&["shapes/statefulset-job-lws.yaml"]);
    let ib: Vec<&Check> = checks(&r, "env.nccl_ib_disable")
        .into_iter()
        .filter(|c| c.status == Status::Fail)
        .collect();
    assert_eq!(ib.len(), 1);
    assert!(ib[0].scope.as_deref().unwrap_or("").contains("sglang-wide-ep/leader"));
    // GID index 3 everywhere: valid, consistent.
    assert!(
        checks(&r, "env.gid_index")
            .iter()
            .filter(|c| c.scope.as_deref().unwrap_or("").contains("sglang-wide-ep"))
            .all(|c| c.status == Status::Ok)
    );
}

#[test]
fn dgd_v1alpha1_layers_and_roles() {
    let docs = load_inputs(&[Input::Path(fixture("good/dgd-v1alpha1-ib.yaml"))]).unwrap();
    let res = resolve(&docs);
    let roles: Vec<(&str, Role)> = res
        .roles
        .iter()
        .map(|r| (r.component.as_str(), r.role.clone()))
        .collect();
    assert_eq!(
        roles,
        vec![
            ("Frontend", Role::Frontend),
            ("VllmPrefillWorker", Role::Prefill),
            ("VllmDecodeWorker", Role::Decode)
        ]
    );
    let p = &res.roles[1];
    assert!(p.var("UCX_TLS").unwrap().origin.starts_with("spec.envs"));
    assert!(
        p.var("UCX_NET_DEVICES")
            .unwrap()
            .origin
            .starts_with("spec.services.VllmPrefillWorker.envs")
    );
    assert_eq!(p.shm.as_ref().map(|s| s.0.as_str()), Some("16Gi"));
    assert_eq!(p.resources.gpus.as_deref(), Some("4"));
    assert_eq!(p.engine.kv_connector.as_deref(), Some("NixlConnector"));
    assert_eq!(p.engine.nixl_backends, vec!["UCX"]);
    assert_eq!(
        p.placement.node_selector.get("agentpool").map(String::as_str),
        Some("gpu-ib")
    );
}

#[test]
fn later_layers_win_and_main_container_overrides_service_envs() {
    let yaml = r#"
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: layered}
spec:
  envs: [{name: UCX_TLS, value: tcp}, {name: KEEP, value: global}]
  services:
    decode:
      subComponentType: decode
      envs: [{name: UCX_TLS, value: "rc,cuda_copy"}]
      extraPodSpec:
        mainContainer:
          env: [{name: UCX_TLS, value: "rc_x,cuda_copy"}]
"#;
    let docs = load_inputs(&[Input::Text {
        name: "layered.yaml".into(),
        content: yaml.into(),
    }])
    .unwrap();
    let res = resolve(&docs);
    let d = &res.roles[0];
    assert_eq!(d.literal("UCX_TLS"), Some("rc_x,cuda_copy"));
    assert_eq!(d.literal("KEEP"), Some("global"));
    assert_eq!(d.layers.len(), 3);
}

#[test]
fn dgd_v1beta1_components() {
    let res = resolve(&load_inputs(&[Input::Path(fixture("good/dgd-v1beta1-ib.yaml"))]).unwrap());
    let roles: Vec<Role> = res.roles.iter().map(|r| r.role.clone()).collect();
    assert_eq!(roles, vec![Role::Frontend, Role::Prefill, Role::Decode]);
    let p = &res.roles[1];
    assert_eq!(p.shm.as_ref().and_then(|s| s.1), Some(32 << 30));
    assert!(p.has_capability("IPC_LOCK"));
    assert_eq!(p.resources.rdma.get("rdma/ib").map(String::as_str), Some("4"));
    assert_eq!(p.placement.affinity, vec!["nvidia.com/gpu.product In [NVIDIA-B200]"]);
}

#[test]
fn provider_overlay_map_env_is_applied_to_its_targets_when_named() {
    // Found by walking the directory, the overlay is not applied (overlays apply only when
    // named), and the report says how to apply it.
    let walked = probe(&["shapes/overlay"]);
    assert_all(&walked, "pod.rdma_resource", Status::Fail);
    assert!(
        walked
            .next_steps
            .iter()
            .any(|s| s.contains("--overlay") && s.contains("20-aks-ib.yaml")),
        "{:?}",
        walked.next_steps
    );
    // Named on the command line (a file argument), it applies to the recipe's targets.
    let r = probe(&["shapes/overlay/10-base-dgd.yaml", "shapes/overlay/20-aks-ib.yaml"]);
    let via_flag = icb_recipe::probe_env_with(
        &[Input::Path(fixture("shapes/overlay"))],
        &icb_recipe::EnvOptions {
            overlays: vec![Input::Path(fixture("shapes/overlay/20-aks-ib.yaml"))],
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(via_flag.status, r.status);
    assert_eq!(via_flag.counts, r.counts);
    assert_all(&r, "pod.rdma_resource", Status::Ok);
    assert_all(&r, "pod.ipc_lock", Status::Ok);
    assert_all(&r, "env.ucx_net_devices.fmt", Status::Ok);
    assert_all(&r, "env.critical_vars", Status::Ok);
    let placement = checks(&r, "pod.placement")[0];
    assert_eq!(placement.status, Status::Ok);
    assert!(placement.hint.as_deref().unwrap_or("").contains("agentpool"));
    let named = [
        Input::Path(fixture("shapes/overlay/10-base-dgd.yaml")),
        Input::Path(fixture("shapes/overlay/20-aks-ib.yaml")),
    ];
    let env = recipe_transport_env(&named).unwrap();
    assert_eq!(env.len(), 2);
    assert!(
        env.iter()
            .all(|e| e.ucx_net_devices.as_deref() == Some("mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"))
    );
    assert!(
        env.iter()
            .all(|e| e.nccl_ib_hca.as_deref() == Some("mlx5_0,mlx5_1,mlx5_2,mlx5_3"))
    );
    assert!(
        env.iter()
            .all(|e| e.ucx_tls.as_deref() == Some("rc_x,rc,cuda_copy,cuda_ipc"))
    );
    // The frontend is not a target.
    let res = resolve(&load_inputs(&named).unwrap());
    let fe = res.roles.iter().find(|r| r.role == Role::Frontend).unwrap();
    assert!(fe.var("UCX_NET_DEVICES").is_none());
    // The overlay alone is no recipe: a usage error, not a silent pass.
    let alone = probe_env(&[Input::Path(fixture("shapes/overlay/20-aks-ib.yaml"))]);
    assert!(matches!(alone, Err(RecipeError::Unsupported { .. })), "{alone:?}");
}

#[test]
fn kustomize_patch_delete_removes_the_env_entry() {
    let base = probe(&["shapes/kustomize/base.yaml"]);
    assert_all(&base, "env.ucx_tls.tcp_only", Status::Fail);
    let patched = probe(&["shapes/kustomize/base.yaml", "shapes/kustomize/patch.yaml"]);
    assert_all(&patched, "env.ucx_tls.tcp_only", Status::Ok);
    assert!(checks(&patched, "env.ucx_tls.tcp_only")[0].detail.contains("unset"));
    let res = resolve(&load_inputs(&[Input::Path(fixture("shapes/kustomize"))]).unwrap());
    assert_eq!(res.roles.len(), 1);
    assert_eq!(res.roles[0].literal("NCCL_SOCKET_IFNAME"), Some("eth0"));
    assert_eq!(res.roles[0].literal("UCX_NET_DEVICES"), Some("mlx5_0:1"));
}

#[test]
fn patch_delete_inside_a_single_env_list_deletes_lower_layers() {
    let yaml = r#"
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: d}
spec:
  envs: [{name: UCX_TLS, value: tcp}]
  services:
    decode:
      subComponentType: decode
      extraPodSpec:
        mainContainer:
          env:
            - {name: UCX_TLS, $patch: delete}
"#;
    let res = resolve(
        &load_inputs(&[Input::Text {
            name: "d.yaml".into(),
            content: yaml.into(),
        }])
        .unwrap(),
    );
    assert!(res.roles[0].var("UCX_TLS").is_none());
}

#[test]
fn kustomize_component_inline_patches() {
    let res = resolve(&load_inputs(&[Input::Path(fixture("shapes/kustomize-component"))]).unwrap());
    assert_eq!(res.roles.len(), 2);
    for r in &res.roles {
        assert_eq!(r.literal("FI_PROVIDER"), Some("efa"), "{}", r.component);
        assert!(r.resources.has_efa());
        assert!(r.privileged);
    }
    let r = probe(&["shapes/kustomize-component"]);
    assert_all(&r, "env.rndv", Status::Fail); // get_zcopy from the base, EFA from the component
}

#[test]
fn trt_backend_from_configmap() {
    let res = resolve(&load_inputs(&[Input::Path(fixture("warn/shm-small.yaml"))]).unwrap());
    for r in &res.roles {
        assert_eq!(r.engine.trt_backend.as_deref(), Some("UCX"));
    }
    let r = probe(&["warn/shm-small.yaml"]);
    assert_all(&r, "env.backend", Status::Ok);
    assert!(checks(&r, "pod.shm").iter().all(|c| c.detail.contains("80Gi")));
}

#[test]
fn map_form_env_and_value_from_in_a_list() {
    let yaml = r#"
env:
  UCX_TLS: tcp
  NCCL_IB_DISABLE: "1"
  UCX_NET_DEVICES: {$patch: delete}
"#;
    let base = r#"
apiVersion: v1
kind: Pod
metadata: {name: prefill-0}
spec:
  containers:
    - name: main
      env:
        - {name: UCX_NET_DEVICES, value: "mlx5_0:1"}
        - name: NCCL_IB_HCA
          valueFrom: {configMapKeyRef: {name: fabric, key: hca}}
      resources: {limits: {nvidia.com/gpu: "1", rdma/ib: "1"}}
"#;
    let docs = load_inputs(&[
        Input::Text {
            name: "pod.yaml".into(),
            content: base.into(),
        },
        Input::Text {
            name: "overlay.yaml".into(),
            content: yaml.into(),
        },
    ])
    .unwrap();
    let res = resolve(&docs);
    let r = &res.roles[0];
    assert_eq!(r.role, Role::Prefill);
    assert_eq!(r.literal("UCX_TLS"), Some("tcp"));
    assert!(r.var("UCX_NET_DEVICES").is_none());
    assert!(r.var("NCCL_IB_HCA").is_some_and(|v| v.literal().is_none()));
    let checks = icb_recipe::check(&res);
    let st = |id: &str| checks.iter().find(|c| c.id == id).map(|c| c.status);
    assert_eq!(st("env.ucx_tls.tcp_only"), Some(Status::Fail));
    assert_eq!(st("env.nccl_ib_disable"), Some(Status::Fail));
    assert_eq!(st("env.resolve"), Some(Status::Warn));
}

#[test]
fn secrets_never_appear_in_details_or_json() {
    let r = probe(&["shapes/secrets.yaml"]);
    let json = serde_json::to_string(&r).unwrap();
    for secret in [
        "hf_SuperSecretValueFromSecretDoc1234567",
        "plain-but-named-key-4711",
        "Zx81kPq02LmN3vB4cD5eF6gH7iJ8kL9m",
        "sk-ArgSecretValue0123456789abcdefXYZ",
    ] {
        assert!(!json.contains(secret), "{secret} leaked: {json}");
    }
    // The masked variable is still reported, as ***.
    assert!(
        checks(&r, "env.nccl_debug_knobs")[0]
            .detail
            .contains("NCCL_P2P_LEVEL=***")
    );
    let env = recipe_transport_env(&[Input::Path(fixture("shapes/secrets.yaml"))]).unwrap();
    assert_eq!(env[0].vars.get("NCCL_P2P_LEVEL").map(String::as_str), Some("***"));
    // valueFrom secrets name their source but never a value.
    assert!(
        checks(&r, "env.resolve")[0]
            .detail
            .contains("DB_PASSWORD <from Secret db>")
    );
}

#[test]
fn bad_yaml_is_a_one_line_error_naming_file_and_line() {
    let err = probe_env(&[Input::Path(fixture("bad/broken.yaml"))]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RecipeError::Yaml { .. }), "{msg}");
    assert!(msg.contains("bad/broken.yaml:"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    let RecipeError::Yaml { line, .. } = err else {
        unreachable!()
    };
    assert!((6..=8).contains(&line), "line {line}");
}

#[test]
fn input_errors_say_what_to_fix() {
    let missing = probe_env(&[Input::Path(fixture("does/not/exist.yaml"))])
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("does/not/exist.yaml") && missing.contains("cannot read"),
        "{missing}"
    );
    assert!(matches!(probe_env(&[]), Err(RecipeError::NoInputs)));
    let dir = tempfile::tempdir().unwrap();
    let empty = probe_env(&[Input::Path(dir.path().to_path_buf())])
        .unwrap_err()
        .to_string();
    assert!(empty.contains("no *.yaml"), "{empty}");
    std::fs::write(dir.path().join("x.yaml"), [0xff, 0xfe, 0x00]).unwrap();
    let binary = probe_env(&[Input::Path(dir.path().join("x.yaml"))])
        .unwrap_err()
        .to_string();
    assert!(binary.contains("not UTF-8"), "{binary}");
}

#[test]
fn input_without_a_recipe_is_refused_naming_the_input() {
    let text = |name: &str, content: &str| Input::Text {
        name: name.into(),
        content: content.into(),
    };
    for (input, name) in [
        (text("empty.yaml", ""), "empty.yaml"),
        (text("nokind.yaml", "foo: bar\n---\n- 1\n"), "nokind.yaml"),
        (text("comments.yaml", "# only a comment\n"), "comments.yaml"),
    ] {
        let err = probe_env(std::slice::from_ref(&input)).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, RecipeError::NoRecipe { .. }), "{msg}");
        assert!(msg.starts_with(&format!("{name}: no recipe found")), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
        assert!(matches!(
            recipe_transport_env(&[input]),
            Err(RecipeError::NoRecipe { .. })
        ));
    }
    // Kubernetes objects of no supported kind: a usage error (exit 2) saying what to pass.
    let err = probe_env(&[text("svc.yaml", "kind: Service\nmetadata: {name: s}\n")]).unwrap_err();
    assert!(matches!(err, RecipeError::Unsupported { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("svc.yaml: no supported recipe kind (saw Service)"),
        "{msg}"
    );
    assert!(msg.contains("LLMInferenceService"), "{msg}");
    // A provider profile alone is no recipe either: it has nothing to apply to.
    let err = probe_env(&[text(
        "p.yaml",
        "provider: aws\nenv: [{name: FI_PROVIDER, value: efa}]\n",
    )])
    .unwrap_err();
    assert!(matches!(err, RecipeError::Unsupported { .. }), "{err}");
}

#[test]
fn the_suggested_node_command_is_runnable() {
    let split = fixture("../nodes/recipes/pd-split-devices.yaml");
    let r = probe_env(&[Input::Path(split.clone())]).unwrap();
    // prefill and decode use different devices: probe node refuses --recipe without --role.
    assert_eq!(
        r.next_steps,
        vec![format!(
            "ic-bench probe node --recipe {} --role prefill",
            split.display()
        )]
    );
    // Text from stdin cannot be re-read by a later command: no --recipe to suggest.
    let content = std::fs::read_to_string(&split).unwrap();
    let r = probe_env(&[Input::Text {
        name: "<stdin>".into(),
        content,
    }])
    .unwrap();
    assert!(r.next_steps.is_empty(), "{:?}", r.next_steps);
}

#[test]
fn directory_walk_is_recursive_sorted_and_yaml_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("b/nested")).unwrap();
    std::fs::write(dir.path().join("b/nested/2.yml"), "kind: Pod\nmetadata: {name: two}\n").unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        "kind: Pod\nmetadata: {name: one}\n---\nkind: Pod\nmetadata: {name: one-b}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "kind: Pod\n").unwrap();
    std::fs::write(dir.path().join(".hidden.yaml"), "kind: Pod\n").unwrap();
    let docs = load_inputs(&[Input::Path(dir.path().to_path_buf())]).unwrap();
    let names: Vec<&str> = docs.iter().filter_map(|d| d.name()).collect();
    assert_eq!(names, vec!["one", "one-b", "two"]);
    assert_eq!(docs[1].index, 1);
}

#[test]
fn json_report_is_stable_and_scoped() {
    let a = serde_json::to_string(&probe(&["good/dgd-v1alpha1-ib.yaml"])).unwrap();
    let b = serde_json::to_string(&probe(&["good/dgd-v1alpha1-ib.yaml"])).unwrap();
    assert_eq!(a, b);
    let r = probe(&["good/dgd-v1alpha1-ib.yaml"]);
    assert_eq!(r.kind, "env");
    assert!(r.checks.iter().all(|c| c.scope.is_some() && !c.detail.contains('\n')));
    assert!(r.next_steps[0].starts_with("ic-bench probe node --recipe"));
}

#[test]
fn same_named_variants_stay_separate_but_partial_documents_patch() {
    let full = |tls: &str| {
        format!(
            "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata: {{name: same}}\nspec:\n  services:\n    decode:\n      subComponentType: decode\n      extraPodSpec:\n        mainContainer:\n          image: img\n          env: [{{name: UCX_TLS, value: \"{tls}\"}}]\n"
        )
    };
    let docs = load_inputs(&[
        Input::Text {
            name: "deploy.yaml".into(),
            content: full("tcp"),
        },
        Input::Text {
            name: "deploy_hopper.yaml".into(),
            content: full("rc,cuda_copy"),
        },
    ])
    .unwrap();
    let res = resolve(&docs);
    assert_eq!(res.roles.len(), 2);
    assert_ne!(res.roles[0].group, res.roles[1].group);
    assert_eq!(res.roles[0].literal("UCX_TLS"), Some("tcp"));
    assert_eq!(res.roles[1].literal("UCX_TLS"), Some("rc,cuda_copy"));
    let patch = "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata: {name: same}\nspec:\n  services:\n    decode:\n      extraPodSpec:\n        mainContainer:\n          env: [{name: UCX_TLS, value: \"rc_x,cuda_copy\"}]\n";
    let docs = load_inputs(&[
        Input::Text {
            name: "deploy.yaml".into(),
            content: full("tcp"),
        },
        Input::Text {
            name: "patch.yaml".into(),
            content: patch.into(),
        },
    ])
    .unwrap();
    let res = resolve(&docs);
    assert_eq!(res.roles.len(), 1);
    assert_eq!(res.roles[0].literal("UCX_TLS"), Some("rc_x,cuda_copy"));
    assert_eq!(res.roles[0].sources, vec!["deploy.yaml", "patch.yaml"]);
}

#[test]
fn unrelated_kindless_yaml_is_not_an_overlay_but_trt_engine_configs_are_read() {
    let workflow = "name: ci\non: push\nenv:\n  UCX_TLS: tcp\njobs: {}\n";
    let engine_cfg = "tensor_parallel_size: 4\ncache_transceiver_config:\n  backend: NIXL\n";
    let pod = "kind: Pod\nmetadata: {name: trt-decode}\nspec:\n  containers:\n  - name: main\n    image: trt\n    args: [\"python3 -m dynamo.trtllm --disaggregation-mode decode\"]\n";
    let docs = load_inputs(&[
        Input::Text {
            name: "pod.yaml".into(),
            content: pod.into(),
        },
        Input::Text {
            name: ".github/ci.yaml".into(),
            content: workflow.into(),
        },
        Input::Text {
            name: "engine_configs/decode.yaml".into(),
            content: engine_cfg.into(),
        },
    ])
    .unwrap();
    let res = resolve(&docs);
    assert_eq!(res.roles.len(), 1);
    assert!(res.roles[0].var("UCX_TLS").is_none());
    assert_eq!(res.roles[0].engine.trt_backend.as_deref(), Some("NIXL"));
    assert_eq!(res.roles[0].engine.framework.as_deref(), Some("trtllm"));
}

#[test]
fn compute_domain_claims_are_an_nvlink_fabric_not_a_nic() {
    let r = probe(&["pass/mnnvl-compute-domain.yaml"]);
    assert_all(&r, "pod.rdma_resource", Status::Ok);
    assert_all(&r, "pod.ipc_lock", Status::Ok);
    assert_all(&r, "pod.placement", Status::Ok);
    assert!(checks(&r, "pod.placement")[0].detail.contains("gb200-channel"));
    assert!(checks(&r, "pod.rdma_resource")[0].detail.contains("ComputeDomain"));
    let res = resolve(&load_inputs(&[Input::Path(fixture("pass/mnnvl-compute-domain.yaml"))]).unwrap());
    assert!(res.roles.iter().all(|r| r.uses_compute_domain() && !r.requests_rdma()));
    // Split templates are the MNNVL trap.
    let split = probe(&["warn/computedomain-split.yaml"]);
    assert!(checks(&split, "pod.placement")[0].detail.contains("cliques"));
}

#[test]
fn cronjob_daemonset_and_connector_none() {
    let yaml = r#"
apiVersion: batch/v1
kind: CronJob
metadata: {name: bench-prefill}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
            - name: main
              image: vllm
              args: ["python3", "-m", "dynamo.vllm", "--is-prefill-worker", "--connector", "none"]
              env: [{name: UCX_TLS, value: "^cuda_copy"}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: decode-ds}
spec:
  template:
    spec:
      containers:
        - name: main
          image: vllm
          env: [{name: UCX_TLS, value: "^ib"}]
"#;
    let docs = load_inputs(&[Input::Text {
        name: "c.yaml".into(),
        content: yaml.into(),
    }])
    .unwrap();
    let res = resolve(&docs);
    assert_eq!(res.roles.len(), 2);
    assert_eq!(res.roles[0].role, Role::Prefill);
    assert_eq!(res.roles[0].workload, "CronJob/bench-prefill");
    assert_eq!(res.roles[1].role, Role::Decode);
    let checks = icb_recipe::check(&res);
    let find = |id: &str, comp: &str| {
        checks
            .iter()
            .find(|c| c.id == id && c.scope.as_deref().unwrap_or("").contains(comp))
            .map(|c| c.status)
    };
    assert_eq!(find("env.backend", "bench-prefill"), Some(Status::Warn));
    // `^` exclusion forms: excluding cuda_copy loses GPU buffers; excluding ib loses RDMA.
    assert_eq!(find("env.ucx_tls.cuda", "bench-prefill"), Some(Status::Fail));
    assert_eq!(find("env.ucx_tls.tcp_only", "bench-prefill"), Some(Status::Ok));
    assert_eq!(find("env.ucx_tls.tcp_only", "decode-ds"), Some(Status::Fail));
    assert_eq!(find("env.ucx_tls.cuda", "decode-ds"), Some(Status::Ok));
}

#[test]
fn rdma_through_host_devices() {
    let r = probe(&["pass/lws-host-infiniband.yaml"]);
    assert_all(&r, "pod.rdma_resource", Status::Ok);
    assert_all(&r, "pod.ipc_lock", Status::Ok);
    assert_all(&r, "pod.shm", Status::Ok);
    assert_all(&r, "env.backend", Status::Ok);
    assert!(
        checks(&r, "pod.rdma_resource")[0]
            .detail
            .contains("hostPath /dev/infiniband")
    );
    let res = resolve(&load_inputs(&[Input::Path(fixture("pass/lws-host-infiniband.yaml"))]).unwrap());
    let roles: Vec<(String, Role)> = res
        .roles
        .iter()
        .map(|r| (r.component.clone(), r.role.clone()))
        .collect();
    assert_eq!(
        roles,
        vec![
            ("r1-prefill/leader".to_string(), Role::Prefill),
            ("r1-prefill/worker".to_string(), Role::Prefill),
            ("r1-decode/leader".to_string(), Role::Decode),
            ("r1-decode/worker".to_string(), Role::Decode),
        ]
    );
    // The same mount without privileged is blocked by the device cgroup, and without IPC_LOCK
    // memory registration fails.
    let unprivileged = r#"
kind: Pod
metadata: {name: decode-0}
spec:
  containers:
    - name: main
      image: img
      volumeMounts: [{name: ib, mountPath: /dev/infiniband}]
  volumes: [{name: ib, hostPath: {path: /dev/infiniband}}]
"#;
    let r = probe_env(&[Input::Text {
        name: "u.yaml".into(),
        content: unprivileged.into(),
    }])
    .unwrap();
    assert_all(&r, "pod.rdma_resource", Status::Warn);
    assert_all(&r, "pod.ipc_lock", Status::Warn);
}

#[test]
fn configmap_refs_resolve_when_the_configmap_is_loaded() {
    let yaml = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: fabric}
data:
  tls: tcp
  UCX_NET_DEVICES: mlx5_0
  NCCL_SOCKET_IFNAME: ignored-because-env-wins
---
kind: Pod
metadata: {name: decode-0}
spec:
  containers:
    - name: main
      image: img
      envFrom: [{configMapRef: {name: fabric}}]
      env:
        - name: UCX_TLS
          valueFrom: {configMapKeyRef: {name: fabric, key: tls}}
        - {name: NCCL_SOCKET_IFNAME, value: eth0}
"#;
    let res = resolve(
        &load_inputs(&[Input::Text {
            name: "cm.yaml".into(),
            content: yaml.into(),
        }])
        .unwrap(),
    );
    let r = &res.roles[0];
    assert_eq!(r.literal("UCX_TLS"), Some("tcp"));
    assert!(r.var("UCX_TLS").unwrap().origin.starts_with("ConfigMap/fabric tls"));
    assert_eq!(r.literal("UCX_NET_DEVICES"), Some("mlx5_0"));
    assert_eq!(r.literal("NCCL_SOCKET_IFNAME"), Some("eth0"));
    assert!(r.env_from.is_empty());
    let checks = icb_recipe::check(&res);
    let st = |id: &str| checks.iter().find(|c| c.id == id).map(|c| c.status);
    assert_eq!(st("env.resolve"), Some(Status::Ok));
    assert_eq!(st("env.ucx_tls.tcp_only"), Some(Status::Fail));
    assert_eq!(st("env.ucx_net_devices.fmt"), Some(Status::Warn));
}

#[test]
fn base64_secret_data_is_masked_wherever_it_shows_up() {
    let yaml = r#"
apiVersion: v1
kind: Secret
metadata: {name: s}
data: {pw: bXktcGxhaW4tcGFzcy13b3Jk}
---
kind: Pod
metadata: {name: worker-0}
spec:
  containers:
    - name: main
      image: img
      env: [{name: NCCL_NET_GDR_LEVEL, value: my-plain-pass-word}]
"#;
    let r = probe_env(&[Input::Text {
        name: "s.yaml".into(),
        content: yaml.into(),
    }])
    .unwrap();
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("my-plain-pass-word"), "{json}");
    assert!(json.contains("NCCL_NET_GDR_LEVEL=***"), "{json}");
}

#[test]
fn an_image_bump_patch_is_a_patch_not_a_variant() {
    let base = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: decode}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    spec:\n      containers:\n      - name: main\n        image: old\n        env: [{name: UCX_TLS, value: tcp}]\n";
    let bump = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: decode}\nspec:\n  template:\n    spec:\n      containers:\n      - name: main\n        image: new\n";
    let res = resolve(
        &load_inputs(&[
            Input::Text {
                name: "base.yaml".into(),
                content: base.into(),
            },
            Input::Text {
                name: "bump.yaml".into(),
                content: bump.into(),
            },
        ])
        .unwrap(),
    );
    assert_eq!(res.roles.len(), 1);
    assert_eq!(res.roles[0].image.as_deref(), Some("new"));
    assert_eq!(res.roles[0].literal("UCX_TLS"), Some("tcp"));
}
