//! Safe UCX (UCP) wrapper used by ic-bench's transfer engine.
//!
//! The object graph mirrors UCP: a loaded library ([`Ucx`]), a [`Context`] (features and
//! per-context configuration), a [`Worker`] (progress engine; one per thread), [`Endpoint`]s
//! created from a remote worker's address, memory maps ([`MemMap`]) whose packed rkeys let a peer
//! do RMA, and the operations themselves (tag send/recv, put/get, flush), submitted without
//! blocking and completed by [`Worker::wait`] / [`Worker::wait_all`] under a deadline. The timed
//! loops post [`PreparedTag`]s (checked once); a bandwidth window of them runs through
//! [`Worker::stream`], and a ping-pong's through [`Lane`]s, which keep ucx_perftest's
//! per-message cost (no slot per operation; the completion callback frees the request).
//!
//! Memory safety against UCX: an operation keeps an `Rc` of its buffer (and of its remote key)
//! until UCX reports it complete, so safe code cannot free memory UCX is still reading or
//! writing — not even with `mem::forget` on a handle. Buffers implement the unsafe [`Region`]
//! trait. Everything below [`Ucx`] is `!Send + !Sync`: UCP workers are created in single-thread
//! mode and the engine drives each from one dedicated thread.
//!
//! Teardown against UCX: a worker is destroyed only when UCX can do so safely. One whose
//! endpoint failed to close without peer error handling ([`ErrorMode::None`]: the peer died or
//! went silent with operations queued) is kept for the life of the process instead, with its
//! context; destroying it purged a dead endpoint's queue through a freed pointer (SIGSEGV under
//! load). [`Context::kept_workers`] counts them.
//!
//! UCX's own log is captured from the first load ([`log`]): warnings and errors are counted and
//! the first of each kept for a one-line summary; [`log::set_passthrough`] lets UCX print them too.
//!
//! Nothing here reads process environment variables except UCX itself (`UCX_*`); per-context
//! overrides go through [`ContextBuilder::config`], so tests running in parallel threads can use
//! different transports.
#![allow(unsafe_code)] // an FFI crate: unsafe is its job, each block with a SAFETY comment

mod context;
mod endpoint;
mod error;
mod lane;
pub mod log;
mod memory;
mod ops;
mod prepared;
mod stream;
mod submit;
mod worker;

pub use context::{Context, ContextBuilder};
pub use endpoint::{Endpoint, ErrorMode, Transport};
pub use error::{Error, Result};
pub use lane::Lane;
pub use memory::{MemMap, MemoryKind, Region, Registered, RemoteKey};
pub use ops::{Completion, Op, OpOptions, Rma};
pub use prepared::PreparedTag;
pub use stream::StreamLengths;
pub use ucx_sys::{LoadError, Version};
pub use worker::Worker;

use std::path::Path;
use std::sync::Arc;

/// A loaded UCX library: the function table, its version and where it came from.
///
/// Cheap to clone and `Send + Sync` (an immutable function table over libraries that stay open).
#[derive(Clone)]
pub struct Ucx {
    pub(crate) lib: Arc<ucx_sys::Loaded>,
}

impl std::fmt::Debug for Ucx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ucx")
            .field("version", &self.lib.version)
            .field("path", &self.lib.path)
            .finish()
    }
}

/// The functions every ic-bench run needs; checked once at load so a stripped or odd build is
/// one clear error up front rather than a failure in the middle of a measurement.
type IsPresent = fn(&ucx_sys::Ucp) -> bool;

