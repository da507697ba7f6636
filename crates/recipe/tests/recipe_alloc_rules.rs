//! Issue 39: the allocator trap in a recipe. Prefill and decode on one node (cuda_ipc in
//! UCX_TLS, no RDMA) whose PyTorch allocator hands out VMM or pool memory warn `env.cuda_alloc`;
//! without the variable, with it off, or with cuda_ipc excluded, nothing is said.

use icb_core::checks::{Check, ProbeReport};
use icb_core::model::Status;
use icb_recipe::{Input, probe_env};

/// Two Deployments of one namespace, prefill and decode, with `env` items appended to both.
fn recipe(tls: &str, env: &str) -> String {
    let deployment = |name: &str, flag: &str| {
        format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: llm}}
spec:
  template:
    spec:
      hostIPC: true
      containers:
        - name: main
          image: lmsysorg/sglang:v0.5.0
          command: ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--disaggregation-mode", "{flag}", "--disaggregation-transfer-backend", "nixl"]
          resources: {{limits: {{nvidia.com/gpu: "1"}}}}
          env:
            - {{name: UCX_TLS, value: "{tls}"}}
{env}"#
        )
    };
    format!(
        "{}---\n{}",
        deployment("prefill", "prefill"),
        deployment("decode", "decode")
    )
}

fn probe(yaml: &str) -> ProbeReport {
    probe_env(&[Input::Text {
        name: "pd.yaml".into(),
        content: yaml.into(),
    }])
    .unwrap_or_else(|e| panic!("{e}"))
}

fn alloc_checks(r: &ProbeReport) -> Vec<&Check> {
    r.checks.iter().filter(|c| c.id == "env.cuda_alloc").collect()
}

const IPC_TLS: &str = "cuda_copy,cuda_ipc,sm,tcp";

#[test]
fn expandable_segments_on_a_cuda_ipc_path_warns_naming_the_variable_and_the_fix() {
    let env =
        "            - {name: PYTORCH_CUDA_ALLOC_CONF, value: \"max_split_size_mb:512,expandable_segments:True\"}\n";
    let r = probe(&recipe(IPC_TLS, env));
    let found = alloc_checks(&r);
    assert_eq!(found.len(), 1, "one check per deployment: {found:?}");
    let c = found[0];
    assert_eq!(c.status, Status::Warn);
    assert!(
        c.detail
            .contains("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512,expandable_segments:True (vmm memory)"),
        "{}",
        c.detail
    );
    assert!(c.detail.contains("cuda_ipc"), "{}", c.detail);
    let hint = c.hint.as_deref().unwrap_or_default();
    assert!(
        hint.contains("--cuda-alloc vmm") && hint.contains("SYS_PTRACE"),
        "{hint}"
    );
}

#[test]
fn the_newer_variable_name_and_the_async_backend_are_read_too() {
    let env = "            - {name: PYTORCH_ALLOC_CONF, value: \"backend:cudaMallocAsync\"}\n";
    let r = probe(&recipe(IPC_TLS, env));
    let found = alloc_checks(&r);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .detail
            .contains("PYTORCH_ALLOC_CONF=backend:cudaMallocAsync (pool memory)"),
        "{}",
        found[0].detail
    );
}

#[test]
fn no_warning_without_the_variable_with_it_off_or_without_a_cuda_ipc_path() {
    assert!(alloc_checks(&probe(&recipe(IPC_TLS, ""))).is_empty());
    let off = "            - {name: PYTORCH_CUDA_ALLOC_CONF, value: \"expandable_segments:False\"}\n";
    assert!(alloc_checks(&probe(&recipe(IPC_TLS, off))).is_empty());
    let on = "            - {name: PYTORCH_CUDA_ALLOC_CONF, value: \"expandable_segments:True\"}\n";
    assert!(
        alloc_checks(&probe(&recipe("rc_x,rc,cuda_copy,tcp", on))).is_empty(),
        "cuda_ipc excluded: the KV path cannot go over it"
    );
}

