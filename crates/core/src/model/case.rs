//! One case's outcome: what was measured, by which engine, and how precisely.

use super::*;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One (test, memory pair, size) cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub test: TestKind,
    pub memory: MemoryPair,
    /// Message size; for a KV-shaped case, the size of one block.
    pub size: u64,
    /// KV-shaped case: blocks per operation (absent: one contiguous message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u32>,
    pub status: CaseStatus,
    /// Why the case was skipped or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportEvidence>,
    /// Filled by the verdict engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<CheckVerdict>,
    /// Which engine ran the case and, for NIXL, its direction and batch (flattened into the row:
    /// `engine`, `direction`, `batch`; absent in rows of the UCX engine, so v1 files read as before).
    #[serde(flatten)]
    pub run_by: CaseEngine,
    /// `pair --rails`: the row of the per-rail table that ran this case (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<usize>,
    /// A CUDA case: how its GPU memory was allocated (`--cuda-alloc`) and whether a peer can
    /// map it with legacy CUDA IPC. Absent for host cases and in results written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_alloc: Option<CudaAllocation>,
    /// Both sides' NIC error and congestion counters around the case (every RDMA port each side
    /// read when the case's buffers were ready and when it finished) and what the rules found
    /// (issue 40). Absent: not read (the NIXL engine, results written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_health: Option<Box<crate::rails::nic_health::case::CaseHealth>>,
}

impl CaseResult {
    /// What a person calls the case's operation: `read`/`write` for the NIXL engine (its
    /// direction), the test otherwise (`tag_bw`, `put_bw`, …).
    pub fn operation(&self) -> String {
        match self.run_by.direction {
            Some(d) if self.run_by.engine == EngineKind::Nixl => d.to_string(),
            _ => self.test.to_string(),
        }
    }

    /// The case's message shape: `4 MiB`, or `64 × 16 KiB` for a list of blocks (a KV-shaped
    /// case or a NIXL request's descriptors).
    pub fn shape(&self) -> String {
        let size = crate::units::format_size(self.size);
        match self.blocks {
            Some(n) if n > 1 => format!("{n} × {size}"),
            _ => size,
        }
    }
}

/// The engine that moved a case's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// ic-bench's own UCX engine (tag and RMA tests).
    #[default]
    Ucx,
    /// NIXL's C API with its UCX backend (READ/WRITE descriptor lists).
    Nixl,
}

impl EngineKind {
    pub fn is_default(&self) -> bool {
        *self == EngineKind::Ucx
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Ucx => "ucx",
            EngineKind::Nixl => "nixl",
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ucx" => Ok(EngineKind::Ucx),
            "nixl" => Ok(EngineKind::Nixl),
            other => Err(format!(
                "'{other}' is not an engine: use ucx (ic-bench's UCX engine) or nixl (NIXL's C API)"
            )),
        }
    }
}

/// NIXL's two transfer directions, seen from the initiator (the prefill side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The initiator pulls the target's bytes (RMA get).
    Read,
    /// The initiator pushes bytes into the target (RMA put).
    Write,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
        }
    }

    /// The RMA test a direction is judged as (same verdict rules as the UCX engine's RMA tests).
    pub fn test_kind(self) -> TestKind {
        match self {
            Direction::Read => TestKind::GetBw,
            Direction::Write => TestKind::PutBw,
        }
    }

    /// The direction an RMA test stands for (`get_bw` is READ, `put_bw` is WRITE); tag tests have
    /// none.
    pub fn of_test(test: TestKind) -> Option<Direction> {
        match test {
            TestKind::GetBw => Some(Direction::Read),
            TestKind::PutBw => Some(Direction::Write),
            TestKind::TagBw | TestKind::TagLat => None,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which engine ran a case and, for NIXL, in which direction (issue 12); defaults to "UCX engine".
/// A NIXL request's descriptor count is the case's `blocks`, as for a KV-shaped UCX case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CaseEngine {
    #[serde(default, skip_serializing_if = "EngineKind::is_default")]
    pub engine: EngineKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    Measured,
    Skipped,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub warmup_iterations: u64,
    pub iterations: u64,
    pub elapsed_s: f64,
    /// Payload bytes moved in the measured iterations.
    pub bytes: u64,
    /// Payload bytes the warm-up moved (the engines report it; absent in older files): with
    /// `bytes`, what the NICs' counters should show (`pair --rails`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_bytes: Option<u64>,
    /// Bytes per second (bandwidth tests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_bps: Option<f64>,
    /// One-way latency in microseconds (half the round trip; latency tests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<LatencyStats>,
    pub window: u32,
    /// Every payload was checked on the receiving side.
    pub verified: bool,
    /// How the case decided it had measured enough, and the precision it reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// KV-shaped case: time per list of blocks (issue to flush complete), microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_latency_us: Option<LatencyStats>,
    /// Window auto-tuning: the windows tried during warmup and what each gave (bytes/s).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window_trials: Vec<WindowTrial>,
    /// NIXL engine: mean time in the post call per request, microseconds (the rest of a
    /// request's time is the transfer itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_us: Option<f64>,
}

/// The precision a case reached (see [`StopRule`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Precision {
    /// Why the case stopped.
    pub stopped_by: StopReason,
    /// The per-round statistic the interval is over: `bandwidth` or `latency_p50`.
    pub statistic: String,
    pub rounds: u32,
    /// Half-width of the confidence interval relative to the mean (absent below 2 rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel_half_width: Option<f64>,
    pub confidence: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The interval was narrower than the rule's bound.
    Precision,
    /// `max_time_s` ran out first; the precision reached is recorded.
    MaxTime,
    /// The fixed rule: `min_time_s` and `min_iterations` reached.
    MinTime,
}

/// One window tried by the auto-tuning.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowTrial {
    pub window: u32,
    pub bandwidth_bps: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}
