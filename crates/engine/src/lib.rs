//! icb-engine: moves bytes between two processes with UCX the way a KV-cache transfer does,
//! measures it without adding overhead, and records what UCX says carried them.
//!
//! Two roles, like ucx_perftest's server and client: [`serve`] (the decode side, owner of the
//! target buffers) and [`connect`] (the prefill side, which initiates every operation, times
//! it and returns a judged [`icb_core::PairReport`]). They meet over a small TCP control channel
//! ([`wire`], [`messages`]; the protocol itself is crate icb-control): versioned, length-bounded
//! frames carrying the hello (UCX worker address, boot id for same-host detection, CUDA
//! availability), per-case parameters, rkeys and phase synchronisation. Nothing a peer sends is trusted and every wait has a deadline.
//!
//! `serve` admits only a client that proves the shared token (challenge-response, [`auth`]), one
//! at a time, within bounds of its own (buffer size, session time, connection rate, deadlines
//! for the hello and every frame): [`admit`].
//!
//! Both take an optional cancel token (Ctrl-C, SIGTERM): `serve` stops and releases UCX,
//! `connect` returns the cases measured so far as a report marked `partial`. `serve` gives each
//! client a fresh UCX worker, so nothing UCX keeps for a finished peer accumulates.
//!
//! UCX itself lives on one dedicated thread per process (`ucx_thread`), because the wrapper's
//! objects are single-threaded; the measurement loops (`runtime`) follow ucx_perftest's
//! methodology so that the two tools' numbers can be compared, and report typed errors
//! (`run_error`). How long a case measures is decided by `measure`: the fixed rule, or the
//! adaptive one that stops once the per-round estimate is stable (`RunSettings::stop`). Besides
//! single messages, a case can be KV-shaped: one operation is a list of non-contiguous blocks,
//! issued as that many put/get operations and one flush, as NIXL moves a descriptor list.
//!
//! [`rank::kv_rank`] is one TP rank of `pair --kv-shape`'s per-rank model on this engine: one
//! process owns its rank's KV buffer (registered once) and issues every peer rank's block list
//! as RMA gets (READ) or puts (WRITE) at once, driven by `icb_kv_transfer::ranks` over
//! `icb_core::protocol::kv_rank`; its connection to that coordinator ([`rank::Link`]) serves the
//! NIXL engine's ranks too.
//!
//! The NIXL engine (crate `icb-nixl-engine`) reuses the control channel ([`control`], [`wire`],
//! [`messages`]), the per-process facts ([`local`]) and the owner-thread pattern (`ucx_thread`)
//! rather than forking them.
#![forbid(unsafe_code)]

pub mod admit;
pub mod alloc;
pub mod auth;
mod buffers;
mod client;
mod client_finish;
pub mod control;
mod error;
mod fit;
pub mod local;
mod measure;
mod options;
pub mod preflight;
pub mod rank;
mod report;
pub mod request;
mod run_error;
mod runtime;
pub mod serve_loop;
mod server;
mod session;
mod settings;
pub mod stats;
pub mod ucx_thread;
mod warmup;

pub use client::{TEST_CASE_DELAY_ENV, connect};
pub use error::{Admission, EngineError};
/// The control protocol lives in icb-control (pure protocol, shared with the fuzz targets).
pub use icb_control::{messages, wire};
pub use options::{
    CancellationToken, ConnectOptions, DEFAULT_PORT, Listening, NIXL_UCX_DEFAULTS, OnCase, OnListening,
    PeerFailureMode, ProfileSetting, ServeOptions, UcxOptions, UcxProfile, nixl_ucx_defaults,
};
pub use report::{SessionRecord, SessionStart, SessionState, assemble_report, finish_report};
pub use request::{Profile, RequestError, SettingsRequest};
pub use run_error::RunError;
pub use server::serve;
pub use session::{HELLO_TIMEOUT, check_peer_hello, peer_info, resolve};
pub use settings::validate as validate_settings;
pub use wire::{MAX_FRAME_BYTES, PROTOCOL_VERSION};
