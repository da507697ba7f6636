//! icb-sides: the two sides of a pair as this binary runs them, on either engine: `serve` (the
//! decode side), `connect` (the prefill side, by hand or under a launcher's `--plan`) and one
//! `--kv-shape` TP rank. Which engine runs is decided here once ([`EngineChoice`]), where the
//! binary used to match on the engine in three commands. The binary keeps the flags, the
//! signal handler and the emit.
#![forbid(unsafe_code)]

pub mod connect;
pub mod serve;

use icb_core::protocol::kv_rank::RankPlan;
use icb_core::{EngineKind, PairReport};
use icb_engine::rank::RankError;
use icb_engine::{ConnectOptions, EngineError, ServeOptions, UcxOptions};
use icb_nixl_engine::{NixlEngineError, NixlOptions};

/// The engine a side runs (`--engine`), with NIXL's options (`--nixl-lib`).
#[derive(Debug, Clone, Default)]
pub struct EngineChoice {
    pub kind: EngineKind,
    pub nixl: NixlOptions,
}

impl EngineChoice {
    /// The prefill side: every case against the server.
    pub fn connect(&self, opts: ConnectOptions) -> Result<PairReport, EngineError> {
        match self.kind {
            EngineKind::Ucx => icb_engine::connect(opts),
            EngineKind::Nixl => {
                icb_nixl_engine::connect(opts, self.nixl.clone()).map_err(NixlEngineError::into_engine_error)
            }
        }
    }

    /// The decode side: serves clients until `opts` says to stop.
    pub fn serve(&self, opts: ServeOptions) -> Result<(), EngineError> {
        match self.kind {
            EngineKind::Ucx => icb_engine::serve(opts),
            EngineKind::Nixl => {
                icb_nixl_engine::serve(opts, self.nixl.clone()).map_err(NixlEngineError::into_engine_error)
            }
        }
    }
}

/// Whether NIXL's library loads on this host (from `library_dir`, `--nixl-lib`, else the
/// loader's search; no agent starts): how a `--kv-shape` run without `--engine` decides its
/// engine when it starts (`icb_kv_transfer::KvEngine`).
pub fn nixl_loads(library_dir: Option<&std::path::Path>) -> bool {
    icb_nixl_engine::probe_load(library_dir).is_ok()
}

/// One `--kv-shape` TP rank on the engine its plan names; `ucx` (the UCX engine's options, with
/// the plan's TCP control variables over the environment's) is used by the UCX engine only.
pub fn kv_rank(plan: &RankPlan, mut ucx: UcxOptions, nixl: &NixlOptions) -> Result<(), RankError> {
    match plan.engine {
        EngineKind::Nixl => icb_nixl_engine::kv_rank(plan, nixl),
        EngineKind::Ucx => {
            // The TCP control's `TLS=tcp` (empty otherwise), over the environment as `connect`'s.
            ucx.config.extend(plan.ucx_config.iter().cloned());
            icb_engine::rank::kv_rank(plan, &ucx)
        }
    }
}

/// UCX as a side is told: `--ucx-lib`, who notices a failed peer (UCX itself with
/// `peer_errors`, as NIXL does; else the control channel) and `--ucx-profile`.
pub fn ucx_options(
    library_dir: Option<std::path::PathBuf>,
    peer_errors: bool,
    profile: icb_engine::UcxProfile,
) -> UcxOptions {
    UcxOptions {
        library_dir,
        peer_failure: if peer_errors {
            icb_engine::PeerFailureMode::UcxPeer
        } else {
            icb_engine::PeerFailureMode::ControlChannel
        },
        ..Default::default()
    }
    .with_profile(profile)
}
