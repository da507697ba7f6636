//! What UCX says about a worker and its requests: the protocol a pending operation uses, the
//! worker's printed tables, and the size of the longest description it can give.

use super::{Worker, WorkerInner};
use crate::ops::{OpRepr, State};
use crate::{Error, Op, Result, ucp_fn};
use ucx_sys as sys;

impl Worker {
    /// `ucp_worker_print_info`'s text: the worker's address and, when the context's
    /// `PROTO_INFO` selects them, the protocol tables of its remote-key configurations, among
    /// them the receiver's "rendezvous data fetch" tables: what a tag receive chose, which its
    /// request's info string does not say (`{rcv_tag} recv length N host memory`, UCX 1.22).
    /// Printed into memory, not UCX's log. `None` where it cannot be captured.
    pub fn print_info(&self) -> Option<String> {
        let print = ucp_fn!(self.inner.ctx.ucx, ucp_worker_print_info).ok()?;
        let mut buf: *mut libc::c_char = std::ptr::null_mut();
        let mut len: libc::size_t = 0;
        // SAFETY: open_memstream gets two out-pointers that outlive the stream; it returns NULL
        // on failure, checked before use.
        let stream = unsafe { libc::open_memstream(&mut buf, &mut len) };
        if stream.is_null() {
            return None;
        }
        // SAFETY: the worker is alive and `stream` an open FILE, written by this thread only.
        unsafe { print(self.inner.handle, stream.cast()) };
        // SAFETY: closed once; after fclose `buf` holds `len` bytes (plus a NUL) that this
        // function owns and frees once, after copying them.
        unsafe {
            let closed = libc::fclose(stream);
            let text = (closed == 0 && !buf.is_null())
                .then(|| String::from_utf8_lossy(std::slice::from_raw_parts(buf.cast::<u8>(), len)).into_owned());
            libc::free(buf.cast());
            text
        }
    }

    /// The largest protocol info string this worker can report (`ucp_worker_query`).
    pub fn max_info_string(&self) -> usize {
        self.max_info
    }

    /// UCX's description of how a still-pending operation is being carried out, e.g.
    /// `tag_send from host memory length 4194304 rendezvous zero-copy read from remote cma/memory`.
    /// `None` when the operation already completed (submit it with [`crate::OpOptions::QUERYABLE`] and
    /// query right away) or the loaded UCX cannot describe requests. The receive side carries no
    /// protocol description.
    pub fn info_string(&self, op: Op) -> Result<Option<String>> {
        let OpRepr::Slot { idx, generation, owner } = op.0 else {
            return Ok(None);
        };
        if owner != self.owner() {
            return Err(Error::invalid("info_string", "the operation belongs to another worker"));
        }
        let Some(slot) = self.table.slot(idx) else {
            return Ok(None);
        };
        let req = slot.req.get();
        // A request UCX completed inside the submit call (small eager sends do, even with
        // NO_IMM_CMPL) is still a valid object until it is released with ucp_request_free, and
        // still carries its protocol description: ucx_perftest queries such requests too.
        if slot.generation.get() != generation || slot.state.get() == State::Free || req.is_null() {
            return Ok(None);
        }
        let Ok(query) = ucp_fn!(self.inner.ctx.ucx, ucp_request_query) else {
            return Ok(None);
        };
        let mut buf = vec![0u8; self.max_info.max(16)];
        // The SIZE bit is required: without it UCX ignores the string field.
        let mut attr = sys::ucp_request_attr_t {
            field_mask: (sys::UCP_REQUEST_ATTR_FIELD_INFO_STRING | sys::UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE) as u64,
            debug_string: buf.as_mut_ptr().cast(),
            debug_string_size: buf.len(),
            ..Default::default()
        };
        // SAFETY: `req` is a request not yet released (its slot is Pending or Done, never Free, and
        // the generation matches), so UCX still owns a valid object; UCX writes at most debug_string_size bytes
        // (NUL included) into `buf`, which outlives the call.
        let status = unsafe { query(req, &mut attr) };
        if status != sys::UCS_OK {
            return Err(self.inner.ctx.ucx.status_error("ucp_request_query", status));
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        let text = String::from_utf8_lossy(&buf[..end]).trim().to_string();
        Ok((!text.is_empty()).then_some(text))
    }
}

pub(super) fn query_max_info(inner: &WorkerInner) -> Option<usize> {
    let query = ucp_fn!(inner.ctx.ucx, ucp_worker_query).ok()?;
    let mut attr = sys::ucp_worker_attr_t {
        field_mask: sys::UCP_WORKER_ATTR_FIELD_MAX_INFO_STRING as u64,
        ..Default::default()
    };
    // SAFETY: worker alive; `attr` is a valid in/out struct for the call.
    let status = unsafe { query(inner.handle, &mut attr) };
    (status == sys::UCS_OK && attr.max_debug_string > 0).then_some(attr.max_debug_string)
}
