//! What of a model shapes its KV cache: layers, and per layer either GQA's K/V heads or MLA's
//! one compressed latent. Built-in models carry the numbers of their Hugging Face
//! `config.json`; any other model is read from its own `config.json`.

use crate::KvError;
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::Path;

/// The attention shape that decides a layer's KV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Attention {
    /// Multi-head / grouped-query attention: K and V, each `kv_heads × head_dim` per token.
    Gqa { kv_heads: u32, head_dim: u32 },
    /// Multi-head latent attention (DeepSeek-V2/V3/R1): one latent of
    /// `kv_lora_rank + qk_rope_head_dim` elements per token, the same on every TP rank.
    Mla { kv_lora_rank: u32, qk_rope_head_dim: u32 },
}

impl Attention {
    /// The KV heads TP splits: GQA's K/V heads; MLA's latent counts as one head that is never
    /// split (vLLM's `TpKVTopology.replicates_kv_cache`: "MLA is always replicated").
    pub fn kv_heads(&self) -> u32 {
        match self {
            Attention::Gqa { kv_heads, .. } => *kv_heads,
            Attention::Mla { .. } => 1,
        }
    }

    /// Elements per token of one head in one region (K, V or the latent).
    pub fn head_elements(&self) -> u64 {
        match self {
            Attention::Gqa { head_dim, .. } => u64::from(*head_dim),
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
            } => u64::from(*kv_lora_rank) + u64::from(*qk_rope_head_dim),
        }
    }

    /// Memory regions per layer: K and V apart for GQA (vLLM registers them as two regions,
    /// `NixlConnectorWorker.register_kv_caches`, `split_k_and_v`), one latent for MLA.
    pub fn regions_per_layer(&self) -> u32 {
        match self {
            Attention::Gqa { .. } => 2,
            Attention::Mla { .. } => 1,
        }
    }

    pub fn is_mla(&self) -> bool {
        matches!(self, Attention::Mla { .. })
    }
}

/// A model as far as its KV cache goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KvModel {
    /// The built-in name, or the config.json path it was read from.
    pub name: String,
    /// Where the numbers come from (a Hugging Face repository's config.json, or the file).
    pub source: String,
    pub layers: u32,
    /// Query heads: the engine requires the TP size to divide them.
    pub attention_heads: u32,
    pub attention: Attention,
    /// What the geometry leaves out for this model (sliding-window layers counted as full).
    pub notes: Vec<String>,
}

struct BuiltIn {
    name: &'static str,
    hf_repo: &'static str,
    layers: u32,
    attention_heads: u32,
    attention: Attention,
    note: Option<&'static str>,
}

