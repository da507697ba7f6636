//! One prepared tag operation posted again and again, one at a time: a ping-pong's send or
//! receive without a slot per message.
//!
//! A ping-pong round trip through [`Worker::post`] and [`Worker::wait`] costs two slots of the
//! worker's table: ~500 of the ~800 instructions ic-bench's client spent per round trip in its
//! own code (callgrind, tcp, 8 B; BENCHMARKS.md, issue 24), where ucx_perftest's reuses two
//! requests' callbacks and a counter. A [`Lane`] is the one-entry form of [`Worker::stream`]:
//! its entry is allocated once, the callback records status and length and frees the request,
//! and the lane holds the buffer itself, so forgetting a lane with an operation in flight leaks
//! the buffer instead of freeing it under UCX. Dropping a lane cancels what it has in flight.

use crate::prepared::PreparedTag;
use crate::stream::{Entry, cancel_entries, post_into};
use crate::worker::WorkerInner;
use crate::{Error, Region, Result, Worker};
use std::rc::Rc;
use std::time::Instant;

/// Progress calls between two calls of the caller's check (and two deadline checks).
const CHECK_EVERY: u32 = 64;

/// A prepared operation with its own completion entry (see the module docs). Made by
/// [`Worker::lane`]; at most one operation in flight at a time.
pub struct Lane<'p> {
    worker: Rc<WorkerInner>,
    p: &'p PreparedTag,
    /// Boxed: the address is the requests' `user_data`. Never freed while pending (see Drop).
    entry: Box<Entry>,
    /// Keeps the buffer alive even if the lane is forgotten with an operation in flight.
    _hold: Rc<dyn Region>,
}

impl std::fmt::Debug for Lane<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane")
            .field("op", &self.p.op)
            .field("pending", &self.entry.pending())
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A lane for `p`, which must have been prepared on this worker.
    pub fn lane<'p>(&self, p: &'p PreparedTag) -> Result<Lane<'p>> {
        if !Rc::ptr_eq(&p.worker, &self.inner) {
            return Err(Error::invalid(p.op, "the operation was prepared on another worker"));
        }
        Ok(Lane {
            worker: self.inner.clone(),
            p,
            entry: Box::new(Entry::new(self.inner.request_free_fn)),
            _hold: p.buf.clone(),
        })
    }
}

impl Lane<'_> {
    /// Posts the operation; refused while the previous one is in flight.
    #[inline]
    pub fn post(&self) -> Result<()> {
        if self.entry.pending() {
            return Err(Error::invalid(
                self.p.op,
                "the lane's previous operation is still in flight",
            ));
        }
        // SAFETY: `p` was prepared on this worker (checked in `Worker::lane`); the entry is boxed
        // and freed only when nothing is pending (Drop), and the lane holds the Region; a
        // forgotten lane leaks both.
        unsafe { post_into(&self.worker, self.p, &self.entry) }
    }

    /// True when nothing is in flight (the last operation completed, or none was posted).
    #[inline(always)]
    pub fn is_done(&self) -> bool {
        !self.entry.pending()
    }

    /// Progresses until the operation completes and returns its length (for a receive, the
    /// matched message's) or its error. `check` runs every few dozen progress calls; its error,
    /// or `deadline`, cancels the operation and is returned.
    #[inline]
    pub fn finish<E: From<Error>>(
        &self,
        deadline: Instant,
        mut check: impl FnMut() -> Result<(), E>,
    ) -> Result<usize, E> {
        let mut i = 0u32;
        while self.entry.pending() {
            self.worker.progress();
            i = i.wrapping_add(1);
            if i.is_multiple_of(CHECK_EVERY) {
                if let Err(e) = check() {
                    self.cancel();
                    return Err(e);
                }
                if Instant::now() >= deadline {
                    self.cancel();
                    return Err(Error::Timeout { op: self.p.op }.into());
                }
            }
        }
        Ok(self.entry.result(&self.worker, self.p.op)?)
    }

    /// Cancels what is in flight; true when nothing is left pending.
    pub fn cancel(&self) -> bool {
        cancel_entries(&self.worker, std::slice::from_ref(&*self.entry))
    }
}

impl Drop for Lane<'_> {
    fn drop(&mut self) {
        if !self.cancel() {
            // UCX never confirmed: its request still points at the entry and the buffer.
            std::mem::forget(std::mem::replace(
                &mut self.entry,
                Box::new(Entry::new(self.worker.request_free_fn)),
            ));
            std::mem::forget(self._hold.clone());
        }
    }
}
