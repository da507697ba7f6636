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
