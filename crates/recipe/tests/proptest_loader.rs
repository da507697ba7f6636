//! The loader, resolver and rules never panic, whatever the bytes (the CI-friendly twin of
//! the `recipe_load` cargo-fuzz target in `fuzz/`).

use icb_recipe::{Input, RecipeError, fuzz_load, load_inputs, parse_bytes, probe_env};
use proptest::prelude::*;

/// Fragments that steer random text towards the shapes the resolver walks.
fn yamlish() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "apiVersion: nvidia.com/v1alpha1\n",
        "apiVersion: nvidia.com/v1beta1\n",
        "kind: DynamoGraphDeployment\n",
        "kind: Deployment\n",
        "kind: LeaderWorkerSet\n",
        "kind: Pod\n",
        "kind: Component\n",
        "kind: ConfigMap\n",
        "kind: Secret\n",
        "metadata: {name: x}\n",
        "spec:\n",
        "  services:\n",
        "    decode:\n",
        "      subComponentType: prefill\n",
        "  components:\n",
        "  - name: c\n    type: decode\n",
        "  template:\n    spec:\n",
        "      containers:\n",
        "      - name: main\n",
        "        env:\n",
        "        - {name: UCX_TLS, value: tcp}\n",
        "        - value: rc\n          name: UCX_TLS\n",
        "        - {name: X, $patch: delete}\n",
        "        - name: Y\n          valueFrom: {secretKeyRef: {name: s, key: k}}\n",
        "        args: [\"--kv-transfer-config\", '{\"kv_connector\":', \"bash -c 'a \\\"b\"]\n",
        "        resources: {limits: {rdma/ib: 1, nvidia.com/gpu: [1]}}\n",
        "env: {UCX_TLS: tcp, A: {$patch: delete}}\n",
        "patches:\n- patch: |\n    - op: add\n      path: /spec/-\n      value: 1\n",
        "patches:\n- patch: \"kind: Pod\\nspec: 1\"\n",
        "leaderWorkerTemplate: {size: x, workerTemplate: {spec: {containers: 5}}}\n",
        "&a [*a]\n",
        "<<: *b\n",
        "? [complex]\n: key\n",
        "---\n",
        "# - name: UCX_TLS\n",
        "data: {prefill.yaml: \"cache_transceiver_config: {backend: \"}\n",
        "\t",
        "  ",
        "- ",
        ": ",
        "[",
        "{",
        "\"",
        "'",
        "|\n",
    ]);
    prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        fuzz_load(&bytes);
        let _ = parse_bytes("fuzz", &bytes);
    }

    #[test]
    fn yamlish_text_never_panics_and_errors_are_one_line(text in yamlish()) {
        match load_inputs(&[Input::Text { name: "p.yaml".into(), content: text.clone() }]) {
            Ok(_) => match probe_env(&[Input::Text { name: "p.yaml".into(), content: text }]) {
                Ok(_) => {}
                // Loadable text in which no document is a recipe: refused in one line.
                Err(e @ RecipeError::NoRecipe { .. }) => {
                    let msg = e.to_string();
                    prop_assert!(msg.starts_with("p.yaml: no recipe found"), "{}", msg);
                    prop_assert!(!msg.contains('\n'), "{}", msg);
                }
                // Objects of no supported kind (a Service, a Component alone): refused in one line.
                Err(e @ RecipeError::Unsupported { .. }) => {
                    let msg = e.to_string();
                    prop_assert!(msg.starts_with("p.yaml: no supported recipe kind"), "{}", msg);
                    prop_assert!(!msg.contains('\n'), "{}", msg);
                }
                Err(e) => prop_assert!(false, "{}", e),
            },
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.starts_with("p.yaml"), "{}", msg);
                prop_assert!(!msg.contains('\n'), "{}", msg);
            }
        }
    }
}

