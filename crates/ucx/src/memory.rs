//! Buffers UCX may touch ([`Region`]), their registration ([`MemMap`]) and peers' keys
//! ([`RemoteKey`]).

use crate::context::ContextInner;
use crate::endpoint::EpInner;
use crate::{Error, Result, ucp_fn};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use ucx_sys as sys;

/// Where a buffer lives; passed to UCX as a memory-type hint so it need not detect it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    Host,
    Cuda,
}

impl MemoryKind {
    pub(crate) fn ucs(self) -> sys::ucs_memory_type_t {
        match self {
            MemoryKind::Host => sys::UCS_MEMORY_TYPE_HOST,
            MemoryKind::Cuda => sys::UCS_MEMORY_TYPE_CUDA,
        }
    }
}

/// Memory UCX may read and write while an operation on it is in flight.
///
/// # Safety
/// Implementors guarantee that, for as long as the value is alive and not moved out of its `Rc`:
/// - `as_ptr()` is stable and `[as_ptr(), as_ptr() + len())` is valid memory of `memory_type()`;
/// - safe code reaches that memory only through `&mut self` methods (never through a reference
///   obtained from `&self`), so UCX writing into it through a shared `Rc` is never observed as
///   a data race by Rust code. `Rc::get_mut` then proves no operation or map still holds it.
pub unsafe trait Region {
    fn as_ptr(&self) -> *mut u8;
    fn len(&self) -> usize;
    fn memory_type(&self) -> MemoryKind;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The UCX registration backing this region, passed to operations so UCX skips its own
    /// registration-cache lookup. Only [`MemMap`] provides one: the parameter type cannot be
    /// named outside this crate, so no other implementation can override it.
    #[doc(hidden)]
    fn ucx_mapping(&self, _: sealed::Token) -> Option<sealed::Mapping> {
        None
    }
}

pub(crate) mod sealed {
    /// Proof that the caller is this crate.
    pub struct Token(pub(crate) ());

    /// A registration: the context it belongs to and its handle.
    #[derive(Clone, Copy)]
    pub struct Mapping {
        pub(crate) ctx: ucx_sys::ucp_context_h,
        pub(crate) memh: ucx_sys::ucp_mem_h,
    }
}

/// A region registered with UCX (`ucp_mem_map`). Unmapped on drop; holds the region alive.
///
/// A `MemMap` is itself a [`Region`]: put it in an `Rc` and pass it to operations on a worker of
/// the same context, and UCX uses this registration (`UCP_OP_ATTR_FIELD_MEMH`) instead of
/// looking the buffer up — how NIXL issues its transfers.
///
/// Once its rkey was packed ([`MemMap::pack_rkey`]) a peer may reach the memory at any time, and
/// over transports without native RMA (tcp) the worker packs a GET's reply from it whenever the
/// reply gets its turn on the link. So dropping an exposed map does not unmap it: the
/// registration and the region are kept until every worker of the context that was alive at that
/// moment is destroyed (`Retired`). No order of drops can then free memory UCX still reads.
pub struct MemMap {
    ctx: Rc<ContextInner>,
    memh: sys::ucp_mem_h,
    region: Rc<dyn Region>,
    /// Set once an rkey was packed: a peer may hold it.
    exposed: Cell<bool>,
}

impl std::fmt::Debug for MemMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemMap")
            .field("address", &self.address())
            .field("len", &self.len())
            .finish()
    }
}

impl MemMap {
    pub(crate) fn new(ctx: Rc<ContextInner>, region: Rc<dyn Region>) -> Result<Self> {
        if region.is_empty() {
            return Err(Error::invalid("memory map", "the region is empty"));
        }
        let mem_map = ucp_fn!(ctx.ucx, ucp_mem_map)?;
        let params = sys::ucp_mem_map_params_t {
            field_mask: (sys::UCP_MEM_MAP_PARAM_FIELD_ADDRESS
                | sys::UCP_MEM_MAP_PARAM_FIELD_LENGTH
                | sys::UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE) as u64,
            address: region.as_ptr().cast(),
            length: region.len(),
            memory_type: region.memory_type().ucs(),
            ..Default::default()
        };
        let mut memh: sys::ucp_mem_h = std::ptr::null_mut();
        // SAFETY: the context is alive (we hold it); address/length describe memory the Region
        // contract keeps valid while `region` (held by the map) lives; `memh` is an out-pointer.
        let status = unsafe { mem_map(ctx.handle, &params, &mut memh) };
        if status != sys::UCS_OK {
            return Err(ctx.ucx.status_error("ucp_mem_map", status));
        }
        Ok(MemMap {
            ctx,
            memh,
            region,
            exposed: Cell::new(false),
        })
    }