/// The built-in models. Every number is the field of the same name in the `config.json` of
/// the Hugging Face repository named (head_dim, where the file has none, is hidden_size /
/// num_attention_heads).
const BUILT_INS: &[BuiltIn] = &[
    // meta-llama/Llama-3.1-8B-Instruct: num_hidden_layers 32, num_attention_heads 32,
    // num_key_value_heads 8, hidden_size 4096 (head_dim 4096/32 = 128).
    BuiltIn {
        name: "llama-3.1-8b",
        hf_repo: "meta-llama/Llama-3.1-8B-Instruct",
        layers: 32,
        attention_heads: 32,
        attention: Attention::Gqa {
            kv_heads: 8,
            head_dim: 128,
        },
        note: None,
    },
    // meta-llama/Llama-3.1-70B-Instruct: num_hidden_layers 80, num_attention_heads 64,
    // num_key_value_heads 8, hidden_size 8192 (head_dim 8192/64 = 128).
    BuiltIn {
        name: "llama-3.1-70b",
        hf_repo: "meta-llama/Llama-3.1-70B-Instruct",
        layers: 80,
        attention_heads: 64,
        attention: Attention::Gqa {
            kv_heads: 8,
            head_dim: 128,
        },
        note: None,
    },
    // Qwen/Qwen3-32B: num_hidden_layers 64, num_attention_heads 64, num_key_value_heads 8,
    // head_dim 128 (explicit: hidden_size 5120 / 64 would give 80).
    BuiltIn {
        name: "qwen3-32b",
        hf_repo: "Qwen/Qwen3-32B",
        layers: 64,
        attention_heads: 64,
        attention: Attention::Gqa {
            kv_heads: 8,
            head_dim: 128,
        },
        note: None,
    },
    // Qwen/Qwen3-235B-A22B: num_hidden_layers 94, num_attention_heads 64,
    // num_key_value_heads 4, head_dim 128.
    BuiltIn {
        name: "qwen3-235b-a22b",
        hf_repo: "Qwen/Qwen3-235B-A22B",
        layers: 94,
        attention_heads: 64,
        attention: Attention::Gqa {
            kv_heads: 4,
            head_dim: 128,
        },
        note: None,
    },
    // deepseek-ai/DeepSeek-V3 (DeepSeek-R1 has the same config): num_hidden_layers 61,
    // num_attention_heads 128, kv_lora_rank 512, qk_rope_head_dim 64.
    BuiltIn {
        name: "deepseek-v3",
        hf_repo: "deepseek-ai/DeepSeek-V3",
        layers: 61,
        attention_heads: 128,
        attention: Attention::Mla {
            kv_lora_rank: 512,
            qk_rope_head_dim: 64,
        },
        note: None,
    },
    BuiltIn {
        name: "deepseek-r1",
        hf_repo: "deepseek-ai/DeepSeek-R1",
        layers: 61,
        attention_heads: 128,
        attention: Attention::Mla {
            kv_lora_rank: 512,
            qk_rope_head_dim: 64,
        },
        note: None,
    },
    // openai/gpt-oss-120b: num_hidden_layers 36, num_attention_heads 64,
    // num_key_value_heads 8, head_dim 64; layer_types alternates sliding (sliding_window 128)
    // and full attention.
    BuiltIn {
        name: "gpt-oss-120b",
        hf_repo: "openai/gpt-oss-120b",
        layers: 36,
        attention_heads: 64,
        attention: Attention::Gqa {
            kv_heads: 8,
            head_dim: 64,
        },
        note: Some(SLIDING_NOTE),
    },
];

const SLIDING_NOTE: &str = "sliding-window layers are counted as full attention (every layer moves every block): an upper bound on what a hybrid allocator moves";

/// The built-in model names, as `--kv-shape` accepts them.
pub fn builtin_names() -> Vec<&'static str> {
    BUILT_INS.iter().map(|b| b.name).collect()
}

/// A built-in model by name (case-insensitive), or by its Hugging Face repository id.
pub fn builtin(name: &str) -> Option<KvModel> {
    let wanted = name.trim().to_ascii_lowercase();
    let found = BUILT_INS
        .iter()
        .find(|b| b.name == wanted || b.hf_repo.eq_ignore_ascii_case(&wanted) || instruct_alias(b, &wanted))?;
    Some(KvModel {
        name: found.name.to_string(),
        source: format!("https://huggingface.co/{}/blob/main/config.json", found.hf_repo),
        layers: found.layers,
        attention_heads: found.attention_heads,
        attention: found.attention,
        notes: found.note.iter().map(|n| n.to_string()).collect(),
    })
}

/// `meta-llama/Llama-3.1-8B` names the same KV shape as its `-Instruct` repository.
fn instruct_alias(b: &BuiltIn, wanted: &str) -> bool {
    b.hf_repo
        .strip_suffix("-Instruct")
        .is_some_and(|base| base.eq_ignore_ascii_case(wanted))
}

/// The error for a name that is neither built in nor a path.
pub(crate) fn unknown_model(given: &str) -> KvError {
    KvError::UnknownModel {
        given: given.to_string(),
        known: builtin_names().join(", "),
    }
}

