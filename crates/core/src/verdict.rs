//! The verdict rules: what the placement should give, and ok / warn / fail for every case.
//!
//! Classification decides first, bandwidth second. On the 2-core development machine loopback
//! TCP moves ~4.5 GB/s against ~7 GB/s over sysv, so a bandwidth floor alone cannot tell a TCP
//! fallback from shared memory; the transport UCX reports can. Floors then catch a correct
//! transport that is still slow (wrong NIC, PCIe placement, a throttled link).
//!
//! # The expectations file
//!
//! YAML, parsed with serde-saphyr (so JSON, a subset of YAML, works too). Every key is
//! optional; unknown keys are an error naming the key. Bandwidths carry a unit: `GB/s`
//! (10^9 B/s), `MB/s` (10^6), `GiB/s`, `MiB/s`, or `Gb/s` (10^9 *bits*/s, as NICs are sold).
//!
//! ```yaml
//! same_host:            # both sides on one host
//!   host: 1 GB/s        # host→host
//!   cuda: 50 GB/s       # cuda→cuda
//!   host_cuda: 5 GB/s   # host→cuda and cuda→host
//! different_hosts:
//!   host: 100 Gb/s
//!   cuda: 10 GB/s
//! min_size: 1MiB        # floors apply to messages at least this large
//! tcp: warn             # fail (default) or warn when TCP carries the data
//! ```
//!
//! The CLI reads the file and passes its text to [`parse_expectation_config`]; flags win over
//! the file, the file over [`Expectation::defaults`].

use crate::ParseError;
use crate::classify::{describe, join_lanes, severity_rank};
use crate::model::*;
use serde::Deserialize;

const GB: f64 = 1e9;

/// Floor for different hosts, every memory pair: 8 GB/s. The slowest fabric the tool targets is
/// RoCE 100 GbE (12.5 GB/s line rate, 10–12 GB/s practical per the Dynamo guide); 8 GB/s is 80 %
/// of its lowest practical figure, so a healthy link never trips it, yet 2.7× the top of the TCP
/// fallback range (1–3 GB/s; observed failures 0.3–0.5 GB/s). Faster fabrics (HDR 25 GB/s, NDR
/// 50 GB/s) should raise it in the expectations file.
pub const DIFFERENT_HOSTS_FLOOR_BPS: f64 = 8.0 * GB;
/// Floor for same-host host→host: 1 GB/s. Shared memory and cma give 5–10 GB/s even on a 2-core
/// machine (sysv ~7 GB/s here), and the observed broken setups sit at 0.3–0.5 GB/s. Loopback TCP
/// (~4.5 GB/s here) clears this floor, which is why classification, not this number, catches it.
pub const SAME_HOST_HOST_FLOOR_BPS: f64 = 1.0 * GB;
/// Floor for same-host cuda→cuda: 50 GB/s. cuda_ipc over NVLink is estimated by UCX at 300 (A100),
/// 400 (H100/H20) and 800 (Blackwell) GB/s; 50 GB/s is 6× below the slowest of those, and above
/// anything staged through host memory or a PCIe Gen5 x16 NIC (≈ 64 GB/s theoretical, less in
/// practice), so a same-host GPU pair that lost NVLink fails. PCIe-only GPU boxes lower it.
pub const SAME_HOST_CUDA_FLOOR_BPS: f64 = 50.0 * GB;
/// Floor for same-host host↔cuda: 5 GB/s. One side is host memory, so the bytes cross PCIe
/// (Gen4 x16 ≈ 25 GB/s practical, Gen5 twice that) instead of NVLink; 5 GB/s leaves room for a
/// host-side copy and stays above the TCP fallback range.
pub const SAME_HOST_MIXED_FLOOR_BPS: f64 = 5.0 * GB;
/// Floors apply from 1 MiB: KV-cache blocks are this size or larger, and smaller messages are
/// latency-bound, so their bandwidth says nothing about the fabric.
pub const MIN_SIZE_FOR_BANDWIDTH: u64 = 1 << 20;

