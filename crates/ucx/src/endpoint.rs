//! Endpoints: connections to a remote worker, their transports, rkeys, and closing.

use crate::memory::{RemoteKey, RkeyInner};
use crate::worker::WorkerInner;
use crate::{Error, Result, ucp_fn};
use std::cell::Cell;
use std::ffi::c_void;
use std::rc::Rc;
use std::time::{Duration, Instant};
use ucx_sys as sys;

/// How an endpoint reacts to a dead peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorMode {
    /// UCX's default: fastest transports (shared memory included), but a dead peer can stall
    /// operations until their deadline.
    #[default]
    None,
    /// `UCP_ERR_HANDLING_MODE_PEER`: a dead peer fails operations with an error, and close may
    /// be forced. UCX then avoids transports without peer-failure detection (e.g. sysv/posix).
    Peer,
}

/// One lane of an endpoint as `ucp_ep_query` reports it (e.g. `tcp` on `lo`, `sysv` on `memory`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Transport {
    pub transport: String,
    pub device: String,
}

pub(crate) struct EpInner {
    pub(crate) worker: Rc<WorkerInner>,
    /// NULL once closed.
    pub(crate) ep: Cell<sys::ucp_ep_h>,
    pub(crate) mode: ErrorMode,
    /// The status UCX's error handler reported (UCS_OK while healthy).
    failed: Cell<sys::ucs_status_t>,
}

/// Time an implicit close (on drop) may take before the endpoint is abandoned to UCX.
const DROP_CLOSE_DEADLINE: Duration = Duration::from_secs(1);

unsafe extern "C" fn on_ep_error(arg: *mut c_void, _ep: sys::ucp_ep_h, status: sys::ucs_status_t) {
    // SAFETY: `arg` is the address of the EpInner that owns this ucp_ep; UCX only calls the
    // handler from ucp_worker_progress while the endpoint exists, and the EpInner outlives it
    // (it closes the endpoint in its Drop). Only a Cell is touched.
    let inner = unsafe { &*(arg as *const EpInner) };
    inner.failed.set(status);
}

/// The error of an operation on a closed endpoint (kept out of line: posts inline `handle`).
#[cold]
#[inline(never)]
fn closed(op: &'static str) -> Error {
    Error::invalid(op, "the endpoint is closed")
}

impl EpInner {
    #[inline(always)]
    pub(crate) fn handle(&self, op: &'static str) -> Result<sys::ucp_ep_h> {
        let ep = self.ep.get();
        if ep.is_null() {
            return Err(closed(op));
        }
        Ok(ep)
    }

    fn close_now(&self, deadline: Instant, also: &mut dyn FnMut()) -> Result<()> {
        let ep = self.ep.replace(std::ptr::null_mut());
        if ep.is_null() {
            return Ok(());
        }
        let ucx = &self.worker.ctx.ucx;
        let close = ucp_fn!(ucx, ucp_ep_close_nbx)?;
        // A forced close is only legal with peer error handling; otherwise flush first so that
        // UCX does not drop in-flight data.
        let flags = match self.mode {
            ErrorMode::Peer => sys::UCP_EP_CLOSE_FLAG_FORCE,
            ErrorMode::None => 0,
        };
        let param = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FIELD_FLAGS,
            flags,
            ..Default::default()
        };
        // SAFETY: `ep` is a live endpoint of this worker (we just took it out, so it is closed
        // exactly once); `param` is valid for the call.
        let req = unsafe { close(ep, &param) };
        let closed = self.worker.wait_request(req, "ucp_ep_close", deadline, also);
        if closed.is_err() && self.mode == ErrorMode::None {
            // Without peer error handling, UCX cannot destroy this worker safely any more.
            self.worker.keep();
        }
        closed
    }
}

impl Drop for EpInner {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; the close is bounded by DROP_CLOSE_DEADLINE.
        let _ = self.close_now(Instant::now() + DROP_CLOSE_DEADLINE, &mut || {});
    }
}

/// A connection to a remote worker. `!Send + !Sync` (belongs to its worker's thread).
pub struct Endpoint {
    pub(crate) inner: Rc<EpInner>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("mode", &self.inner.mode)
            .field("closed", &self.inner.ep.get().is_null())
            .finish()
    }
}

impl Endpoint {
    pub(crate) fn create(worker: Rc<WorkerInner>, remote_address: &[u8], mode: ErrorMode) -> Result<Endpoint> {
        if remote_address.is_empty() {
            return Err(Error::invalid("endpoint", "the remote worker address is empty"));
        }
        let ep_create = ucp_fn!(worker.ctx.ucx, ucp_ep_create)?;
        let inner = Rc::new(EpInner {
            worker: worker.clone(),
            ep: Cell::new(std::ptr::null_mut()),
            mode,
            failed: Cell::new(sys::UCS_OK),
        });
        let mut params = sys::ucp_ep_params_t {
            field_mask: sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS as u64,
            address: remote_address.as_ptr().cast(),
            ..Default::default()
        };
        if mode == ErrorMode::Peer {
            params.field_mask |=
                (sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | sys::UCP_EP_PARAM_FIELD_ERR_HANDLER) as u64;
            params.err_mode = sys::UCP_ERR_HANDLING_MODE_PEER;
            params.err_handler = sys::ucp_err_handler_t {
                cb: Some(on_ep_error),
                arg: Rc::as_ptr(&inner) as *mut c_void,
            };
        }
        let mut ep: sys::ucp_ep_h = std::ptr::null_mut();
        // SAFETY: the worker is alive; UCX copies what it needs from `remote_address` (an address
        // blob a peer sent us: UCX validates it and fails with a status on garbage); the error
        // handler's `arg` stays valid for the endpoint's life (see `on_ep_error`).
        let status = unsafe { ep_create(worker.handle, &params, &mut ep) };
        if status != sys::UCS_OK {
            return Err(worker.ctx.ucx.status_error("ucp_ep_create", status));
        }
        inner.ep.set(ep);
        Ok(Endpoint { inner })
    }