impl KvModel {
    /// Reads a Hugging Face `config.json` from `path`: the one I/O this crate does.
    pub fn from_config_path(path: &Path) -> Result<KvModel, KvError> {
        let text = std::fs::read_to_string(path).map_err(|e| KvError::ConfigUnreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        KvModel::from_config_json(&text, &path.display().to_string())
    }

    /// Parses the text of a Hugging Face `config.json`; `origin` names it in errors and in the
    /// result. Fields: `num_hidden_layers`, `num_attention_heads`, `num_key_value_heads`
    /// (default: `num_attention_heads`), `head_dim` (default: `hidden_size /
    /// num_attention_heads`); MLA when `kv_lora_rank` is set, with `qk_rope_head_dim`. A
    /// multimodal config's `text_config` is read when the top level has no layers.
    pub fn from_config_json(text: &str, origin: &str) -> Result<KvModel, KvError> {
        let root: Value = serde_json::from_str(text).map_err(|e| KvError::ConfigNotJson {
            origin: origin.to_string(),
            reason: e.to_string(),
        })?;
        let top = root.as_object().ok_or_else(|| KvError::ConfigNotJson {
            origin: origin.to_string(),
            reason: "the top level is not an object".to_string(),
        })?;
        let config = text_config(top);
        let fields = Fields { map: config, origin };
        let layers = fields.required("num_hidden_layers", "the number of transformer layers")?;
        let attention_heads = fields.required("num_attention_heads", "the number of query heads")?;
        let attention = if fields.present("kv_lora_rank") {
            Attention::Mla {
                kv_lora_rank: fields.required("kv_lora_rank", "the MLA latent rank")?,
                qk_rope_head_dim: fields.required("qk_rope_head_dim", "MLA needs the rope part of the key")?,
            }
        } else {
            let kv_heads = fields.optional("num_key_value_heads")?.unwrap_or(attention_heads);
            Attention::Gqa {
                kv_heads,
                head_dim: fields.head_dim(attention_heads)?,
            }
        };
        Ok(KvModel {
            name: origin.to_string(),
            source: origin.to_string(),
            layers,
            attention_heads,
            attention,
            notes: sliding_note(config),
        })
    }
}

/// Multimodal configs (Llama 4, Qwen-VL, …) keep the language model under `text_config`.
fn text_config(top: &Map<String, Value>) -> &Map<String, Value> {
    match top.get("text_config").and_then(Value::as_object) {
        Some(inner) if !top.contains_key("num_hidden_layers") => inner,
        _ => top,
    }
}

fn sliding_note(config: &Map<String, Value>) -> Vec<String> {
    let windowed = config.get("sliding_window").is_some_and(|v| !v.is_null())
        || config
            .get("layer_types")
            .and_then(Value::as_array)
            .is_some_and(|types| types.iter().any(|t| t.as_str().is_some_and(|s| s.contains("sliding"))));
    if windowed {
        vec![SLIDING_NOTE.to_string()]
    } else {
        Vec::new()
    }
}

/// Typed reads of a config.json's integer fields.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    origin: &'a str,
}

impl Fields<'_> {
    fn present(&self, field: &str) -> bool {
        self.map.get(field).is_some_and(|v| !v.is_null())
    }

    /// `None` when absent or null; an error when present but not a positive 32-bit integer.
    fn optional(&self, field: &'static str) -> Result<Option<u32>, KvError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0) {
                Some(n) => Ok(Some(n)),
                None => Err(KvError::ConfigMissingField {
                    origin: self.origin.to_string(),
                    field,
                    hint: "it must be a positive integer",
                }),
            },
        }
    }

    fn required(&self, field: &'static str, hint: &'static str) -> Result<u32, KvError> {
        self.optional(field)?.ok_or_else(|| KvError::ConfigMissingField {
            origin: self.origin.to_string(),
            field,
            hint,
        })
    }

    /// `head_dim`, or `hidden_size / num_attention_heads` as transformers derives it.
    fn head_dim(&self, attention_heads: u32) -> Result<u32, KvError> {
        if let Some(head_dim) = self.optional("head_dim")? {
            return Ok(head_dim);
        }
        let hidden = self.required("hidden_size", "needed for the head size when head_dim is absent")?;
        if !hidden.is_multiple_of(attention_heads) {
            return Err(KvError::ConfigInconsistent {
                origin: self.origin.to_string(),
                field: "head_dim",
                problem: format!("hidden_size {hidden} is not a multiple of num_attention_heads {attention_heads}"),
            });
        }
        Ok(hidden / attention_heads)
    }
}
