//! icb-nixl-engine: the same pair test as the UCX engine, but the bytes move through NIXL itself
//! (its C API, an agent with the UCX backend), the way disaggregated serving moves KV cache.
//!
//! [`serve`] (decode side, owner of the target buffers) and [`connect`] (prefill side, initiator
//! of every READ and WRITE) mirror `icb_engine::serve` / `icb_engine::connect`: they take the
//! same option structs plus [`NixlOptions`], speak the same control protocol over
//! `icb_engine::control` (the hello carries NIXL agent metadata instead of a UCX worker address,
//! `ready` carries the target's metadata after it registered the case's buffer), and return the
//! same judged [`icb_core::PairReport`]: one row per (direction, memory pair, block size, batch),
//! with `engine: nixl`, judged by the UCX engine's RMA rules (READ as `get_bw`, WRITE as `put_bw`).
//!
//! Which transport carried the bytes comes from NIXL's own UCX: each process turns on
//! `UCX_PROTO_INFO` (`used`, falling back to `y` on UCX < 1.21) into a private log file, and
//! [`evidence`] attributes the protocol table rows to each case's RMA operation, memory types
//! and block size ([`icb_core::EvidenceSource::ProtoInfo`], raw rows kept in the JSON).
//!
//! [`kv_rank`] is one TP rank of `pair --kv-shape`'s per-rank model: one process owns its rank's
//! KV buffer, registered once, and posts to every peer rank at once, driven by the parent over
//! `icb_core::protocol::kv_rank`.
//!
//! Why a separate crate: NIXL brings its own UCX, and a process must hold only one. Nothing here
//! loads ic-bench's UCX (`icb_engine` is used for its control channel and thread helper only),
//! and a process that used NIXL must leave through [`exit_process`].
#![forbid(unsafe_code)]

mod choice;
mod client;
mod error;
mod options;
pub mod per_case;
mod rank;
mod request;
mod runtime;
mod server;
mod session;
pub mod ucx_log;

pub use client::connect;
pub use error::{NixlEngineError, RuntimeError};
/// The `UCX_PROTO_INFO` table parser and its attribution to RMA cases: pure string work kept in
/// icb-core with the other classification (so its fuzz target builds without NIXL); here under the
/// name this crate uses.
pub mod evidence {
    pub use icb_core::classify::proto_tables::{ProtoRow, ProtoTable, memory_after, parse};
    pub use icb_core::classify::rma_evidence::attribute;
}
pub use choice::{EngineChoice, EngineChoiceError};
pub use nixl::{exit_process, nixl_was_used};
pub use options::{
    DEFAULT_BATCHES, FULL_MAX_REQUEST, FULL_SIZES, NixlOptions, QUALIFICATION_BATCHES, full_plan, nixl_settings,
    qualification_settings, verdict_plan,
};
pub use rank::kv_rank;
pub use request::settings_for_request;
pub use server::serve;

/// Whether `--engine nixl` can load the NIXL found from `library_dir` (same search and checks as
/// the engine: found, is NIXL, not too old, no foreign UCX in this process), without creating an
/// agent, so no UCX is loaded. `Ok` names the library and release, `Err` is the one-line reason.
/// For `probe nixl`.
pub fn probe_load(library_dir: Option<&std::path::Path>) -> Result<String, nixl::NixlError> {
    let lib = nixl::Nixl::load(library_dir)?;
    Ok(format!(
        "NIXL {} ({})",
        lib.version().unwrap_or("of unknown release"),
        lib.library().display()
    ))
}

/// A NIXL call that failed mid-session, and during what.
pub(crate) fn nixl_failed(during: impl std::fmt::Display, detail: impl std::fmt::Display) -> icb_engine::EngineError {
    icb_engine::EngineError::Nixl(format!("NIXL operation failed during {during}: {detail}"))
}
