//! Pieces both NIXL sides share: the hello, its checks, address resolution, CUDA facts.

use crate::runtime::LocalNixl;
use icb_core::{CudaInfo, ToolInfo};
use icb_engine::EngineError;
use icb_engine::messages::{Hello, HexBytes, Role};
use std::time::Duration;

/// The peer must answer the hello within this long.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(15);
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
    }
}

pub fn check_peer_hello(peer: &Hello, expected: Role) -> Result<(), EngineError> {
    if peer.role != expected {
        let what = match expected {
            Role::Server => "connected to another ic-bench client, not a server: point connect at `ic-bench serve`",
            Role::Client => "a server connected to this server: only `ic-bench connect` may connect here",
        };
        return Err(EngineError::Settings(what.into()));
    }
    if peer.engine.as_deref() != Some(ENGINE) {
        let engine = peer.engine.as_deref().unwrap_or("ucx");
        return Err(EngineError::Settings(format!(
            "the peer runs the {engine} engine and this side the nixl engine: use --engine nixl on both sides"
        )));
    }
    Ok(())
}

pub use icb_engine::resolve;

/// CUDA availability as the report states it.
pub fn cuda_info() -> CudaInfo {
    match icb_memory::cuda_status() {
        icb_memory::CudaStatus::Available {
            devices,
            driver_version,
        } => CudaInfo {
            available: true,
            detail: format!("CUDA driver {driver_version}"),
            devices: u32::try_from(devices).unwrap_or(u32::MAX),
        },
        icb_memory::CudaStatus::Unavailable { reason } => CudaInfo {
            available: false,
            detail: reason,
            devices: 0,
        },
    }
}

/// `no CUDA driver on the prefill side`, or the driver's own reason.
pub fn no_cuda_reason(side: &str, cuda: &CudaInfo) -> String {
    if cuda.detail.is_empty() || cuda.detail == "no CUDA driver" {
        format!("no CUDA driver on the {side} side")
    } else {
        format!("CUDA unavailable on the {side} side: {}", cuda.detail)
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
