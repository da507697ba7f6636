//! The pure core of ic-bench.
//!
//! Everything here is data and rules, with no I/O: the result types that form the JSON
//! contract of `ic-bench pair` ([`model`]), the probe result types ([`checks`]), parsing of
//! sizes and units ([`units`]), what must never be printed ([`secrets`]), the lines a pair's two
//! sides print for their parent and the plan the parent hands the prefill side ([`protocol`]), the
//! classification of what UCX reported into a transport class ([`classify`]), and the verdict
//! rules that turn measurements plus a placement into ok / warn / fail with a one-line reason and
//! a fix hint ([`verdict`]).
//!
//! Keeping this crate free of UCX, CUDA, Kubernetes and the file system means the rules can be
//! table-tested exhaustively and reused by every front end (local pair, Kubernetes pair,
//! exporters) without pulling any of those in.
//!
//! [`fabric`] is the one place ic-bench spells the fabric vocabulary: which environment
//! variables decide the transport, which Kubernetes resources are GPUs or RDMA NICs, UCX
//! transport names and `UCX_TLS` / `UCX_NET_DEVICES`, quantities, `/dev/shm` and capabilities.
//! `probe env`, the recipe rules, the node probe and `pair`'s spec cloner all read through it,
//! so they cannot judge the same pod differently.
#![forbid(unsafe_code)]

pub mod checks;
pub mod classify;
pub mod fabric;
pub mod model;
pub mod protocol;
pub mod secrets;
pub mod units;
pub mod verdict;

pub use model::*;

/// Process exit codes: part of the contract, documented in the README.
pub mod exit {
    /// The verdict passed (or only warned).
    pub const OK: i32 = 0;
    /// The verdict failed: the fabric is not what the placement should give.
    pub const VERDICT_FAILED: i32 = 1;
    /// Bad flags, bad input, or the test could not be set up (UCX missing, peer unreachable, …).
    pub const USAGE_OR_SETUP: i32 = 2;
    /// Stopped by Ctrl-C or SIGTERM after cleaning up (128 + SIGINT, the shell convention).
    pub const INTERRUPTED: i32 = 130;
}

/// A value given by the user could not be parsed; the message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

impl ParseError {
    pub fn new(msg: impl Into<String>) -> Self {
        ParseError(msg.into())
    }
}
