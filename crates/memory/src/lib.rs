//! Buffers that ic-bench moves through UCX: page-aligned host memory and CUDA device memory.
//!
//! Both implement [`ucx::Region`], so the transfer engine hands them (in an `Rc`) to UCX
//! operations and memory maps. Payloads are filled with a position-dependent pattern and
//! verified after a transfer, so a shifted, truncated or stale copy is caught; a KV-shaped
//! transfer ([`BlockLayout`]) is checked block by block, and its gaps must be left untouched.
//!
//! CUDA is loaded at run time through cudarc. Its loader panics when no driver is installed, so
//! every entry point first checks for `libcuda` and reports [`CudaStatus::Unavailable`] ("no
//! CUDA driver") instead: a machine without a GPU skips CUDA cases, it never crashes.
#![allow(unsafe_code)] // an FFI crate: unsafe is its job, each block with a SAFETY comment

mod any;
mod cuda;
mod cuda_alloc;
mod error;
mod host;
mod pattern;

pub use any::Buffer;
pub use cuda::{CudaActive, CudaBuffer, CudaStatus, GpuMemory, activate as activate_cuda, cuda_status, gpu_memory};
pub use error::MemoryError;
pub use host::{HostBuffer, PAGE_SIZE};
pub use icb_core::{CudaAllocMode, LegacyIpc};
pub use pattern::{
    BlockLayout, GatherError, Mismatch, Moved, fill_pattern, pattern_byte, verify_blocks, verify_gathered,
    verify_moved, verify_pattern, verify_pattern_at,
};
pub use ucx::{MemoryKind, Region};
