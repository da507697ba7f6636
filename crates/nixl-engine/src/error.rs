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
}
