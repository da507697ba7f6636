//! The flags' values (`--kv-shape`, `--isl`, `--page-size`, `--kv-dtype`, `--prefill-tp`,
//! `--decode-tp`) and the validated request they make. The CLI maps each flag through the
//! parser here, then [`KvRequest::from_flags`]; every refusal is one [`KvError`] line.

use crate::KvError;
use crate::geometry::{self, KvGeometry};
use crate::model::{self, KvModel};
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// vLLM's default `--block-size` on CUDA.
pub const DEFAULT_PAGE_SIZE: u32 = 16;

/// `--kv-shape MODEL|PATH`: a built-in model, or the path of a Hugging Face config.json.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// The canonical built-in name.
    BuiltIn(String),
    ConfigPath(PathBuf),
}

impl FromStr for ModelSpec {
    type Err = KvError;

    /// A built-in name (or its Hugging Face repository id) wins; otherwise anything that looks
    /// like a path (a separator, or a `.json` ending) is taken as one and read by
    /// [`ModelSpec::load`]; anything else is an unknown model.
    fn from_str(text: &str) -> Result<Self, KvError> {
        let given = text.trim();
        if let Some(found) = model::builtin(given) {
            return Ok(ModelSpec::BuiltIn(found.name));
        }
        let path_like = given.contains('/') || given.contains('\\') || given.ends_with(".json");
        if path_like {
            Ok(ModelSpec::ConfigPath(PathBuf::from(given)))
        } else {
            Err(model::unknown_model(given))
        }
    }
}

impl ModelSpec {
    /// The model: the built-in table, or the config.json read from disk (a model directory
    /// stands for the config.json in it). A path that does not exist and does not end in
    /// `.json` was most likely meant as a model name (`org/model`): it is reported as unknown.
    pub fn load(&self) -> Result<KvModel, KvError> {
        match self {
            ModelSpec::BuiltIn(name) => model::builtin(name).ok_or_else(|| model::unknown_model(name)),
            ModelSpec::ConfigPath(path) if path.is_dir() => KvModel::from_config_path(&path.join("config.json")),
            ModelSpec::ConfigPath(path) if !path.exists() && path.extension().is_none_or(|e| e != "json") => {
                Err(model::unknown_model(&path.display().to_string()))
            }
            ModelSpec::ConfigPath(path) => KvModel::from_config_path(path),
        }
    }
}

/// `--kv-dtype`: the KV cache's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KvDtype {
    #[default]
    Bf16,
    Fp16,
    /// vLLM's `--kv-cache-dtype fp8` (e4m3 or e5m2): one byte an element. Backends that keep
    /// per-token scales next to the data are not modelled.
    Fp8,
}

impl KvDtype {
    pub fn bytes(self) -> u64 {
        match self {
            KvDtype::Bf16 | KvDtype::Fp16 => 2,
            KvDtype::Fp8 => 1,
        }
    }
}

impl FromStr for KvDtype {
    type Err = KvError;

    fn from_str(text: &str) -> Result<Self, KvError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "bf16" | "bfloat16" | "auto" => Ok(KvDtype::Bf16),
            "fp16" | "float16" | "half" => Ok(KvDtype::Fp16),
            "fp8" | "fp8_e4m3" | "fp8_e5m2" => Ok(KvDtype::Fp8),
            _ => Err(KvError::BadValue {
                flag: "--kv-dtype",
                given: text.to_string(),
                expected: "use bf16, fp16 or fp8",
            }),
        }
    }
}

impl fmt::Display for KvDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KvDtype::Bf16 => "bf16",
            KvDtype::Fp16 => "fp16",
            KvDtype::Fp8 => "fp8",
        })
    }
}

fn positive(flag: &'static str, text: &str, expected: &'static str) -> Result<u64, KvError> {
    let bad = || KvError::BadValue {
        flag,
        given: text.to_string(),
        expected,
    };
    let n: u64 = text.trim().replace('_', "").parse().map_err(|_| bad())?;
    if n == 0 { Err(bad()) } else { Ok(n) }
}