impl Expectation {
    /// The built-in expectation for a placement (see the constants above for the reasoning).
    pub fn defaults(locality: Locality) -> Expectation {
        let (host, cuda, mixed) = match locality {
            Locality::SameHost => (
                SAME_HOST_HOST_FLOOR_BPS,
                SAME_HOST_CUDA_FLOOR_BPS,
                SAME_HOST_MIXED_FLOOR_BPS,
            ),
            Locality::DifferentHosts => (
                DIFFERENT_HOSTS_FLOOR_BPS,
                DIFFERENT_HOSTS_FLOOR_BPS,
                DIFFERENT_HOSTS_FLOOR_BPS,
            ),
        };
        Expectation {
            locality,
            min_host_bandwidth_bps: host,
            min_cuda_bandwidth_bps: cuda,
            min_mixed_bandwidth_bps: Some(mixed),
            min_size_for_bandwidth: MIN_SIZE_FOR_BANDWIDTH,
            tcp_is_failure: true,
            source: "defaults".to_string(),
        }
    }

    /// The floor (bytes/s) for one memory pair.
    pub fn floor_for(&self, memory: MemoryPair) -> f64 {
        match (memory.initiator, memory.target) {
            (MemoryType::Host, MemoryType::Host) => self.min_host_bandwidth_bps,
            (MemoryType::Cuda, MemoryType::Cuda) => self.min_cuda_bandwidth_bps,
            _ => self.min_mixed_bandwidth_bps.unwrap_or(self.min_cuda_bandwidth_bps),
        }
    }

    /// Applies overrides; `source` names where they came from (`flags`, a file path).
    pub fn with_overrides(mut self, o: &ExpectationOverrides, source: &str) -> Expectation {
        if o.is_empty() {
            return self;
        }
        if let Some(v) = o.min_host_bandwidth_bps {
            self.min_host_bandwidth_bps = v;
        }
        if let Some(v) = o.min_cuda_bandwidth_bps {
            self.min_cuda_bandwidth_bps = v;
        }
        if let Some(v) = o.min_mixed_bandwidth_bps {
            self.min_mixed_bandwidth_bps = Some(v);
        }
        if let Some(v) = o.min_size_for_bandwidth {
            self.min_size_for_bandwidth = v;
        }
        if let Some(v) = o.tcp_is_failure {
            self.tcp_is_failure = v;
        }
        self.source = if self.source == "defaults" {
            source.to_string()
        } else {
            format!("{} + {source}", self.source)
        };
        self
    }

    /// Defaults, then the expectations file (`config` = parsed file and its path), then flags.
    pub fn resolve(
        locality: Locality,
        config: Option<(&ExpectationConfig, &str)>,
        flags: &ExpectationOverrides,
    ) -> Result<Expectation, ParseError> {
        let mut e = Expectation::defaults(locality);
        if let Some((cfg, path)) = config {
            e = e.with_overrides(&cfg.overrides_for(locality)?, path);
        }
        Ok(e.with_overrides(flags, "flags"))
    }
}

/// Values that replace defaults; `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpectationOverrides {
    pub min_host_bandwidth_bps: Option<f64>,
    pub min_cuda_bandwidth_bps: Option<f64>,
    pub min_mixed_bandwidth_bps: Option<f64>,
    pub min_size_for_bandwidth: Option<u64>,
    pub tcp_is_failure: Option<bool>,
}

impl ExpectationOverrides {
    fn is_empty(&self) -> bool {
        *self == ExpectationOverrides::default()
    }

    /// From the CLI flags: `--min-host-bw`/`--min-cuda-bw` in GB/s (the cuda floor also sets the
    /// host↔cuda one), `--min-bw-size`, and `--allow-tcp`.
    pub fn from_flags(
        min_host_gbps: Option<f64>,
        min_cuda_gbps: Option<f64>,
        min_size: Option<u64>,
        allow_tcp: bool,
    ) -> Result<Self, ParseError> {
        let check = |flag: &str, v: Option<f64>| -> Result<Option<f64>, ParseError> {
            match v {
                None => Ok(None),
                Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x * GB)),
                Some(x) => Err(ParseError::new(format!(
                    "{flag} {x}: give a positive bandwidth in GB/s, e.g. {flag} 10"
                ))),
            }
        };
        let cuda = check("--min-cuda-bw", min_cuda_gbps)?;
        Ok(ExpectationOverrides {
            min_host_bandwidth_bps: check("--min-host-bw", min_host_gbps)?,
            min_cuda_bandwidth_bps: cuda,
            min_mixed_bandwidth_bps: cuda,
            min_size_for_bandwidth: min_size,
            tcp_is_failure: allow_tcp.then_some(false),
        })
    }
}

