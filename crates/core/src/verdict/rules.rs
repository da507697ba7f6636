//! The case rules: one case's verdict from the data path UCX reported, the placement and the
//! measured bandwidth. Classification decides first, the bandwidth floor second.

use super::expectation::CEILING_SLACK;
use crate::classify::join_lanes;
use crate::model::*;

/// What a case's verdict is about, most important first: the roll-up's headline is the first
/// kind found among the cases with the worst status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Finding {
    /// More bandwidth than the placement can carry: every other conclusion is suspect.
    Implausible,
    /// GPU→GPU on one host off cuda_ipc because the memory is not legacy-IPC capable: the
    /// allocation mode is the cause (named before the transport it fell back to).
    AllocatorFallback,
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
    /// A bandwidth case with no bandwidth figure (no measured time): not measured, whatever
    /// its status says.
    NoFigure,
    SelfLoop,
    Unverified,
    Skipped,
    Fine,
    /// Measured but not what the profile judges: tag cases under `--ucx-profile nixl` (NIXL
    /// moves KV with put/get). Ok, and left out of the roll-up's data paths.
    NotJudged,
}

impl Finding {
    /// Findings that leave the run unable to say whether the fabric is right: the run is
    /// inconclusive unless a case failed outright.
    pub(super) fn is_inconclusive(self) -> bool {
        matches!(self, Finding::UnknownTransport | Finding::NoFigure)
    }
}

pub(super) struct Assessment {
    pub(super) finding: Finding,
    pub(super) verdict: CheckVerdict,
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
        finding: None,
    }
}

fn fmt_bw(bps: f64, unit: BandwidthUnit) -> String {
    crate::units::format_bandwidth(bps, unit)
}

pub(super) fn has_tcp(path: &DataPath) -> bool {
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

/// The bytes a case kept moving at once: its message size times its window (the UCX engine's
/// outstanding operations, a NIXL request's descriptors) or its list of blocks, whichever is
/// larger (a list is one operation in flight with all its blocks).
fn bytes_in_flight(case: &CaseResult, m: &Measurement) -> u64 {
    let at_once = m.window.max(case.blocks.unwrap_or(1)).max(1);
    case.size.saturating_mul(u64::from(at_once))
}

/// Classification only (no bandwidth): what the data path means for this placement.
fn assess_path(case: &CaseResult, path: &DataPath, exp: &Expectation) -> Assessment {
    let same_host = exp.locality == Locality::SameHost;
    let cuda = case.memory.uses_cuda();
    // Host memory on one side and GPU memory on the other cross PCIe through a copy on one host
    // whatever the transport: staging through host memory is the path there, not a fault, and
    // the host↔cuda floor judges its speed. Only GPU→GPU on one host has cuda_ipc to miss.
    let mixed_same_host = same_host && cuda && case.memory != cuda_cuda();
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
        TransportClass::SharedMemory | TransportClass::Cma | TransportClass::CudaCopyStaging if mixed_same_host => a(
            Finding::Fine,
            Status::Ok,
            format!("host memory to or from the GPU on the same host ({lanes})"),
            None,
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
        TransportClass::Unknown if unattributed_rendezvous(case) => a(
            Finding::UnknownTransport,
            Status::Warn,
            "rendezvous: which side moved the bytes is not known (neither the receiver's \"rendezvous data fetch\" \
             table nor the sender's \"rendezvous data send\" table named a row for this case)"
                .to_string(),
            Some(HINT_UNATTRIBUTED_RENDEZVOUS),
        ),
        TransportClass::Unknown => a(
            Finding::UnknownTransport,
            Status::Warn,
            if lanes.is_empty() {
                "transport unknown: UCX reported neither a protocol nor lanes".to_string()
            } else {
                format!("transport not recognised: {lanes}")
            },
            Some(unknown_transport_hint(case.run_by.engine)),
        ),
    }
}

/// A rendezvous tag case whose data path no side's own table named: the evidence keeps a
/// side's guess (`other_view`) and names no chooser.
fn unattributed_rendezvous(case: &CaseResult) -> bool {
    case.transport
        .as_ref()
        .is_some_and(|t| t.chosen_by.is_none() && t.other_view.is_some())
}

const HINT_UNATTRIBUTED_RENDEZVOUS: &str = "leave UCX_PROTO_INFO unset (ic-bench sets it to read both sides' \
     rendezvous tables) and run serve and connect from the same ic-bench version";

/// Where to look when nothing says which transport carried a case: the UCX engine asks UCX
/// itself (request info needs UCX ≥ 1.14); the NIXL engine reads the protocol tables NIXL's UCX
/// prints into the log file it points UCX_LOG_FILE at.
fn unknown_transport_hint(engine: EngineKind) -> &'static str {
    match engine {
        EngineKind::Ucx => "use UCX 1.14 or newer so ic-bench can query the endpoint's transports",
        EngineKind::Nixl => {
            "NIXL's UCX printed no protocol table for this operation and memory: leave UCX_LOG_FILE and UCX_PROTO_INFO unset so ic-bench can read them"
        }
    }
}

