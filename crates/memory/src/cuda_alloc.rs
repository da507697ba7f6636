//! The four ways a GPU buffer is allocated (`--cuda-alloc`), each with its own teardown, and the
//! legacy-IPC query that says whether a peer can map the memory with `cuIpcOpenMemHandle`.
//!
//! Serving engines do not all hold their KV cache in `cuMemAlloc` memory: PyTorch's
//! `expandable_segments:True` maps `cuMemCreate` allocations into a reserved range (what `vmm`
//! does here), `cudaMallocAsync` takes from a stream-ordered pool (`pool`), and multi-node NVLink
//! needs fabric handles (`fabric`). Only `legacy` memory is legacy-IPC capable; UCX's cuda_ipc
//! needs another export for the rest, or falls back to a slower transport.
//!
//! Every function here runs inside the caller's `guarded` with the buffer's context current.

use crate::error::MemoryError;
use cudarc::driver::sys::{
    self, CUdevice_attribute, CUmemAccess_flags, CUmemAllocationGranularity_flags, CUmemAllocationHandleType,
    CUmemAllocationType, CUmemLocationType, CUpointer_attribute, CUresult,
};
use cudarc::driver::{DriverError, result};
use icb_core::{CudaAllocMode, LegacyIpc};

/// What a buffer's teardown must undo, by mode.
#[derive(Debug)]
pub(crate) enum Backing {
    /// `cuMemFree`.
    Legacy,
    /// Unmap the range, release the physical handle, free the reserved address range
    /// (`vmm` and `fabric`).
    Mapped {
        handle: sys::CUmemGenericAllocationHandle,
        reserved: usize,
    },
    /// `cuMemFreeAsync` on the allocating stream, wait for it, then destroy the pool and stream.
    Pool {
        pool: sys::CUmemoryPool,
        stream: sys::CUstream,
    },
}

fn check(op: &'static str, r: CUresult) -> Result<(), MemoryError> {
    r.result().map_err(|e: DriverError| MemoryError::Cuda {
        op,
        message: e.to_string(),
    })
}

/// A driver's answer that means "this device or setup cannot give that kind of memory", as
/// opposed to a failure of the call (decided on the result code, never its text).
fn unsupported_code(r: CUresult) -> bool {
    matches!(
        r,
        CUresult::CUDA_ERROR_NOT_SUPPORTED | CUresult::CUDA_ERROR_NOT_PERMITTED
    )
}

fn unsupported(mode: CudaAllocMode, device: usize, why: impl Into<String>) -> MemoryError {
    MemoryError::AllocModeUnsupported {
        mode,
        device,
        why: why.into(),
    }
}

fn attribute(device: usize, attr: CUdevice_attribute) -> Result<i32, MemoryError> {
    let dev = result::device::get(device as i32).map_err(|e| MemoryError::Cuda {
        op: "cuDeviceGet",
        message: e.to_string(),
    })?;
    // SAFETY: `dev` came from cuDeviceGet for an ordinal the caller checked against the count.
    unsafe { result::device::get_attribute(dev, attr) }.map_err(|e| MemoryError::Cuda {
        op: "cuDeviceGetAttribute",
        message: e.to_string(),
    })
}

