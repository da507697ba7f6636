//! A case's buffer: host or CUDA memory from icb-memory, filled and checked with its pattern.
//!
//! Operations are generic over the buffer type, so [`with_region!`] picks the concrete type once,
//! outside the timed loops, and the loops themselves are monomorphic.

use crate::run_error::RunError;
use icb_core::{CudaAllocMode, CudaAllocation, MemoryType};
use icb_memory::{BlockLayout, CudaBuffer, HostBuffer, MemoryError, verify_blocks};
use std::rc::Rc;

pub enum Buf {
    Host(Rc<HostBuffer>),
    Cuda(Rc<CudaBuffer>),
}

/// Runs `$body` with `$r` bound to the buffer's concrete `&Rc<…>`.
macro_rules! with_region {
    ($buf:expr, $r:ident => $body:expr) => {
        match $buf {
            $crate::buffers::Buf::Host($r) => $body,
            $crate::buffers::Buf::Cuda($r) => $body,
        }
    };
}
pub(crate) use with_region;

const BUSY: RunError = RunError::Internal("the buffer is still in use by UCX");

/// The seed whose pattern differs from `seed`'s in every 8-byte word: destinations are pre-filled
/// with it so stale bytes can never pass for delivered ones.
pub fn other_seed(seed: u64) -> u64 {
    !seed
}

impl Buf {
    /// Allocates `len` bytes of `kind` memory; CUDA memory on device ordinal `cuda_device`,
    /// allocated the way `mode` says.
    pub fn alloc(kind: MemoryType, len: usize, cuda_device: usize, mode: CudaAllocMode) -> Result<Buf, RunError> {
        Ok(match kind {
            MemoryType::Host => Buf::Host(Rc::new(HostBuffer::new(len)?)),
            MemoryType::Cuda => Buf::Cuda(Rc::new(CudaBuffer::with_mode(cuda_device, len, mode)?)),
        })
    }

    /// A CUDA buffer's allocation as the case reports it; `None` for host memory.
    pub fn cuda_allocation(&self) -> Option<CudaAllocation> {
        match self {
            Buf::Host(_) => None,
            Buf::Cuda(b) => Some(CudaAllocation {
                mode: b.alloc_mode(),
                legacy_ipc: b.legacy_ipc(),
            }),
        }
    }

    /// Writes the pattern of `seed` (CUDA memory through a host staging copy).
    pub fn fill(&mut self, seed: u64) -> Result<(), RunError> {
        match self {
            Buf::Host(b) => Rc::get_mut(b).ok_or(BUSY)?.fill(seed),
            Buf::Cuda(b) => Rc::get_mut(b).ok_or(BUSY)?.fill(seed)?,
        }
        Ok(())
    }

    /// Checks the buffer after a transfer: every block of `layout` holds the pattern of `seed`,
    /// every gap between blocks still holds `gap_seed`'s (nothing landed outside the blocks).
    pub fn verify_blocks(&mut self, layout: BlockLayout, seed: u64, gap_seed: u64) -> Result<(), RunError> {
        let r = match self {
            Buf::Host(b) => verify_blocks(Rc::get_mut(b).ok_or(BUSY)?.as_slice(), layout, seed, gap_seed),
            Buf::Cuda(b) => verify_blocks(&Rc::get_mut(b).ok_or(BUSY)?.to_host()?, layout, seed, gap_seed),
        };
        r.map_err(|m| RunError::Corrupted {
            what: "",
            source: MemoryError::Mismatch(m),
        })
    }

    /// Checks a KV destination: every block holds its source block's bytes, nothing else changed.
    pub fn verify_moved(&mut self, moved: &icb_memory::Moved, seed: u64, gap_seed: u64) -> Result<(), RunError> {
        let r = match self {
            Buf::Host(b) => icb_memory::verify_moved(Rc::get_mut(b).ok_or(BUSY)?.as_slice(), moved, seed, gap_seed),
            Buf::Cuda(b) => icb_memory::verify_moved(&Rc::get_mut(b).ok_or(BUSY)?.to_host()?, moved, seed, gap_seed),
        };
        r.map_err(|m| RunError::Corrupted {
            what: "",
            source: MemoryError::Mismatch(m),
        })
    }

    /// Bytes in the buffer.
    pub fn byte_len(&self) -> usize {
        with_region!(self, b => ucx::Region::len(b.as_ref()))
    }

    /// Registers the buffer for RMA by the peer: UCX must.
    pub fn map(&self, ctx: &ucx::Context) -> Result<ucx::Registered, RunError> {
        with_region!(self, b => ctx.register_required(b)).map_err(RunError::Register)
    }

    /// Registers the buffer where UCX can, to speed its operations up (see [`ucx::Registered`]);
    /// where it cannot, says why in the log and operations run on unregistered memory.
    pub fn register(&self, ctx: &ucx::Context) -> ucx::Registered {
        let (reg, refused) = with_region!(self, b => ctx.register(b));
        if let Some(e) = refused {
            let kind = match self {
                Buf::Host(_) => "host",
                Buf::Cuda(_) => "CUDA",
            };
            tracing::warn!("running on an unregistered {kind} buffer: {e}");
        }
        reg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_catches_stale_and_corrupted_payloads() {
        let mut b = Buf::alloc(MemoryType::Host, 4099, 0, CudaAllocMode::Legacy).unwrap();
        b.fill(other_seed(7)).unwrap();
        let whole = BlockLayout::single(4099);
        assert!(
            b.verify_blocks(whole, 7, 7).is_err(),
            "the pre-fill must not pass for the payload"
        );
        b.fill(7).unwrap();
        assert!(b.verify_blocks(whole, 7, 7).is_ok());
        if let Buf::Host(h) = &mut b {
            Rc::get_mut(h).unwrap().as_mut_slice()[4000] ^= 0x20;
        }
        let e = b.verify_blocks(whole, 7, 7).unwrap_err().to_string();
        assert!(e.contains("payload corrupted") && e.contains("4000"), "{e}");
    }

    #[test]
    fn cuda_without_a_driver_is_an_error_not_a_panic() {
        let info = crate::local::cuda_info();
        // Without a driver (this machine) every allocation mode is the typed "no CUDA driver".
        if !info.available {
            assert!(!info.detail.is_empty());
            for mode in CudaAllocMode::ALL {
                let e = Buf::alloc(MemoryType::Cuda, 64, 0, mode)
                    .err()
                    .expect("no CUDA buffer without a driver");
                assert!(
                    matches!(e, RunError::Memory(icb_memory::MemoryError::CudaUnavailable(_))),
                    "{mode}: {e}"
                );
            }
        }
    }
}
