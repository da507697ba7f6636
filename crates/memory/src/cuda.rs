//! CUDA device buffers through cudarc, with the driver loaded at run time.

use crate::cuda_alloc::Backing;
use crate::error::MemoryError;
use crate::pattern::{fill_pattern, verify_pattern};
use cudarc::driver::{CudaContext, result};
use icb_core::{CudaAllocMode, LegacyIpc};
use std::cell::Cell;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};
use ucx::{MemoryKind, Region};

const NO_DRIVER: &str = "no CUDA driver";

/// Whether CUDA can be used here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaStatus {
    /// A driver is loaded and sees `devices` GPUs; `driver_version` as "major.minor".
    Available { devices: usize, driver_version: String },
    /// Why not, e.g. "no CUDA driver" on a machine without libcuda.
    Unavailable { reason: String },
}

impl CudaStatus {
    pub fn is_available(&self) -> bool {
        matches!(self, CudaStatus::Available { .. })
    }
}

fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: is_culib_present only tries to dlopen the driver library (and closes it); it is
    // the one cudarc entry point that does not panic without a driver.
    *PRESENT.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() })
}

/// Runs a cudarc call that must not take the process down: cudarc's lazy symbol loading panics
/// on a driver that lacks a symbol, which becomes an error here.
fn guarded<T>(op: &'static str, f: impl FnOnce() -> Result<T, MemoryError>) -> Result<T, MemoryError> {
    if !driver_present() {
        return Err(MemoryError::CudaUnavailable(NO_DRIVER.into()));
    }
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(MemoryError::Cuda {
            op,
            message: "the CUDA driver lacks a required function".into(),
        })
    })
}

fn cuda_err(op: &'static str) -> impl Fn(cudarc::driver::DriverError) -> MemoryError {
    move |e| MemoryError::Cuda {
        op,
        message: e.to_string(),
    }
}

/// Probes the CUDA driver without ever panicking.
pub fn cuda_status() -> CudaStatus {
    let probe = guarded("probe", || {
        let devices = CudaContext::device_count().map_err(cuda_err("cuDeviceGetCount"))?;
        let mut v: std::os::raw::c_int = 0;
        // SAFETY: the driver is present and initialised (device_count ran cuInit); `v` is a valid
        // out-pointer.
        let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
        let driver_version = if r == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            format!("{}.{}", v / 1000, (v % 1000) / 10)
        } else {
            "unknown".into()
        };
        Ok((devices.max(0) as usize, driver_version))
    });
    match probe {
        Ok((0, _)) => CudaStatus::Unavailable {
            reason: "the CUDA driver sees no device".into(),
        },
        Ok((devices, driver_version)) => CudaStatus::Available {
            devices,
            driver_version,
        },
        Err(MemoryError::CudaUnavailable(reason)) => CudaStatus::Unavailable { reason },
        Err(e) => CudaStatus::Unavailable { reason: e.to_string() },
    }
}

/// Free and total memory of one GPU, bytes, as its driver reports them now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuMemory {
    pub device: usize,
    pub free: u64,
    pub total: u64,
}

/// GPU `device`'s free and total memory (`cuMemGetInfo` in its primary context, retained for
/// the call only). `CudaUnavailable("no CUDA driver")` without a driver, `NoSuchDevice` for an
/// ordinal the driver does not see; never panics.
pub fn gpu_memory(device: usize) -> Result<GpuMemory, MemoryError> {
    guarded("mem_get_info", || {
        let ctx = primary_context(device)?;
        let (free, total) = ctx.mem_get_info().map_err(cuda_err("cuMemGetInfo"))?;
        Ok(GpuMemory {
            device,
            free: free as u64,
            total: total as u64,
        })
    })
}

/// A GPU's primary context, retained and current on the thread that activated it, for as long as
/// this value lives (the context is released on drop).
///
/// Why a process with only host buffers wants one: UCX can move host memory to a peer's GPU
/// memory fast only when the host side can stage through GPU memory of its own (its
/// "pipeline cuda_copy, frag cuda" protocol). Without a CUDA context in the host-memory process
/// UCX falls back to reading the host buffer through cma into the peer: measured on an H200,
/// tag_bw 64 MiB host→GPU ran at 1.0 GB/s where ucx_perftest, whose processes both hold a
/// context, ran at 51 GB/s. Serving workers always hold one.
pub struct CudaActive {
    _ctx: Arc<CudaContext>,
}

impl std::fmt::Debug for CudaActive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaActive")
            .field("device", &self._ctx.ordinal())
            .finish()
    }
}

/// Retains GPU `device`'s primary context and makes it current on this thread;
/// `CudaUnavailable` without a driver, `NoSuchDevice` for an ordinal the driver does not see.
pub fn activate(device: usize) -> Result<CudaActive, MemoryError> {
    guarded("activate", || {
        Ok(CudaActive {
            _ctx: primary_context(device)?,
        })
    })
}

/// GPU `device`'s primary context, retained and made current on this thread (call inside
/// [`guarded`]).
fn primary_context(device: usize) -> Result<Arc<CudaContext>, MemoryError> {
    let count = CudaContext::device_count()
        .map_err(cuda_err("cuDeviceGetCount"))?
        .max(0) as usize;
    if device >= count {
        return Err(MemoryError::NoSuchDevice { device, count });
    }
    CudaContext::new(device).map_err(cuda_err("cuDevicePrimaryCtxRetain"))
}

