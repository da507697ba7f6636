//! What `serve` and `connect` are asked to do.

use icb_core::verdict::{ExpectationConfig, ExpectationOverrides};
use icb_core::{CaseResult, Expectation, Locality, RunSettings, ToolInfo};
use std::path::PathBuf;
use std::time::Duration;
pub use tokio_util::sync::CancellationToken;

/// Default control port (ucx_perftest's default is 13337; ic-bench picks its own).
pub const DEFAULT_PORT: u16 = 18515;

/// How endpoints react to a dead peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeerFailureMode {
    /// UCX's default error handling: every transport is eligible (shared memory included), as for
    /// ucx_perftest. A dead peer is noticed through the control connection and phase deadlines.
    #[default]
    ControlChannel,
    /// `UCP_ERR_HANDLING_MODE_PEER`: UCX itself fails operations to a dead peer, but then avoids
    /// transports without peer-failure detection (sysv/posix), as NIXL's UCX backend does.
    UcxPeer,
}

/// Where UCX comes from and how its context is configured (both sides).
#[derive(Debug, Clone, Default)]
pub struct UcxOptions {
    /// Directory holding `libucp.so.0` (else `IC_BENCH_UCX_LIB`, well-known places, the linker).
    pub library_dir: Option<PathBuf>,
    /// Per-context settings, e.g. `("TLS", "tcp")`; `UCX_*` environment variables apply too.
    pub config: Vec<(String, String)>,
    pub peer_failure: PeerFailureMode,
}

/// Called once the server is bound, with the actual address (port 0 resolved) and UCX version.
pub type OnListening = Box<dyn FnOnce(&Listening) + Send>;

/// What `serve` tells its caller once it listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listening {
    pub address: std::net::SocketAddr,
    pub ucx_version: String,
}

pub struct ServeOptions {
    /// `ADDR:PORT`; port 0 picks a free port.
    pub listen: String,
    /// Serve one client, then return.
    pub once: bool,
    /// Give up when no client connects within this long (`None`: wait forever).
    pub idle_timeout: Option<Duration>,
    pub ucx: UcxOptions,
    pub tool: ToolInfo,
    pub on_listening: Option<OnListening>,
    /// Cancelled (Ctrl-C, SIGTERM): stop accepting, drop the current client, release UCX and
    /// return [`crate::EngineError::Interrupted`]. `None`: run until `once`/idle/error.
    pub cancel: Option<CancellationToken>,
}

/// Called after each case, for progress output.
pub type OnCase = Box<dyn FnMut(&CaseResult) + Send>;

pub struct ConnectOptions {
    /// `HOST:PORT` of `ic-bench serve`.
    pub server: String,
    pub settings: RunSettings,
    pub connect_timeout: Duration,
    /// Forces the locality instead of deriving it from the kernel boot ids.
    pub locality: Option<Locality>,
    /// Expectation overrides from flags, and an expectations file with its path.
    pub expect_flags: ExpectationOverrides,
    pub expect_config: Option<(ExpectationConfig, String)>,
    /// An expectation already resolved by whoever planned the run (`connect --plan`): used as
    /// it is, and its locality wins over `locality` and the boot ids.
    pub expectation: Option<Expectation>,
    pub ucx: UcxOptions,
    pub tool: ToolInfo,
    /// `placement.mode` in the report (`manual` for a bare `connect`).
    pub placement_mode: String,
    pub on_case: Option<OnCase>,
    /// Cancelled (Ctrl-C, SIGTERM): stop after the case in progress is abandoned and return the
    /// report of the cases measured so far, marked `partial`; before the server's hello it is
    /// [`crate::EngineError::Interrupted`]. `None`: run every case.
    pub cancel: Option<CancellationToken>,
}
