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
    pub size: u64,
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
    pub shape: CaseShape,
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
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Additive per-case fields of the NIXL engine (issue 12); all default to "UCX engine".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CaseShape {
    #[serde(default, skip_serializing_if = "EngineKind::is_default")]
    pub engine: EngineKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Descriptors per request (`size` is one descriptor's length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
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
}
