//! What is layered into a recipe (issue 25): a partial document only when a kustomization
//! references it or it is named (`--overlay`, a file argument) — never by `metadata.name` alone —
//! and a kustomization whose base is not there is "render it first" (exit 2), whichever way the
//! kustomization is given.

use icb_core::model::Status;
use icb_recipe::{EnvOptions, Input, RecipeError, probe_env, probe_env_with};
use std::path::Path;

const DGD_RC: &str = "apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: llama}
spec:
  services:
    decode:
      componentType: worker
      subComponentType: decode
      resources: {limits: {gpu: \"1\", custom: {rdma/ib: \"1\"}}}
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0
          securityContext: {capabilities: {add: [IPC_LOCK]}}
          env:
            - {name: UCX_TLS, value: \"rc,cuda_copy\"}
";

// A debug patch nobody references: same kind and name, TCP only.
const DEBUG_PATCH: &str = "apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: llama}
spec:
  services:
    decode:
      extraPodSpec:
        mainContainer:
          env: [{name: UCX_TLS, value: tcp}]
";

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn tls_status(r: &icb_core::checks::ProbeReport) -> Vec<Status> {
    r.checks
        .iter()
        .filter(|c| c.id == "env.ucx_tls.tcp_only")
        .map(|c| c.status)
        .collect()
}

#[test]
fn a_stray_patch_in_the_tree_is_reported_not_layered() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "llama/deploy.yaml", DGD_RC);
    write(t.path(), "llama/debug-tcp.yaml", DEBUG_PATCH);
    let in_dir = probe_env(&[Input::Path(t.path().to_path_buf())]).unwrap();
    let alone = probe_env(&[Input::Path(t.path().join("llama/deploy.yaml"))]).unwrap();
    assert_eq!(tls_status(&in_dir), vec![Status::Ok]);
    assert_eq!(in_dir.status, alone.status, "{} vs {}", in_dir.verdict, alone.verdict);
    assert!(
        in_dir
            .next_steps
            .iter()
            .any(|s| s.contains("debug-tcp.yaml") && s.contains("not applied") && s.contains("--overlay")),
        "{:?}",
        in_dir.next_steps
    );
    // Named, it applies.
    let named = probe_env_with(
        &[Input::Path(t.path().join("llama/deploy.yaml"))],
        &EnvOptions {
            overlays: vec![Input::Path(t.path().join("llama/debug-tcp.yaml"))],
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(tls_status(&named), vec![Status::Fail]);
}

#[test]
fn a_kustomize_overlay_never_takes_a_same_named_document_it_does_not_reference() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "base/deploy.yaml", DGD_RC);
    write(t.path(), "base/kustomization.yaml", "resources: [deploy.yaml]\n");
    write(
        t.path(),
        "overlays/prod/kustomization.yaml",
        "resources: [../../base]\nnamespace: prod\n",
    );
    write(t.path(), "overlays/prod/debug-tcp.yaml", DEBUG_PATCH);
    let r = probe_env(&[Input::Path(t.path().to_path_buf())]).unwrap();
    assert_eq!(tls_status(&r), vec![Status::Ok], "{}", r.verdict);
    // Referenced from the kustomization, the same file is a patch.
    write(
        t.path(),
        "overlays/prod/kustomization.yaml",
        "resources: [../../base]\npatches:\n  - path: debug-tcp.yaml\n",
    );
    let r = probe_env(&[Input::Path(t.path().join("overlays/prod"))]).unwrap();
    assert_eq!(tls_status(&r), vec![Status::Fail], "{}", r.verdict);
}

#[test]
fn a_base_outside_the_tree_is_render_it_first_as_a_dir_or_a_file() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "overlays/aws/kustomization.yaml",
        "resources: [../../base]\npatches:\n  - target: {kind: DynamoGraphDeployment}\n    patch: |-\n      - {op: add, path: /metadata/labels, value: {a: b}}\n",
    );
    for input in [
        t.path().join("overlays/aws"),
        t.path().join("overlays/aws/kustomization.yaml"),
    ] {
        let err = probe_env(&[Input::Path(input.clone())]).unwrap_err();
        assert!(matches!(err, RecipeError::NeedsRender { .. }), "{input:?}: {err}");
        let msg = err.to_string();
        assert!(msg.contains("base missing: render it first"), "{msg}");
        assert!(msg.contains("base"), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
    // With the base present, the file and the folder give the same verdict.
    write(t.path(), "base/deploy.yaml", DGD_RC);
    write(t.path(), "base/kustomization.yaml", "resources: [deploy.yaml]\n");
    let dir = probe_env(&[Input::Path(t.path().join("overlays/aws"))]).unwrap();
    let file = probe_env(&[Input::Path(t.path().join("overlays/aws/kustomization.yaml"))]).unwrap();
    assert_eq!(
        (dir.status, &dir.counts),
        (file.status, &file.counts),
        "{} / {}",
        dir.verdict,
        file.verdict
    );
    assert_eq!(tls_status(&dir), vec![Status::Ok]);
}
