//! The `pair` result: one struct tree = one JSON schema (`ic-bench.pair/v1`, see `docs/schema.md`).
//!
//! Fields are only ever added within a schema version; renaming or removing one bumps [`PAIR_SCHEMA`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Schema identifier written into every pair report.
pub const PAIR_SCHEMA: &str = "ic-bench.pair/v1";

/// The whole outcome of one `ic-bench pair` run (also what `ic-bench connect -o json` prints).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairReport {
    pub schema: String,
    pub tool: ToolInfo,
    /// RFC 3339 UTC time the run started.
    pub started_at: String,
    pub duration_s: f64,
    pub placement: Placement,
    /// The decode side: it runs `ic-bench serve` and owns the target buffers.
    pub server: PeerInfo,
    /// The prefill side: it runs `ic-bench connect` and initiates every operation.
    pub client: PeerInfo,
    pub settings: RunSettings,
    pub expectation: Expectation,
    pub cases: Vec<CaseResult>,
    pub verdict: Verdict,
    /// Measurement-quality warnings with advice (outliers, short runs, noisy machine).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Present only when the run was cut short (Ctrl-C, SIGTERM): `cases` then holds just the
    /// cases measured before it and the verdict judges only those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<PartialRun>,
}

/// Why a report holds fewer cases than its settings asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialRun {
    /// What cut the run short, e.g. `interrupted by SIGTERM`.
    pub reason: String,
    /// How many cases the settings asked for (`cases` has the ones measured).
    pub planned_cases: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
    pub git_commit: String,
    /// Version of the UCX headers the binary was generated from.
    pub ucx_headers: String,
}

/// Where the two sides ran relative to each other; it decides what the fabric should give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Locality {
    SameHost,
    DifferentHosts,
}

impl fmt::Display for Locality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Locality::SameHost => "same host",
            Locality::DifferentHosts => "different hosts",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub locality: Locality,
    /// How the pair was started, e.g. `local (isolation=pod)`, `kubernetes`, `manual`.
    pub mode: String,
    pub prefill: Endpoint,
    pub decode: Endpoint,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Host name, or the Kubernetes node name.
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Address the control channel used (server side: the listen address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The reference pod or workload this side was modelled on (`pod/NAME`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelled_on: Option<String>,
}

/// What one side reports about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerInfo {
    pub hostname: String,
    /// UCX library version loaded at run time, e.g. `1.22.0`.
    pub ucx_version: String,
    /// Directory the UCX library was loaded from.
    pub ucx_library: String,
    pub cuda: CudaInfo,
    /// Transport-relevant environment (`UCX_*`, `NCCL_*`, `NIXL_*`, `CUDA_VISIBLE_DEVICES`), secrets masked.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The NIXL this side ran (NIXL engine only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nixl: Option<NixlInfo>,
}

/// NIXL's release, library and backend on one side (the UCX it runs is `ucx_version`/`ucx_library`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NixlInfo {
    /// e.g. `1.5.1`; empty when the install does not say.
    pub version: String,
    /// The `libnixl_capi.so` that was loaded.
    pub library: String,
    /// The backend plugin that moved the bytes (`UCX`).
    pub backend: String,
    /// The backend's parameters as NIXL reported them after initialisation.
    #[serde(default)]
    pub backend_params: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaInfo {
    pub available: bool,
    /// Why CUDA is unavailable (e.g. `no CUDA driver`), or the driver version when available.
    pub detail: String,
    #[serde(default)]
    pub devices: u32,
}

/// Test parameters, as agreed by both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub tests: Vec<TestKind>,
    pub sizes: Vec<u64>,
    pub memory: Vec<MemoryPair>,
    pub warmup_iterations: u64,
    pub min_iterations: u64,
    /// Each case runs at least this long (after warmup) and at least `min_iterations`.
    pub min_time_s: f64,
    /// Upper bound on one case's measurement time; a case that hits it reports what it measured.
    pub max_time_s: f64,
    /// Outstanding operations for bandwidth tests.
    pub window: u32,
    pub unit: BandwidthUnit,
    /// CUDA cases without a driver fail the run instead of being skipped.
    pub require_cuda: bool,
    /// Adaptive stop: a case ends once its estimate is stable (see [`StopRule`]) instead of after
    /// a fixed `min_time_s`. Absent: the fixed rule (`min_time_s` and `min_iterations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopRule>,
    /// The cases to run, when not every `tests` × `sizes` combination (the verdict profile picks
    /// a few). Each shape runs for every memory pair. Empty: `tests` × `sizes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<CaseShape>,
    /// KV-shaped RMA: one operation is a list of this many non-contiguous blocks of each size,
    /// issued as that many put/get operations and one flush. Applies to `put_bw`/`get_bw` in
    /// `tests` × `sizes` (a `plan` names its own). Absent: one block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u32>,
    /// Bandwidth cases try these windows during warmup and measure with the fastest (the window
    /// used is the measurement's `window`). Empty: `window` only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window_candidates: Vec<u32>,
    /// Benchmark-only methodology control: buffers are neither written nor verified (as
    /// ucx_perftest moves them); every case then reports `verified: false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untouched_buffers: bool,
}

