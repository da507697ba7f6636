//! icb-engine: moves bytes between two processes with UCX the way a KV-cache transfer does,
//! measures it without adding overhead, and records what UCX says carried them.
//!
//! Two roles, like ucx_perftest's server and client: [`serve`] (the decode side, owner of the
//! target buffers) and [`connect`] (the prefill side, which initiates every operation, times
//! it and returns a judged [`icb_core::PairReport`]). They meet over a small TCP control channel
//! ([`wire`], [`messages`]): versioned, length-bounded frames carrying the hello (UCX worker
//! address, boot id for same-host detection, CUDA availability), per-case parameters, rkeys and
//! phase synchronisation. Nothing a peer sends is trusted and every wait has a deadline.
//!
//! Both take an optional cancel token (Ctrl-C, SIGTERM): `serve` stops and releases UCX,
//! `connect` returns the cases measured so far as a report marked `partial`. `serve` gives each
//! client a fresh UCX worker, so nothing UCX keeps for a finished peer accumulates.
//!
//! UCX itself lives on one dedicated thread per process ([`ucx_thread`]), because the wrapper's
//! objects are single-threaded; the measurement loops ([`runtime`]) follow ucx_perftest's
//! methodology so that the two tools' numbers can be compared.
#![forbid(unsafe_code)]

mod buffers;
mod client;
mod control;
mod error;
mod local;
pub mod messages;
mod options;
mod runtime;
mod server;
mod session;
mod stats;
mod ucx_thread;
pub mod wire;

pub use client::{connect, validate as validate_settings};
pub use error::EngineError;
pub use options::{
    CancellationToken, ConnectOptions, DEFAULT_PORT, Listening, OnCase, OnListening, PeerFailureMode, ServeOptions,
    UcxOptions,
};
pub use server::serve;
pub use wire::{MAX_FRAME_BYTES, PROTOCOL_VERSION};
