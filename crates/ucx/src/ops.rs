//! Bookkeeping for in-flight operations: a slot per request, completed by UCX callbacks.
//!
//! Slots are boxed once and reused, so the hot path allocates nothing after warm-up. A slot
//! holds an `Rc` of the operation's buffer and remote key until UCX reports completion: that is
//! what keeps safe code from freeing memory UCX still uses (dropping or forgetting an [`Op`]
//! changes nothing). Callbacks touch only `Cell`s reached through raw pointers to the boxed
//! slot and core, never a `RefCell` borrow, so they are safe to run inside any UCX call.

use crate::memory::{Region, RkeyInner};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::rc::Rc;
use ucx_sys as sys;

/// Per-operation submission options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpOptions {
    /// `UCP_OP_ATTR_FLAG_NO_IMM_CMPL`: always create a request (never complete inline), so the
    /// operation can be queried with [`crate::Worker::info_string`] while pending. Costs a little
    /// for small messages; use it on the one operation you want to inspect.
    pub no_imm_cmpl: bool,
    /// `UCP_OP_ATTR_FLAG_MULTI_SEND`: one of many operations kept in flight (a bandwidth
    /// stream). UCX selects the protocol from its "multi" table, tuned for throughput (other
    /// thresholds, e.g. an earlier rendezvous), instead of the single-operation one.
    /// ucx_perftest's stream tests set it on every send and receive.
    pub multi_send: bool,
}

impl OpOptions {
    /// Options for an operation whose protocol info string will be queried.
    pub const QUERYABLE: OpOptions = OpOptions {
        no_imm_cmpl: true,
        multi_send: false,
    };
    /// Options for the operations of a bandwidth stream (see [`OpOptions::multi_send`]).
    pub const STREAM: OpOptions = OpOptions {
        no_imm_cmpl: false,
        multi_send: true,
    };
    /// The same options, made queryable (see [`OpOptions::no_imm_cmpl`]): the probe of a
    /// stream keeps the stream's protocol selection.
    pub const fn queryable(self) -> OpOptions {
        OpOptions {
            no_imm_cmpl: true,
            ..self
        }
    }
}

/// The direction of a one-sided operation ([`crate::Worker::rma`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rma {
    /// Write the local range to the peer's memory (`ucp_put_nbx`).
    Put,
    /// Read the peer's memory into the local range (`ucp_get_nbx`).
    Get,
}

impl Rma {
    /// `put` or `get`, as errors and request bookkeeping name the operation.
    pub fn as_str(self) -> &'static str {
        match self {
            Rma::Put => "put",
            Rma::Get => "get",
        }
    }
}

/// A submitted operation. A small `Copy` token: waiting on it is optional (see
/// [`crate::Worker::wait_all`]); dropping it never cancels anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op(pub(crate) OpRepr);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpRepr {
    /// UCX completed the operation inside the submit call.
    Immediate { length: usize },
    /// `owner` is the address of the submitting worker's core: another worker's tokens are
    /// refused instead of aliasing one of this worker's slots.
    Slot { idx: u32, generation: u32, owner: usize },
}

impl Op {
    /// True when UCX completed the operation inside the submit call (no request exists).
    pub fn completed_immediately(&self) -> bool {
        matches!(self.0, OpRepr::Immediate { .. })
    }
}

/// What a finished operation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// Bytes transferred; for a tag receive, the length of the message that matched.
    pub length: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Free,
    Pending,
    Done,
}

pub(crate) struct Core {
    /// Operations submitted and not yet completed (abandoned ones excluded).
    pub(crate) pending: Cell<usize>,
}

pub(crate) struct Slot {
    core: NonNull<Core>,
    pub(crate) generation: Cell<u32>,
    pub(crate) state: Cell<State>,
    pub(crate) status: Cell<sys::ucs_status_t>,
    pub(crate) length: Cell<usize>,
    pub(crate) req: Cell<*mut c_void>,
    pub(crate) op: Cell<&'static str>,
    /// Given up on after a timeout: completes silently, reaped by the next `wait_all`.
    pub(crate) abandoned: Cell<bool>,
    hold_buf: Cell<Option<Rc<dyn Region>>>,
    hold_rkey: Cell<Option<Rc<RkeyInner>>>,
}

impl Slot {
    fn complete(&self, status: sys::ucs_status_t, length: Option<usize>) {
        self.status.set(status);
        if let Some(l) = length {
            self.length.set(l);
        }
        self.state.set(State::Done);
        if !self.abandoned.get() {
            // SAFETY: the core outlives every slot (both are freed together by Table::drop, or
            // leaked together), and is only accessed through Cells.
            let core = unsafe { self.core.as_ref() };
            core.pending.set(core.pending.get().saturating_sub(1));
        }
    }
}

pub(crate) unsafe extern "C" fn send_cb(_req: *mut c_void, status: sys::ucs_status_t, user_data: *mut c_void) {
    // SAFETY: `user_data` is the address of the boxed Slot this request was submitted with; the
    // slot stays allocated until the request is released or, if never, forever (leaked).
    let slot = unsafe { &*(user_data as *const Slot) };
    slot.complete(status, None);
}