/// `--isl TOKENS`: the prompt length, a positive integer.
pub fn parse_isl(text: &str) -> Result<u64, KvError> {
    positive(
        "--isl",
        text,
        "give the prompt length in tokens, a positive integer such as 8192",
    )
}

/// `--page-size TOKENS`: tokens per KV block (vLLM's `--block-size`).
pub fn parse_page_size(text: &str) -> Result<u32, KvError> {
    let expected = "give tokens per KV block, a positive integer such as 16 (vLLM's default)";
    let n = positive("--page-size", text, expected)?;
    u32::try_from(n).map_err(|_| KvError::BadValue {
        flag: "--page-size",
        given: text.to_string(),
        expected,
    })
}

/// `--prefill-tp` / `--decode-tp`: a tensor-parallel size, a positive integer.
pub fn parse_tp(flag: &'static str, text: &str) -> Result<u32, KvError> {
    let expected = "give the tensor-parallel size, a positive integer such as 8";
    let n = positive(flag, text, expected)?;
    u32::try_from(n).map_err(|_| KvError::BadValue {
        flag,
        given: text.to_string(),
        expected,
    })
}

/// The deployment and request, without the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KvShape {
    /// Prompt tokens (`--isl`).
    pub isl: u64,
    /// Tokens per block (`--page-size`).
    pub page_size: u32,
    pub kv_dtype: KvDtype,
    /// Prefill TP size `a`.
    pub prefill_tp: u32,
    /// Decode TP size `b`.
    pub decode_tp: u32,
    /// The most KV bytes one rank may hold for this request (its buffer for the transfer);
    /// `None`: no limit.
    pub max_rank_bytes: Option<u64>,
}

impl KvShape {
    /// A request of `isl` tokens with the defaults: page size 16, bf16, TP 1 → TP 1, no limit.
    pub fn new(isl: u64) -> KvShape {
        KvShape {
            isl,
            page_size: DEFAULT_PAGE_SIZE,
            kv_dtype: KvDtype::Bf16,
            prefill_tp: 1,
            decode_tp: 1,
            max_rank_bytes: None,
        }
    }
}

/// The shape flags as given, before parsing (`None`: left out, the default applies): what
/// `pair --kv-shape` reads from its flags and `gate --kv-shape` completes from the recipe.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KvShapeText {
    pub isl: Option<String>,
    pub page_size: Option<String>,
    pub kv_dtype: Option<String>,
    pub prefill_tp: Option<String>,
    pub decode_tp: Option<String>,
}

impl KvShapeText {
    /// Each value through its parser (the errors are one line naming the flag), the defaults
    /// filled in: 8192 tokens, page size 16, bf16, TP 1 → TP 1.
    pub fn shape(&self, max_rank_bytes: Option<u64>) -> Result<KvShape, KvError> {
        let or = |v: &Option<String>, d: &str| v.clone().unwrap_or_else(|| d.to_string());
        Ok(KvShape {
            isl: parse_isl(&or(&self.isl, "8192"))?,
            page_size: parse_page_size(&or(&self.page_size, "16"))?,
            kv_dtype: or(&self.kv_dtype, "bf16").parse::<KvDtype>()?,
            prefill_tp: parse_tp("--prefill-tp", &or(&self.prefill_tp, "1"))?,
            decode_tp: parse_tp("--decode-tp", &or(&self.decode_tp, "1"))?,
            max_rank_bytes,
        })
    }

    /// The model `model` (a built-in name or a config.json path) with this shape.
    pub fn flags(&self, model: &str, max_rank_bytes: Option<u64>) -> Result<KvFlags, KvError> {
        Ok(KvFlags {
            kv_shape: model.parse::<ModelSpec>()?,
            shape: self.shape(max_rank_bytes)?,
        })
    }
}

/// All the flags' values, parsed but not yet checked against each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvFlags {
    pub kv_shape: ModelSpec,
    pub shape: KvShape,
}

/// A request whose model and shape passed every check, with its geometry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvRequest {
    model: KvModel,
    shape: KvShape,
    geometry: KvGeometry,
}

