//! Reads the KV-transfer backend and the role out of engine command lines (vLLM, SGLang,
//! TensorRT-LLM, each bare or launched through Dynamo) and TensorRT-LLM config text.

use crate::model::{EngineAllocator, EngineArgs, Role};
use crate::shell::shell_words;

/// Reads container `command` + `args`. A word with whitespace is a script (`bash -c "…"`) and
/// is split like a shell would; other words are taken verbatim (JSON keeps its quotes).
pub fn read_args(engine: &mut EngineArgs, words: &[String]) {
    let mut tokens = Vec::new();
    let mut prev: Option<&str> = None;
    for w in words {
        // A flag's value (`--kv-transfer-config`, then `{"kv_connector": …}` as its own list
        // item) is one argument even with spaces; JSON never is a script either.
        let is_value = prev.is_some_and(|p| p.starts_with("--") && !p.contains('='));
        let is_json = w.trim_start().starts_with(['{', '[']);
        if w.chars().any(char::is_whitespace) && !is_value && !is_json {
            tokens.extend(shell_words(w));
        } else {
            tokens.push(w.clone());
        }
        prev = Some(w);
    }
    for t in &tokens {
        let lower = t.to_ascii_lowercase();
        if lower.starts_with("dynamo.") || lower.contains("/dynamo/") && lower.ends_with(".py") {
            engine.dynamo = true;
        }
        if engine.framework.is_none() {
            if lower.contains("sglang") {
                engine.framework = Some("sglang".into());
            } else if lower.contains("trtllm") || lower.contains("tensorrt_llm") {
                engine.framework = Some("trtllm".into());
            } else if lower.contains("vllm") && !lower.starts_with("--") {
                engine.framework = Some("vllm".into());
            }
        }
    }
    let mut i = 0;
    while i < tokens.len() {
        let tok = &tokens[i];
        i += 1;
        if !tok.starts_with("--") {
            continue;
        }
        let (flag, inline) = match tok.split_once('=') {
            Some((f, v)) => (f.replace('_', "-"), Some(v.to_string())),
            None => (tok.replace('_', "-"), None),
        };
        let mut value = || -> Option<String> {
            if inline.is_some() {
                return inline.clone();
            }
            let v = tokens.get(i).filter(|v| !v.starts_with("--")).cloned();
            if v.is_some() {
                i += 1;
            }
            v
        };
        match flag.as_str() {
            "--kv-transfer-config" => match value() {
                Some(json) => read_kv_transfer_config(engine, &json),
                None => engine.problems.push("--kv-transfer-config has no value".into()),
            },
            "--disaggregation-transfer-backend" => engine.sglang_backend = value(),
            "--config" => engine.config_file = value(),
            "--disaggregation-mode" => {
                if let Some(v) = value() {
                    engine.role_hint = role_word(&v);
                }
            }
            "--is-prefill-worker" => engine.role_hint = Some(Role::Prefill),
            "--is-decode-worker" => engine.role_hint = Some(Role::Decode),
            "--connector" => {
                if let Some(v) = value() {
                    engine.kv_connector = Some(v);
                }
            }
            "--model" | "--model-path" => engine.model = value(),
            "--tensor-parallel-size" | "--tp" | "--tp-size" => {
                engine.tensor_parallel = value().and_then(|v| v.trim().parse().ok());
            }
            "--block-size" | "--page-size" | "--tokens-per-block" => {
                engine.page_size = value().and_then(|v| v.trim().parse().ok());
            }
            // Switches: no value taken from the next word; `=false` (or `--no-…`) turns them off.
            "--enable-sleep-mode" | "--enable-memory-saver" => {
                let on = inline
                    .as_deref()
                    .is_none_or(|v| !matches!(v.trim(), "false" | "False" | "0"));
                let which = if flag == "--enable-sleep-mode" {
                    EngineAllocator::VllmSleepMode
                } else {
                    EngineAllocator::SglangMemorySaver
                };
                engine.allocator = on.then_some(which);
            }
            "--no-enable-sleep-mode" | "--no-enable-memory-saver" => engine.allocator = None,
            _ => {}
        }
    }
    if engine.model.is_none() {
        engine.model = positional_model(&tokens);
    }
    let joined = words.join(" ");
    if let Some(b) = trt_backend_in_text(&joined) {
        engine.trt_backend = Some(b);
    }
}

/// `vllm serve MODEL` / `trtllm-serve MODEL`: the first word after the serve command that is
/// not a flag.
fn positional_model(tokens: &[String]) -> Option<String> {
    let at = tokens.iter().position(|t| {
        let base = t.rsplit('/').next().unwrap_or(t);
        base == "trtllm-serve" || base == "serve" && tokens.iter().any(|w| w.ends_with("vllm"))
    })?;
    tokens[at + 1..]
        .iter()
        .find(|t| !t.starts_with('-'))
        .filter(|t| !t.starts_with("serve"))
        .cloned()
}

