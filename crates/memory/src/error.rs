//! Errors from allocating, filling and verifying buffers.

use crate::pattern::Mismatch;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("buffer size must be at least 1 byte")]
    Empty,
    #[error("cannot allocate {len} bytes of host memory")]
    HostAlloc { len: usize },
    #[error("CUDA is unavailable: {0}")]
    CudaUnavailable(String),
    #[error("CUDA device {device} is not present ({count} device(s) found); pick a device index below {count}")]
    NoSuchDevice { device: usize, count: usize },
    /// The device (or its setup) cannot give `mode` memory: typed, so callers skip the mode
    /// rather than fail the run.
    #[error("CUDA allocation mode {mode} is not supported on device {device}: {why}")]
    AllocModeUnsupported {
        mode: icb_core::CudaAllocMode,
        device: usize,
        why: String,
    },
    #[error("CUDA {op} failed: {message}")]
    Cuda { op: &'static str, message: String },
    #[error("payload check failed: {0}")]
    Mismatch(#[from] Mismatch),
    /// Blocks gathered from several sources did not verify (the message is the gather's own).
    #[error(transparent)]
    Gather(#[from] crate::pattern::GatherError),
    #[error("cannot check {asked} bytes of a {len}-byte buffer")]
    Length { asked: usize, len: usize },
}
