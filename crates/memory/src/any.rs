//! One buffer type for either memory kind, so the engine picks the kind at run time.

use crate::cuda::CudaBuffer;
use crate::error::MemoryError;
use crate::host::HostBuffer;
use icb_core::{CudaAllocMode, LegacyIpc};
use ucx::{MemoryKind, Region};

#[derive(Debug)]
pub enum Buffer {
    Host(HostBuffer),
    Cuda(CudaBuffer),
}

impl Buffer {
    /// Allocates `len` bytes of `kind`; `device` is the GPU index for CUDA (ignored for host).
    pub fn new(kind: MemoryKind, len: usize, device: usize) -> Result<Self, MemoryError> {
        Self::with_mode(kind, len, device, CudaAllocMode::Legacy)
    }

    /// As [`Buffer::new`], CUDA memory allocated the way `mode` says (host memory ignores it).
    pub fn with_mode(kind: MemoryKind, len: usize, device: usize, mode: CudaAllocMode) -> Result<Self, MemoryError> {
        Ok(match kind {
            MemoryKind::Host => Buffer::Host(HostBuffer::new(len)?),
            MemoryKind::Cuda => Buffer::Cuda(CudaBuffer::with_mode(device, len, mode)?),
        })
    }

    /// A CUDA buffer's allocation mode and legacy-IPC capability; `None` for host memory.
    pub fn cuda_allocation(&self) -> Option<(CudaAllocMode, LegacyIpc)> {
        match self {
            Buffer::Host(_) => None,
            Buffer::Cuda(b) => Some((b.alloc_mode(), b.legacy_ipc())),
        }
    }

    pub fn fill(&mut self, seed: u64) -> Result<(), MemoryError> {
        match self {
            Buffer::Host(b) => {
                b.fill(seed);
                Ok(())
            }
            Buffer::Cuda(b) => b.fill(seed),
        }
    }

    pub fn verify(&mut self, len: usize, seed: u64) -> Result<(), MemoryError> {
        match self {
            Buffer::Host(b) => b.verify(len, seed),
            Buffer::Cuda(b) => b.verify(len, seed),
        }
    }

    /// Checks blocks gathered from several sources and the bytes around them
    /// ([`crate::verify_gathered`]); returns the blocks checked.
    pub fn verify_gathered(&mut self, sources: &[(crate::Moved, u64)], gap_seed: u64) -> Result<u64, MemoryError> {
        let r = match self {
            Buffer::Host(b) => crate::verify_gathered(b.as_slice(), sources, gap_seed),
            Buffer::Cuda(b) => crate::verify_gathered(&b.to_host()?, sources, gap_seed),
        };
        r.map_err(Into::into)
    }

    /// Checks the blocks of a KV transfer and the bytes around them ([`crate::verify_moved`]).
    pub fn verify_moved(&mut self, moved: &crate::Moved, seed: u64, gap_seed: u64) -> Result<(), MemoryError> {
        let r = match self {
            Buffer::Host(b) => crate::verify_moved(b.as_slice(), moved, seed, gap_seed),
            Buffer::Cuda(b) => crate::verify_moved(&b.to_host()?, moved, seed, gap_seed),
        };
        r.map_err(Into::into)
    }
}

// SAFETY: delegates to the two Region implementations, whose guarantees carry over unchanged.
unsafe impl Region for Buffer {
    fn as_ptr(&self) -> *mut u8 {
        match self {
            Buffer::Host(b) => b.as_ptr(),
            Buffer::Cuda(b) => b.as_ptr(),
        }
    }
    fn len(&self) -> usize {
        match self {
            Buffer::Host(b) => b.len(),
            Buffer::Cuda(b) => b.len(),
        }
    }
    fn memory_type(&self) -> MemoryKind {
        match self {
            Buffer::Host(_) => MemoryKind::Host,
            Buffer::Cuda(_) => MemoryKind::Cuda,
        }
    }
}