    /// The start address a peer uses as `remote_addr` for put/get.
    pub fn address(&self) -> u64 {
        self.region.as_ptr() as u64
    }

    pub fn len(&self) -> usize {
        self.region.len()
    }

    pub fn is_empty(&self) -> bool {
        self.region.is_empty()
    }

    /// Unmaps now, exposed or not, and gives the region back: for when the peer has confirmed
    /// that every operation it issued on this memory completed (its flush returned), as a case's
    /// normal end does. Any other way of letting go (a drop) keeps exposed memory until the
    /// workers that could serve the peer are destroyed.
    pub fn unmap_now(self) {
        self.exposed.set(false);
    }

    /// Packs the rkey a peer unpacks (with [`crate::Endpoint::unpack_rkey`]) to reach this map.
    pub fn pack_rkey(&self) -> Result<Vec<u8>> {
        let pack = ucp_fn!(self.ctx.ucx, ucp_rkey_pack)?;
        let release = ucp_fn!(self.ctx.ucx, ucp_rkey_buffer_release)?;
        let mut buf: *mut std::ffi::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: context and memh are alive; buf/size are valid out-pointers.
        let status = unsafe { pack(self.ctx.handle, self.memh, &mut buf, &mut size) };
        if status != sys::UCS_OK {
            return Err(self.ctx.ucx.status_error("ucp_rkey_pack", status));
        }
        // SAFETY: on success UCX returned `size` readable bytes at `buf`, which we copy before
        // releasing the buffer exactly once.
        let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) }.to_vec();
        // SAFETY: see above.
        unsafe { release(buf) };
        self.exposed.set(true);
        Ok(bytes)
    }
}

impl Drop for MemMap {
    fn drop(&mut self) {
        if self.exposed.get() && self.ctx.retired.retire(self.memh, self.region.clone()) {
            return;
        }
        self.ctx.unmap(self.memh);
    }
}

/// Exposed registrations whose [`MemMap`] was dropped while workers that could serve a peer's
/// RMA on them were alive. Each waits for those workers' destruction (`ucp_worker_destroy`
/// purges what they still had queued for a peer), then is unmapped and its region released.
#[derive(Default)]
pub(crate) struct Retired {
    next_worker: Cell<u64>,
    live_workers: RefCell<Vec<u64>>,
    maps: RefCell<Vec<RetiredMap>>,
}

pub(crate) struct RetiredMap {
    pub(crate) memh: sys::ucp_mem_h,
    /// Keeps the memory allocated until the registration is gone.
    _region: Rc<dyn Region>,
    waiting_for: Vec<u64>,
}

impl Retired {
    /// A new worker of the context: its id, to report its destruction with.
    pub(crate) fn worker_created(&self) -> u64 {
        let id = self.next_worker.get();
        self.next_worker.set(id + 1);
        self.live_workers.borrow_mut().push(id);
        id
    }

    /// Keeps `memh` and `region` until the workers alive now are destroyed; `false` (nothing
    /// kept) when there is none.
    fn retire(&self, memh: sys::ucp_mem_h, region: Rc<dyn Region>) -> bool {
        let waiting_for = self.live_workers.borrow().clone();
        if waiting_for.is_empty() {
            return false;
        }
        self.maps.borrow_mut().push(RetiredMap {
            memh,
            _region: region,
            waiting_for,
        });
        true
    }

