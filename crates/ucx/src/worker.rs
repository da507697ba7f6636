//! The worker: progress engine, address, and non-blocking operations with deadlines.

use crate::context::ContextInner;
use crate::endpoint::{Endpoint, ErrorMode};
use crate::memory::{Region, RemoteKey};
use crate::ops::{Completion, Op, OpOptions, OpRepr, Rma, State, Table, recv_cb, send_cb};
use crate::submit::{RmaFn, check_range, mapping_for, set_memh};
use crate::{Error, Result, ucp_fn};
use std::cell::Cell;
use std::ffi::c_void;
use std::ops::Range;
use std::rc::Rc;
use std::time::{Duration, Instant};
use ucx_sys as sys;

mod info;
use info::query_max_info;

/// How long a timed-out operation gets to acknowledge its cancellation before it is abandoned
/// (left to UCX, its buffer kept alive).
const CANCEL_GRACE: Duration = Duration::from_millis(200);
/// How long dropping a worker waits for cancelled operations.
const DROP_GRACE: Duration = Duration::from_secs(1);
/// Progress calls between two clock reads in wait loops (a clock read costs about as much as
/// an idle progress call).
const CLOCK_EVERY: u32 = 16;
/// Fallback when the loaded UCX does not report its maximum info-string size.
const DEFAULT_MAX_INFO: usize = 256;

pub(crate) struct WorkerInner {
    pub(crate) ctx: Rc<ContextInner>,
    pub(crate) handle: sys::ucp_worker_h,
    progress_fn: unsafe extern "C" fn(sys::ucp_worker_h) -> std::os::raw::c_uint,
    check_status_fn: unsafe extern "C" fn(*mut c_void) -> sys::ucs_status_t,
    pub(crate) request_free_fn: unsafe extern "C" fn(*mut c_void),
    /// This worker's id in its context's [`crate::memory::Retired`] bookkeeping.
    id: u64,
    /// Never destroy this worker: an endpoint of its without peer error handling failed to close
    /// (its peer dead or silent, with operations queued to it), or UCX never gave back an
    /// operation. UCX defines no teardown for that state: destroying such a worker purged the
    /// endpoint's queue through a freed pointer under load (SIGSEGV in
    /// `ucp_request_send_state_ff`, on either side of a pair). Set through [`WorkerInner::keep`].
    pub(crate) unsafe_to_destroy: Cell<bool>,
}

impl WorkerInner {
    #[inline(always)]
    pub(crate) fn progress(&self) -> u32 {
        // SAFETY: the worker handle is alive while this struct is; single-thread mode is upheld
        // by every owner being !Send.
        unsafe { (self.progress_fn)(self.handle) }
    }

    /// Waits for a request created without a callback (close), polling its status; `also` runs
    /// after each progress call (the peer's worker, when one thread drives both).
    pub(crate) fn wait_request(
        &self,
        req: *mut c_void,
        op: &'static str,
        deadline: Instant,
        also: &mut dyn FnMut(),
    ) -> Result<()> {
        if req.is_null() {
            return Ok(());
        }
        if sys::ucs_ptr_is_err(req) {
            return Err(self.ctx.ucx.status_error(op, sys::ucs_ptr_status(req)));
        }
        let mut n = 0u32;
        loop {
            // SAFETY: `req` is a live request returned by UCX, not yet freed.
            let status = unsafe { (self.check_status_fn)(req) };
            if status != sys::UCS_INPROGRESS {
                // SAFETY: complete request, freed once.
                unsafe { (self.request_free_fn)(req) };
                return if sys::ucs_status_is_err(status) {
                    Err(self.ctx.ucx.status_error(op, status))
                } else {
                    Ok(())
                };
            }
            self.progress();
            also();
            n = n.wrapping_add(1);
            if n.is_multiple_of(CLOCK_EVERY) && Instant::now() >= deadline {
                // SAFETY: freeing a pending request hands it to UCX, which finishes it internally;
                // no callback was registered, and nothing of ours is referenced by it.
                unsafe { (self.request_free_fn)(req) };
                return Err(Error::Timeout { op });
            }
        }
    }