fn role_word(v: &str) -> Option<Role> {
    match v.trim().to_ascii_lowercase().as_str() {
        "prefill" | "context" | "context_only" => Some(Role::Prefill),
        "decode" | "generation" | "generation_only" => Some(Role::Decode),
        _ => None,
    }
}

fn read_kv_transfer_config(engine: &mut EngineArgs, json: &str) {
    let parsed: Result<serde_json::Value, _> = serde_json::from_str(json);
    let Ok(cfg) = parsed else {
        engine
            .problems
            .push("--kv-transfer-config is not valid JSON; the engine will refuse to start".into());
        return;
    };
    if let Some(c) = cfg.get("kv_connector").and_then(|v| v.as_str()) {
        engine.kv_connector = Some(c.to_string());
    }
    if let Some(r) = cfg.get("kv_role").and_then(|v| v.as_str()) {
        engine.kv_role = Some(r.to_string());
        if engine.role_hint.is_none() {
            engine.role_hint = match r {
                "kv_producer" => Some(Role::Prefill),
                "kv_consumer" => Some(Role::Decode),
                _ => None,
            };
        }
    }
    let backends = cfg
        .get("backends")
        .or_else(|| cfg.get("kv_connector_extra_config").and_then(|e| e.get("backends")));
    if let Some(list) = backends.and_then(|b| b.as_array()) {
        engine.nixl_backends = list.iter().filter_map(|b| b.as_str()).map(str::to_string).collect();
    }
}

/// `disaggregation-transfer-backend: X` (or `_` spelling) in an SGLang `--config` YAML file.
pub fn sglang_backend_in_text(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            let key = key.trim().trim_matches(['"', '\'']).replace('_', "-");
            (key == "disaggregation-transfer-backend").then(|| value.trim().trim_matches(['"', '\'']).to_string())
        })
        .filter(|v| !v.is_empty())
}

/// Finds `cache_transceiver_config … backend: X` in YAML or JSON text (a ConfigMap's
/// engine config, or a heredoc in a launch script).
pub fn trt_backend_in_text(text: &str) -> Option<String> {
    let start = text.find("cache_transceiver_config")?;
    let rest = &text[start..];
    let window_end = rest.char_indices().nth(400).map(|(i, _)| i).unwrap_or(rest.len());
    let window = &rest[..window_end];
    let b = window.find("backend")?;
    let after = window[b + "backend".len()..].trim_start_matches(['"', '\'']);
    let after = after.trim_start().strip_prefix(':')?;
    let value: String = after
        .trim_start()
        .trim_start_matches(['"', '\''])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!value.is_empty()).then_some(value)
}

/// How an engine's KV backend reads, and whether ic-bench knows it.
pub struct BackendView {
    pub text: String,
    pub known: bool,
    /// Set when the backend moves no data (SGLang `fake`).
    pub caveat: Option<String>,
}

const VLLM_CONNECTORS: &[&str] = &[
    "nixlconnector",
    "lmcacheconnectorv1",
    "lmcacheconnector",
    "lmcachempconnector",
    "mooncakeconnector",
    "mooncakestoreconnector",
    "p2pncclconnector",
    "multiconnector",
    "offloadingconnector",
    "sharedstorageconnector",
    "dynamoconnector",
    "nixl",
    "lmcache",
    "kvbm",
    "none",
];
const NIXL_BACKENDS: &[&str] = &[
    "ucx",
    "ucx_mo",
    "libfabric",
    "gds",
    "gds_mt",
    "posix",
    "obj",
    "mooncake",
    "uccl",
    "gpunetio",
    "hf3fs",
];
const SGLANG_BACKENDS: &[&str] = &["nixl", "mooncake", "ascend", "mori", "fake"];
const TRT_BACKENDS: &[&str] = &["default", "ucx", "nixl", "mpi", "mooncake"];

fn known(list: &[&str], v: &str) -> bool {
    list.contains(&v.trim().to_ascii_lowercase().as_str())
}

