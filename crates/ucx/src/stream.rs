//! A window of prepared tag operations run the way ucx_perftest's `run_stream_uni` runs it:
//! the bandwidth loops' fast path.
//!
//! [`Worker::post`] gives every operation a slot in the worker's table (an `Rc` of the buffer,
//! generation, state) and [`Worker::wait`] checks and releases it: about 330 instructions per
//! message on a tag_bw receiver, against ucx_perftest's ~80–140 (callgrind, sysv, 4 KiB;
//! BENCHMARKS.md, issue 24). At 4 KiB over shared memory a message takes ~100 ns, so that
//! difference was a fifth of the figure. [`Worker::stream`] keeps what the table guarantees
//! (the buffer outlives every request, each completion's status and length is checked, every
//! wait has a deadline, a timeout cancels what is pending) with one flat array of entries for the
//! whole window: the buffer is held once for the call (the [`PreparedTag`] is borrowed until it
//! returns), the completion callback records status and length and frees the request, as
//! ucx_perftest's does, and a post only fills in the entry's address.

use crate::prepared::{Direction, PreparedTag};
use crate::worker::WorkerInner;
use crate::{Error, Result, Worker, ucp_fn};
use std::cell::Cell;
use std::ffi::c_void;
use std::time::{Duration, Instant};
use ucx_sys as sys;

/// Progress calls between two calls of the caller's check (and two deadline checks).
const CHECK_EVERY: u32 = 64;
/// How long cancelled operations get to call back before the window is abandoned (leaked, with
/// a hold on the buffer, so UCX can never write into freed memory).
const CANCEL_GRACE: Duration = Duration::from_millis(200);

/// What the completed operations of a [`Worker::stream`] reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLengths {
    /// Operations completed (all of them, when the call succeeds).
    pub completed: u64,
    /// Shortest and longest completion length (for receives, of the matched messages).
    pub min: usize,
    pub max: usize,
}

/// One operation of the window. `user_data` of its request points here.
pub(crate) struct Entry {
    pending: Cell<bool>,
    /// The request while it is pending (null once the callback freed it, or if none exists).
    req: Cell<*mut c_void>,
    status: Cell<sys::ucs_status_t>,
    length: Cell<usize>,
    free: unsafe extern "C" fn(*mut c_void),
}

impl Entry {
    pub(crate) fn new(free: unsafe extern "C" fn(*mut c_void)) -> Entry {
        Entry {
            pending: Cell::new(false),
            req: Cell::new(std::ptr::null_mut()),
            status: Cell::new(sys::UCS_OK),
            length: Cell::new(0),
            free,
        }
    }

    #[inline(always)]
    pub(crate) fn pending(&self) -> bool {
        self.pending.get()
    }

    /// The finished operation's length, or its error.
    #[inline]
    pub(crate) fn result(&self, w: &WorkerInner, op: &'static str) -> Result<usize> {
        let status = self.status.get();
        if sys::ucs_status_is_err(status) {
            return Err(w.ctx.ucx.status_error(op, status));
        }
        Ok(self.length.get())
    }

    /// Called from UCX's completion callback: records the result and frees the request
    /// (ucx_perftest's `send_cb` / `tag_recv_cb` free it there too).
    fn complete(&self, req: *mut c_void, status: sys::ucs_status_t, length: Option<usize>) {
        self.status.set(status);
        if let Some(l) = length {
            self.length.set(l);
        }
        self.req.set(std::ptr::null_mut());
        self.pending.set(false);
        // SAFETY: `req` is the request this callback reports on; UCX allows freeing it inside its
        // callback, and nothing else frees it (the entry's pointer was cleared first).
        unsafe { (self.free)(req) };
    }
}

unsafe extern "C" fn stream_send_cb(req: *mut c_void, status: sys::ucs_status_t, user_data: *mut c_void) {
    // SAFETY: `user_data` is an Entry of a window that stays allocated until every request
    // submitted with it has called back, or forever (leaked) if that never happens.
    let e = unsafe { &*(user_data as *const Entry) };
    e.complete(req, status, None);
}