/// A bandwidth in the expectations file: text with a unit, or a bare number (rejected: units matter).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum BandwidthValue {
    Text(String),
    Number(f64),
}

impl BandwidthValue {
    fn bps(&self, key: &str) -> Result<f64, ParseError> {
        match self {
            BandwidthValue::Text(t) => parse_bandwidth(t).map_err(|e| ParseError::new(format!("{key}: {e}"))),
            BandwidthValue::Number(n) => Err(ParseError::new(format!(
                "{key}: {n} has no unit: write e.g. '{n} GB/s' (10^9 B/s), 'MiB/s' or 'Gb/s' (bits)"
            ))),
        }
    }
}

/// Floors for one locality in the expectations file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalityFloors {
    pub host: Option<BandwidthValue>,
    pub cuda: Option<BandwidthValue>,
    pub host_cuda: Option<BandwidthValue>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TcpPolicy {
    Fail,
    Warn,
}

/// The expectations file (see the module docs for the format).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectationConfig {
    pub same_host: Option<LocalityFloors>,
    pub different_hosts: Option<LocalityFloors>,
    /// A size such as `1MiB` or `4194304`.
    pub min_size: Option<BandwidthSize>,
    pub tcp: Option<TcpPolicy>,
}

/// A size in the expectations file: `1MiB` or a plain byte count.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum BandwidthSize {
    Bytes(u64),
    Text(String),
}

impl ExpectationConfig {
    /// The overrides this file sets for one locality; units are checked here.
    pub fn overrides_for(&self, locality: Locality) -> Result<ExpectationOverrides, ParseError> {
        let (key, floors) = match locality {
            Locality::SameHost => ("same_host", &self.same_host),
            Locality::DifferentHosts => ("different_hosts", &self.different_hosts),
        };
        let floor = |name: &str, v: &Option<BandwidthValue>| -> Result<Option<f64>, ParseError> {
            v.as_ref().map(|b| b.bps(&format!("{key}.{name}"))).transpose()
        };
        let default = LocalityFloors::default();
        let f = floors.as_ref().unwrap_or(&default);
        let min_size = match &self.min_size {
            None => None,
            Some(BandwidthSize::Bytes(0)) => {
                return Err(ParseError::new("min_size: 0 bytes: use a positive size such as 1MiB"));
            }
            Some(BandwidthSize::Bytes(n)) => Some(*n),
            Some(BandwidthSize::Text(t)) => {
                Some(crate::units::parse_size(t).map_err(|e| ParseError::new(format!("min_size: {e}")))?)
            }
        };
        Ok(ExpectationOverrides {
            min_host_bandwidth_bps: floor("host", &f.host)?,
            min_cuda_bandwidth_bps: floor("cuda", &f.cuda)?,
            min_mixed_bandwidth_bps: floor("host_cuda", &f.host_cuda)?,
            min_size_for_bandwidth: min_size,
            tcp_is_failure: self.tcp.map(|p| p == TcpPolicy::Fail),
        })
    }
}

/// Parses the expectations file's text (YAML or JSON) and checks every value, so a bad file is
/// reported before any test runs.
pub fn parse_expectation_config(text: &str) -> Result<ExpectationConfig, ParseError> {
    let cfg: ExpectationConfig = if text.trim().is_empty() {
        ExpectationConfig::default()
    } else {
        serde_saphyr::from_str(text).map_err(|e| {
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or("unreadable");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            ParseError::new(format!(
                "bad expectations file: {first} (see the format in docs/schema.md, \"expectation\")"
            ))
        })?
    };
    cfg.overrides_for(Locality::SameHost)?;
    cfg.overrides_for(Locality::DifferentHosts)?;
    Ok(cfg)
}