    /// Marks this worker as one UCX cannot destroy safely; it is counted once, as kept.
    pub(crate) fn keep(&self) {
        if !self.unsafe_to_destroy.replace(true) {
            self.ctx.kept_workers.set(self.ctx.kept_workers.get() + 1);
        }
    }
}

impl Drop for WorkerInner {
    fn drop(&mut self) {
        if self.unsafe_to_destroy.get() {
            // Kept for the life of the process, with its context (ucp_cleanup with a live worker
            // is undefined too) and the registrations a peer reached through it.
            std::mem::forget(self.ctx.clone());
            return;
        }
        if let Ok(destroy) = ucp_fn!(self.ctx.ucx, ucp_worker_destroy) {
            // SAFETY: endpoints and rkeys hold an Rc of this worker, so none is left; the handle
            // is destroyed exactly once.
            unsafe { destroy(self.handle) };
        }
        // Nothing can reach memory through this worker any more.
        self.ctx.worker_destroyed(self.id);
    }
}

/// A UCP worker in single-thread mode. `!Send + !Sync`: drive it from the thread that made it.
///
/// Operations are submitted without blocking and return an [`Op`]; finish them with
/// [`Worker::wait`] (one, with its status and length) or [`Worker::wait_all`] (every
/// outstanding one; the window pattern of a bandwidth test).
pub struct Worker {
    pub(crate) inner: Rc<WorkerInner>,
    pub(crate) table: Table,
    max_info: usize,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("pending", &self.pending())
            .finish_non_exhaustive()
    }
}

impl Worker {
    pub(crate) fn new(ctx: Rc<ContextInner>) -> Result<Worker> {
        let ucx = ctx.ucx.clone();
        let create = ucp_fn!(ucx, ucp_worker_create)?;
        let progress_fn = ucp_fn!(ucx, ucp_worker_progress)?;
        let check_status_fn = ucp_fn!(ucx, ucp_request_check_status)?;
        let request_free_fn = ucp_fn!(ucx, ucp_request_free)?;
        let params = sys::ucp_worker_params_t {
            field_mask: sys::UCP_WORKER_PARAM_FIELD_THREAD_MODE as u64,
            thread_mode: sys::UCS_THREAD_MODE_SINGLE,
            ..Default::default()
        };
        let mut handle: sys::ucp_worker_h = std::ptr::null_mut();
        // SAFETY: the context is alive (held by the new WorkerInner); `handle` is an out-pointer.
        let status = unsafe { create(ctx.handle, &params, &mut handle) };
        if status != sys::UCS_OK {
            return Err(ucx.status_error("ucp_worker_create", status));
        }
        let id = ctx.retired.worker_created();
        let inner = Rc::new(WorkerInner {
            ctx,
            handle,
            id,
            unsafe_to_destroy: Cell::new(false),
            progress_fn,
            check_status_fn,
            request_free_fn,
        });
        let max_info = query_max_info(&inner).unwrap_or(DEFAULT_MAX_INFO);
        Ok(Worker {
            inner,
            table: Table::new(),
            max_info,
        })
    }

