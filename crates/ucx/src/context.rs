//! The UCP context: which features the workers get and the per-context configuration.

use crate::memory::{MemMap, Region, Registered, Retired};
use crate::worker::Worker;
use crate::{Error, Result, Ucx, ucp_fn};
use std::cell::Cell;
use std::ffi::CString;
use std::rc::Rc;
use ucx_sys as sys;

/// Builds a [`Context`]. Configuration set here applies to this context only (UCX still reads
/// `UCX_*` variables from the environment; values given here win).
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    ucx: Ucx,
    config: Vec<(String, String)>,
    tag: bool,
    rma: bool,
}

impl ContextBuilder {
    pub(crate) fn new(ucx: Ucx) -> Self {
        Self {
            ucx,
            config: Vec::new(),
            tag: true,
            rma: true,
        }
    }

    /// Overrides one UCX setting for this context, e.g. `("TLS", "tcp")`; a leading `UCX_` is
    /// accepted and dropped (`ucp_config_modify` wants the bare name).
    pub fn config(mut self, key: &str, value: &str) -> Self {
        let key = key.strip_prefix("UCX_").unwrap_or(key);
        self.config.push((key.to_string(), value.to_string()));
        self
    }

    /// Selects the UCP features (both on by default).
    pub fn features(mut self, tag: bool, rma: bool) -> Self {
        self.tag = tag;
        self.rma = rma;
        self
    }

    pub fn build(self) -> Result<Context> {
        let ucx = self.ucx;
        let config_read = ucp_fn!(ucx, ucp_config_read)?;
        let config_modify = ucp_fn!(ucx, ucp_config_modify)?;
        let config_release = ucp_fn!(ucx, ucp_config_release)?;
        let init_version = ucp_fn!(ucx, ucp_init_version)?;

        let mut config: *mut sys::ucp_config_t = std::ptr::null_mut();
        // SAFETY: NULL env prefix and filename mean "defaults + UCX_* environment"; `config` is
        // a valid out-pointer.
        let status = unsafe { config_read(std::ptr::null(), std::ptr::null(), &mut config) };
        if status != sys::UCS_OK {
            return Err(ucx.status_error("ucp_config_read", status));
        }
        // Released on every path below.
        let release = |config| {
            // SAFETY: `config` came from ucp_config_read and is released exactly once.
            unsafe { config_release(config) }
        };
        for (key, value) in &self.config {
            let (Ok(k), Ok(v)) = (CString::new(key.as_str()), CString::new(value.as_str())) else {
                release(config);
                return Err(Error::invalid(
                    "UCX configuration",
                    format!("{key}={value} contains a NUL byte"),
                ));
            };
            // SAFETY: `config` is live; both strings are NUL-terminated and outlive the call.
            let status = unsafe { config_modify(config, k.as_ptr(), v.as_ptr()) };
            if status != sys::UCS_OK {
                release(config);
                let text = sys::loader::status_string(ucx.ucp(), status);
                return Err(Error::Config {
                    key: key.clone(),
                    value: value.clone(),
                    text,
                });
            }
        }

        let mut features = 0u64;
        if self.tag {
            features |= sys::UCP_FEATURE_TAG as u64;
        }
        if self.rma {
            features |= sys::UCP_FEATURE_RMA as u64;
        }
        let name = c"ic-bench";
        let params = sys::ucp_params_t {
            field_mask: (sys::UCP_PARAM_FIELD_FEATURES | sys::UCP_PARAM_FIELD_NAME) as u64,
            features,
            name: name.as_ptr(),
            ..Default::default()
        };
        // `ucp_init` is a static inline in ucp.h: it calls ucp_init_version with the header's API
        // version. Asking for more than the loaded library has would make it warn and misbehave.
        let runtime = ucx.version();
        let minor = if runtime.major == sys::HEADER_API_MAJOR {
            sys::HEADER_API_MINOR.min(runtime.minor)
        } else {
            sys::HEADER_API_MINOR
        };
        let mut handle: sys::ucp_context_h = std::ptr::null_mut();
        // SAFETY: params/config are valid for the call; `handle` is a valid out-pointer.
        let status = unsafe { init_version(sys::HEADER_API_MAJOR, minor, &params, config, &mut handle) };
        release(config);
        if status != sys::UCS_OK {
            return Err(ucx.status_error("ucp_init", status));
        }
        Ok(Context {
            inner: Rc::new(ContextInner {
                ucx,
                handle,
                retired: Retired::default(),
                kept_workers: Cell::new(0),
            }),
        })
    }
}