    /// Worker `id` is destroyed: the registrations that waited only for it, to be unmapped.
    pub(crate) fn worker_destroyed(&self, id: u64) -> Vec<RetiredMap> {
        self.live_workers.borrow_mut().retain(|w| *w != id);
        let mut maps = self.maps.borrow_mut();
        maps.iter_mut().for_each(|m| m.waiting_for.retain(|w| *w != id));
        let (done, waiting): (Vec<_>, Vec<_>) = maps.drain(..).partition(|m| m.waiting_for.is_empty());
        *maps = waiting;
        done
    }

    /// Every registration still kept (the context is going: no worker is left).
    pub(crate) fn take_all(&self) -> Vec<RetiredMap> {
        std::mem::take(&mut *self.maps.borrow_mut())
    }

    /// How many dropped maps are still kept registered.
    pub(crate) fn kept(&self) -> usize {
        self.maps.borrow().len()
    }
}

// SAFETY: forwards to the mapped region, whose guarantees hold while the map (which owns an
// `Rc` of it) lives; the registration handle stays valid until the map is dropped.
unsafe impl Region for MemMap {
    fn as_ptr(&self) -> *mut u8 {
        self.region.as_ptr()
    }
    fn len(&self) -> usize {
        self.region.len()
    }
    fn memory_type(&self) -> MemoryKind {
        self.region.memory_type()
    }
    fn ucx_mapping(&self, _: sealed::Token) -> Option<sealed::Mapping> {
        Some(sealed::Mapping {
            ctx: self.ctx.handle,
            memh: self.memh,
        })
    }
}

/// A region and the registration UCX gave it, if it gave one: operations on it pass the
/// registration when there is one and leave UCX to look the memory up otherwise.
///
/// For memory whose registration speeds operations up but is not required (tag operations; the
/// local side of put/get): ucx_perftest registers its buffers and NIXL every buffer it moves, so
/// UCX's copy transports may pin them (cuda_copy copies registered host memory to and from a GPU
/// ~4× faster than pageable memory). Where UCX refuses the registration (a locked-memory limit an
/// RDMA domain hits, say) the operations still run, as on unregistered memory.
pub struct Registered {
    map: Option<MemMap>,
    region: Rc<dyn Region>,
}

impl Registered {
    pub(crate) fn new(map: Option<MemMap>, region: Rc<dyn Region>) -> Self {
        Registered { map, region }
    }

    /// The registration, when UCX made one.
    pub fn map(&self) -> Option<&MemMap> {
        self.map.as_ref()
    }

    /// Lets go of the registration now (see [`MemMap::unmap_now`]) and of the region.
    pub fn unmap_now(self) {
        if let Some(map) = self.map {
            map.unmap_now();
        }
    }
}

// SAFETY: forwards to the region, whose guarantees hold while this value (which owns an `Rc` of
// it) lives; the registration, when there is one, is of that same region and lives as long.
unsafe impl Region for Registered {
    fn as_ptr(&self) -> *mut u8 {
        self.region.as_ptr()
    }
    fn len(&self) -> usize {
        self.region.len()
    }
    fn memory_type(&self) -> MemoryKind {
        self.region.memory_type()
    }
    fn ucx_mapping(&self, token: sealed::Token) -> Option<sealed::Mapping> {
        self.map.as_ref().and_then(|m| m.ucx_mapping(token))
    }
}

pub(crate) struct RkeyInner {
    pub(crate) ep: Rc<EpInner>,
    pub(crate) rkey: sys::ucp_rkey_h,
}

impl Drop for RkeyInner {
    fn drop(&mut self) {
        if let Ok(destroy) = ucp_fn!(self.ep.worker.ctx.ucx, ucp_rkey_destroy) {
            // SAFETY: the rkey came from ucp_ep_rkey_unpack; it needs only its worker alive
            // (held through `ep`), not the endpoint itself, which may already be closed.
            unsafe { destroy(self.rkey) };
        }
    }
}

/// A peer's memory key, unpacked on one endpoint; usable for put/get on that endpoint only.
/// Pending operations keep it alive.
#[derive(Clone)]
pub struct RemoteKey {
    pub(crate) inner: Rc<RkeyInner>,
}

impl std::fmt::Debug for RemoteKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteKey").finish_non_exhaustive()
    }
}