/// `gate` measures with the recipe's allocation: each role's mode as its allocator setting says.
#[test]
fn each_role_reports_the_allocation_its_engine_uses() {
    let mode = |env: &str| {
        let inputs = [Input::Text {
            name: "pd.yaml".into(),
            content: recipe(IPC_TLS, env),
        }];
        let (_, roles) = icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default()).unwrap();
        let prefill = roles.for_side(icb_recipe::Role::Prefill, None).unwrap();
        icb_recipe::role_cuda_alloc(&prefill.env)
    };
    use icb_core::CudaAllocMode::*;
    assert_eq!(mode(""), Legacy);
    assert_eq!(
        mode("            - {name: PYTORCH_CUDA_ALLOC_CONF, value: \"expandable_segments:True\"}\n"),
        Vmm
    );
    assert_eq!(
        mode("            - {name: PYTORCH_ALLOC_CONF, value: \"backend:cudaMallocAsync\"}\n"),
        Pool
    );
}

/// Prefill and decode Deployments whose container runs `command` (`ROLE` replaced by the role),
/// cuda_ipc allowed, no PyTorch allocator setting.
fn engine_recipe(image: &str, command: &str) -> String {
    let deployment = |role: &str| {
        format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {role}, namespace: llm}}
spec:
  template:
    spec:
      hostIPC: true
      containers:
        - name: main
          image: {image}
          command: [{}]
          resources: {{limits: {{nvidia.com/gpu: "1"}}}}
          env:
            - {{name: UCX_TLS, value: "{IPC_TLS}"}}
"#,
            command.replace("ROLE", role)
        )
    };
    format!("{}---\n{}", deployment("prefill"), deployment("decode"))
}

const VLLM: &str =
    r#""vllm", "serve", "m", "--kv-transfer-config", "{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}""#;
const SGLANG: &str = r#""python3", "-m", "sglang.launch_server", "--model-path", "m", "--disaggregation-mode", "ROLE", "--disaggregation-transfer-backend", "nixl""#;

fn prefill_engine(yaml: &str) -> (icb_recipe::EngineArgs, icb_core::CudaAllocMode) {
    let inputs = [Input::Text {
        name: "pd.yaml".into(),
        content: yaml.into(),
    }];
    let (_, roles) = icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default()).unwrap();
    let prefill = roles.for_side(icb_recipe::Role::Prefill, None).unwrap();
    (prefill.env.engine.clone(), icb_recipe::role_cuda_alloc(&prefill.env))
}

/// vLLM's sleep mode and SGLang's memory saver put the KV cache in memory their own allocators
/// map with cuMemCreate: the same trap as expandable_segments, under the same conditions.
#[test]
fn the_engines_own_allocator_flags_warn_like_expandable_segments() {
    use icb_recipe::EngineAllocator::*;
    for (image, command, flag, which) in [
        ("vllm/vllm-openai:v0.11.0", VLLM, "--enable-sleep-mode", VllmSleepMode),
        (
            "lmsysorg/sglang:v0.5.0",
            SGLANG,
            "--enable-memory-saver",
            SglangMemorySaver,
        ),
    ] {
        let yaml = engine_recipe(image, &format!("{command}, \"{flag}\""));
        let (engine, mode) = prefill_engine(&yaml);
        assert_eq!(engine.allocator, Some(which), "{flag}");
        assert_eq!(mode, icb_core::CudaAllocMode::Vmm, "{flag}: gate measures VMM memory");
        let r = probe(&yaml);
        let found = alloc_checks(&r);
        assert_eq!(found.len(), 1, "{flag}: {found:?}");
        assert_eq!(found[0].status, Status::Warn, "{flag}");
        assert!(found[0].detail.contains(flag), "{flag}: {}", found[0].detail);
        assert!(
            found[0].hint.as_deref().unwrap_or_default().contains(flag),
            "{flag}: the hint names the flag to drop"
        );

        // Without the flag, turned off, or with cuda_ipc excluded: nothing.
        for off in [
            engine_recipe(image, command),
            engine_recipe(image, &format!("{command}, \"{flag}=false\"")),
            engine_recipe(image, &format!("{command}, \"{flag}\"")).replace(IPC_TLS, "rc_x,rc,cuda_copy,tcp"),
        ] {
            assert!(alloc_checks(&probe(&off)).is_empty(), "{flag}: {off}");
        }
        let (engine, mode) = prefill_engine(&engine_recipe(image, command));
        assert_eq!(
            (engine.allocator, mode),
            (None, icb_core::CudaAllocMode::Legacy),
            "{flag}"
        );
    }
}