pub(crate) struct ContextInner {
    pub(crate) ucx: Ucx,
    pub(crate) handle: sys::ucp_context_h,
    /// Exposed registrations kept past their map until their workers are gone.
    pub(crate) retired: Retired,
    /// Workers that could not be destroyed safely (see `WorkerInner::unsafe_to_destroy`).
    pub(crate) kept_workers: Cell<usize>,
}

impl ContextInner {
    /// Unmaps a registration of this context (exactly once per `memh`: the caller gives it up).
    pub(crate) fn unmap(&self, memh: sys::ucp_mem_h) {
        if let Ok(unmap) = ucp_fn!(self.ucx, ucp_mem_unmap) {
            // SAFETY: memh came from ucp_mem_map on this (alive) context, and its owner gives it
            // up with this call, so it is unmapped once.
            unsafe { unmap(self.handle, memh) };
        }
    }

    /// Unmaps the kept registrations that waited for worker `id`, now destroyed, then lets
    /// their regions go (in that order: the registration never outlives its memory).
    pub(crate) fn worker_destroyed(&self, id: u64) {
        for map in self.retired.worker_destroyed(id) {
            self.unmap(map.memh);
        }
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // No worker is left (each holds an Rc of this context): nothing can reach them now.
        for map in self.retired.take_all() {
            self.unmap(map.memh);
        }
        if let Ok(cleanup) = ucp_fn!(self.ucx, ucp_cleanup) {
            // SAFETY: every worker and memory map holds an Rc of this context, so none is left;
            // the handle came from ucp_init_version and is cleaned up exactly once.
            unsafe { cleanup(self.handle) };
        }
    }
}

/// A UCP context. `!Send + !Sync`: its workers and memory maps refer to it without locking.
pub struct Context {
    pub(crate) inner: Rc<ContextInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("ucx", &self.inner.ucx)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub fn ucx(&self) -> &Ucx {
        &self.inner.ucx
    }

    /// Creates a worker in single-thread mode (drive it from one thread only).
    pub fn worker(&self) -> Result<Worker> {
        Worker::new(self.inner.clone())
    }

    /// How many dropped memory maps are still kept registered because a worker that a peer could
    /// reach them through is alive (see [`MemMap`]).
    pub fn retired_maps(&self) -> usize {
        self.inner.retired.kept()
    }

    /// How many workers are kept instead of destroyed, for the life of the process with this
    /// context: an endpoint of theirs without peer error handling ([`crate::ErrorMode::None`])
    /// failed to close, or UCX never gave back an operation of theirs.
    pub fn kept_workers(&self) -> usize {
        self.inner.kept_workers.get()
    }

    /// Registers `region` with UCX (with its memory type as a hint) so that a peer can reach it
    /// through the rkey packed from the returned map. The map keeps the region alive.
    pub fn mem_map<R: Region + 'static>(&self, region: &Rc<R>) -> Result<MemMap> {
        MemMap::new(self.inner.clone(), region.clone())
    }

    /// Registers `region` where UCX can ([`Registered`]); the error says why it could not.
    pub fn register<R: Region + 'static>(&self, region: &Rc<R>) -> (Registered, Option<Error>) {
        match MemMap::new(self.inner.clone(), region.clone()) {
            Ok(map) => (Registered::new(Some(map), region.clone()), None),
            Err(e) => (Registered::new(None, region.clone()), Some(e)),
        }
    }

    /// A registration that UCX must make: the region of a peer's rkey.
    pub fn register_required<R: Region + 'static>(&self, region: &Rc<R>) -> Result<Registered> {
        Ok(Registered::new(Some(self.mem_map(region)?), region.clone()))
    }
}