/// Parses `8 GB/s`, `9000MiB/s`, `100 Gb/s` (bits), `1.5GiB/s`, `500 MB/s` into bytes per second.
pub fn parse_bandwidth(text: &str) -> Result<f64, ParseError> {
    let t = text.trim();
    let bad = || {
        ParseError::new(format!(
            "bad bandwidth '{text}': use a positive number with a unit, e.g. 10 GB/s, 9000 MiB/s or 100 Gb/s"
        ))
    };
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult = match unit.trim() {
        "GB/s" => 1e9,
        "MB/s" => 1e6,
        "kB/s" | "KB/s" => 1e3,
        "B/s" => 1.0,
        "GiB/s" => (1u64 << 30) as f64,
        "MiB/s" => (1u64 << 20) as f64,
        "Gb/s" | "Gbit/s" | "Gbps" => 1e9 / 8.0,
        "Mb/s" | "Mbit/s" | "Mbps" => 1e6 / 8.0,
        _ => return Err(bad()),
    };
    let v = n * mult;
    if !(v.is_finite() && v > 0.0) {
        return Err(bad());
    }
    Ok(v)
}

/// What a case's verdict is about, most important first: the roll-up's headline is the first
/// kind found among the cases with the worst status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Finding {
    TcpFallback,
    NoRdma,
    RmaEmulated,
    CaseFailed,
    CudaRequired,
    CudaStaging,
    NvlinkUnused,
    BelowFloor,
    Unexpected,
    UnknownTransport,
    SelfLoop,
    Unverified,
    Skipped,
    Fine,
}

struct Assessment {
    finding: Finding,
    verdict: CheckVerdict,
}

const HINT_NAMESPACES: &str =
    "the two sides do not share IPC/PID namespaces (pods); run both roles in one pod, use hostIPC/hostPID, or use RDMA";
const HINT_GPU_VISIBILITY: &str = "for GPU memory cuda_ipc also needs each side to see the other's GPUs: privileged \
     pods with a CUDA_VISIBLE_DEVICES mapping from /proc/driver/nvidia/gpus, or RDMA with GPUDirect";
/// Seed 002: pods on one NVLink node each saw only their own GPUs, so cuda_ipc was impossible.
const HINT_CUDA_IPC: &str = "cuda_ipc (NVLink) needs both sides in one PID namespace and each side able to see the \
     other's GPUs: privileged pods with a CUDA_VISIBLE_DEVICES mapping from /proc/driver/nvidia/gpus, or RDMA with GPUDirect";
const HINT_NO_RDMA: &str = "give both pods an RDMA NIC (rdma/ib resource, IPC_LOCK capability), keep rc/dc in UCX_TLS, \
     and check the nodes with `ic-bench probe node`";
const HINT_GPUDIRECT: &str = "GPUDirect RDMA is not in use: load nvidia-peermem and check that `ucx_info -d` lists cuda \
     memory on the mlx5 device";
const HINT_RMA_SAME_HOST: &str = "NIXL moves KV cache with put/get, which need a zero-copy transport: share the PID \
     namespace (hostPID or one pod) so cma works, or use RDMA";
const HINT_RMA_REMOTE: &str = "NIXL moves KV cache with put/get; without rc/dc UCX emulates them over active messages: \
     give both pods an RDMA NIC (rdma/ib resource, IPC_LOCK) and keep rc/dc in UCX_TLS";

fn verdict(status: Status, reason: String, hint: Option<&str>) -> CheckVerdict {
    CheckVerdict {
        status,
        reason,
        hint: hint.map(str::to_string),
    }
}

fn fmt_bw(bps: f64, unit: BandwidthUnit) -> String {
    format!("{:.2} {}", unit.from_bytes_per_s(bps), unit.label())
}

fn has_tcp(path: &DataPath) -> bool {
    path.transports
        .iter()
        .any(|l| crate::classify::class_of_transport(&l.transport) == TransportClass::Tcp)
}

