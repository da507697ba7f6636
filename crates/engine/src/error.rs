//! The engine's errors: each says what went wrong and what to do about it, on one line.

use crate::messages::DenyCause;
use crate::run_error::RunError;
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

    /// No usable UCX library: not found, not loadable, too old.
    #[error("UCX setup failed: {0}")]
    UcxNotFound(String),

    /// UCX loaded, but `ucp_init` or its worker failed; `variable` is the setting most likely
    /// to blame when one is set (`UCX_TLS=…`, or a configuration key UCX refused).
    #[error("UCX setup failed: {detail}")]
    UcxInit { detail: String, variable: Option<String> },

    /// What went wrong on the UCX thread (typed: a dead peer, a deadline, UCX's own error, a
    /// corrupted payload), and during what.
    #[error("UCX operation failed during {during}: {source}")]
    Ucx {
        during: String,
        #[source]
        source: RunError,
    },

    #[error("no client connected within {0}: start `ic-bench connect` sooner or raise --idle-timeout")]
    IdleTimeout(String),

    /// The control connection opened but no ic-bench hello came within the connect timeout.
    #[error(
        "{addr} accepted the connection but sent no ic-bench hello within {secs:.0} s: it is not `ic-bench serve` (another server listens on that port?), or an ic-bench serve busy with another client: check the port, or raise --connect-timeout"
    )]
    NoHello { addr: String, secs: f64 },

    /// Stopped by the caller's cancel token (Ctrl-C, SIGTERM) before anything could be reported.
    #[error("interrupted")]
    Interrupted,

    #[error("invalid settings: {0}")]
    Settings(String),

    #[error("internal error: {0} (please report this)")]
    Internal(String),

    /// Admission failed (token, busy, rate): typed, so callers decide on the cause.
    #[error("{0}")]
    Admission(Admission),

    /// The server ended a session that ran past `--max-session`.
    #[error("the session ran past the server's --max-session of {0}: split the run or raise --max-session on serve")]
    SessionLimit(String),

    /// NIXL could not be loaded or set up (NIXL engine); the message says what to do.
    #[error("{0}")]
    Nixl(String),
}

/// Why a session was not admitted, seen from either side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Admission {
    /// Client: the server checks a token and this side has none.
    #[error("the server requires a token; give connect the token serve uses (--token-file FILE or IC_BENCH_TOKEN)")]
    TokenRequired,
    /// Client: the server turned this client away.
    #[error("{}", denied_text(*.0))]
    Denied(DenyCause),
    /// Client: this side has a token, the server none, so it cannot prove it is the right server.
    #[error(
        "the server runs without a token and cannot prove it holds this side's: start serve with the same --token-file (or IC_BENCH_TOKEN), or run connect without one"
    )]
    ServerWithoutToken,
    /// Client: the server's proof does not match this side's token.
    #[error(
        "the server's token proof does not match this side's token, so this is not the serve holding the same token (check the address and --token-file)"
    )]
    BadServerProof,
    /// Server: the client sent no token proof.
    #[error("client sent no token, refused")]
    NoClientToken,
    /// Server: the client's proof does not check.
    #[error("client's token proof is wrong: refused")]
    WrongClientToken,
}

fn denied_text(cause: DenyCause) -> &'static str {
    match cause {
        DenyCause::Unauthorized => {
            "the server refused this client's token; give connect the same token as serve (--token-file FILE or IC_BENCH_TOKEN)"
        }
        DenyCause::Busy => {
            "the server is busy with another client: serve runs one session at a time; retry when it is done"
        }
        DenyCause::RateLimited => "the server refuses connections arriving this fast: wait a second and retry",
    }
}

impl EngineError {
    /// Why this side gave up, as its `failed` protocol line says it: the parent names the cause
    /// (and matches on its kind) without reading stderr.
    pub fn side_failure(&self) -> icb_core::protocol::SideFailure {
        icb_core::protocol::SideFailure::new(self.side_error_kind(), self.to_string())
    }

