//! The NIXL engine's errors: the control channel's (shared with the UCX engine) or NIXL's.

use icb_engine::EngineError;

#[derive(Debug, thiserror::Error)]
pub enum NixlEngineError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Nixl(#[from] nixl::NixlError),
}

impl NixlEngineError {
    /// The exit code a front end returns for it: every engine error is a setup/usage failure (2),
    /// as for the UCX engine; verdict failures are not errors.
    pub fn exit_code(&self) -> i32 {
        icb_core::exit::USAGE_OR_SETUP
    }

    /// As the UCX engine's error, so a front end handles both engines alike (an interruption stays
    /// `Interrupted`; NIXL's own failures become `EngineError::Nixl` with the same one line).
    pub fn into_engine_error(self) -> EngineError {
        match self {
            NixlEngineError::Engine(e) => e,
            other => EngineError::Nixl(other.to_string()),
        }
    }
}

/// What one case's NIXL work on the owner thread ([`crate::runtime::NixlRuntime`]) failed on: the
/// session's front end reports it as the case's failure or as a NIXL operation that failed
/// during a step, by kind.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Nixl(#[from] nixl::NixlError),
    /// The case's buffer could not be allocated or filled.
    #[error("{0}")]
    Memory(#[from] icb_memory::MemoryError),
    /// A case this engine does not run (`why` says which and what to use instead).
    #[error("{0}")]
    Unsupported(&'static str),
    /// A case whose sizes do not fit (this platform, or the engine's bounds).
    #[error("{0}")]
    TooLarge(String),
    #[error("the peer's agent changed from {was} to {now} mid-session")]
    PeerChanged { was: String, now: String },
    /// The phase's deadline passed (`what` waited for it).
    #[error("{0}")]
    Deadline(&'static str),
    #[error("stopped: the peer ended the phase")]
    Stopped,
    /// The destination's payload is not what the source sent (`kv`: a KV case's blocks).
    #[error("{} not delivered intact: {source}", if *.kv { "KV blocks" } else { "payload" })]
    NotIntact { kv: bool, source: icb_memory::MemoryError },
    #[error("internal: no prepared request")]
    NoRequest,
}