fn tcp_lanes(path: &DataPath) -> String {
    let tcp: Vec<Lane> = path
        .transports
        .iter()
        .filter(|l| crate::classify::class_of_transport(&l.transport) == TransportClass::Tcp)
        .cloned()
        .collect();
    if tcp.is_empty() {
        "tcp".to_string()
    } else {
        join_lanes(&tcp)
    }
}

/// Classification only (no bandwidth): what the data path means for this placement.
fn assess_path(case: &CaseResult, path: &DataPath, exp: &Expectation) -> Assessment {
    let same_host = exp.locality == Locality::SameHost;
    let cuda = case.memory.uses_cuda();
    let large = case.size >= exp.min_size_for_bandwidth;
    let lanes = join_lanes(&path.transports);
    let tcp_status = if exp.tcp_is_failure { Status::Fail } else { Status::Warn };
    let tcp_hint = |same: bool| -> String {
        if !same {
            HINT_NO_RDMA.to_string()
        } else if cuda {
            format!("{HINT_NAMESPACES}; {HINT_GPU_VISIBILITY}")
        } else {
            HINT_NAMESPACES.to_string()
        }
    };
    let a = |finding, status, reason: String, hint: Option<&str>| Assessment {
        finding,
        verdict: verdict(status, reason, hint),
    };
    match path.class {
        TransportClass::Tcp => {
            let (finding, reason) = if same_host {
                (
                    Finding::TcpFallback,
                    format!("tcp fallback: data went over {}", tcp_lanes(path)),
                )
            } else {
                (
                    Finding::NoRdma,
                    format!("no RDMA transport: data went over {}", tcp_lanes(path)),
                )
            };
            let hint = tcp_hint(same_host);
            a(finding, tcp_status, reason, Some(&hint))
        }
        TransportClass::RmaEmulated if case.test.is_rma() => {
            let op = if case.test == TestKind::GetBw { "get" } else { "put" };
            if has_tcp(path) {
                let hint = if same_host {
                    format!("{HINT_NAMESPACES}; {HINT_RMA_SAME_HOST}")
                } else {
                    HINT_RMA_REMOTE.to_string()
                };
                let (finding, head) = if same_host {
                    (Finding::TcpFallback, "tcp fallback")
                } else {
                    (Finding::NoRdma, "no RDMA transport")
                };
                let reason = format!("{head}: {op} emulated over active messages on {}", tcp_lanes(path));
                a(finding, tcp_status, reason, Some(&hint))
            } else {
                let on = if lanes.is_empty() {
                    String::new()
                } else {
                    format!(" on {lanes}")
                };
                let hint = if same_host { HINT_RMA_SAME_HOST } else { HINT_RMA_REMOTE };
                a(
                    Finding::RmaEmulated,
                    Status::Fail,
                    format!("RMA emulated over active messages: {op}{on} is not zero-copy"),
                    Some(hint),
                )
            }
        }
        TransportClass::RmaEmulated => a(
            Finding::Unexpected,
            Status::Warn,
            format!("UCX reported RMA emulation ({lanes}) for a {} test", case.test),
            None,
        ),
        TransportClass::SharedMemory | TransportClass::Cma | TransportClass::CudaIpc if !same_host => a(
            Finding::Unexpected,
            Status::Warn,
            format!(
                "placement says different hosts, but data went over {} ({lanes})",
                path.class
            ),
            Some("both sides are on one host: check the placement (node names) before trusting this run"),
        ),
        TransportClass::SharedMemory | TransportClass::Cma if cuda && large => a(
            Finding::CudaStaging,
            Status::Warn,
            format!("GPU memory staged through host memory over {lanes}, not cuda_ipc"),
            Some(HINT_CUDA_IPC),
        ),
        TransportClass::SharedMemory | TransportClass::Cma | TransportClass::CudaIpc => a(
            Finding::Fine,
            Status::Ok,
            format!("{} on the same host ({lanes})", path.class),
            None,
        ),
        TransportClass::Rdma if same_host && case.memory == cuda_cuda() => a(
            Finding::NvlinkUnused,
            Status::Warn,
            format!("GPU data went over rdma ({lanes}), not cuda_ipc (NVLink)"),
            Some(HINT_CUDA_IPC),
        ),
        TransportClass::Rdma => a(Finding::Fine, Status::Ok, format!("rdma ({lanes})"), None),
        TransportClass::CudaCopyStaging if cuda && large => {
            let (reason, hint) = if same_host {
                (
                    format!("GPU memory staged through host memory with cuda_copy ({lanes}), not cuda_ipc"),
                    HINT_CUDA_IPC,
                )
            } else {
                (
                    format!("GPU memory staged through host memory with cuda_copy ({lanes}), not GPUDirect RDMA"),
                    HINT_GPUDIRECT,
                )
            };
            a(Finding::CudaStaging, Status::Warn, reason, Some(hint))
        }
        TransportClass::CudaCopyStaging if cuda => a(
            Finding::Fine,
            Status::Ok,
            format!("small GPU message copied through host memory ({lanes}), as UCX does below the rendezvous size"),
            None,
        ),
        TransportClass::CudaCopyStaging => a(
            Finding::Unexpected,
            Status::Warn,
            format!("cuda_copy ({lanes}) carried a host-memory case"),
            None,
        ),
        TransportClass::SelfLoop => a(
            Finding::SelfLoop,
            Status::Warn,
            format!("data looped back inside one process ({lanes}): nothing crossed between the two sides"),
            Some("run serve and connect as separate processes"),
        ),
        TransportClass::Unknown => a(
            Finding::UnknownTransport,
            Status::Warn,
            if lanes.is_empty() {
                "transport unknown: UCX reported neither a protocol nor lanes".to_string()
            } else {
                format!("transport not recognised: {lanes}")
            },
            Some("use UCX 1.14 or newer so ic-bench can query the endpoint's transports"),
        ),
    }
}