/// Allocates `len` bytes on `device` (its context current) the way `mode` says; returns the
/// device address and what its teardown must undo.
pub(crate) fn allocate(mode: CudaAllocMode, device: usize, len: usize) -> Result<(u64, Backing), MemoryError> {
    match mode {
        CudaAllocMode::Legacy => {
            // SAFETY: the context is current on this thread; `len` > 0. The pointer is owned by
            // the returned backing and freed once, by `release`.
            let ptr = unsafe { result::malloc_sync(len) }.map_err(|e| MemoryError::Cuda {
                op: "cuMemAlloc",
                message: e.to_string(),
            })?;
            Ok((ptr, Backing::Legacy))
        }
        CudaAllocMode::Vmm => {
            let needs = [
                (
                    CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
                    "the device has no virtual memory management",
                ),
                (
                    CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                    "the device cannot export POSIX file-descriptor handles",
                ),
            ];
            for (attr, why) in needs {
                if attribute(device, attr)? == 0 {
                    return Err(unsupported(mode, device, why));
                }
            }
            mapped(
                mode,
                device,
                len,
                CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        }
        CudaAllocMode::Fabric => {
            let attr = CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED;
            if attribute(device, attr)? == 0 {
                return Err(unsupported(mode, device, "the device does not support fabric handles"));
            }
            mapped(mode, device, len, CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC)
        }
        CudaAllocMode::Pool => {
            let attr = CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED;
            if attribute(device, attr)? == 0 {
                return Err(unsupported(mode, device, "the device has no memory pools"));
            }
            pooled(device, len)
        }
    }
}

fn device_location(device: usize) -> sys::CUmemLocation {
    sys::CUmemLocation {
        type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: device as i32,
    }
}

/// `cuMemCreate` + `cuMemAddressReserve` + `cuMemMap` + `cuMemSetAccess`, sized up to the
/// recommended granularity, as PyTorch's expandable segments map their memory. Each step that
/// fails undoes the ones before it.
fn mapped(
    mode: CudaAllocMode,
    device: usize,
    len: usize,
    handle_type: CUmemAllocationHandleType,
) -> Result<(u64, Backing), MemoryError> {
    // GPUDirect RDMA on VMM memory is opt-in per allocation; ask for it where the device has it,
    // so a NIC can register the memory as it can a serving engine's.
    let rdma = attribute(
        device,
        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
    )
    .unwrap_or(0);
    let prop = sys::CUmemAllocationProp {
        type_: CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: handle_type,
        location: device_location(device),
        win32HandleMetaData: std::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
            compressionType: 0,
            gpuDirectRDMACapable: u8::from(rdma != 0),
            usage: 0,
            reserved: [0; 4],
        },
    };
    let mut granularity = 0usize;
    // SAFETY: `granularity` and `prop` are valid for the call; `prop` is fully initialised.
    let r = unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut granularity,
            &prop,
            CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
        )
    };
    check("cuMemGetAllocationGranularity", r)?;
    let size = len
        .checked_next_multiple_of(granularity.max(1))
        .ok_or(MemoryError::Cuda {
            op: "cuMemCreate",
            message: format!("{len} bytes rounded up to the {granularity}-byte granularity overflow"),
        })?;
    let mut handle: sys::CUmemGenericAllocationHandle = 0;
    // SAFETY: `handle` is a valid out-pointer, `prop` outlives the call.
    let r = unsafe { sys::cuMemCreate(&mut handle, size, &prop, 0) };
    if unsupported_code(r) {
        // A fabric handle also needs an IMEX channel; the device attribute alone does not say.
        return Err(unsupported(
            mode,
            device,
            format!("cuMemCreate refused: {}", DriverError(r)),
        ));
    }
    check("cuMemCreate", r)?;
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: `ptr` is a valid out-pointer; a zero address and alignment let the driver choose.
    let r = unsafe { sys::cuMemAddressReserve(&mut ptr, size, 0, 0, 0) };
    if let Err(e) = check("cuMemAddressReserve", r) {
        // SAFETY: `handle` was created above and is released once, here.
        unsafe { sys::cuMemRelease(handle) };
        return Err(e);
    }
    let backing = Backing::Mapped { handle, reserved: size };
    // SAFETY: `ptr..ptr+size` is the range reserved above and `handle` holds `size` bytes.
    let r = unsafe { sys::cuMemMap(ptr, size, 0, handle, 0) };
    if let Err(e) = check("cuMemMap", r) {
        release_mapped(ptr, handle, size, false);
        return Err(e);
    }
    let access = sys::CUmemAccessDesc {
        location: device_location(device),
        flags: CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: the range is mapped above; `access` is one valid descriptor.
    let r = unsafe { sys::cuMemSetAccess(ptr, size, &access, 1) };
    if let Err(e) = check("cuMemSetAccess", r) {
        release_mapped(ptr, handle, size, true);
        return Err(e);
    }
    Ok((ptr, backing))
}

/// Undoes [`mapped`]: unmap (if mapped), release the physical memory, free the address range.
fn release_mapped(
    ptr: u64,
    handle: sys::CUmemGenericAllocationHandle,
    reserved: usize,
    is_mapped: bool,
) -> Vec<CUresult> {
    let mut results = Vec::with_capacity(3);
    // SAFETY: `ptr..ptr+reserved` was reserved (and mapped when `is_mapped`) by `mapped`, and
    // `handle` created there; each is undone exactly once, here, after every user of the memory
    // (UCX, NIXL) has deregistered it.
    unsafe {
        if is_mapped {
            results.push(sys::cuMemUnmap(ptr, reserved));
        }
        results.push(sys::cuMemRelease(handle));
        results.push(sys::cuMemAddressFree(ptr, reserved));
    }
    results
}