    /// This worker's address, to be sent to a peer out of band.
    pub fn address(&self) -> Result<Vec<u8>> {
        let ucx = &self.inner.ctx.ucx;
        let get = ucp_fn!(ucx, ucp_worker_get_address)?;
        let release = ucp_fn!(ucx, ucp_worker_release_address)?;
        let mut addr: *mut sys::ucp_address_t = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: worker alive; addr/len are out-pointers.
        let status = unsafe { get(self.inner.handle, &mut addr, &mut len) };
        if status != sys::UCS_OK {
            return Err(ucx.status_error("ucp_worker_get_address", status));
        }
        // SAFETY: UCX returned `len` readable bytes at `addr`; copied, then released once.
        let bytes = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) }.to_vec();
        // SAFETY: see above.
        unsafe { release(self.inner.handle, addr) };
        Ok(bytes)
    }

    /// One call to `ucp_worker_progress`; returns the number of events it processed.
    #[inline]
    pub fn progress(&self) -> u32 {
        self.inner.progress()
    }

    /// Connects to a remote worker by its address (bytes from [`Worker::address`] on the peer).
    pub fn connect(&self, remote_address: &[u8], mode: ErrorMode) -> Result<Endpoint> {
        Endpoint::create(self.inner.clone(), remote_address, mode)
    }

    #[inline(always)]
    fn owner(&self) -> usize {
        self.table.core.as_ptr() as usize
    }

    /// Operations submitted and not yet complete.
    pub fn pending(&self) -> usize {
        self.table.core().pending.get()
    }

    pub(crate) fn check_ep(&self, op: &'static str, ep: &Endpoint) -> Result<sys::ucp_ep_h> {
        if !Rc::ptr_eq(&ep.inner.worker, &self.inner) {
            return Err(Error::invalid(op, "the endpoint belongs to another worker"));
        }
        ep.inner.handle(op)
    }

    #[inline]
    pub(crate) fn base_param(slot_ptr: *mut c_void, opts: OpOptions) -> sys::ucp_request_param_t {
        let mut mask = sys::UCP_OP_ATTR_FIELD_CALLBACK | sys::UCP_OP_ATTR_FIELD_USER_DATA;
        if opts.no_imm_cmpl {
            mask |= sys::UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        }
        if opts.multi_send {
            mask |= sys::UCP_OP_ATTR_FLAG_MULTI_SEND;
        }
        sys::ucp_request_param_t {
            op_attr_mask: mask,
            cb: sys::ucp_request_param_t__bindgen_ty_1 { send: Some(send_cb) },
            user_data: slot_ptr,
            ..Default::default()
        }
    }

    /// Turns what an `*_nbx` call returned into an [`Op`].
    #[inline]
    pub(crate) fn finish_submit(&self, idx: u32, ret: *mut c_void, op: &'static str, length: usize) -> Result<Op> {
        if ret.is_null() {
            self.table.unacquire(idx);
            return Ok(Op(OpRepr::Immediate { length }));
        }
        if sys::ucs_ptr_is_err(ret) {
            self.table.unacquire(idx);
            return Err(self.inner.ctx.ucx.status_error(op, sys::ucs_ptr_status(ret)));
        }
        let slot = self.table.slot(idx).expect("idx came from acquire on this table");
        slot.req.set(ret);
        Ok(Op(OpRepr::Slot {
            idx,
            generation: slot.generation.get(),
            owner: self.owner(),
        }))
    }

    /// Sends `buf[range]` with `tag` (`ucp_tag_send_nbx`). The buffer is held until completion.
    pub fn tag_send<R: Region + 'static>(
        &self,
        ep: &Endpoint,
        buf: &Rc<R>,
        range: Range<usize>,
        tag: u64,
        opts: OpOptions,
    ) -> Result<Op> {
        const OP: &str = "tag_send";
        let ep = self.check_ep(OP, ep)?;
        let ptr = check_range(OP, &**buf, &range)?;
        let memh = mapping_for(OP, &**buf, self.inner.ctx.handle)?;
        let send = ucp_fn!(self.inner.ctx.ucx, ucp_tag_send_nbx)?;
        let kind = buf.memory_type();
        let (idx, slot) = self.table.acquire(OP, range.len(), Some(buf.clone()), None);
        let mut param = Self::base_param(slot as *const _ as *mut c_void, opts);
        param.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        param.memory_type = kind.ucs();
        set_memh(&mut param, memh);
        let len = range.len();
        // SAFETY: ep is a live endpoint of this worker; [ptr, ptr+len) lies in a Region the slot
        // keeps alive until the callback (or forever if UCX never completes); `param` and its
        // user_data (a boxed slot) are valid for the call and the request's life.
        let ret = unsafe { send(ep, ptr as *const c_void, len, tag, &param) };
        self.finish_submit(idx, ret, OP, len)
    }

    /// Posts a receive into `buf[range]` for messages whose tag matches `tag` under `tag_mask`
    /// (`ucp_tag_recv_nbx`). The completion reports the matched message's length.
    pub fn tag_recv<R: Region + 'static>(
        &self,
        buf: &Rc<R>,
        range: Range<usize>,
        tag: u64,
        tag_mask: u64,
        opts: OpOptions,
    ) -> Result<Op> {
        const OP: &str = "tag_recv";
        let ptr = check_range(OP, &**buf, &range)?;
        let memh = mapping_for(OP, &**buf, self.inner.ctx.handle)?;
        let recv = ucp_fn!(self.inner.ctx.ucx, ucp_tag_recv_nbx)?;
        let kind = buf.memory_type();
        let (idx, slot) = self.table.acquire(OP, 0, Some(buf.clone()), None);
        let mut info = sys::ucp_tag_recv_info_t::default();
        let mut param = Self::base_param(slot as *const _ as *mut c_void, opts);
        param.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_MEMORY_TYPE | sys::UCP_OP_ATTR_FIELD_RECV_INFO;
        param.memory_type = kind.ucs();
        set_memh(&mut param, memh);
        param.cb = sys::ucp_request_param_t__bindgen_ty_1 { recv: Some(recv_cb) };
        param.recv_info = sys::ucp_request_param_t__bindgen_ty_2 { tag_info: &mut info };
        // SAFETY: as in `tag_send`; UCX writes into [ptr, ptr+len) of a Region held by the slot,
        // and into `info` only if it completes inside this call.
        let ret = unsafe { recv(self.inner.handle, ptr.cast(), range.len(), tag, tag_mask, &param) };
        let imm_len = info.length;
        self.finish_submit(idx, ret, OP, imm_len)
    }

    /// One-sided transfer between `buf[range]` and the peer's `remote_addr` (`ucp_put_nbx` /
    /// `ucp_get_nbx`): [`Rma::Put`] writes the local range to the peer, [`Rma::Get`] reads the
    /// peer's memory into it. Completion of a put means the local buffer may be reused;
    /// [`Worker::flush`] makes the data visible remotely.
    #[allow(clippy::too_many_arguments)] // the arguments of ucp_put_nbx/ucp_get_nbx, plus the direction
    pub fn rma<R: Region + 'static>(
        &self,
        kind: Rma,
        ep: &Endpoint,
        buf: &Rc<R>,
        range: Range<usize>,
        remote_addr: u64,
        rkey: &RemoteKey,
        opts: OpOptions,
    ) -> Result<Op> {
        let op = kind.as_str();
        let ep_h = self.check_ep(op, ep)?;
        if !Rc::ptr_eq(&rkey.inner.ep, &ep.inner) {
            return Err(Error::invalid(op, "the remote key was unpacked on another endpoint"));
        }
        let ptr = check_range(op, &**buf, &range)?;
        let memh = mapping_for(op, &**buf, self.inner.ctx.handle)?;
        let ucx = &self.inner.ctx.ucx;
        // Resolved before any slot is taken, so a missing symbol leaves nothing behind.
        let func = match kind {
            Rma::Put => RmaFn::Put(ucp_fn!(ucx, ucp_put_nbx)?),
            Rma::Get => RmaFn::Get(ucp_fn!(ucx, ucp_get_nbx)?),
        };
        let memory = buf.memory_type();
        let (idx, slot) = self
            .table
            .acquire(op, range.len(), Some(buf.clone()), Some(rkey.inner.clone()));
        let mut param = Self::base_param(slot as *const _ as *mut c_void, opts);
        param.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        param.memory_type = memory.ucs();
        set_memh(&mut param, memh);
        let len = range.len();
        // SAFETY: as in `tag_send`; the rkey is held by the slot too. The remote range is the
        // peer's business: UCX checks it against the rkey where the transport can.
        let ret = match func {
            // SAFETY: see above.
            RmaFn::Put(put) => unsafe { put(ep_h, ptr as *const c_void, len, remote_addr, rkey.inner.rkey, &param) },
            // SAFETY: see above; UCX writes into the local range.
            RmaFn::Get(get) => unsafe { get(ep_h, ptr as *mut c_void, len, remote_addr, rkey.inner.rkey, &param) },
        };
        self.finish_submit(idx, ret, op, len)
    }

    /// Submits an endpoint flush (`ucp_ep_flush_nbx`): completes when every operation issued on
    /// `ep` before it is complete at the remote side.
    pub fn flush(&self, ep: &Endpoint, opts: OpOptions) -> Result<Op> {
        const OP: &str = "flush";
        let ep = self.check_ep(OP, ep)?;
        let flush = ucp_fn!(self.inner.ctx.ucx, ucp_ep_flush_nbx)?;
        let (idx, slot) = self.table.acquire(OP, 0, None, None);
        let param = Self::base_param(slot as *const _ as *mut c_void, opts);
        // SAFETY: ep is live; param/user_data as in `tag_send`.
        let ret = unsafe { flush(ep, &param) };
        self.finish_submit(idx, ret, OP, 0)
    }

    /// True when `op` has finished (successfully or not) or was already reaped.
    #[inline]
    pub fn is_done(&self, op: Op) -> bool {
        match op.0 {
            OpRepr::Immediate { .. } => true,
            OpRepr::Slot { owner, .. } if owner != self.owner() => true,
            OpRepr::Slot { idx, generation, .. } => match self.table.slot(idx) {
                Some(s) => s.generation.get() != generation || s.state.get() != State::Pending,
                None => true,
            },
        }
    }

    /// Progresses until `op` completes, then returns its result and releases it. On timeout
    /// the operation is cancelled (and, if UCX does not confirm in time, abandoned with its
    /// buffer kept alive) and `Error::Timeout` is returned.
    #[inline]
    pub fn wait(&self, op: Op, deadline: Instant) -> Result<Completion> {
        let (idx, generation) = match op.0 {
            OpRepr::Immediate { length } => return Ok(Completion { length }),
            OpRepr::Slot { owner, .. } if owner != self.owner() => {
                return Err(Error::invalid("wait", "the operation belongs to another worker"));
            }
            OpRepr::Slot { idx, generation, .. } => (idx, generation),
        };
        let slot = match self.table.slot(idx) {
            Some(s) if s.generation.get() == generation && s.state.get() != State::Free && !s.abandoned.get() => s,
            _ => {
                return Err(Error::invalid(
                    "wait",
                    "the operation was already waited for or reaped by wait_all",
                ));
            }
        };
        let mut n = 0u32;
        while slot.state.get() == State::Pending {
            self.inner.progress();
            n = n.wrapping_add(1);
            if n.is_multiple_of(CLOCK_EVERY) && Instant::now() >= deadline {
                let name = slot.op.get();
                self.cancel_slot(idx);
                return Err(Error::Timeout { op: name });
            }
        }
        let (status, length, name) = (slot.status.get(), slot.length.get(), slot.op.get());
        self.table.release(idx, Some(self.inner.request_free_fn));
        if sys::ucs_status_is_err(status) {
            return Err(self.inner.ctx.ucx.status_error(name, status));
        }
        Ok(Completion { length })
    }

    /// Progresses until every outstanding operation has completed, then releases them all
    /// (their [`Op`]s can no longer be waited for) and returns the first error among them.
    /// On timeout every pending operation is cancelled as in [`Worker::wait`].
    pub fn wait_all(&self, deadline: Instant) -> Result<()> {
        let core = self.table.core();
        let mut n = 0u32;
        while core.pending.get() > 0 {
            self.inner.progress();
            n = n.wrapping_add(1);
            if n.is_multiple_of(CLOCK_EVERY) && Instant::now() >= deadline {
                let first = self.first_pending_op();
                self.cancel_all();
                let _ = self.reap();
                return Err(Error::Timeout { op: first });
            }
        }
        self.reap()
    }

    fn first_pending_op(&self) -> &'static str {
        (0..self.table.len() as u32)
            .filter_map(|i| self.table.slot(i))
            .find(|s| s.state.get() == State::Pending && !s.abandoned.get())
            .map(|s| s.op.get())
            .unwrap_or("operation")
    }

    /// Releases every completed slot; returns the first error of a non-abandoned one.
    fn reap(&self) -> Result<()> {
        let mut first: Option<Error> = None;
        for idx in 0..self.table.len() as u32 {
            let Some(slot) = self.table.slot(idx) else { continue };
            if slot.state.get() != State::Done {
                continue;
            }
            let status = slot.status.get();
            if first.is_none() && !slot.abandoned.get() && sys::ucs_status_is_err(status) {
                first = Some(self.inner.ctx.ucx.status_error(slot.op.get(), status));
            }
            self.table.release(idx, Some(self.inner.request_free_fn));
        }
        first.map_or(Ok(()), Err)
    }

    fn cancel_request(&self, req: *mut c_void) {
        if let Ok(cancel) = ucp_fn!(self.inner.ctx.ucx, ucp_request_cancel) {
            // SAFETY: `req` is a live request of this worker (its slot is pending).
            unsafe { cancel(self.inner.handle, req) };
        }
    }

    /// Cancels one pending operation and waits up to CANCEL_GRACE for UCX to confirm; if it
    /// does not, the slot is abandoned (still holding its buffer) and reaped later.
    fn cancel_slot(&self, idx: u32) {
        let Some(slot) = self.table.slot(idx) else { return };
        if slot.state.get() == State::Pending && !slot.req.get().is_null() {
            self.cancel_request(slot.req.get());
        }
        let grace = Instant::now() + CANCEL_GRACE;
        while slot.state.get() == State::Pending && Instant::now() < grace {
            self.inner.progress();
        }
        if slot.state.get() == State::Done {
            self.table.release(idx, Some(self.inner.request_free_fn));
        } else {
            self.abandon(idx);
        }
    }

    fn abandon(&self, idx: u32) {
        let Some(slot) = self.table.slot(idx) else { return };
        if !slot.abandoned.get() {
            slot.abandoned.set(true);
            let core = self.table.core();
            core.pending.set(core.pending.get().saturating_sub(1));
        }
    }

    fn cancel_all(&self) {
        self.cancel_pending(CANCEL_GRACE);
        for idx in 0..self.table.len() as u32 {
            if self.table.slot(idx).is_some_and(|s| s.state.get() == State::Pending) {
                self.abandon(idx);
            }
        }
    }

    /// Asks UCX to cancel every pending request, then progresses until UCX has confirmed them
    /// all or `grace` has passed.
    fn cancel_pending(&self, grace: Duration) {
        for idx in 0..self.table.len() as u32 {
            if let Some(slot) = self.table.slot(idx)
                && slot.state.get() == State::Pending
                && !slot.req.get().is_null()
            {
                self.cancel_request(slot.req.get());
            }
        }
        let until = Instant::now() + grace;
        while self.any_pending() && Instant::now() < until {
            self.inner.progress();
        }
    }

    fn any_pending(&self) -> bool {
        (0..self.table.len() as u32).any(|i| self.table.slot(i).is_some_and(|s| s.state.get() == State::Pending))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Cancel what is still in flight and give UCX a bounded time to confirm; anything it
        // never confirms keeps its buffer (the slot table is leaked instead of freed).
        if self.any_pending() {
            self.cancel_pending(DROP_GRACE);
        }
        let _ = self.reap();
        if self.any_pending() {
            // UCX still owns requests that point into the table: the table, and so the worker
            // the slots' holds keep alive, are never freed.
            self.table.leaked.set(true);
            self.inner.keep();
        }
    }
}