fn cuda_cuda() -> MemoryPair {
    MemoryPair {
        initiator: MemoryType::Cuda,
        target: MemoryType::Cuda,
    }
}

fn assess(case: &CaseResult, exp: &Expectation, settings: &RunSettings) -> Assessment {
    let label = format!("{} {} {}", case.test, crate::units::format_size(case.size), case.memory);
    match case.status {
        CaseStatus::Failed => {
            return Assessment {
                finding: Finding::CaseFailed,
                verdict: verdict(
                    Status::Fail,
                    format!(
                        "{label} failed: {}",
                        case.reason.as_deref().unwrap_or("no reason given")
                    ),
                    Some("rerun with UCX_LOG_LEVEL=info to see UCX's own messages"),
                ),
            };
        }
        CaseStatus::Skipped => {
            let why = case.reason.as_deref().unwrap_or("skipped");
            return if case.memory.uses_cuda() && settings.require_cuda {
                Assessment {
                    finding: Finding::CudaRequired,
                    verdict: verdict(
                        Status::Fail,
                        format!("CUDA required but no CUDA driver: {label} skipped ({why})"),
                        Some("run where the NVIDIA driver is visible (libcuda.so.1), or drop --require-cuda"),
                    ),
                }
            } else {
                Assessment {
                    finding: Finding::Skipped,
                    verdict: verdict(Status::Skipped, format!("skipped: {why}"), None),
                }
            };
        }
        CaseStatus::Measured => {}
    }
    let unknown = DataPath {
        class: TransportClass::Unknown,
        transports: Vec::new(),
        protocol: String::new(),
        source: EvidenceSource::None,
    };
    let path = case.transport.as_ref().map(|t| &t.data_path).unwrap_or(&unknown);
    let mut out = assess_path(case, path, exp);

    if let Some(m) = &case.measurement {
        if !m.verified && out.verdict.status == Status::Ok {
            out = Assessment {
                finding: Finding::Unverified,
                verdict: verdict(
                    Status::Warn,
                    "payloads were not verified on the receiving side".to_string(),
                    None,
                ),
            };
        }
        let floor = exp.floor_for(case.memory);
        if case.test.is_bandwidth()
            && case.size >= exp.min_size_for_bandwidth
            && let Some(bps) = m.bandwidth_bps
            && bps < floor
        {
            let unit = settings.unit;
            let shortfall = format!(
                "{} measured, expected ≥ {} for {} on {}",
                fmt_bw(bps, unit),
                fmt_bw(floor, unit),
                case.memory,
                exp.locality
            );
            if out.verdict.status == Status::Ok {
                let hint = format!(
                    "the data path is right ({}) but slow: check link speed, NUMA and PCIe placement \
                     (`ic-bench probe node`), or set the floor in the expectations file",
                    path.class
                );
                out = Assessment {
                    finding: Finding::BelowFloor,
                    verdict: verdict(Status::Fail, format!("bandwidth below floor: {shortfall}"), Some(&hint)),
                };
            } else {
                out.verdict.status = Status::Fail;
                out.verdict.reason = format!("{}; {shortfall}", out.verdict.reason);
            }
        }
    } else if out.verdict.status == Status::Ok {
        out = Assessment {
            finding: Finding::Unexpected,
            verdict: verdict(Status::Warn, "measured case without a measurement".to_string(), None),
        };
    }
    out
}

