//! Tag operations checked once and posted many times: the timed loops' fast path.
//!
//! [`Worker::tag_send`] and [`Worker::tag_recv`] check their arguments on every call (the
//! endpoint's worker, the range, the registration's context) and resolve the UCX entry point.
//! That is right for one operation, but a ping-pong posts two per round trip, and whatever runs
//! between a pong's arrival and the next ping's departure is added to every latency sample:
//! ucx_perftest builds its `ucp_request_param_t` once per test and only calls UCX in the loop. A
//! [`PreparedTag`] does the same: [`Worker::prepare_tag_send`] / [`Worker::prepare_tag_recv`]
//! run every check and build the parameter template; [`Worker::post`] takes a slot, fills in
//! its address and calls UCX. The buffer is still held by the slot until completion, exactly as
//! with the unprepared calls, so the safety argument is theirs.

use crate::endpoint::{Endpoint, EpInner};
use crate::memory::Region;
use crate::ops::{Op, OpOptions};
use crate::submit::{TagRecvFn, TagSendFn, check_range, mapping_for, set_memh};
use crate::worker::WorkerInner;
use crate::{Error, Result, Worker, ucp_fn};
use std::ffi::c_void;
use std::ops::Range;
use std::rc::Rc;
use ucx_sys as sys;

pub(crate) enum Direction {
    Send { ep: Rc<EpInner>, send: TagSendFn },
    Recv { mask: u64, recv: TagRecvFn },
}

/// A tag send or receive on one buffer range, checked once (see the module docs). Post it with
/// [`Worker::post`] on the worker that prepared it.
pub struct PreparedTag {
    pub(crate) worker: Rc<WorkerInner>,
    pub(crate) dir: Direction,
    pub(crate) buf: Rc<dyn Region>,
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) tag: u64,
    /// Everything but the slot's address (`user_data`) and, for receives, `recv_info`.
    pub(crate) param: sys::ucp_request_param_t,
    pub(crate) op: &'static str,
}

impl std::fmt::Debug for PreparedTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedTag")
            .field("op", &self.op)
            .field("len", &self.len)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A [`Worker::tag_send`] of `buf[range]` with `tag`, checked now and posted with
    /// [`Worker::post`] as often as needed.
    pub fn prepare_tag_send<R: Region + 'static>(
        &self,
        ep: &Endpoint,
        buf: &Rc<R>,
        range: Range<usize>,
        tag: u64,
        opts: OpOptions,
    ) -> Result<PreparedTag> {
        const OP: &str = "tag_send";
        self.check_ep(OP, ep)?;
        let send = ucp_fn!(self.inner.ctx.ucx, ucp_tag_send_nbx)?;
        let dir = Direction::Send {
            ep: ep.inner.clone(),
            send,
        };
        self.prepare(OP, dir, buf, range, tag, opts)
    }

    /// A [`Worker::tag_recv`] into `buf[range]` for `tag` under `tag_mask`, checked now and
    /// posted with [`Worker::post`] as often as needed.
    pub fn prepare_tag_recv<R: Region + 'static>(
        &self,
        buf: &Rc<R>,
        range: Range<usize>,
        tag: u64,
        tag_mask: u64,
        opts: OpOptions,
    ) -> Result<PreparedTag> {
        const OP: &str = "tag_recv";
        let recv = ucp_fn!(self.inner.ctx.ucx, ucp_tag_recv_nbx)?;
        let dir = Direction::Recv { mask: tag_mask, recv };
        self.prepare(OP, dir, buf, range, tag, opts)
    }

    fn prepare<R: Region + 'static>(
        &self,
        op: &'static str,
        dir: Direction,
        buf: &Rc<R>,
        range: Range<usize>,
        tag: u64,
        opts: OpOptions,
    ) -> Result<PreparedTag> {
        let ptr = check_range(op, &**buf, &range)?;
        let memh = mapping_for(op, &**buf, self.inner.ctx.handle)?;
        let mut param = Self::base_param(std::ptr::null_mut(), opts);
        param.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        param.memory_type = buf.memory_type().ucs();
        set_memh(&mut param, memh);
        if matches!(dir, Direction::Recv { .. }) {
            param.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_RECV_INFO;
            param.cb = sys::ucp_request_param_t__bindgen_ty_1 {
                recv: Some(crate::ops::recv_cb),
            };
        }
        let buf: Rc<dyn Region> = buf.clone();
        Ok(PreparedTag {
            worker: self.inner.clone(),
            dir,
            buf,
            ptr,
            len: range.len(),
            tag,
            param,
            op,
        })
    }

    /// Posts a prepared tag operation (`ucp_tag_send_nbx` / `ucp_tag_recv_nbx`); the returned
    /// [`Op`] is waited for like any other.
    #[inline]
    pub fn post(&self, p: &PreparedTag) -> Result<Op> {
        if !Rc::ptr_eq(&p.worker, &self.inner) {
            return Err(Error::invalid(p.op, "the operation was prepared on another worker"));
        }
        match &p.dir {
            Direction::Send { ep, send } => {
                // Checked again at every post: the endpoint may have been closed since.
                let ep = ep.handle(p.op)?;
                let (idx, slot) = self.table.acquire(p.op, p.len, Some(p.buf.clone()), None);
                let mut param = p.param;
                param.user_data = slot as *const _ as *mut c_void;
                // SAFETY: as in `Worker::tag_send`: ep is a live endpoint of this worker (checked
                // just above); [ptr, ptr+len) was checked against the Region the slot now holds
                // until the callback; `param` and its user_data (a boxed slot) outlive the call.
                let ret = unsafe { send(ep, p.ptr as *const c_void, p.len, p.tag, &param) };
                self.finish_submit(idx, ret, p.op, p.len)
            }
            Direction::Recv { mask, recv } => {
                let (idx, slot) = self.table.acquire(p.op, 0, Some(p.buf.clone()), None);
                let mut info = sys::ucp_tag_recv_info_t::default();
                let mut param = p.param;
                param.user_data = slot as *const _ as *mut c_void;
                param.recv_info = sys::ucp_request_param_t__bindgen_ty_2 { tag_info: &mut info };
                // SAFETY: as in `Worker::tag_recv`: UCX writes into [ptr, ptr+len) of a Region
                // held by the slot, and into `info` only if it completes inside this call.
                let ret = unsafe { recv(self.inner.handle, p.ptr.cast(), p.len, p.tag, *mask, &param) };
                self.finish_submit(idx, ret, p.op, info.length)
            }
        }
    }
}
