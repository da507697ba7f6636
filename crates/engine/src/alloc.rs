//! What a case reports of its GPU memory (`--cuda-alloc`), and the refusal of a server too old
//! to allocate the asked-for kind.

use crate::messages::{CaseReady, CaseSetup};
use icb_core::{CudaAllocation, LegacyIpc, MemoryType};

/// A server older than `--cuda-alloc` ignores the mode and allocates `cuMemAlloc` memory; its
/// `ready` then says nothing of its GPU buffer, and measuring on would report the wrong memory.
pub fn older_server_allocation(setup: &CaseSetup, ready: &CaseReady) -> Option<String> {
    let ignored =
        !setup.cuda_alloc.is_legacy() && setup.memory.target == MemoryType::Cuda && ready.cuda_alloc.is_none();
    ignored.then(|| {
        format!(
            "the decode side's ic-bench predates --cuda-alloc and allocates cuMemAlloc memory only: \
             upgrade it to measure {} memory, or drop --cuda-alloc",
            setup.cuda_alloc
        )
    })
}

/// The case's GPU memory as the result reports it: the mode, and the legacy-IPC capability
/// combined over both sides' GPU buffers. `None` for a host-only case.
pub fn case_allocation(
    setup: &CaseSetup,
    initiator: Option<CudaAllocation>,
    target: Option<CudaAllocation>,
) -> Option<CudaAllocation> {
    let sides: Vec<LegacyIpc> = [initiator, target]
        .into_iter()
        .flatten()
        .map(|a| a.legacy_ipc)
        .collect();
    (!sides.is_empty()).then(|| CudaAllocation {
        mode: setup.cuda_alloc,
        legacy_ipc: LegacyIpc::combine(sides),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::{CudaAllocMode, MemoryPair, TestKind};

    fn setup(mode: CudaAllocMode, memory: MemoryPair) -> CaseSetup {
        CaseSetup {
            test: TestKind::GetBw,
            memory,
            size: 4 << 20,
            window: 1,
            seed: 1,
            blocks: 1,
            untouched: false,
            kv: None,
            cuda_alloc: mode,
        }
    }

    const CUDA_CUDA: MemoryPair = MemoryPair {
        initiator: MemoryType::Cuda,
        target: MemoryType::Cuda,
    };

    #[test]
    fn a_server_that_ignores_the_mode_fails_the_case_with_the_upgrade_named() {
        let old = CaseReady::default();
        let why = older_server_allocation(&setup(CudaAllocMode::Vmm, CUDA_CUDA), &old).expect("refused");
        assert!(why.contains("predates --cuda-alloc") && why.contains("vmm"), "{why}");
        // Legacy is what an older server gives anyway; host memory on the server has no mode.
        assert!(older_server_allocation(&setup(CudaAllocMode::Legacy, CUDA_CUDA), &old).is_none());
        let host_target = MemoryPair {
            initiator: MemoryType::Cuda,
            target: MemoryType::Host,
        };
        assert!(older_server_allocation(&setup(CudaAllocMode::Vmm, host_target), &old).is_none());
        let new = CaseReady {
            cuda_alloc: Some(CudaAllocation {
                mode: CudaAllocMode::Vmm,
                legacy_ipc: LegacyIpc::No,
            }),
            ..CaseReady::default()
        };
        assert!(older_server_allocation(&setup(CudaAllocMode::Vmm, CUDA_CUDA), &new).is_none());
    }

    #[test]
    fn the_case_reports_its_mode_and_the_capability_of_both_sides() {
        let side = |legacy_ipc| {
            Some(CudaAllocation {
                mode: CudaAllocMode::Vmm,
                legacy_ipc,
            })
        };
        let s = setup(CudaAllocMode::Vmm, CUDA_CUDA);
        let both = case_allocation(&s, side(LegacyIpc::Yes), side(LegacyIpc::No)).unwrap();
        assert_eq!((both.mode, both.legacy_ipc), (CudaAllocMode::Vmm, LegacyIpc::No));
        let one = case_allocation(&s, None, side(LegacyIpc::Yes)).unwrap();
        assert_eq!(one.legacy_ipc, LegacyIpc::Yes);
        assert_eq!(
            case_allocation(&s, None, None),
            None,
            "a host-only case carries nothing"
        );
    }
}