/// The verdict for one case. Pure: the same case, expectation and settings give the same answer.
pub fn judge_case(case: &CaseResult, exp: &Expectation, settings: &RunSettings) -> CheckVerdict {
    assess(case, exp, settings).verdict
}

/// Sets every case's verdict and returns the rolled-up one: the worst status wins, its reason is
/// the most important finding among the worst cases (tcp fallback first), and `data_paths` lists
/// the classes seen in measured cases, most explanatory first.
pub fn judge_cases(cases: &mut [CaseResult], exp: &Expectation, settings: &RunSettings) -> Verdict {
    let assessments: Vec<Assessment> = cases.iter().map(|c| assess(c, exp, settings)).collect();
    for (case, a) in cases.iter_mut().zip(&assessments) {
        case.verdict = Some(a.verdict.clone());
    }

    let mut data_paths: Vec<TransportClass> = Vec::new();
    for c in cases.iter().filter(|c| c.status == CaseStatus::Measured) {
        let class = c
            .transport
            .as_ref()
            .map(|t| t.data_path.class)
            .unwrap_or(TransportClass::Unknown);
        if !data_paths.contains(&class) {
            data_paths.push(class);
        }
    }
    data_paths.sort_by_key(|c| severity_rank(*c));

    let measured = cases.iter().filter(|c| c.status == CaseStatus::Measured).count();
    let skipped = assessments
        .iter()
        .filter(|a| a.verdict.status == Status::Skipped)
        .count();
    let worst = assessments
        .iter()
        .map(|a| a.verdict.status)
        .filter(|s| *s != Status::Skipped)
        .max()
        .unwrap_or(Status::Ok);

    if worst == Status::Fail || worst == Status::Warn {
        let headline = assessments
            .iter()
            .enumerate()
            .filter(|(_, a)| a.verdict.status == worst)
            // Prefer the largest message as the example: KV-cache transfers are large.
            .min_by_key(|(i, a)| (a.finding, std::cmp::Reverse(cases[*i].size)))
            .map(|(i, a)| (i, a.finding, a.verdict.clone()));
        if let Some((idx, finding, v)) = headline {
            let same = assessments
                .iter()
                .filter(|a| a.verdict.status == worst && a.finding == finding)
                .count();
            let first = &cases[idx];
            let example = match first.transport.as_ref() {
                Some(t) => describe(first.test, first.memory, first.size, &t.data_path),
                None => format!(
                    "{} {} {}",
                    first.test,
                    crate::units::format_size(first.size),
                    first.memory
                ),
            };
            let total = cases.len();
            return Verdict {
                status: if worst == Status::Fail {
                    VerdictStatus::Fail
                } else {
                    VerdictStatus::Warn
                },
                reason: format!("{} ({same} of {total} cases; e.g. {example})", v.reason),
                hint: v.hint,
                data_paths,
            };
        }
    }
    if measured == 0 {
        return Verdict {
            status: VerdictStatus::Warn,
            reason: format!("inconclusive: no case was measured ({skipped} skipped)"),
            hint: Some("run where the requested memory types are available, or ask for host-host".to_string()),
            data_paths,
        };
    }
    let classes: Vec<&str> = data_paths.iter().map(|c| c.as_str()).collect();
    // The skips' reason belongs in the verdict line: a run that passed on host memory only must
    // not read like one that tested CUDA too.
    let skip_reason = cases
        .iter()
        .find(|c| c.status == CaseStatus::Skipped)
        .and_then(|c| c.reason.as_deref());
    let skipped_note = match (skipped, skip_reason) {
        (0, _) => String::new(),
        (n, Some(why)) => format!("; {n} skipped: {why}"),
        (n, None) => format!(", {n} skipped"),
    };
    Verdict {
        status: VerdictStatus::Pass,
        reason: format!(
            "all {measured} measured cases ok over {} for {}{skipped_note}",
            classes.join(", "),
            exp.locality
        ),
        hint: None,
        data_paths,
    }
}