pub(crate) unsafe extern "C" fn recv_cb(
    _req: *mut c_void,
    status: sys::ucs_status_t,
    info: *const sys::ucp_tag_recv_info_t,
    user_data: *mut c_void,
) {
    // SAFETY: UCX passes a valid tag info (or NULL on some error paths) for the call's duration.
    let length = (!info.is_null()).then(|| unsafe { (*info).length });
    // SAFETY: as in `send_cb`.
    let slot = unsafe { &*(user_data as *const Slot) };
    slot.complete(status, length);
}

/// The slot storage of one worker.
pub(crate) struct Table {
    pub(crate) core: NonNull<Core>,
    slots: RefCell<Vec<NonNull<Slot>>>,
    free: RefCell<Vec<u32>>,
    /// Set when a worker is dropped with operations UCX never finished: their slots (and the
    /// buffers they hold) are leaked rather than freed under UCX.
    pub(crate) leaked: Cell<bool>,
}

impl Table {
    pub(crate) fn new() -> Self {
        let core = Box::new(Core { pending: Cell::new(0) });
        Table {
            core: NonNull::from(Box::leak(core)),
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            leaked: Cell::new(false),
        }
    }

    pub(crate) fn core(&self) -> &Core {
        // SAFETY: allocated in `new`, freed only in Drop (or never).
        unsafe { self.core.as_ref() }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.borrow().len()
    }

    /// The slot at `idx`; the reference lives as long as the table (slots are never freed
    /// before the table is dropped).
    #[inline]
    pub(crate) fn slot(&self, idx: u32) -> Option<&Slot> {
        let p = *self.slots.borrow().get(idx as usize)?;
        // SAFETY: boxed slots stay allocated for the table's lifetime.
        Some(unsafe { p.as_ref() })
    }

    /// Takes a free slot (allocating one only beyond the previous high-water mark) and marks it
    /// pending with its holds; counts it as pending *before* UCX can call back.
    pub(crate) fn acquire(
        &self,
        op: &'static str,
        length: usize,
        buf: Option<Rc<dyn Region>>,
        rkey: Option<Rc<RkeyInner>>,
    ) -> (u32, &Slot) {
        let idx = match self.free.borrow_mut().pop() {
            Some(i) => i,
            None => {
                let mut slots = self.slots.borrow_mut();
                let slot = Box::new(Slot {
                    core: self.core,
                    generation: Cell::new(0),
                    state: Cell::new(State::Free),
                    status: Cell::new(sys::UCS_OK),
                    length: Cell::new(0),
                    req: Cell::new(std::ptr::null_mut()),
                    op: Cell::new(""),
                    abandoned: Cell::new(false),
                    hold_buf: Cell::new(None),
                    hold_rkey: Cell::new(None),
                });
                slots.push(NonNull::from(Box::leak(slot)));
                (slots.len() - 1) as u32
            }
        };
        let slot = self
            .slot(idx)
            .expect("index just taken from this table's free list or pushed");
        slot.generation.set(slot.generation.get().wrapping_add(1));
        slot.state.set(State::Pending);
        slot.status.set(sys::UCS_OK);
        // Sends, put, get and flush report the submitted length; a receive's callback overrides it.
        slot.length.set(length);
        slot.req.set(std::ptr::null_mut());
        slot.op.set(op);
        slot.abandoned.set(false);
        slot.hold_buf.set(buf);
        slot.hold_rkey.set(rkey);
        let core = self.core();
        core.pending.set(core.pending.get() + 1);
        (idx, slot)
    }

    /// Undoes `acquire` for an operation UCX finished (or refused) inside the submit call: no
    /// callback will come.
    pub(crate) fn unacquire(&self, idx: u32) {
        let core = self.core();
        core.pending.set(core.pending.get().saturating_sub(1));
        self.release(idx, None);
    }

    /// Returns a finished slot to the free list, freeing its UCX request and dropping its holds.
    pub(crate) fn release(&self, idx: u32, request_free: Option<unsafe extern "C" fn(*mut c_void)>) {
        let Some(slot) = self.slot(idx) else { return };
        let req = slot.req.replace(std::ptr::null_mut());
        if let (false, Some(free)) = (req.is_null(), request_free) {
            // SAFETY: `req` is a request UCX returned for this slot's operation, now complete;
            // it is freed exactly once (the slot's pointer was just cleared).
            unsafe { free(req) };
        }
        slot.state.set(State::Free);
        drop(slot.hold_buf.take());
        drop(slot.hold_rkey.take());
        self.free.borrow_mut().push(idx);
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        if self.leaked.get() {
            return;
        }
        for p in self.slots.get_mut().drain(..) {
            // SAFETY: each slot was Box::leak'ed in `acquire`; the worker's Drop made sure no
            // request refers to it any more (or set `leaked`).
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
        // SAFETY: allocated with Box in `new`, freed once.
        drop(unsafe { Box::from_raw(self.core.as_ptr()) });
    }
}
