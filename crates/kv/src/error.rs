//! The one error type of this crate. Every variant prints as one line that names the value at
//! fault and what to change, so the CLI can print it as-is and exit 2.

use std::path::PathBuf;

/// Why a KV shape could not be built. `Display` is the one line a user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// `--kv-shape` is neither a built-in model nor a path to a config.json.
    #[error("unknown model '{given}': use one of {known}, or the path of a Hugging Face config.json")]
    UnknownModel { given: String, known: String },

    /// The config.json could not be read (missing file, permissions).
    #[error("cannot read {path}: {reason}: give the path of a readable Hugging Face config.json")]
    ConfigUnreadable { path: PathBuf, reason: String },

    /// The config.json is not a JSON object.
    #[error("{origin} is not a Hugging Face config.json ({reason}): give a model's config.json")]
    ConfigNotJson { origin: String, reason: String },

    /// A field the geometry needs is absent (or not a positive integer).
    #[error("{origin} has no usable '{field}' (a positive integer is needed): {hint}")]
    ConfigMissingField {
        origin: String,
        field: &'static str,
        hint: &'static str,
    },

    /// A field is present but inconsistent with the others (e.g. hidden_size not a multiple of
    /// num_attention_heads when head_dim is absent).
    #[error("{origin}: {problem}: add an explicit '{field}' to the config.json")]
    ConfigInconsistent {
        origin: String,
        field: &'static str,
        problem: String,
    },

    /// A flag's value could not be parsed.
    #[error("bad {flag} '{given}': {expected}")]
    BadValue {
        flag: &'static str,
        given: String,
        expected: &'static str,
    },

    /// `--isl 0`: a request with no prompt moves no KV.
    #[error("--isl must be at least 1 token (a request with no prompt has no KV to transfer)")]
    ZeroIsl,

    /// A tensor-parallel size the engine would refuse for this model.
    #[error("{flag} {tp} does not fit {model}: {why}; choose {suggestion}")]
    TpMismatch {
        flag: &'static str,
        tp: u32,
        model: String,
        why: String,
        suggestion: String,
    },

    /// Prefill and decode TP sizes that are not multiples of one another.
    #[error(
        "--prefill-tp {prefill} and --decode-tp {decode}: one must divide the other (vLLM's NIXL connector pairs ranks by their ratio); change one of them"
    )]
    TpRatio { prefill: u32, decode: u32 },

    /// One rank's share of the request exceeds the stated limit.
    #[error(
        "a {side} rank would hold {needed} bytes of KV for this request, over the limit of {limit} bytes: lower --isl, raise the TP size, or use --kv-dtype fp8"
    )]
    RequestTooLarge {
        side: &'static str,
        needed: u64,
        limit: u64,
    },

    /// The arithmetic left u64: the inputs are far outside anything a GPU holds.
    #[error("the request's KV size overflows 64 bits ({what}): lower --isl or --page-size")]
    Overflow { what: &'static str },
}
