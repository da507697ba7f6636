//! nixl: a small safe wrapper over NIXL's C API, shaped for measuring KV-cache transfers.
//!
//! [`Nixl::load`] finds and checks `libnixl_capi.so` (see `nixl_sys::load`); an [`Agent`] owns one
//! NIXL agent with one UCX backend (NIXL's plugin defaults plus the caller's overrides); memory
//! is registered as a [`Registration`] (deregistered on drop); agents swap metadata blobs; a
//! [`Transfer`] is one prepared READ or WRITE request over two descriptor lists, posted and
//! polled as often as the caller likes, released on drop.
//!
//! Everything here is single-threaded (`Rc`, raw handles): create and use NIXL objects on one
//! thread, like the UCX engine does with its UCX thread. All `unsafe` of the NIXL engine is in
//! this crate and `nixl-sys`.
//!
//! Process-wide pieces: [`set_env_before_start`] sets `UCX_*` variables before NIXL's UCX reads
//! them, and [`exit_process`] is how a process that used NIXL must leave (see there).
#![allow(unsafe_code)] // an FFI crate: unsafe is its job, each block with a SAFETY comment

mod agent;
mod error;
mod process;
mod transfer;

pub use agent::{Agent, MemKind, Nixl, Registration};
pub use error::NixlError;
pub use nixl_sys::{ENV_NIXL_LIB, LoadError, candidate_dirs, loaded_ucx, ucx_version_of};
pub use process::{exit_process, flush_c_stdio, nixl_was_used, set_env_before_start};
pub use transfer::{Descriptor, Transfer, XferOp};