/// When a case has measured enough: after at least `min_rounds` rounds of about `round_s`
/// seconds each, once the confidence interval of the per-round statistic (bandwidth, or the
/// latency p50) is narrower than `rel_half_width` of its mean, and not before `min_time_s`; a
/// case that reaches `max_time_s` stops with the precision it has.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StopRule {
    /// Target half-width of the interval relative to the mean, e.g. 0.02 for ±2 %.
    pub rel_half_width: f64,
    /// Two-sided confidence level of the interval, e.g. 0.95.
    pub confidence: f64,
    /// Fewest rounds before the interval is trusted.
    pub min_rounds: u32,
    /// Target duration of one measured round, seconds.
    pub round_s: f64,
}

impl StopRule {
    /// ±2 % at 95 % confidence over rounds of 20 ms, at least 5 of them.
    pub const DEFAULT: StopRule = StopRule {
        rel_half_width: 0.02,
        confidence: 0.95,
        min_rounds: 5,
        round_s: 0.02,
    };
}

/// One case of a [`RunSettings::plan`]: a test at one size (a block size when `blocks` > 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CaseShape {
    pub test: TestKind,
    pub size: u64,
    /// Blocks per operation (RMA tests only); absent or 1 is one contiguous message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u32>,
}

impl CaseShape {
    pub fn new(test: TestKind, size: u64) -> Self {
        CaseShape {
            test,
            size,
            blocks: None,
        }
    }
    pub fn blocks(test: TestKind, size: u64, blocks: u32) -> Self {
        CaseShape {
            test,
            size,
            blocks: (blocks > 1).then_some(blocks),
        }
    }
}

/// The verdict profile's block size and count for its one KV-shaped case: 64 blocks of 16 KiB,
/// a small vLLM/NIXL-like descriptor list (1 MiB per operation).
pub const KV_BLOCK_SIZE: u64 = 16 << 10;
pub const KV_BLOCKS: u32 = 64;
/// The verdict profile's bandwidth size: 4 MiB, above the floors' 1 MiB and short enough
/// (~1 ms per operation on shared memory) that a round of a few dozen takes milliseconds.
pub const VERDICT_BANDWIDTH_SIZE: u64 = 4 << 20;

impl RunSettings {
    /// The default gate: the cases a verdict needs and nothing else, each stopped adaptively.
    /// Bandwidth where the floors apply (tag, put and get at 4 MiB), latency at 8 B, and one
    /// KV-shaped put (64 × 16 KiB), for every memory pair (CUDA pairs are skipped without a
    /// driver). A case stops at ±2 % (95 % confidence) or after 1 s.
    pub fn verdict_profile() -> RunSettings {
        let plan = vec![
            CaseShape::new(TestKind::TagBw, VERDICT_BANDWIDTH_SIZE),
            CaseShape::new(TestKind::PutBw, VERDICT_BANDWIDTH_SIZE),
            CaseShape::new(TestKind::GetBw, VERDICT_BANDWIDTH_SIZE),
            CaseShape::new(TestKind::TagLat, 8),
            CaseShape::blocks(TestKind::PutBw, KV_BLOCK_SIZE, KV_BLOCKS),
        ];
        RunSettings {
            tests: vec![TestKind::TagBw, TestKind::TagLat, TestKind::PutBw, TestKind::GetBw],
            sizes: vec![8, KV_BLOCK_SIZE, VERDICT_BANDWIDTH_SIZE],
            memory: MemoryPair::ALL.to_vec(),
            warmup_iterations: 16,
            min_iterations: 1,
            min_time_s: 0.05,
            max_time_s: 1.0,
            window: 32,
            unit: BandwidthUnit::GBps,
            require_cuda: false,
            stop: Some(StopRule::DEFAULT),
            plan,
            blocks: None,
            window_candidates: Vec::new(),
            untouched_buffers: false,
        }
    }