unsafe extern "C" fn stream_recv_cb(
    req: *mut c_void,
    status: sys::ucs_status_t,
    info: *const sys::ucp_tag_recv_info_t,
    user_data: *mut c_void,
) {
    // SAFETY: UCX passes a valid tag info (or NULL on some error paths) for the call's duration.
    let length = (!info.is_null()).then(|| unsafe { (*info).length });
    // SAFETY: as in `stream_send_cb`.
    let e = unsafe { &*(user_data as *const Entry) };
    e.complete(req, status, length);
}

impl Worker {
    /// Posts `p` `n` times with at most `window` outstanding and returns when every one has
    /// completed (ucx_perftest's stream loop): operation `i` reuses the entry of operation
    /// `i - window`, whose completion is waited for first. `filled` runs once the first window
    /// is posted (or all `n`, if fewer); `check` runs every few dozen progress calls while
    /// waiting, and an error from it, a failed operation or `deadline` ends the stream: what is
    /// still pending is cancelled and that error returned.
    pub fn stream<E: From<Error>>(
        &self,
        p: &PreparedTag,
        n: u64,
        window: usize,
        deadline: Instant,
        mut check: impl FnMut() -> Result<(), E>,
        mut filled: impl FnMut(),
    ) -> Result<StreamLengths, E> {
        if !std::rc::Rc::ptr_eq(&p.worker, &self.inner) {
            return Err(Error::invalid(p.op, "the operation was prepared on another worker").into());
        }
        let window = window.clamp(1, n.clamp(1, 1 << 16) as usize);
        let free = self.inner.request_free_fn;
        let entries: Box<[Entry]> = (0..window)
            .map(|_| Entry {
                pending: Cell::new(false),
                req: Cell::new(std::ptr::null_mut()),
                status: Cell::new(sys::UCS_OK),
                length: Cell::new(0),
                free,
            })
            .collect();
        let mut run = Run {
            w: self,
            p,
            entries,
            deadline,
            lengths: StreamLengths {
                completed: 0,
                min: usize::MAX,
                max: 0,
            },
        };
        // On an error (or a panic in a closure) `run`'s drop cancels what is still pending.
        run.all(n, &mut check, &mut filled).map(|()| run.lengths)
    }
}

struct Run<'a> {
    w: &'a Worker,
    p: &'a PreparedTag,
    entries: Box<[Entry]>,
    deadline: Instant,
    lengths: StreamLengths,
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        self.cancel_pending();
    }
}

impl Run<'_> {
    fn all<E: From<Error>>(
        &mut self,
        n: u64,
        check: &mut impl FnMut() -> Result<(), E>,
        filled: &mut impl FnMut(),
    ) -> Result<(), E> {
        let window = self.entries.len();
        let first = n.min(window as u64);
        if first == 0 {
            filled();
        }
        // The entry of operation i is i % window, kept as a wrapping index: no division per
        // message (with `finish`, `post` and the endpoint check inlined, the 4 KiB sender's own
        // instructions per message fell from ~133 to ~60, perftest's ~61; BENCHMARKS.md).
        let mut k = 0usize;
        for i in 0..n {
            if i >= window as u64 {
                self.finish(k, check)?;
            }
            self.post(k)?;
            if i + 1 == first {
                filled();
            }
            k += 1;
            if k == window {
                k = 0;
            }
        }
        // Oldest first, so completions are checked in submission order.
        let mut k = ((n - first) % window as u64) as usize;
        for _ in 0..first {
            self.finish(k, check)?;
            k += 1;
            if k == window {
                k = 0;
            }
        }
        Ok(())
    }

    /// Waits for entry `k`'s operation and checks its result.
    #[inline(always)]
    fn finish<E: From<Error>>(&mut self, k: usize, check: &mut impl FnMut() -> Result<(), E>) -> Result<(), E> {
        let e = &self.entries[k];
        let mut i = 0u32;
        while e.pending.get() {
            self.w.inner.progress();
            i = i.wrapping_add(1);
            if i.is_multiple_of(CHECK_EVERY) {
                check()?;
                if Instant::now() >= self.deadline {
                    return Err(Error::Timeout { op: self.p.op }.into());
                }
            }
        }
        if sys::ucs_status_is_err(e.status.get()) {
            return Err(self.w.inner.ctx.ucx.status_error(self.p.op, e.status.get()).into());
        }
        let len = e.length.get();
        let l = &mut self.lengths;
        l.completed += 1;
        l.min = l.min.min(len);
        l.max = l.max.max(len);
        Ok(())
    }

    #[inline(always)]
    fn post(&self, k: usize) -> Result<()> {
        // SAFETY: `p` was checked to be this worker's in `Worker::stream`; the entries and `p`
        // (so its Region) live until every request has called back: `all` waits for each, and
        // dropping the run cancels what is pending or leaks the entries with a hold on the buffer.
        unsafe { post_into(&self.w.inner, self.p, &self.entries[k]) }
    }

    /// Cancels every pending operation; if some never call back, the entries and a hold on the
    /// buffer are leaked so UCX never touches freed memory (as the slot table abandons a slot).
    fn cancel_pending(&mut self) {
        if !cancel_entries(&self.w.inner, &self.entries) {
            std::mem::forget(std::mem::take(&mut self.entries));
            std::mem::forget(self.p.buf.clone());
        }
    }
}

