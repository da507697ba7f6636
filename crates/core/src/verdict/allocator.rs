//! The allocator trap: GPU→GPU on one host whose memory is not legacy-IPC capable (a serving
//! engine's `expandable_segments:True`, a stream-ordered pool, fabric handles) and whose bytes
//! did not go over cuda_ipc. The transport rules alone would blame the placement (namespaces,
//! GPU visibility); the cause is the allocation, and so is the fix.

use super::rules::{Assessment, Finding};
use crate::classify::join_lanes;
use crate::model::*;

/// What to do about it: UCX's cuda_ipc can map VMM memory only by exporting its POSIX file
/// descriptor and pulling it into the peer with `pidfd_getfd`, which needs a UCX that does so and
/// ptrace rights over the peer; or keep the KV cache in `cuMemAlloc` memory.
pub(super) const HINT_ALLOCATOR: &str = "use a UCX whose cuda_ipc maps VMM memory (it passes the allocation's POSIX \
     file descriptor with pidfd_getfd, which needs CAP_SYS_PTRACE and both sides in one PID namespace: hostPID or one \
     pod), or allocate the KV cache with cuMemAlloc (unset expandable_segments:True in PYTORCH_CUDA_ALLOC_CONF / \
     PYTORCH_ALLOC_CONF)";

