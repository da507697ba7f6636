//! Which recipe role models a side (`RecipeRoles`): one rule for the gate's node probes, its
//! bench pod templates and `probe node --recipe`, with errors that list the roles there are.

use icb_recipe::{EnvOptions, Input, RecipeRoles, Role, RoleError, probe_env_and_roles};

fn roles(yaml: &str) -> RecipeRoles {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recipe.yaml");
    std::fs::write(&path, yaml).unwrap();
    let input = Input::from_arg(path.to_str().unwrap());
    probe_env_and_roles(&[input], &EnvOptions::default()).unwrap().1
}

fn deployment(name: &str, tls: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: engine
        image: vllm:1
        args: ["--kv-transfer-config", "{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}}"]
        env:
        - {{name: UCX_TLS, value: "{tls}"}}
"#
    )
}

#[test]
fn each_side_gets_its_own_role_and_an_explicit_role_wins() {
    let r = roles(&format!(
        "{}---\n{}",
        deployment("prefill", "rc,tcp"),
        deployment("decode", "rc,cuda_ipc")
    ));
    let p = r.for_side(Role::Prefill, None).unwrap();
    let d = r.for_side(Role::Decode, None).unwrap();
    assert_eq!(p.env.role, Role::Prefill);
    assert_eq!(d.env.role, Role::Decode);
    assert_eq!(p.transport.ucx_tls.as_deref(), Some("rc,tcp"));
    let both = r.for_side(Role::Prefill, Some("decode")).unwrap();
    assert_eq!(both.env.role, Role::Decode, "--role models both sides");
    let e = r.for_side(Role::Prefill, Some("router")).unwrap_err();
    assert!(matches!(e, RoleError::NoSuchRole { .. }));
    assert_eq!(
        e.to_string(),
        "--role router: the recipe has prefill (prefill), decode (decode)"
    );
    // No side: the roles disagree, so one must be named.
    assert!(matches!(r.shared(None), Err(RoleError::RolesDiffer { .. })));
    assert_eq!(r.shared(Some("prefill")).unwrap().env.role, Role::Prefill);
}

#[test]
fn a_single_worker_models_both_sides_and_is_shared() {
    let r = roles(&deployment("vllm", "rc,cuda_ipc,tcp"));
    assert_eq!(r.roles().len(), 1);
    let p = r.for_side(Role::Prefill, None).unwrap();
    let d = r.for_side(Role::Decode, None).unwrap();
    assert_eq!(p.env.component, d.env.component);
    assert!(r.shared(None).is_ok());
}