/// Describes the backend(s) named by the engine args, or `None` when none is named.
pub fn describe_backend(e: &EngineArgs) -> Option<BackendView> {
    let mut parts = Vec::new();
    let mut ok = true;
    let mut caveat = None;
    if let Some(c) = &e.kv_connector {
        ok &= known(VLLM_CONNECTORS, c);
        parts.push(format!("vLLM kv_connector={c}"));
    }
    if !e.nixl_backends.is_empty() {
        ok &= e.nixl_backends.iter().all(|b| known(NIXL_BACKENDS, b));
        parts.push(format!("NIXL backends=[{}]", e.nixl_backends.join(",")));
    }
    if let Some(b) = &e.sglang_backend {
        ok &= known(SGLANG_BACKENDS, b);
        if b.eq_ignore_ascii_case("fake") {
            caveat = Some("SGLang's `fake` backend transfers no KV cache (test-only)".to_string());
        }
        parts.push(format!("SGLang disaggregation-transfer-backend={b}"));
    }
    if let Some(b) = &e.trt_backend {
        ok &= known(TRT_BACKENDS, b);
        parts.push(format!("TensorRT-LLM cache_transceiver_config.backend={b}"));
    }
    (!parts.is_empty()).then(|| BackendView {
        text: parts.join(", "),
        known: ok,
        caveat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_handle_quotes_and_continuations() {
        let w = shell_words(
            "python3 -m dynamo.vllm \\\n  --kv-transfer-config '{\"kv_connector\":\"NixlConnector\"}' --x \"a b\"",
        );
        assert_eq!(
            w,
            vec![
                "python3",
                "-m",
                "dynamo.vllm",
                "--kv-transfer-config",
                "{\"kv_connector\":\"NixlConnector\"}",
                "--x",
                "a b"
            ]
        );
    }

    #[test]
    fn reads_vllm_json_and_sglang_flags() {
        let mut e = EngineArgs::default();
        read_args(
            &mut e,
            &[
                "vllm".into(),
                "serve".into(),
                "--kv-transfer-config".into(),
                r#"{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":{"backends":["UCX","LIBFABRIC"]}}"#.into(),
            ],
        );
        assert_eq!(e.kv_connector.as_deref(), Some("NixlConnector"));
        assert_eq!(e.nixl_backends, vec!["UCX", "LIBFABRIC"]);
        let mut s = EngineArgs::default();
        read_args(
            &mut s,
            &[
                "bash".into(),
                "-c".into(),
                "python3 -m sglang.launch_server --disaggregation-mode decode --disaggregation-transfer-backend=nixl"
                    .into(),
            ],
        );
        assert_eq!(s.sglang_backend.as_deref(), Some("nixl"));
        assert_eq!(s.role_hint, Some(Role::Decode));
        assert_eq!(s.framework.as_deref(), Some("sglang"));
    }

    #[test]
    fn json_with_spaces_as_its_own_list_item_stays_whole() {
        let mut e = EngineArgs::default();
        read_args(
            &mut e,
            &[
                "vllm".into(),
                "serve".into(),
                "--kv-transfer-config".into(),
                r#"{"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"backends": ["UCX"]}}"#.into(),
            ],
        );
        assert!(e.problems.is_empty(), "{:?}", e.problems);
        assert_eq!(e.nixl_backends, vec!["UCX"]);
    }

    #[test]
    fn bad_json_is_a_problem_not_a_panic() {
        let mut e = EngineArgs::default();
        read_args(&mut e, &["--kv-transfer-config".into(), "{not json".into()]);
        assert_eq!(e.problems.len(), 1);
    }

    #[test]
    fn trt_backend_from_yaml_text() {
        assert_eq!(
            trt_backend_in_text("cache_transceiver_config:\n  backend: UCX\n").as_deref(),
            Some("UCX")
        );
        assert_eq!(
            trt_backend_in_text("{\"cache_transceiver_config\": {\"backend\": \"NIXL\"}}").as_deref(),
            Some("NIXL")
        );
        assert_eq!(trt_backend_in_text("nothing here"), None);
    }

    #[test]
    fn the_model_tp_and_block_size_are_read_for_the_kv_shape() {
        let words = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        let mut v = EngineArgs::default();
        read_args(
            &mut v,
            &words("vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 8 --block-size 32"),
        );
        assert_eq!(v.model.as_deref(), Some("meta-llama/Llama-3.1-70B-Instruct"));
        assert_eq!((v.tensor_parallel, v.page_size), (Some(8), Some(32)));
        let mut d = EngineArgs::default();
        read_args(
            &mut d,
            &words("python3 -m dynamo.vllm --model Qwen/Qwen3-32B --tensor-parallel-size=2"),
        );
        assert_eq!(
            (d.model.as_deref(), d.tensor_parallel, d.page_size),
            (Some("Qwen/Qwen3-32B"), Some(2), None)
        );
        let mut s = EngineArgs::default();
        read_args(
            &mut s,
            &words("python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 16 --page-size 64"),
        );
        assert_eq!(
            (s.model.as_deref(), s.tensor_parallel, s.page_size),
            (Some("deepseek-ai/DeepSeek-V3"), Some(16), Some(64))
        );
        let mut t = EngineArgs::default();
        read_args(&mut t, &words("trtllm-serve openai/gpt-oss-120b --tp_size 4"));
        assert_eq!(
            (t.model.as_deref(), t.tensor_parallel),
            (Some("openai/gpt-oss-120b"), Some(4))
        );
    }
}
