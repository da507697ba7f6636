//! What the NIXL engine is asked to do beyond the UCX engine's options.

use icb_core::Direction;
use std::path::PathBuf;

/// Descriptors per request when the caller gives none: one block, a 64-page and a 1024-page KV
/// transfer.
pub const DEFAULT_BATCHES: [u32; 3] = [1, 64, 1024];

/// NIXL-specific options, next to `icb_engine::ServeOptions` / `ConnectOptions` (whose `ucx`
/// field the NIXL engine ignores: NIXL brings its own UCX).
#[derive(Debug, Clone)]
pub struct NixlOptions {
    /// Directory holding `libnixl_capi.so` (else `IC_BENCH_NIXL_LIB`, NIXL's install locations,
    /// the Python wheel's directory, the dynamic linker).
    pub library_dir: Option<PathBuf>,
    /// Descriptors per request (connect side); each descriptor is one block of a size from
    /// `settings.sizes`.
    pub batches: Vec<u32>,
    /// READ and/or WRITE (connect side).
    pub directions: Vec<Direction>,
    /// UCX backend parameters replacing NIXL's plugin defaults (e.g. `("ucx_devices", "mlx5_0")`).
    pub backend_params: Vec<(String, String)>,
}

impl Default for NixlOptions {
    fn default() -> Self {
        NixlOptions {
            library_dir: None,
            batches: DEFAULT_BATCHES.to_vec(),
            directions: vec![Direction::Read, Direction::Write],
            backend_params: Vec::new(),
        }
    }
}