    /// The typed cause a parent reads from a failed side ([`icb_core::protocol::SideFailure`]).
    pub fn side_error_kind(&self) -> icb_core::protocol::SideErrorKind {
        use icb_core::protocol::SideErrorKind;
        match self {
            EngineError::UcxNotFound(_) => SideErrorKind::UcxNotFound,
            EngineError::UcxInit { variable, .. } => SideErrorKind::UcxInit {
                variable: variable.clone(),
            },
            EngineError::Bind { source, .. } if source.kind() == std::io::ErrorKind::AddrInUse => {
                SideErrorKind::AddressInUse
            }
            EngineError::Admission(Admission::Denied(DenyCause::Busy | DenyCause::RateLimited)) => SideErrorKind::Busy,
            EngineError::Admission(_) => SideErrorKind::Unauthorized,
            _ => SideErrorKind::Other,
        }
    }

    pub(crate) fn ucx(during: impl Into<String>, source: RunError) -> Self {
        EngineError::Ucx {
            during: during.into(),
            source,
        }
    }

    pub(crate) fn control(during: impl Into<String>, source: WireError) -> Self {
        EngineError::Control {
            during: during.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::protocol::SideErrorKind;

    /// Issue 36 item 5: the secret masker masks values, never ic-bench's own prose. Every
    /// admission message (the ones that talk about tokens) and the other messages of this type
    /// that carry no user value pass through it unchanged ("…client's token: *** connect the
    /// same token…" was what operators read).
    #[test]
    fn the_masker_leaves_every_own_error_message_as_it_is() {
        let admissions = [
            Admission::TokenRequired,
            Admission::Denied(DenyCause::Unauthorized),
            Admission::Denied(DenyCause::Busy),
            Admission::Denied(DenyCause::RateLimited),
            Admission::ServerWithoutToken,
            Admission::BadServerProof,
            Admission::NoClientToken,
            Admission::WrongClientToken,
        ];
        let mut messages: Vec<String> = admissions
            .iter()
            .map(|a| EngineError::Admission(*a).to_string())
            .collect();
        messages.push(EngineError::Interrupted.to_string());
        messages.push(EngineError::SessionLimit("10m".into()).to_string());
        for m in messages {
            assert_eq!(icb_core::secrets::mask_text(&m), m, "the masker rewrote our own words");
        }
    }

    #[test]
    fn failures_a_parent_acts_on_are_typed() {
        let in_use = EngineError::Bind {
            addr: "0.0.0.0:45100".into(),
            source: std::io::Error::from(std::io::ErrorKind::AddrInUse),
        };
        assert_eq!(in_use.side_error_kind(), SideErrorKind::AddressInUse);
        let failure = in_use.side_failure();
        assert_eq!(
            (failure.cause, failure.message),
            (SideErrorKind::AddressInUse, in_use.to_string())
        );
        let init = EngineError::UcxInit {
            detail: "UCX ucp_init failed".into(),
            variable: Some("UCX_TLS=bogus".into()),
        };
        assert_eq!(
            init.side_error_kind(),
            SideErrorKind::UcxInit {
                variable: Some("UCX_TLS=bogus".into())
            }
        );
        assert_eq!(
            EngineError::UcxNotFound("no libucp".into()).side_error_kind(),
            SideErrorKind::UcxNotFound
        );
        assert_eq!(EngineError::Interrupted.side_error_kind(), SideErrorKind::Other);
        let wrong = EngineError::Admission(Admission::Denied(DenyCause::Unauthorized));
        assert_eq!(wrong.side_error_kind(), SideErrorKind::Unauthorized);
        assert!(wrong.to_string().contains("--token-file"), "{wrong}");
        let busy = EngineError::Admission(Admission::Denied(DenyCause::Busy));
        assert_eq!(busy.side_error_kind(), SideErrorKind::Busy);
        assert_eq!(
            EngineError::Admission(Admission::TokenRequired).side_error_kind(),
            SideErrorKind::Unauthorized
        );
    }
}
