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
    /// Extra defaults applied under `config` and the environment (`--ucx-profile`).
    pub profile: UcxProfile,
    /// CUDA device ordinal this side allocates its CUDA buffers on. The default, 0, is the first
    /// *visible* GPU: CUDA numbers the devices in `CUDA_VISIBLE_DEVICES` from 0 in the order
    /// listed, so a pod or process given one GPU (`CUDA_VISIBLE_DEVICES=3`, or a device plugin's
    /// single allocation) sees it as ordinal 0. Set it on a multi-GPU host to test another GPU.
    pub cuda_device: usize,
}

impl UcxOptions {
    /// Selects a profile; `nixl` also turns on UCX peer-failure handling, as NIXL does.
    pub fn with_profile(mut self, profile: UcxProfile) -> Self {
        self.profile = profile;
        if profile == UcxProfile::Nixl {
            self.peer_failure = PeerFailureMode::UcxPeer;
        }
        self
    }
}

/// `--ucx-profile`: defined with the report, which records it.
pub use icb_core::UcxProfile;

/// One UCX setting of a profile and the first UCX release NIXL applies it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileSetting {
    /// The UCX configuration name without the `UCX_` prefix.
    pub key: &'static str,
    pub value: &'static str,
    /// `(major, minor)`: NIXL sets it only when the loaded UCX is at least this.
    pub since: (u32, u32),
}

/// NIXL's UCX defaults, as NIXL 1.5.1's UCX plugin (wheel `nixl-cu12==1.5.1`, bundled UCX 1.23.0)
/// applies them with `ucp_config_modify` before `ucp_init`, each only when the user did not set
/// it (observed by intercepting `ucp_config_modify` on this machine; version gates from NIXL's
/// `src/plugins/ucx/ucx_utils.cpp`). NIXL ignores a setting the loaded UCX rejects (e.g. an `IB_*`
/// key on a UCX without verbs), and so does the profile. Not included: `NET_DEVICES` (only when
/// the NIXL user passes devices), `ADDRESS_VERSION=v2` and `MAX_COMPONENT_MDS=32` (only on hosts
/// with EFA devices) and `RC_GDA_NUM_CHANNELS` (device API channels, not a host data path).
pub const NIXL_UCX_DEFAULTS: &[ProfileSetting] = &[
    ProfileSetting {
        key: "RNDV_THRESH",
        value: "inf",
        since: (1, 0),
    },
    ProfileSetting {
        key: "MAX_RMA_RAILS",
        value: "2",
        since: (1, 0),
    },
    ProfileSetting {
        key: "IB_PCI_RELAXED_ORDERING",
        value: "try",
        since: (1, 0),
    },
    ProfileSetting {
        key: "RC_FENCE",
        value: "none",
        since: (1, 0),
    },
    ProfileSetting {
        key: "RNDV_PIPELINE_ERROR_HANDLING",
        value: "y",
        since: (1, 0),
    },
    ProfileSetting {
        key: "IB_AH_CACHE_TTL",
        value: "0",
        since: (1, 0),
    },
    ProfileSetting {
        key: "MAX_HCA_PER_GPU",
        value: "auto",
        since: (1, 21),
    },
];

/// The profile's settings for a loaded UCX `major.minor`, minus any the user set in `config` or
/// through a `UCX_<KEY>` environment variable (NIXL too leaves user settings alone).
pub fn nixl_ucx_defaults(
    version: (u32, u32),
    config: &[(String, String)],
    env_has: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    NIXL_UCX_DEFAULTS
        .iter()
        .filter(|s| version >= s.since)
        .filter(|s| !config.iter().any(|(k, _)| k.eq_ignore_ascii_case(s.key)))
        .filter(|s| !env_has(&format!("UCX_{}", s.key)))
        .map(|s| (s.key.to_string(), s.value.to_string()))
        .collect()
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
    /// Whom it admits and what one client may ask (`crate::admit`).
    pub guard: crate::admit::ServeGuard,
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
    /// The token shared with the server (`--token-file`, `IC_BENCH_TOKEN`); `None`: none.
    pub token: Option<crate::auth::Token>,
}

impl ConnectOptions {
    /// The expectation to judge by: a planned one as it is; else resolved for the forced
    /// locality, or for what the kernels' boot ids say (`same_boot`: both sides see one boot id).
    pub fn expectation_for(&self, same_boot: bool) -> Result<Expectation, icb_core::ParseError> {
        if let Some(planned) = &self.expectation {
            return Ok(planned.clone());
        }
        let locality = self.locality.unwrap_or(Locality::of_same_host(same_boot));
        Expectation::resolve(
            locality,
            self.expect_config.as_ref().map(|(c, p)| (c, p.as_str())),
            &self.expect_flags,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nixl_profile_sets_peer_errors_and_versioned_defaults() {
        let o = UcxOptions::default().with_profile(UcxProfile::Nixl);
        assert_eq!(o.peer_failure, PeerFailureMode::UcxPeer);
        let old = nixl_ucx_defaults((1, 20), &[], |_| false);
        assert!(old.contains(&("RNDV_THRESH".into(), "inf".into())));
        assert!(old.contains(&("RC_FENCE".into(), "none".into())));
        assert!(!old.iter().any(|(k, _)| k == "MAX_HCA_PER_GPU"));
        let new = nixl_ucx_defaults((1, 23), &[], |_| false);
        assert!(new.iter().any(|(k, v)| k == "MAX_HCA_PER_GPU" && v == "auto"));
    }

    #[test]
    fn user_settings_win_over_the_profile() {
        let cfg = vec![("rndv_thresh".to_string(), "8k".to_string())];
        let d = nixl_ucx_defaults((1, 22), &cfg, |v| v == "UCX_MAX_RMA_RAILS");
        assert!(
            !d.iter().any(|(k, _)| k == "RNDV_THRESH" || k == "MAX_RMA_RAILS"),
            "{d:?}"
        );
        assert!(d.iter().any(|(k, _)| k == "IB_PCI_RELAXED_ORDERING"));
        assert_eq!("nixl".parse::<UcxProfile>(), Ok(UcxProfile::Nixl));
        assert!("fast".parse::<UcxProfile>().unwrap_err().contains("default or nixl"));
    }
}
