//! The loader, resolver and rules never panic, whatever the bytes (the CI-friendly twin of
//! the `recipe_load` cargo-fuzz target in `fuzz/`).

use icb_recipe::{Input, fuzz_load, load_inputs, parse_bytes, probe_env};
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
            Ok(_) => {
                let report = probe_env(&[Input::Text { name: "p.yaml".into(), content: text }]);
                prop_assert!(report.is_ok());
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.starts_with("p.yaml"), "{}", msg);
                prop_assert!(!msg.contains('\n'), "{}", msg);
            }
        }
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