/// Device memory on one GPU (cudarc's primary context), zero-initialised. `!Sync`.
///
/// Allocated with `cuMemAlloc` by default ([`CudaAllocMode::Legacy`]), not from the
/// stream-ordered pool that cudarc's `alloc` uses on GPUs with memory pools: pool memory cannot
/// be exported with `cuIpcGetMemHandle`, so UCX's cuda_ipc cannot map it in the peer and NIXL
/// cannot register it. Measured on an H200 with pool memory: RMA fell back to active-message
/// emulation (0.65 GB/s), tag_bw 64 MiB GPU→GPU ran at 1.9 GB/s against ucx_perftest's
/// 1.7 TB/s, and NIXL refused to register VRAM. PyTorch's caching allocator uses `cudaMalloc`
/// by default too; with `expandable_segments:True` it maps `cuMemCreate` memory instead, which
/// [`CudaBuffer::with_mode`] reproduces (`vmm`), with `pool` and `fabric` beside it.
pub struct CudaBuffer {
    ctx: Arc<CudaContext>,
    ptr: u64,
    len: usize,
    device: usize,
    mode: CudaAllocMode,
    backing: Backing,
    legacy_ipc: LegacyIpc,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBuffer")
            .field("device", &self.device)
            .field("len", &self.len)
            .field("mode", &self.mode)
            .field("legacy_ipc", &self.legacy_ipc)
            .finish()
    }
}

impl CudaBuffer {
    /// Allocates `len` bytes on GPU `device` with `cuMemAlloc`; `CudaUnavailable("no CUDA
    /// driver")` without a driver.
    pub fn new(device: usize, len: usize) -> Result<Self, MemoryError> {
        Self::with_mode(device, len, CudaAllocMode::Legacy)
    }

    /// Allocates `len` bytes on GPU `device` the way `mode` says. `CudaUnavailable("no CUDA
    /// driver")` without a driver; `AllocModeUnsupported` where the device cannot give that
    /// kind of memory (fabric handles on a GPU without them, say).
    pub fn with_mode(device: usize, len: usize, mode: CudaAllocMode) -> Result<Self, MemoryError> {
        if len == 0 {
            return Err(MemoryError::Empty);
        }
        guarded("alloc", || {
            let ctx = primary_context(device)?;
            let (ptr, backing) = crate::cuda_alloc::allocate(mode, device, len)?;
            let buffer = CudaBuffer {
                ctx,
                ptr,
                len,
                device,
                mode,
                backing,
                legacy_ipc: crate::cuda_alloc::legacy_ipc(ptr),
                _not_sync: PhantomData,
            };
            // SAFETY: `ptr` is a live allocation of at least `len` bytes in the current context;
            // the synchronous memset completes before anyone (UCX, NIXL) can use the pointer.
            unsafe { result::memset_d8_sync(buffer.ptr, 0, len) }.map_err(cuda_err("cuMemsetD8"))?;
            Ok(buffer)
        })
    }

    /// How this buffer was allocated.
    pub fn alloc_mode(&self) -> CudaAllocMode {
        self.mode
    }

    /// Whether a peer can map this memory with legacy CUDA IPC, as the driver said at allocation.
    pub fn legacy_ipc(&self) -> LegacyIpc {
        self.legacy_ipc
    }

    pub fn device(&self) -> usize {
        self.device
    }

    /// Fills the buffer with the pattern for `seed` (staged through host memory).
    pub fn fill(&mut self, seed: u64) -> Result<(), MemoryError> {
        let mut host = vec![0u8; self.len];
        fill_pattern(&mut host, seed);
        guarded("fill", || {
            self.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
            // SAFETY: `ptr` holds `len` bytes, `host` is `len` bytes long; the copy is
            // synchronous, so `host` outlives it.
            unsafe { result::memcpy_htod_sync(self.ptr, &host[..]) }.map_err(cuda_err("cuMemcpyHtoD"))
        })
    }

    /// Checks the first `len` bytes against the pattern for `seed` (copied back to the host).
    pub fn verify(&mut self, len: usize, seed: u64) -> Result<(), MemoryError> {
        if len > self.len {
            return Err(MemoryError::Length {
                asked: len,
                len: self.len,
            });
        }
        let host = self.to_host()?;
        verify_pattern(&host[..len], seed).map_err(Into::into)
    }

    /// A host copy of the whole buffer (for checks that need more than one pattern).
    pub fn to_host(&mut self) -> Result<Vec<u8>, MemoryError> {
        let mut host = vec![0u8; self.len];
        guarded("verify", || {
            self.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
            // SAFETY: `ptr` holds `len` bytes and `host` is `len` bytes long; the copy is
            // synchronous (it also waits for work UCX queued on the legacy stream).
            unsafe { result::memcpy_dtoh_sync(&mut host[..], self.ptr) }.map_err(cuda_err("cuMemcpyDtoH"))
        })?;
        Ok(host)
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        let _ = guarded("free", || {
            self.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
            // UCX and NIXL deregister their mappings before the buffer is dropped; `release`
            // undoes exactly what `allocate` did for this mode.
            crate::cuda_alloc::release(self.ptr, &self.backing)
        });
    }
}

// SAFETY: `ptr` is the device address of a `len`-byte (or larger) allocation that stays mapped
// at that address until Drop; Rust touches the memory only through `&mut self` methods
// (fill/verify), whose copies are synchronous.
unsafe impl Region for CudaBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr as usize as *mut u8
    }
    fn len(&self) -> usize {
        self.len
    }
    fn memory_type(&self) -> MemoryKind {
        MemoryKind::Cuda
    }
}
