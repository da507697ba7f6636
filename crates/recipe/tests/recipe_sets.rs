//! A directory of recipes is a SET of recipes: each is judged with its own inputs only, and the
//! roll-up is one line per recipe plus the worst verdict (issue 9).

use icb_core::model::Status;
use icb_recipe::{EnvOptions, Input, probe_env, probe_env_with};
use std::path::PathBuf;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/recipes")
        .join(rel)
}

const DIR: &str = "sets/dynamo-like/recipes";
const RECIPES: &[&str] = &[
    "deepseek/trtllm/disagg",
    "llama-8b/vllm/disagg",
    "llama-8b/vllm/disagg-tcp",
    "qwen3/sglang/disagg",
];

#[test]
fn per_recipe_verdicts_equal_each_recipe_alone() {
    let all = probe_env(&[Input::Path(fixture(DIR))]).unwrap();
    assert_eq!(all.recipes.len(), RECIPES.len(), "{:#?}", all.recipes);
    for rel in RECIPES {
        let alone = probe_env(&[Input::Path(fixture(&format!("{DIR}/{rel}")))]).unwrap();
        let line = all
            .recipes
            .iter()
            .find(|r| r.recipe.contains(&format!("{rel}/deploy.yaml")))
            .unwrap_or_else(|| panic!("no line for {rel}: {:#?}", all.recipes));
        assert_eq!(
            line.status, alone.status,
            "{rel}: {} vs alone {}",
            line.verdict, alone.verdict
        );
        assert_eq!(line.verdict, alone.verdict, "{rel}");
        assert_eq!(line.counts, alone.counts, "{rel}");
    }
    // Three of the four fail alone, so the directory fails (it used to say "can be trusted").
    assert_eq!(all.status, Status::Fail);
    assert!(all.verdict.starts_with("3 of 4 recipes fail"), "{}", all.verdict);
    assert_eq!(all.exit_code(), 1);
}

#[test]
fn the_right_recipes_fail_for_their_own_reasons() {
    let all = probe_env(&[Input::Path(fixture(DIR))]).unwrap();
    let status = |rel: &str| {
        all.recipes
            .iter()
            .find(|r| r.recipe.contains(rel))
            .map(|r| (r.status, r.verdict.clone()))
            .unwrap()
    };
    assert_eq!(status("llama-8b/vllm/disagg/").0, Status::Ok);
    assert!(status("disagg-tcp/").1.contains("env.ucx_tls.tcp_only"));
    assert!(status("sglang/disagg/").1.contains("pod.rdma_resource"));
    assert!(status("trtllm/disagg/").1.contains("env.ucx_tls.cuda"));
}

#[test]
fn configmaps_join_only_the_recipe_that_names_them() {
    let all = probe_env(&[Input::Path(fixture(DIR))]).unwrap();
    for c in all.checks.iter().filter(|c| c.id == "env.backend") {
        let scope = c.scope.as_deref().unwrap_or("");
        if scope.contains("sglang") {
            assert!(c.detail.contains("SGLang"), "{scope}: {}", c.detail);
            assert!(!c.detail.contains("TensorRT"), "{scope}: {}", c.detail);
        }
        if scope.contains("trtllm") {
            // Its own ConfigMap (UCX), never the unused same-named one (MPI) of another folder.
            assert!(c.detail.contains("backend=UCX"), "{scope}: {}", c.detail);
        }
        if scope.contains("vllm") {
            assert!(!c.detail.contains("TensorRT"), "{scope}: {}", c.detail);
        }
    }
}

#[test]
fn provider_overlays_apply_only_when_named() {
    let plain = probe_env(&[Input::Path(fixture(DIR))]).unwrap();
    // Found in addons/providers/: reported as not applied, one next step each.
    let unused: Vec<&String> = plain.next_steps.iter().filter(|s| s.contains("--overlay")).collect();
    assert_eq!(unused.len(), 4, "{:?}", plain.next_steps);
    // Named: the AKS IB overlay gives every prefill/decode an RDMA device, so the SGLang recipe's
    // only failure goes away, in the directory run and alone alike.
    let opts = EnvOptions {
        overlays: vec![Input::Path(fixture(&format!("{DIR}/addons/providers/aks-ib.yaml")))],
        ..Default::default()
    };
    let with = probe_env_with(&[Input::Path(fixture(DIR))], &opts).unwrap();
    let sglang = with.recipes.iter().find(|r| r.recipe.contains("sglang")).unwrap();
    assert_ne!(sglang.status, Status::Fail, "{}", sglang.verdict);
    assert!(sglang.sources.iter().any(|s| s.ends_with("aks-ib.yaml")));
    let alone = probe_env_with(&[Input::Path(fixture(&format!("{DIR}/qwen3/sglang/disagg")))], &opts).unwrap();
    assert_eq!(alone.status, sglang.status);
    assert_eq!(alone.verdict, sglang.verdict);
}

#[test]
fn a_single_recipe_report_has_no_rollup_lines() {
    let one = probe_env(&[Input::Path(fixture(&format!("{DIR}/llama-8b/vllm/disagg")))]).unwrap();
    assert!(one.recipes.is_empty());
    assert_eq!(one.status, Status::Ok, "{}", one.verdict);
}
