//! Pieces both NIXL sides share: the hello a NIXL side sends (the exchange, its checks and
//! the rest come from `icb_engine`, as the UCX engine uses them).

use crate::runtime::LocalNixl;
use icb_core::{CudaInfo, ToolInfo};
use icb_engine::messages::{Hello, HexBytes, Role};

// Shared with the UCX engine: the hello's deadline and checks, addresses, CUDA facts.
pub use icb_engine::local::{cuda_info, no_cuda_reason};
pub use icb_engine::{HELLO_TIMEOUT, resolve};

/// The `engine` a NIXL-engine hello carries.
pub const ENGINE: &str = "nixl";

pub fn local_hello(role: Role, local: &LocalNixl, cuda: &CudaInfo, tool: &ToolInfo) -> Hello {
    Hello {
        role,
        tool_version: tool.version.clone(),
        hostname: icb_engine::local::hostname(),
        boot_id: icb_engine::local::boot_id(),
        ucx_version: local.ucx_version.clone(),
        ucx_library: local.ucx_library.clone(),
        cuda: cuda.clone(),
        env: icb_engine::local::transport_env(),
        worker_address: HexBytes(local.metadata.clone()),
        // NIXL's UCX backend always asks for peer-failure handling.
        peer_errors: true,
        engine: Some(ENGINE.into()),
        nixl: Some(local.info.clone()),
        line_rate_bps: icb_engine::local::line_rate_bps(),
        readiness: Some(icb_engine::local::readiness()),
        auth: None,
    }
}

/// `read 64 KiB ×64 host→host`: how a case is named in errors.
pub fn case_label(dir: icb_core::Direction, s: &icb_engine::messages::CaseSetup) -> String {
    format!(
        "NIXL {dir} {} ×{} {}",
        icb_core::units::format_size(s.size),
        s.window,
        s.memory
    )
}
