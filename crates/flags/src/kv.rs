//! `--kv-shape MODEL` and the KV geometry, shared by `pair`, `gate` and `probe serving`
//! (`icb_kv` parses the values, `icb_kv_transfer` runs them).

use icb_kv::{KvFlags, KvShapeText};
use icb_kv_transfer::{KvExtraRuns, KvOp};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct KvArgs {
    /// Run one request's real KV transfer for MODEL (a built-in name, e.g. llama-3.1-70b, or
    /// the path of a Hugging Face config.json), prefill TP → decode TP, every rank at once
    #[arg(long, value_name = "MODEL|CONFIG", num_args = 0..=1, default_missing_value = "")]
    pub kv_shape: Option<String>,

    #[command(flatten)]
    pub geometry: KvGeometryArgs,

    /// With --kv-shape: read (decode pulls, vLLM's way) or write (prefill pushes) [default: read]
    #[arg(long, value_name = "OP", requires = "kv_shape", value_parser = parse_op)]
    pub kv_op: Option<KvOp>,

    /// With --kv-shape: fail the verdict when a request's KV transfer takes longer (p50, ms)
    #[arg(long, value_name = "MS", requires = "kv_shape", value_parser = parse_ms)]
    pub max_kv_ms: Option<f64>,

    /// With --kv-shape: also sweep 1, 10, … MAX descriptors per request at the model's block
    /// size (--profile full does it to 100000), showing where posting cost dominates
    #[arg(long, value_name = "MAX", requires = "kv_shape", num_args = 0..=1, default_missing_value = "100000",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub kv_descriptor_sweep: Option<u64>,

    /// With --kv-shape: the runs after the paged one, each on fresh ranks: all, none, or a list
    /// of bulk (one contiguous transfer), bursts (1-64 in flight), other-op [default: all]
    #[arg(long, value_name = "RUNS", requires = "kv_shape", value_parser = parse_extra_runs)]
    pub kv_extra_runs: Option<KvExtraRuns>,
}

/// A model's KV geometry besides the model itself: the flags `pair --kv-shape` and `probe serving
/// --kv-shape` share (each command names its model flag `kv_shape`, which these require).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KvGeometryArgs {
    /// With --kv-shape: prompt length in tokens [default: 8192]
    #[arg(long, value_name = "TOKENS", requires = "kv_shape")]
    pub isl: Option<String>,

    /// With --kv-shape: tokens per KV block (vLLM's --block-size) [default: 16]
    #[arg(long, value_name = "TOKENS", requires = "kv_shape")]
    pub page_size: Option<String>,

    /// With --kv-shape: KV cache element type: bf16, fp16 or fp8 [default: bf16]
    #[arg(long, value_name = "DTYPE", requires = "kv_shape")]
    pub kv_dtype: Option<String>,

    /// With --kv-shape: prefill tensor-parallel size a [default: 1]
    #[arg(long, value_name = "A", requires = "kv_shape")]
    pub prefill_tp: Option<String>,

    /// With --kv-shape: decode tensor-parallel size b [default: 1]
    #[arg(long, value_name = "B", requires = "kv_shape")]
    pub decode_tp: Option<String>,
}

impl KvGeometryArgs {
    /// The values as given, for icb-kv to parse (its errors are one line, defaults filled in).
    pub fn text(&self) -> KvShapeText {
        KvShapeText {
            isl: self.isl.clone(),
            page_size: self.page_size.clone(),
            kv_dtype: self.kv_dtype.clone(),
            prefill_tp: self.prefill_tp.clone(),
            decode_tp: self.decode_tp.clone(),
        }
    }
}

fn parse_op(s: &str) -> Result<KvOp, String> {
    s.parse()
}

fn parse_extra_runs(s: &str) -> Result<KvExtraRuns, String> {
    s.parse().map_err(|e: icb_kv_transfer::BadExtraRuns| e.to_string())
}

fn parse_ms(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches("ms").parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "bad --max-kv-ms '{s}': give a positive number of milliseconds, e.g. 50"
        )),
    }
}

impl KvArgs {
    pub fn wanted(&self) -> bool {
        self.kv_shape.is_some()
    }

    /// The flags' values, each through icb-kv's parser (its errors are one line).
    pub fn flags(&self, max_rank_bytes: Option<u64>) -> Result<KvFlags, icb_kv::KvError> {
        let model = self.kv_shape.as_deref().unwrap_or_default();
        self.geometry.text().flags(model, max_rank_bytes)
    }
}