    /// The full curve: every test at every default size (8 B … 64 MiB) and memory pair, stopped
    /// adaptively, with up to 5 s per case.
    pub fn full_curve() -> RunSettings {
        RunSettings {
            tests: TestKind::ALL.to_vec(),
            sizes: crate::units::default_sizes(),
            min_iterations: 32,
            min_time_s: 0.1,
            max_time_s: 5.0,
            plan: Vec::new(),
            ..RunSettings::verdict_profile()
        }
    }

    /// The cases these settings ask for, in run order (memory pairs innermost for a plan, sizes
    /// innermost for `tests` × `sizes`, as before plans existed).
    pub fn case_list(&self) -> Vec<(CaseShape, MemoryPair)> {
        let mut out = Vec::new();
        if self.plan.is_empty() {
            for &test in &self.tests {
                for &memory in &self.memory {
                    for &size in &self.sizes {
                        let blocks = if test.is_rma() { self.blocks.unwrap_or(1) } else { 1 };
                        out.push((CaseShape::blocks(test, size, blocks), memory));
                    }
                }
            }
        } else {
            for shape in &self.plan {
                for &memory in &self.memory {
                    out.push((*shape, memory));
                }
            }
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    TagBw,
    TagLat,
    PutBw,
    GetBw,
}

impl TestKind {
    pub const ALL: [TestKind; 4] = [TestKind::TagBw, TestKind::TagLat, TestKind::PutBw, TestKind::GetBw];

    pub fn as_str(self) -> &'static str {
        match self {
            TestKind::TagBw => "tag_bw",
            TestKind::TagLat => "tag_lat",
            TestKind::PutBw => "put_bw",
            TestKind::GetBw => "get_bw",
        }
    }

    /// Bandwidth tests report bytes per second; latency tests report percentiles.
    pub fn is_bandwidth(self) -> bool {
        !matches!(self, TestKind::TagLat)
    }

    /// RMA tests are the operations NIXL uses to move KV cache.
    pub fn is_rma(self) -> bool {
        matches!(self, TestKind::PutBw | TestKind::GetBw)
    }
}

impl fmt::Display for TestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TestKind {
    type Err = crate::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TestKind::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| crate::ParseError::new(format!("unknown test '{s}': use tag_bw, tag_lat, put_bw or get_bw")))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryType {
    Host,
    Cuda,
}

impl MemoryType {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::Host => "host",
            MemoryType::Cuda => "cuda",
        }
    }
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Memory on the initiating (prefill/client) side → memory on the target (decode/server) side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemoryPair {
    pub initiator: MemoryType,
    pub target: MemoryType,
}

impl MemoryPair {
    pub const HOST_HOST: MemoryPair = MemoryPair {
        initiator: MemoryType::Host,
        target: MemoryType::Host,
    };
    pub const ALL: [MemoryPair; 4] = [
        MemoryPair {
            initiator: MemoryType::Host,
            target: MemoryType::Host,
        },
        MemoryPair {
            initiator: MemoryType::Host,
            target: MemoryType::Cuda,
        },
        MemoryPair {
            initiator: MemoryType::Cuda,
            target: MemoryType::Host,
        },
        MemoryPair {
            initiator: MemoryType::Cuda,
            target: MemoryType::Cuda,
        },
    ];

    pub fn uses_cuda(self) -> bool {
        self.initiator == MemoryType::Cuda || self.target == MemoryType::Cuda
    }
}

impl fmt::Display for MemoryPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}→{}", self.initiator, self.target)
    }
}