/// Judges a whole report in place (case verdicts and the rolled-up verdict).
pub fn judge(report: &mut PairReport) {
    let exp = report.expectation.clone();
    let settings = report.settings.clone();
    report.verdict = judge_cases(&mut report.cases, &exp, &settings);
    if report.verdict.data_paths.contains(&TransportClass::Tcp)
        && let Some(hint) = tcp_only_tls_hint(report).or_else(|| shared_ipc_without_pid_hint(report))
    {
        // The generic namespace/RDMA hint would send the operator after the wrong cause.
        report.verdict.hint = Some(hint);
    }
}

/// Same host, tag traffic over shared memory, but RMA over tcp or emulated: the sides share an
/// IPC namespace (hostIPC) and not a PID namespace, so cma — the zero-copy path RMA takes on one
/// host — is unavailable. That is NIXL's path, so a passing tag test would mislead.
fn shared_ipc_without_pid_hint(report: &PairReport) -> Option<String> {
    if report.placement.locality != Locality::SameHost {
        return None;
    }
    let class = |c: &CaseResult| c.transport.as_ref().map(|t| t.data_path.class);
    let measured = || report.cases.iter().filter(|c| c.status == CaseStatus::Measured);
    let tag_over_shm = measured().any(|c| !c.test.is_rma() && class(c) == Some(TransportClass::SharedMemory));
    let rma_slow = measured()
        .any(|c| c.test.is_rma() && matches!(class(c), Some(TransportClass::Tcp | TransportClass::RmaEmulated)));
    (tag_over_shm && rma_slow).then(|| {
        "tag messages use shared memory but put/get (NIXL's operations) do not: the sides share IPC but not \
         PID namespaces, and cma needs both; add hostPID (or run both roles in one pod), or use RDMA"
            .to_string()
    })
}

/// When a side's `UCX_TLS` leaves UCX nothing but TCP, that setting is the cause of a TCP data
/// path, whatever the placement: say so, naming the side and the value.
fn tcp_only_tls_hint(report: &PairReport) -> Option<String> {
    let sides = [("prefill", &report.client), ("decode", &report.server)];
    let (side, value) = sides.iter().find_map(|(side, peer)| {
        let value = peer.env.get("UCX_TLS")?;
        tls_allows_only_tcp(value).then_some((*side, value.as_str()))
    })?;
    let instead = match report.placement.locality {
        Locality::SameHost => "sm,cma (same host) and cuda_copy,cuda_ipc (GPU memory)",
        Locality::DifferentHosts => "rc or dc (RDMA) and cuda_copy (GPU memory)",
    };
    Some(format!(
        "UCX_TLS={value} on the {side} side leaves UCX only TCP: allow {instead}, or unset UCX_TLS"
    ))
}

/// True for an explicit transport list (not the `^` exclusion form) with nothing but tcp and
/// helpers that cannot carry data between processes on their own (self, and the cuda_copy /
/// gdr_copy staging copies, which still hand the bytes to tcp).
fn tls_allows_only_tcp(value: &str) -> bool {
    let value = value.trim();
    if value.is_empty() || value.starts_with('^') {
        return false;
    }
    let names: Vec<&str> = value.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    names.contains(&"tcp")
        && names
            .iter()
            .all(|n| matches!(*n, "tcp" | "self" | "cuda_copy" | "gdr_copy"))
}

#[cfg(test)]
mod tests;