/// Posts the prepared operation `p` into entry `e` (which is not pending).
///
/// # Safety
/// `p` must have been prepared on `w`, and `e` and `p`'s Region must stay allocated until the
/// entry is no longer pending (or forever, if the caller gives up on it).
#[inline(always)]
pub(crate) unsafe fn post_into(w: &WorkerInner, p: &PreparedTag, e: &Entry) -> Result<()> {
    let mut param = p.param;
    param.user_data = e as *const Entry as *mut c_void;
    e.status.set(sys::UCS_OK);
    e.length.set(p.len);
    // Pending before UCX can call back (it may, from inside the call, on some paths).
    e.pending.set(true);
    let ret = match &p.dir {
        Direction::Send { ep, send } => {
            let ep = match ep.handle(p.op) {
                Ok(ep) => ep,
                Err(err) => {
                    e.pending.set(false);
                    return Err(err);
                }
            };
            param.cb = sys::ucp_request_param_t__bindgen_ty_1 {
                send: Some(stream_send_cb),
            };
            // SAFETY: ep is a live endpoint of this worker (checked just above); the range
            // was checked against the Region that `p` holds, which the caller keeps alive
            // (with this entry, the request's user_data) until the request has called back;
            // `param` outlives the call.
            unsafe { send(ep, p.ptr as *const c_void, p.len, p.tag, &param) }
        }
        Direction::Recv { mask, recv } => {
            let mut info = sys::ucp_tag_recv_info_t::default();
            param.cb = sys::ucp_request_param_t__bindgen_ty_1 {
                recv: Some(stream_recv_cb),
            };
            param.recv_info = sys::ucp_request_param_t__bindgen_ty_2 { tag_info: &mut info };
            // SAFETY: as for the send; UCX writes into the range and, only if it completes
            // inside this call, into `info`.
            let ret = unsafe { recv(w.handle, p.ptr.cast(), p.len, p.tag, *mask, &param) };
            if ret.is_null() {
                e.length.set(info.length);
            }
            ret
        }
    };
    if ret.is_null() {
        e.pending.set(false);
    } else if sys::ucs_ptr_is_err(ret) {
        e.pending.set(false);
        return Err(w.ctx.ucx.status_error(p.op, sys::ucs_ptr_status(ret)));
    } else if e.pending.get() {
        e.req.set(ret);
    }
    Ok(())
}

/// Cancels the pending operations of `entries` and progresses up to CANCEL_GRACE for their
/// callbacks; true when none is pending any more.
pub(crate) fn cancel_entries(w: &WorkerInner, entries: &[Entry]) -> bool {
    let any = || entries.iter().any(|e| e.pending.get());
    if !any() {
        return true;
    }
    if let Ok(cancel) = ucp_fn!(w.ctx.ucx, ucp_request_cancel) {
        for e in entries.iter().filter(|e| !e.req.get().is_null()) {
            // SAFETY: `req` is a live request of this worker (its callback has not run).
            unsafe { cancel(w.handle, e.req.get()) };
        }
    }
    let end = Instant::now() + CANCEL_GRACE;
    while any() && Instant::now() < end {
        w.progress();
    }
    !any()
}
