//! `probe serving` (issue 42): the engines' own KV-transfer figures, translated to one basis and
//! set beside ic-bench's measurement of the same node pair and KV geometry. Part of
//! `ic-bench.probe/v1` (added within v1), documented in `docs/schema.md`.

use serde::{Deserialize, Serialize};

/// The basis every figure is stated in (also in the report, so a reader need not guess).
pub const SERVING_BASIS: &str = "per rank and per node pair; bytes per request; GB/s = 10^9 bytes/s; \
descriptors and post time per transfer (one rank's NIXL/UCX transfer)";

/// Everything `probe serving` read and how it compares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServingReport {
    /// [`SERVING_BASIS`].
    pub basis: String,
    /// The node pair the figures are for (`--prefill`/`--decode`); absent when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<String>,
    /// What was read: `file:PATH`, `prometheus:URL (window 5m)`, `csv:PATH`.
    pub sources: Vec<String>,
    /// One entry per engine and rank (or pooled series) read.
    pub engines: Vec<EngineFigures>,
}

/// One engine's KV-transfer figures for one rank (or one pooled series), on the report's basis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineFigures {
    /// `vllm-nixl`, `sglang`, `nixl-telemetry`, `trtllm`.
    pub engine: String,
    /// The engine version whose metric names these are (`vllm:nixl_*` histograms, …).
    pub metrics: String,
    /// The series or file it came from: `engine=0,model_name=…` or `rank_0_recv.csv`.
    pub series: String,
    /// `read` or `write` (which side initiates: vLLM's decode pulls, SGLang's prefill pushes).
    pub op: String,
    /// Transfers (one rank's one transfer) in the window.
    pub transfers: f64,
    /// Ranks whose transfers the series pools (vLLM pools its TP ranks; 1 otherwise).
    pub ranks_pooled: u32,
    /// Bytes one rank moves per transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_transfer: Option<f64>,
    /// Bytes one request moves over the node pair (all ranks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_request: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptors_per_transfer: Option<f64>,
    /// Mean time of one transfer, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_ms: Option<f64>,
    /// Mean time to post one transfer, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_ms: Option<f64>,
    /// One rank's rate, GB/s (10^9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_gbps: Option<f64>,
    /// The node pair's rate with every pooled rank moving at once, GB/s (10^9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_gbps: Option<f64>,
    /// Failed transfers or notifications in the window.
    #[serde(default)]
    pub failures: f64,
    /// Known defects of this engine's metric that the figures correct or cannot correct.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defects: Vec<String>,
    /// ic-bench's own measurement of the same pair, operation and geometry, when the history
    /// holds one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<FabricBaseline>,
}

/// The history's `--kv-shape` runs of the same pair, operation and geometry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricBaseline {
    /// The matched case: `get_bw cuda-cuda 40 × 64 KiB (nixl)`.
    pub case: String,
    /// The latest run's rate of one rank pair, GB/s (10^9).
    pub latest_gbps: f64,
    /// The mean of the runs before it, GB/s; absent with a single run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_gbps: Option<f64>,
    /// Runs the history holds for this case.
    pub runs: usize,
    /// The engine's rank rate over the latest fabric rate (1.0 = the engine gets all of it).
    pub engine_ratio: f64,
}