impl std::str::FromStr for MemoryPair {
    type Err = crate::ParseError;
    /// Accepts `host-cuda`, `host:cuda`, `host→cuda` or `host->cuda`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            crate::ParseError::new(format!(
                "bad memory pair '{s}': use INITIATOR-TARGET with host or cuda, e.g. host-cuda"
            ))
        };
        let normalized = s.replace("->", "-").replace(['→', ':'], "-");
        let (a, b) = normalized.split_once('-').ok_or_else(bad)?;
        let parse = |x: &str| match x.trim() {
            "host" => Ok(MemoryType::Host),
            "cuda" => Ok(MemoryType::Cuda),
            _ => Err(bad()),
        };
        Ok(MemoryPair {
            initiator: parse(a)?,
            target: parse(b)?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum BandwidthUnit {
    /// 10^9 bytes per second (nixlbench's unit).
    #[default]
    #[serde(rename = "GB/s")]
    GBps,
    /// 2^20 bytes per second (ucx_perftest's "MB/s").
    #[serde(rename = "MiB/s")]
    MiBps,
}

impl BandwidthUnit {
    pub fn from_bytes_per_s(self, bps: f64) -> f64 {
        match self {
            BandwidthUnit::GBps => bps / 1e9,
            BandwidthUnit::MiBps => bps / (1u64 << 20) as f64,
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            BandwidthUnit::GBps => "GB/s",
            BandwidthUnit::MiBps => "MiB/s",
        }
    }
}

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

/// What UCX says about how the bytes of one case travelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportEvidence {
    /// All lanes of the endpoint (`ucp_ep_query`), including keepalive/backup lanes.
    #[serde(default)]
    pub lanes: Vec<Lane>,
    /// UCX's protocol description for this operation, verbatim (model estimates stripped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The transport that carried the data, classified.
    pub data_path: DataPath,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Lane {
    pub transport: String,
    pub device: String,
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.transport, self.device)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataPath {
    pub class: TransportClass,
    /// e.g. `cma/memory`, `tcp/eth0`, `rc_mlx5/mlx5_0:1`; empty when unknown.
    pub transports: Vec<Lane>,
    /// e.g. `rendezvous zero-copy read`, `eager copy-in`, `software RMA emulation`.
    pub protocol: String,
    /// Where the classification came from.
    pub source: EvidenceSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceSource {
    /// `ucp_request_query` info string on a pending request (per-operation truth).
    RequestInfo,
    /// Endpoint lanes only (older UCX, or the operation completed immediately).
    EndpointLanes,
    /// `UCX_PROTO_INFO` protocol tables of the process (the NIXL engine, whose UCX is NIXL's own).
    ProtoInfo,
    /// Nothing usable was reported.
    None,
}

/// The classes the verdict rules reason about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportClass {
    /// TCP sockets: the silent fallback.
    Tcp,
    /// RMA emulated over active messages (`rma_am`, software emulation): slow.
    RmaEmulated,
    /// sysv / posix / xpmem / knem shared memory.
    SharedMemory,
    /// Cross Memory Attach (process_vm_readv): one-copy, same host, same PID namespace.
    Cma,
    /// InfiniBand / RoCE verbs transports (rc, dc, ud) and EFA's srd.
    Rdma,
    /// CUDA IPC over NVLink / PCIe peer-to-peer.
    CudaIpc,
    /// GPU memory staged through host memory with cuda_copy.
    CudaCopyStaging,
    /// Loopback inside one process.
    SelfLoop,
    Unknown,
}

impl TransportClass {
    pub fn as_str(self) -> &'static str {
        match self {
            TransportClass::Tcp => "tcp",
            TransportClass::RmaEmulated => "rma emulated over active messages",
            TransportClass::SharedMemory => "shared memory",
            TransportClass::Cma => "cma",
            TransportClass::Rdma => "rdma",
            TransportClass::CudaIpc => "cuda_ipc",
            TransportClass::CudaCopyStaging => "cuda_copy staging",
            TransportClass::SelfLoop => "self",
            TransportClass::Unknown => "unknown",
        }
    }
}

impl fmt::Display for TransportClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// ok / warn / fail / skipped, shared by cases and probe checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Skipped,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skipped => "skipped",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckVerdict {
    pub status: Status,
    /// One line: what was seen.
    pub reason: String,
    /// One line: what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictStatus {
    Pass,
    Warn,
    Fail,
}

impl VerdictStatus {
    /// The process exit code for this verdict (see [`crate::exit`]).
    pub fn exit_code(self) -> i32 {
        match self {
            VerdictStatus::Pass | VerdictStatus::Warn => crate::exit::OK,
            VerdictStatus::Fail => crate::exit::VERDICT_FAILED,
        }
    }
}

/// The rolled-up answer for the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: VerdictStatus,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The data-path classes seen across measured cases, most important first.
    #[serde(default)]
    pub data_paths: Vec<TransportClass>,
}