fn cuda_cuda() -> MemoryPair {
    MemoryPair {
        initiator: MemoryType::Cuda,
        target: MemoryType::Cuda,
    }
}

pub(super) fn assess(case: &CaseResult, exp: &Expectation, settings: &RunSettings, profile: UcxProfile) -> Assessment {
    let out = assess_case(case, exp, settings);
    if profile != UcxProfile::Nixl || case.test.is_rma() || case.status != CaseStatus::Measured {
        return out;
    }
    // NIXL moves KV with put/get only; its peer-failure mode (which the profile sets) costs tag
    // messages shared memory on one host, which says nothing about NIXL's path.
    let path = case.transport.as_ref().map(|t| &t.data_path);
    let reason = match path {
        Some(p) if exp.locality == Locality::SameHost && p.class == TransportClass::Tcp => format!(
            "not judged under --ucx-profile nixl: tag messages went over {} because UCX peer-failure mode \
             (NIXL's setting) excludes shared memory (sysv/posix); NIXL moves KV with put/get, judged on their own",
            tcp_lanes(p)
        ),
        _ => format!(
            "not judged under --ucx-profile nixl (NIXL moves KV with put/get): {}",
            out.verdict.reason
        ),
    };
    Assessment {
        finding: Finding::NotJudged,
        verdict: verdict(Status::Ok, reason, None),
    }
}

fn assess_case(case: &CaseResult, exp: &Expectation, settings: &RunSettings) -> Assessment {
    let size = crate::units::format_size(case.size);
    let label = match case.blocks {
        Some(n) if n > 1 => format!("{} {n}×{size} {}", case.test, case.memory),
        _ => format!("{} {size} {}", case.test, case.memory),
    };
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
                        Some(
                            "run where the NVIDIA driver is visible (libcuda.so.1), or drop the CUDA memory pairs \
                             (--memory, --require-cuda; --cuda-optional skips them)",
                        ),
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
    out = super::allocator::allocator_fallback(case, path, exp, out);

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
        if case.test.is_bandwidth() && m.bandwidth_bps.is_none() && out.verdict.status != Status::Fail {
            out = Assessment {
                finding: Finding::NoFigure,
                verdict: verdict(
                    Status::Warn,
                    format!("{label}: no bandwidth figure (no measured time): not measured"),
                    Some("raise --min-time or --min-iterations so the case runs long enough to time"),
                ),
            };
        }
        let floor = exp.floor_for(case.memory);
        if case.test.is_bandwidth()
            && case.size >= exp.min_size_for_bandwidth
            && bytes_in_flight(case, m) >= exp.min_in_flight_for_bandwidth()
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
        let (ceiling, what) = exp.ceiling_for(case.memory);
        if case.test.is_bandwidth()
            && let Some(bps) = m.bandwidth_bps
            && bps > ceiling * CEILING_SLACK
        {
            let unit = settings.unit;
            out = Assessment {
                finding: Finding::Implausible,
                verdict: verdict(
                    Status::Fail,
                    format!(
                        "physically implausible: {} measured, more than {what} ({}) can carry on {}: the bytes did \
                         not go where the placement says",
                        fmt_bw(bps, unit),
                        fmt_bw(ceiling, unit),
                        exp.locality
                    ),
                    Some(
                        "check the placement (node names) and the transport UCX reported: a different-hosts run faster \
                         than its NICs shares a host or a GPU fabric (NVLink); a same-host figure this high means the \
                         payload was not really moved",
                    ),
                ),
            };
        }
    } else if out.verdict.status != Status::Fail {
        out = Assessment {
            finding: Finding::NoFigure,
            verdict: verdict(
                Status::Warn,
                format!("{label}: marked measured but carries no measurement: not measured"),
                None,
            ),
        };
    }
    out
}

/// The verdict for one case. Pure: the same case, expectation and settings give the same answer.
pub fn judge_case(case: &CaseResult, exp: &Expectation, settings: &RunSettings) -> CheckVerdict {
    assess(case, exp, settings, UcxProfile::Default).verdict
}
