//! CUDA device buffers through cudarc, with the driver loaded at run time.

use crate::error::MemoryError;
use crate::pattern::{fill_pattern, verify_pattern};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
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

/// Device memory on one GPU (cudarc's primary context), zero-initialised. `!Sync`.
pub struct CudaBuffer {
    stream: Arc<CudaStream>,
    slice: CudaSlice<u8>,
    ptr: u64,
    device: usize,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBuffer")
            .field("device", &self.device)
            .field("len", &self.slice.len())
            .finish()
    }
}

impl CudaBuffer {
    /// Allocates `len` bytes on GPU `device`; `CudaUnavailable("no CUDA driver")` without a driver.
    pub fn new(device: usize, len: usize) -> Result<Self, MemoryError> {
        if len == 0 {
            return Err(MemoryError::Empty);
        }
        guarded("alloc", || {
            let count = CudaContext::device_count()
                .map_err(cuda_err("cuDeviceGetCount"))?
                .max(0) as usize;
            if device >= count {
                return Err(MemoryError::NoSuchDevice { device, count });
            }
            let ctx = CudaContext::new(device).map_err(cuda_err("cuDevicePrimaryCtxRetain"))?;
            let stream = ctx.default_stream();
            let slice = stream.alloc_zeros::<u8>(len).map_err(cuda_err("cuMemAlloc"))?;
            let ptr = {
                let (p, _sync) = slice.device_ptr(&stream);
                p
            };
            // UCX reads and writes the memory outside cudarc's stream tracking: settle the
            // zeroing before anyone can use the pointer.
            stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))?;
            Ok(CudaBuffer {
                stream,
                slice,
                ptr,
                device,
                _not_sync: PhantomData,
            })
        })
    }

    pub fn device(&self) -> usize {
        self.device
    }

    /// Fills the buffer with the pattern for `seed` (staged through host memory).
    pub fn fill(&mut self, seed: u64) -> Result<(), MemoryError> {
        let mut host = vec![0u8; self.slice.len()];
        fill_pattern(&mut host, seed);
        guarded("fill", || {
            self.stream
                .memcpy_htod(&host[..], &mut self.slice)
                .map_err(cuda_err("cuMemcpyHtoD"))?;
            self.stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))
        })
    }

    /// Checks the first `len` bytes against the pattern for `seed` (copied back to the host).
    pub fn verify(&mut self, len: usize, seed: u64) -> Result<(), MemoryError> {
        let size = self.slice.len();
        if len > size {
            return Err(MemoryError::Length { asked: len, len: size });
        }
        let host = self.to_host()?;
        verify_pattern(&host[..len], seed).map_err(Into::into)
    }

    /// A host copy of the whole buffer (for checks that need more than one pattern).
    pub fn to_host(&mut self) -> Result<Vec<u8>, MemoryError> {
        let mut host = vec![0u8; self.slice.len()];
        guarded("verify", || {
            self.stream
                .memcpy_dtoh(&self.slice, &mut host[..])
                .map_err(cuda_err("cuMemcpyDtoH"))?;
            self.stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))
        })?;
        Ok(host)
    }
}

// SAFETY: `ptr` is the device address of `slice`, which lives (and stays allocated at that
// address) as long as the buffer; Rust touches the memory only through `&mut self` methods
// (fill/verify), and those synchronise the stream before returning.
unsafe impl Region for CudaBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr as usize as *mut u8
    }
    fn len(&self) -> usize {
        self.slice.len()
    }
    fn memory_type(&self) -> MemoryKind {
        MemoryKind::Cuda
    }
}