/// What the placement should give; defaults from the reference fabric figures, overridable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub locality: Locality,
    /// Minimum bandwidth (bytes/s) for host-memory cases at or above `min_size_for_bandwidth`.
    pub min_host_bandwidth_bps: f64,
    /// Minimum bandwidth (bytes/s) for cases with CUDA memory on either side.
    pub min_cuda_bandwidth_bps: f64,
    /// Minimum bandwidth (bytes/s) for host↔cuda cases (one side CUDA, the other host memory);
    /// absent means `min_cuda_bandwidth_bps` applies. Same-host host↔cuda goes over PCIe, not
    /// NVLink, so it needs its own floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_mixed_bandwidth_bps: Option<f64>,
    /// Bandwidth floors apply only to messages this large or larger (KV-cache-sized blocks).
    pub min_size_for_bandwidth: u64,
    /// Whether TCP carrying the data fails the run (default true) or only warns.
    pub tcp_is_failure: bool,
    /// Where these numbers came from: `defaults`, `flags`, or a config file path.
    pub source: String,
    /// What the link between different hosts can carry at most (bytes/s), for the physics check:
    /// the smaller of the two sides' NIC line rates as each read it from sysfs
    /// (`icb_probe::facts::line_rate_bps`). Absent: a generous built-in bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_rate_bps: Option<f64>,
}

#[cfg(test)]
mod measurement_settings_tests {
    use super::*;

    #[test]
    fn verdict_profile_is_small_and_adaptive_and_full_curve_is_every_combination() {
        let v = RunSettings::verdict_profile();
        let cases = v.case_list();
        // 5 shapes × 4 memory pairs; CUDA pairs are skipped quickly without a driver.
        assert_eq!(cases.len(), 5 * 4);
        let host: Vec<CaseShape> = cases
            .iter()
            .filter(|(_, m)| *m == MemoryPair::HOST_HOST)
            .map(|(s, _)| *s)
            .collect();
        assert!(host.contains(&CaseShape::new(TestKind::TagLat, 8)));
        assert!(host.iter().any(|s| s.blocks == Some(KV_BLOCKS) && s.test.is_rma()));
        assert!(
            host.iter()
                .filter(|s| s.test.is_bandwidth() && s.blocks.is_none())
                .all(|s| s.size >= crate::verdict::MIN_SIZE_FOR_BANDWIDTH)
        );
        assert!(v.stop.is_some() && v.max_time_s <= 1.0);

        let mut f = RunSettings::full_curve();
        assert_eq!(f.case_list().len(), 4 * 4 * crate::units::default_sizes().len());
        assert!(f.case_list().iter().all(|(s, _)| s.blocks.is_none()));
        f.blocks = Some(8);
        let rma_blocks = f.case_list().iter().filter(|(s, _)| s.blocks == Some(8)).count();
        assert_eq!(
            rma_blocks,
            2 * 4 * crate::units::default_sizes().len(),
            "put and get only"
        );
    }

    #[test]
    fn settings_and_measurements_without_the_new_fields_still_parse() {
        let old = r#"{"tests":["tag_bw"],"sizes":[8],"memory":[{"initiator":"host","target":"host"}],
            "warmup_iterations":1,"min_iterations":1,"min_time_s":0.1,"max_time_s":1.0,"window":32,
            "unit":"GB/s","require_cuda":false}"#;
        let s: RunSettings = serde_json::from_str(old).unwrap();
        assert!(s.stop.is_none() && s.plan.is_empty() && s.blocks.is_none() && !s.untouched_buffers);
        // Unset optional fields are not written, so v1 readers see the same document.
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            !text.contains("stop") && !text.contains("plan") && !text.contains("untouched"),
            "{text}"
        );
        let m = r#"{"warmup_iterations":1,"iterations":2,"elapsed_s":0.1,"bytes":16,"window":1,"verified":true}"#;
        let m: Measurement = serde_json::from_str(m).unwrap();
        assert!(m.precision.is_none() && m.list_latency_us.is_none() && m.window_trials.is_empty());
        let with = serde_json::to_value(RunSettings::verdict_profile()).unwrap();
        assert_eq!(with["stop"]["rel_half_width"], 0.02);
        assert_eq!(with["plan"][4]["blocks"], KV_BLOCKS);
    }
}