    pub fn error_mode(&self) -> ErrorMode {
        self.inner.mode
    }

    /// The failure UCX's error handler reported for this endpoint (peer mode only), if any.
    pub fn failure(&self) -> Option<Error> {
        let s = self.inner.failed.get();
        (s != sys::UCS_OK).then(|| self.inner.worker.ctx.ucx.status_error("endpoint (peer failure)", s))
    }

    /// The lanes UCX chose for this endpoint, or `None` when the loaded UCX is older than 1.14
    /// (older releases accept the query but return garbage).
    pub fn transports(&self) -> Result<Option<Vec<Transport>>> {
        let ucx = &self.inner.worker.ctx.ucx;
        if !ucx.has_ep_transports() {
            return Ok(None);
        }
        let ep = self.inner.handle("ucp_ep_query")?;
        let query = ucp_fn!(ucx, ucp_ep_query)?;
        const MAX_LANES: usize = 64;
        let mut entries = [sys::ucp_transport_entry_t::default(); MAX_LANES];
        let mut attr = sys::ucp_ep_attr_t {
            field_mask: sys::UCP_EP_ATTR_FIELD_TRANSPORTS as u64,
            ..Default::default()
        };
        attr.transports.entries = entries.as_mut_ptr();
        attr.transports.num_entries = MAX_LANES as u32;
        attr.transports.entry_size = std::mem::size_of::<sys::ucp_transport_entry_t>();
        // SAFETY: runtime >= 1.14 knows this field; `entries` has room for num_entries entries of
        // entry_size bytes and outlives the call.
        let status = unsafe { query(ep, &mut attr) };
        if status != sys::UCS_OK {
            return Err(ucx.status_error("ucp_ep_query", status));
        }
        let n = (attr.transports.num_entries as usize).min(MAX_LANES);
        let lanes = entries[..n]
            .iter()
            .map(|e| Transport {
                // SAFETY: UCX fills names with pointers to strings owned by the endpoint's
                // (still alive) configuration, or leaves them NULL.
                transport: unsafe { sys::loader::c_str_or_empty(e.transport_name) },
                // SAFETY: as above.
                device: unsafe { sys::loader::c_str_or_empty(e.device_name) },
            })
            .collect();
        Ok(Some(lanes))
    }

    /// Unpacks a peer's packed rkey for put/get on this endpoint. Bytes from a peer are untrusted:
    /// UCX parses them and this returns its error status on garbage.
    pub fn unpack_rkey(&self, packed: &[u8]) -> Result<RemoteKey> {
        if packed.is_empty() {
            return Err(Error::invalid("rkey", "the packed rkey is empty"));
        }
        let ep = self.inner.handle("ucp_ep_rkey_unpack")?;
        let unpack = ucp_fn!(self.inner.worker.ctx.ucx, ucp_ep_rkey_unpack)?;
        let mut rkey: sys::ucp_rkey_h = std::ptr::null_mut();
        // SAFETY: ep is alive; UCX reads the packed buffer (it only reads it despite the
        // non-const pointer in older headers) during the call; `rkey` is an out-pointer.
        let status = unsafe { unpack(ep, packed.as_ptr() as *mut c_void as _, &mut rkey) };
        if status != sys::UCS_OK {
            return Err(self.inner.worker.ctx.ucx.status_error("ucp_ep_rkey_unpack", status));
        }
        Ok(RemoteKey {
            inner: Rc::new(RkeyInner {
                ep: self.inner.clone(),
                rkey,
            }),
        })
    }

    /// Closes the endpoint: forced with [`ErrorMode::Peer`], otherwise after a flush of its
    /// pending operations. On timeout the close is left to UCX and `Timeout` is returned.
    /// Remote keys unpacked on it stay valid objects but cannot be used any more.
    ///
    /// A close that fails without peer error handling ([`ErrorMode::None`]: the peer died or
    /// never answered the flush) leaves a worker that UCX cannot destroy safely: the worker is
    /// kept for the life of the process instead (see [`crate::Context::kept_workers`]).
    pub fn close(self, deadline: Instant) -> Result<()> {
        self.inner.close_now(deadline, &mut || {})
    }

    /// [`Endpoint::close`] for one thread that drives both sides of a connection: `also` runs
    /// after each progress of this worker (progress the peer's there), since a flush over tcp
    /// waits for the peer to answer.
    pub fn close_while(self, deadline: Instant, mut also: impl FnMut()) -> Result<()> {
        self.inner.close_now(deadline, &mut also)
    }
}