impl KvRequest {
    /// Loads the model (reading the config.json where `--kv-shape` is a path), then
    /// [`KvRequest::new`].
    pub fn from_flags(flags: &KvFlags) -> Result<KvRequest, KvError> {
        KvRequest::new(flags.kv_shape.load()?, flags.shape)
    }

    /// Checks the shape against the model the way the engine would (isl, page size, TP sizes
    /// against the heads and each other, the per-rank limit) and computes the geometry.
    pub fn new(model: KvModel, shape: KvShape) -> Result<KvRequest, KvError> {
        check_values(&shape)?;
        check_tp(&model, "--prefill-tp", shape.prefill_tp)?;
        check_tp(&model, "--decode-tp", shape.decode_tp)?;
        let (small, large) = (
            shape.prefill_tp.min(shape.decode_tp),
            shape.prefill_tp.max(shape.decode_tp),
        );
        if !large.is_multiple_of(small) {
            return Err(KvError::TpRatio {
                prefill: shape.prefill_tp,
                decode: shape.decode_tp,
            });
        }
        let geometry = geometry::plan(&model, &shape)?;
        check_limit(&geometry, shape.max_rank_bytes)?;
        Ok(KvRequest { model, shape, geometry })
    }

    pub fn model(&self) -> &KvModel {
        &self.model
    }

    pub fn shape(&self) -> &KvShape {
        &self.shape
    }

    pub fn geometry(&self) -> &KvGeometry {
        &self.geometry
    }
}

/// Values a hand-built [`KvShape`] could carry that the parsers refuse.
fn check_values(shape: &KvShape) -> Result<(), KvError> {
    if shape.isl == 0 {
        return Err(KvError::ZeroIsl);
    }
    let zero = |flag: &'static str, expected: &'static str| KvError::BadValue {
        flag,
        given: "0".to_string(),
        expected,
    };
    if shape.page_size == 0 {
        return Err(zero(
            "--page-size",
            "give tokens per KV block, a positive integer such as 16",
        ));
    }
    for (flag, tp) in [("--prefill-tp", shape.prefill_tp), ("--decode-tp", shape.decode_tp)] {
        if tp == 0 {
            return Err(zero(
                flag,
                "give the tensor-parallel size, a positive integer such as 8",
            ));
        }
    }
    Ok(())
}

/// vLLM's rules for one engine: the TP size divides the query heads
/// (`ModelConfig.verify_with_parallel_config`), and divides the KV heads or is a multiple of
/// them (`QKVParallelLinear`: `divide(total_num_kv_heads, tp)` below the head count,
/// `divide(tp, total_num_kv_heads)` replicas above it). MLA's latent is replicated whole, so
/// only the query heads count.
fn check_tp(model: &KvModel, flag: &'static str, tp: u32) -> Result<(), KvError> {
    let kv_heads = model.attention.kv_heads();
    let fits_kv = |t: u32| model.attention.is_mla() || kv_heads.is_multiple_of(t) || t.is_multiple_of(kv_heads);
    let why = if !model.attention_heads.is_multiple_of(tp) {
        format!("it does not divide the {} attention heads", model.attention_heads)
    } else if !fits_kv(tp) {
        format!("it neither divides the {kv_heads} KV heads nor is a multiple of them")
    } else {
        return Ok(());
    };
    let valid: Vec<String> = (1..=model.attention_heads)
        .filter(|&t| model.attention_heads.is_multiple_of(t) && fits_kv(t))
        .map(|t| t.to_string())
        .collect();
    Err(KvError::TpMismatch {
        flag,
        tp,
        model: model.name.clone(),
        why,
        suggestion: format!("one of {}", valid.join(", ")),
    })
}

fn check_limit(geometry: &KvGeometry, limit: Option<u64>) -> Result<(), KvError> {
    let Some(limit) = limit else { return Ok(()) };
    for (side, needed) in [
        ("prefill", geometry.prefill_rank_bytes),
        ("decode", geometry.decode_rank_bytes),
    ] {
        if needed > limit {
            return Err(KvError::RequestTooLarge { side, needed, limit });
        }
    }
    Ok(())
}