/// A stream-ordered allocation from a pool of its own on a stream of its own, complete (the
/// stream synchronised) before it is returned.
fn pooled(device: usize, len: usize) -> Result<(u64, Backing), MemoryError> {
    let props = sys::CUmemPoolProps {
        allocType: CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        // No export handle: as `cudaMallocAsync`'s default pool gives.
        handleTypes: CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
        location: device_location(device),
        win32SecurityAttributes: std::ptr::null_mut(),
        maxSize: 0,
        usage: 0,
        reserved: [0; 54],
    };
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a valid out-pointer and `props` is fully initialised.
    check("cuMemPoolCreate", unsafe { sys::cuMemPoolCreate(&mut pool, &props) })?;
    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: `stream` is a valid out-pointer; the context is current.
    let r = unsafe { sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) };
    if let Err(e) = check("cuStreamCreate", r) {
        // SAFETY: the pool was created above and has no allocation.
        unsafe { sys::cuMemPoolDestroy(pool) };
        return Err(e);
    }
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: `ptr` is a valid out-pointer; pool and stream are live. The synchronise makes the
    // allocation usable from any stream before anyone sees the pointer.
    let r = unsafe {
        let r = sys::cuMemAllocFromPoolAsync(&mut ptr, len, pool, stream);
        if r == CUresult::CUDA_SUCCESS {
            sys::cuStreamSynchronize(stream)
        } else {
            r
        }
    };
    if let Err(e) = check("cuMemAllocFromPoolAsync", r) {
        release_pool(if ptr == 0 { None } else { Some(ptr) }, pool, stream);
        return Err(e);
    }
    Ok((ptr, Backing::Pool { pool, stream }))
}

/// Undoes [`pooled`]: free on the allocating stream, wait for the free, destroy pool and stream.
fn release_pool(ptr: Option<u64>, pool: sys::CUmemoryPool, stream: sys::CUstream) -> Vec<CUresult> {
    let mut results = Vec::with_capacity(4);
    // SAFETY: `ptr` came from this pool on this stream and is freed once, here; the synchronise
    // completes the free before the pool (which must be empty) and the stream are destroyed.
    unsafe {
        if let Some(ptr) = ptr {
            results.push(sys::cuMemFreeAsync(ptr, stream));
            results.push(sys::cuStreamSynchronize(stream));
        }
        results.push(sys::cuMemPoolDestroy(pool));
        results.push(sys::cuStreamDestroy_v2(stream));
    }
    results
}

/// Frees what [`allocate`] gave; the first failing step's error, after every step ran.
pub(crate) fn release(ptr: u64, backing: &Backing) -> Result<(), MemoryError> {
    let results = match *backing {
        // SAFETY: `ptr` came from cuMemAlloc in this context and is freed only here.
        Backing::Legacy => vec![unsafe { sys::cuMemFree_v2(ptr) }],
        Backing::Mapped { handle, reserved } => release_mapped(ptr, handle, reserved, true),
        Backing::Pool { pool, stream } => release_pool(Some(ptr), pool, stream),
    };
    results.into_iter().try_for_each(|r| check("free", r))
}

/// Whether `ptr` can be exported with `cuIpcGetMemHandle`, as the driver says; not known when
/// the query fails (a driver older than CUDA 11.3 has no such attribute).
pub(crate) fn legacy_ipc(ptr: u64) -> LegacyIpc {
    // The attribute is a boolean; a zeroed 8-byte slot reads it right whatever width the driver
    // writes.
    let mut value: u64 = 0;
    // SAFETY: `value` is 8 writable bytes, more than any boolean attribute; `ptr` is a live
    // device allocation of the current context.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&mut value as *mut u64).cast(),
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
            ptr,
        )
    };
    match (r, value) {
        (CUresult::CUDA_SUCCESS, 0) => LegacyIpc::No,
        (CUresult::CUDA_SUCCESS, _) => LegacyIpc::Yes,
        _ => LegacyIpc::NotKnown,
    }
}