/// Renames `out` to the allocation-mode fallback where it is one: a measured GPU→GPU case on
/// one host, memory the driver says is not legacy-IPC capable, a data path other than cuda_ipc
/// (and one that names a transport: an unknown path or a self loop keeps its own finding). The
/// status is at least a warning and never milder than the transport rules gave.
pub(super) fn allocator_fallback(case: &CaseResult, path: &DataPath, exp: &Expectation, out: Assessment) -> Assessment {
    let gpu_to_gpu = case.memory.initiator == MemoryType::Cuda && case.memory.target == MemoryType::Cuda;
    let Some(alloc) = case.cuda_alloc else {
        return out;
    };
    let fallback = !matches!(
        path.class,
        TransportClass::CudaIpc | TransportClass::SelfLoop | TransportClass::Unknown
    );
    if exp.locality != Locality::SameHost || !gpu_to_gpu || alloc.legacy_ipc != LegacyIpc::No || !fallback {
        return out;
    }
    let lanes = join_lanes(&path.transports);
    let on = if lanes.is_empty() {
        path.class.to_string()
    } else {
        format!("{} ({lanes})", path.class)
    };
    Assessment {
        finding: Finding::AllocatorFallback,
        verdict: CheckVerdict {
            status: out.verdict.status.max(Status::Warn),
            reason: format!(
                "allocation-mode fallback: {} GPU memory is not legacy-IPC capable, so UCX moved it over {on}, not \
                 cuda_ipc",
                alloc.mode
            ),
            hint: Some(HINT_ALLOCATOR.to_string()),
            finding: Some(CaseFinding::AllocatorFallback),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::rules::assess;
    use super::*;

    fn case(
        class: TransportClass,
        transport: &str,
        memory: MemoryPair,
        cuda_alloc: Option<CudaAllocation>,
    ) -> CaseResult {
        CaseResult {
            test: TestKind::GetBw,
            memory,
            size: 4 << 20,
            blocks: None,
            status: CaseStatus::Measured,
            reason: None,
            measurement: Some(Measurement {
                warmup_iterations: 4,
                iterations: 100,
                elapsed_s: 1.0,
                bytes: 400 << 20,
                warmup_bytes: None,
                // 0.3 GB/s: what NIXL issue 1754 measured over the fallback.
                bandwidth_bps: Some(0.3e9),
                latency_us: None,
                window: 1,
                verified: true,
                precision: None,
                list_latency_us: None,
                window_trials: Vec::new(),
                post_us: None,
            }),
            transport: Some(TransportEvidence {
                lanes: Vec::new(),
                protocol: None,
                data_path: DataPath {
                    class,
                    transports: vec![Lane {
                        transport: transport.to_string(),
                        device: "lo".to_string(),
                    }],
                    protocol: String::new(),
                    source: EvidenceSource::RequestInfo,
                },
                chosen_by: None,
                other_view: None,
            }),
            verdict: None,
            run_by: Default::default(),
            rail: None,
            cuda_alloc,
            nic_health: None,
        }
    }

    const GPU_GPU: MemoryPair = MemoryPair {
        initiator: MemoryType::Cuda,
        target: MemoryType::Cuda,
    };

    fn vmm(legacy_ipc: LegacyIpc) -> Option<CudaAllocation> {
        Some(CudaAllocation {
            mode: CudaAllocMode::Vmm,
            legacy_ipc,
        })
    }

    fn judge(c: &CaseResult, locality: Locality) -> Assessment {
        let exp = Expectation::defaults(locality);
        assess(c, &exp, &RunSettings::verdict_profile(), UcxProfile::Default)
    }

    #[test]
    fn vmm_memory_over_tcp_on_one_host_is_named_the_allocator_fallback_with_its_fix() {
        let a = judge(
            &case(TransportClass::Tcp, "tcp", GPU_GPU, vmm(LegacyIpc::No)),
            Locality::SameHost,
        );
        assert_eq!(a.finding, Finding::AllocatorFallback);
        assert_eq!(
            a.verdict.finding,
            Some(CaseFinding::AllocatorFallback),
            "typed in the JSON too"
        );
        assert_eq!(a.verdict.status, Status::Fail, "tcp fails, whatever the cause");
        assert!(
            a.verdict.reason.starts_with("allocation-mode fallback: vmm GPU memory"),
            "{}",
            a.verdict.reason
        );
        assert!(a.verdict.reason.contains("tcp (tcp/lo)"), "{}", a.verdict.reason);
        let hint = a.verdict.hint.unwrap_or_default();
        assert!(
            hint.contains("pidfd_getfd") && hint.contains("CAP_SYS_PTRACE") && hint.contains("expandable_segments")
        );
    }

    #[test]
    fn emulated_and_staged_paths_are_the_fallback_too_at_least_a_warning() {
        for (class, tl) in [
            (TransportClass::RmaEmulated, "sysv"),
            (TransportClass::CudaCopyStaging, "cuda_copy"),
            (TransportClass::SharedMemory, "sysv"),
        ] {
            let a = judge(&case(class, tl, GPU_GPU, vmm(LegacyIpc::No)), Locality::SameHost);
            assert_eq!(a.finding, Finding::AllocatorFallback, "{class}");
            assert!(a.verdict.status >= Status::Warn, "{class}: {:?}", a.verdict.status);
        }
    }

    #[test]
    fn the_rule_stays_silent_where_it_does_not_apply() {
        let same = Locality::SameHost;
        // Over cuda_ipc the trap did not spring (UCX mapped the VMM memory).
        let a = judge(
            &case(TransportClass::CudaIpc, "cuda_ipc", GPU_GPU, vmm(LegacyIpc::No)),
            same,
        );
        assert_eq!(
            a.finding,
            Finding::BelowFloor,
            "slow over cuda_ipc is not the allocator's doing"
        );
        // Legacy-capable memory, or a capability not known, is not blamed on the allocator.
        for ipc in [LegacyIpc::Yes, LegacyIpc::NotKnown] {
            let a = judge(&case(TransportClass::Tcp, "tcp", GPU_GPU, vmm(ipc)), same);
            assert_eq!(a.finding, Finding::TcpFallback, "{ipc}");
            assert_eq!(
                a.verdict.finding, None,
                "{ipc}: no typed finding where the rule is silent"
            );
        }
        // No allocation recorded (an older result), a host side, or two hosts: the old rules.
        let a = judge(&case(TransportClass::Tcp, "tcp", GPU_GPU, None), same);
        assert_eq!(a.finding, Finding::TcpFallback);
        let host_gpu = MemoryPair {
            initiator: MemoryType::Host,
            target: MemoryType::Cuda,
        };
        let a = judge(&case(TransportClass::Tcp, "tcp", host_gpu, vmm(LegacyIpc::No)), same);
        assert_eq!(a.finding, Finding::TcpFallback);
        let a = judge(
            &case(TransportClass::Tcp, "tcp", GPU_GPU, vmm(LegacyIpc::No)),
            Locality::DifferentHosts,
        );
        assert_eq!(a.finding, Finding::NoRdma);
    }

    #[test]
    fn the_run_verdict_headlines_the_allocator_not_the_transport() {
        let mut cases = vec![
            case(TransportClass::Tcp, "tcp", GPU_GPU, vmm(LegacyIpc::No)),
            case(TransportClass::Cma, "cma", MemoryPair::HOST_HOST, None),
        ];
        let exp = Expectation::defaults(Locality::SameHost);
        let v = crate::verdict::judge_cases(&mut cases, &exp, &RunSettings::verdict_profile());
        assert_eq!(v.status, VerdictStatus::Fail);
        assert!(v.reason.starts_with("allocation-mode fallback"), "{}", v.reason);
        assert!(v.hint.unwrap_or_default().contains("pidfd_getfd"));
    }
}