fn pod(name: &str, var: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: main\n    image: img\n    env:\n    - {{name: {var}, value: \"{value}\"}}\n    - {{name: NCCL_P2P_LEVEL, value: \"{value}\"}}\n"
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Secret-named transport variables differ between prefill and decode, so the symmetry rule
    /// reports them; their values must still never reach the report.
    #[test]
    fn secret_values_never_reach_the_report(
        a in "[A-Za-z0-9]{6,40}",
        b in "[A-Za-z0-9]{6,40}",
        var in prop::sample::select(vec!["NCCL_API_TOKEN", "UCX_SECRET_KEY", "NIXL_PASSWORD", "FI_CREDENTIALS"]),
    ) {
        let (a, b) = (format!("Zq{a}"), format!("Zq{b}"));
        let text = format!("{}---\n{}", pod("prefill-0", var, &a), pod("decode-0", var, &b));
        let report = probe_env(&[Input::Text { name: "p.yaml".into(), content: text }]).unwrap();
        let json = serde_json::to_string(&report).unwrap();
        prop_assert!(json.contains(var) || a == b, "{}", json);
        prop_assert!(!json.contains(&a) && !json.contains(&b), "{}", json);
    }
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    for text in ["[".repeat(100_000), "{a: ".repeat(50_000), "- ".repeat(50_000)] {
        fuzz_load(text.as_bytes());
        let r = parse_bytes("deep.yaml", text.as_bytes());
        if let Err(e) = r {
            assert!(e.to_string().starts_with("deep.yaml"), "{e}");
        }
    }
    let mut block = String::new();
    for i in 0..2000 {
        block.push_str(&" ".repeat(i));
        block.push_str("a:\n");
    }
    fuzz_load(block.as_bytes());
}

const KNOWN_IDS: &[&str] = &[
    "env.resolve",
    "env.backend",
    "env.critical_vars",
    "env.role_symmetry",
    "env.ucx_tls.tcp_only",
    "env.ucx_tls.cuda",
    "env.ucx_net_devices.fmt",
    "env.rndv",
    "env.nccl_ib_disable",
    "env.nccl_debug_knobs",
    "env.gid_index",
    "env.efa",
    "env.ucx_net_devices.rdma",
    "env.nic_agreement",
    "env.ucx_net_devices.tcp",
    "env.ucx_rndv_rails",
    "env.nccl_net",
    "env.gpu_direct",
    "env.ucx_log_level",
    "pod.ipc_lock",
    "pod.rdma_resource",
    "pod.shm",
    "pod.cuda_ipc_xpod",
    "pod.placement",
];

/// A well-formed prefill/decode Deployment pair with env, devices and privileges drawn at random.
fn recipe() -> impl Strategy<Value = String> {
    let var = prop::sample::select(vec![
        ("UCX_TLS", "tcp"),
        ("UCX_TLS", "rc_x,rc,cuda_copy,cuda_ipc"),
        ("UCX_TLS", "^cuda_ipc"),
        ("UCX_TLS", "srd,cuda_copy"),
        ("UCX_NET_DEVICES", "mlx5_0:1,mlx5_1:1"),
        ("UCX_NET_DEVICES", "mlx5_0"),
        ("UCX_RNDV_SCHEME", "get_zcopy"),
        ("UCX_RNDV_THRESH", "0"),
        ("NCCL_IB_DISABLE", "1"),
        ("NCCL_IB_GID_INDEX", "3"),
        ("UCX_IB_GID_INDEX", "x"),
        ("NCCL_P2P_DISABLE", "1"),
        ("FI_PROVIDER", "efa"),
        ("NVIDIA_VISIBLE_DEVICES", "all"),
    ]);
    let device = prop::sample::select(vec![
        "",
        "rdma/ib: \"1\"",
        "vpc.amazonaws.com/efa: \"4\"",
        "nvidia.com/sriov_vf: \"1\"",
    ]);
    let sc = prop::sample::select(vec![
        "",
        "securityContext: {privileged: true}",
        "securityContext: {capabilities: {add: [IPC_LOCK]}}",
    ]);
    let side = (
        prop::collection::vec(var, 0..6),
        device,
        sc,
        any::<bool>(),
        any::<bool>(),
    );
    (side.clone(), side).prop_map(|(p, d)| {
        let one = |name: &str, (env, device, sc, host_ipc, host_pid): &(Vec<(&str, &str)>, &str, &str, bool, bool)| {
            let env: String = env.iter().map(|(k, v)| format!("            - {{name: {k}, value: \"{v}\"}}\n")).collect();
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  template:\n    spec:\n      hostIPC: {host_ipc}\n      hostPID: {host_pid}\n      containers:\n        - name: main\n          image: img\n          {sc}\n          resources: {{limits: {{nvidia.com/gpu: \"1\", {device}}}}}\n          env:\n            - {{name: NCCL_SOCKET_IFNAME, value: eth0}}\n{env}"
            )
        };
        format!("{}---\n{}", one("prefill", &p), one("decode", &d))
    })
}

fn summary(text: &str) -> Vec<(String, String, String)> {
    let report = probe_env(&[Input::Text {
        name: "r.yaml".into(),
        content: text.to_string(),
    }])
    .unwrap();
    report
        .checks
        .iter()
        .map(|c| {
            (
                c.id.clone(),
                c.status.as_str().to_string(),
                c.scope.clone().unwrap_or_default(),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Well-formed recipes always resolve; every check has a known id, a scope and one line.
    #[test]
    fn recipes_yield_known_scoped_one_line_checks(text in recipe()) {
        let report = probe_env(&[Input::Text { name: "r.yaml".into(), content: text }]).unwrap();
        for c in &report.checks {
            prop_assert!(KNOWN_IDS.contains(&c.id.as_str()), "unknown id {}", c.id);
            prop_assert!(c.scope.is_some());
            prop_assert!(!c.detail.contains('\n') && !c.detail.is_empty());
        }
        prop_assert!(report.checks.iter().any(|c| c.id == "env.role_symmetry"));
    }

    /// Commented-out variables never count: sprinkling comment lines changes no check.
    #[test]
    fn comment_lines_change_nothing(text in recipe(), at in prop::collection::vec(any::<prop::sample::Index>(), 1..6)) {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        for idx in at {
            let i = idx.index(lines.len() + 1);
            lines.insert(i, "# - name: UCX_TLS   # export NCCL_IB_DISABLE=1".to_string());
            lines.insert(i, "            #   value: tcp".to_string());
        }
        let commented = lines.join("\n") + "\n";
        prop_assert_eq!(summary(&text), summary(&commented));
    }
}

/// Inputs shaped to make naive loops quadratic (huge env lists, thousands of patches of one
/// object, thousands of deployments and secrets) still finish: the CI timeout is the judge.
#[test]
fn hostile_sizes_stay_linear() {
    let mut text = String::from(
        "kind: Pod\nmetadata: {name: big-env}\nspec:\n  containers:\n  - name: main\n    image: i\n    env:\n",
    );
    for i in 0..6_000 {
        text.push_str(&format!(
            "    - {{name: V{i}, value: x}}\n    - {{name: V{}, $patch: delete}}\n",
            i / 2
        ));
    }
    // One object, 300 partial patches (each would walk a 12,000-item env list if uncapped).
    text.push_str(
        &text
            .replace("big-env", "decode-0")
            .replace("kind: Pod", "---\nkind: Pod"),
    );
    for _ in 0..300 {
        text.push_str("---\nkind: Pod\nmetadata: {name: decode-0}\nspec: {containers: [{name: main, env: [{name: UCX_TLS, value: tcp}]}]}\n");
    }
    for i in 0..500 {
        text.push_str(&format!(
            "---\nkind: DynamoGraphDeployment\nmetadata: {{name: d{i}}}\nspec:\n  services:\n    p: {{subComponentType: prefill}}\n    d: {{subComponentType: decode}}\n"
        ));
    }
    text.push_str("---\nkind: Secret\nmetadata: {name: s}\nstringData:\n");
    for i in 0..4_000 {
        text.push_str(&format!("  k{i}: secret-value-{i}\n"));
    }
    let report = probe_env(&[Input::Text {
        name: "big.yaml".into(),
        content: text,
    }])
    .unwrap();
    assert!(report.checks.len() > 500 * 2);
    let decode = report
        .checks
        .iter()
        .find(|c| c.id == "env.ucx_tls.tcp_only" && c.scope.as_deref().unwrap_or("").contains("decode-0"))
        .unwrap();
    // UCX_TLS=tcp was appended past the 4096-entry reading cap: it is not seen, by design.
    assert_eq!(decode.status.as_str(), "ok");
    assert!(report.checks.iter().any(|c| c.detail.contains("more than 256 patches")));
}
