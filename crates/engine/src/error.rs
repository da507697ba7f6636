//! The engine's errors: each says what went wrong and what to do about it, on one line.

use crate::wire::WireError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot listen on {addr}: {source}: pick another --listen address or port")]
    Bind { addr: String, source: std::io::Error },

    #[error(
        "cannot reach ic-bench serve at {addr}: {detail}: start `ic-bench serve` there and check the address, port and firewall"
    )]
    Connect { addr: String, detail: String },

    #[error("{addr} is not a usable address ({detail}): give HOST:PORT, e.g. 10.0.0.5:18515")]
    Address { addr: String, detail: String },

    /// The control channel broke or the peer misbehaved; `during` says what was going on.
    #[error("{source} during {during}")]
    Control { during: String, source: WireError },

    #[error("the peer sent nothing for {secs:.0} s during {during}: it is stuck or the network dropped the connection")]
    Timeout { during: String, secs: f64 },

    #[error("the peer sent '{got}' during {during}, expected {expected}: use the same ic-bench version on both sides")]
    Unexpected {
        during: String,
        got: &'static str,
        expected: &'static str,
    },

    #[error("the peer reported an error: {0}")]
    Peer(String),

    #[error("UCX setup failed: {0}")]
    UcxSetup(String),

    #[error("UCX operation failed during {during}: {detail}")]
    Ucx { during: String, detail: String },

    #[error("no client connected within {0}: start `ic-bench connect` sooner or raise --idle-timeout")]
    IdleTimeout(String),

    #[error("invalid settings: {0}")]
    Settings(String),

    #[error("internal error: {0} (please report this)")]
    Internal(String),

    /// NIXL could not be loaded or set up (NIXL engine); the message says what to do.
    #[error("{0}")]
    Nixl(String),
}

impl EngineError {
    pub(crate) fn control(during: impl Into<String>, source: WireError) -> Self {
        EngineError::Control {
            during: during.into(),
            source,
        }
    }
}