const REQUIRED: &[(&str, IsPresent)] = &[
    ("ucp_config_read", |u| u.ucp_config_read.is_ok()),
    ("ucp_config_modify", |u| u.ucp_config_modify.is_ok()),
    ("ucp_config_release", |u| u.ucp_config_release.is_ok()),
    ("ucp_init_version", |u| u.ucp_init_version.is_ok()),
    ("ucp_cleanup", |u| u.ucp_cleanup.is_ok()),
    ("ucp_worker_create", |u| u.ucp_worker_create.is_ok()),
    ("ucp_worker_destroy", |u| u.ucp_worker_destroy.is_ok()),
    ("ucp_worker_get_address", |u| u.ucp_worker_get_address.is_ok()),
    ("ucp_worker_release_address", |u| u.ucp_worker_release_address.is_ok()),
    ("ucp_worker_progress", |u| u.ucp_worker_progress.is_ok()),
    ("ucp_ep_create", |u| u.ucp_ep_create.is_ok()),
    ("ucp_ep_close_nbx", |u| u.ucp_ep_close_nbx.is_ok()),
    ("ucp_ep_flush_nbx", |u| u.ucp_ep_flush_nbx.is_ok()),
    ("ucp_mem_map", |u| u.ucp_mem_map.is_ok()),
    ("ucp_mem_unmap", |u| u.ucp_mem_unmap.is_ok()),
    ("ucp_rkey_pack", |u| u.ucp_rkey_pack.is_ok()),
    ("ucp_rkey_buffer_release", |u| u.ucp_rkey_buffer_release.is_ok()),
    ("ucp_ep_rkey_unpack", |u| u.ucp_ep_rkey_unpack.is_ok()),
    ("ucp_rkey_destroy", |u| u.ucp_rkey_destroy.is_ok()),
    ("ucp_tag_send_nbx", |u| u.ucp_tag_send_nbx.is_ok()),
    ("ucp_tag_recv_nbx", |u| u.ucp_tag_recv_nbx.is_ok()),
    ("ucp_put_nbx", |u| u.ucp_put_nbx.is_ok()),
    ("ucp_get_nbx", |u| u.ucp_get_nbx.is_ok()),
    ("ucp_request_cancel", |u| u.ucp_request_cancel.is_ok()),
    ("ucp_request_free", |u| u.ucp_request_free.is_ok()),
    ("ucp_request_check_status", |u| u.ucp_request_check_status.is_ok()),
];

impl Ucx {
    /// Loads UCX from `explicit_dir` (the `--ucx-lib` flag), else `IC_BENCH_UCX_LIB`, else the
    /// well-known locations, else the dynamic linker's search; refuses UCX older than 1.14.
    pub fn load(explicit_dir: Option<&Path>) -> Result<Ucx> {
        let lib = ucx_sys::load(explicit_dir)?;
        if let Some((name, _)) = REQUIRED.iter().find(|(_, present)| !present(&lib.ucp)) {
            // Names in REQUIRED are 'static string literals.
            return Err(ucx_sys::LoadError::MissingSymbol { name }.into());
        }
        log::install(&lib.ucp);
        Ok(Ucx { lib: Arc::new(lib) })
    }

    /// The run-time library version (`ucp_get_version`).
    pub fn version(&self) -> Version {
        self.lib.version
    }

    /// `ucp_get_version_string()`, e.g. "1.22.0".
    pub fn version_string(&self) -> &str {
        &self.lib.version_string
    }

    /// The directory libucp (and its preloaded siblings) came from.
    pub fn library_dir(&self) -> &Path {
        &self.lib.dir
    }

    /// The libucp file that was opened.
    pub fn library_path(&self) -> &Path {
        &self.lib.path
    }

    /// The UCX version of the headers ic-bench was built with (major, minor, full string).
    pub fn header_version() -> (u32, u32, &'static str) {
        (
            ucx_sys::HEADER_API_MAJOR,
            ucx_sys::HEADER_API_MINOR,
            ucx_sys::HEADER_VERSION_STRING,
        )
    }

    /// True when the loaded UCX reports an endpoint's transports (`UCP_EP_ATTR_FIELD_TRANSPORTS`,
    /// UCX >= 1.14; older releases return garbage instead of an error).
    pub fn has_ep_transports(&self) -> bool {
        self.lib.version.at_least(1, 14)
    }

    /// Starts building a UCP context on this library.
    pub fn context(&self) -> ContextBuilder {
        ContextBuilder::new(self.clone())
    }

    pub(crate) fn ucp(&self) -> &ucx_sys::Ucp {
        &self.lib.ucp
    }

    pub(crate) fn status_error(&self, op: &'static str, code: ucx_sys::ucs_status_t) -> Error {
        Error::Status {
            op,
            code,
            text: ucx_sys::loader::status_string(&self.lib.ucp, code),
        }
    }
}

/// Fetches a function pointer from the table, turning a symbol the loaded UCX lacks into an error.
macro_rules! ucp_fn {
    ($ucx:expr, $name:ident) => {
        ucx_sys::require(&$ucx.ucp().$name, stringify!($name)).map_err($crate::Error::from)
    };
}
pub(crate) use ucp_fn;
