//! Pieces both sides of a session share: the hello, its checks, and how steps are named in errors.

use crate::error::EngineError;
use crate::local;
use crate::messages::{CaseSetup, Hello, HexBytes, PhaseKind, Role};
use crate::runtime::{LocalUcx, PhaseCtl};
use icb_core::units::format_size;
use icb_core::{CudaInfo, PeerInfo, ToolInfo};
use std::net::SocketAddr;
use std::time::Duration;

/// The peer must answer the hello within this long (a busy server keeps later clients waiting in
/// its accept queue; this is what they see).
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(15);

/// Aborts a phase when the future driving it is dropped (a cancelled run), so the UCX thread
/// stops at its next check instead of running on until the phase deadline.
pub struct AbortOnDrop(pub PhaseCtl);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `put_bw 4 MiB host→cuda`: how a case is named in errors and logs.
pub fn case_label(s: &CaseSetup) -> String {
    if s.blocks > 1 {
        format!("{} {}×{} {}", s.test, s.blocks, format_size(s.size), s.memory)
    } else {
        format!("{} {} {}", s.test, format_size(s.size), s.memory)
    }
}

pub fn phase_during(s: &CaseSetup, kind: PhaseKind) -> String {
    match kind {
        PhaseKind::Wireup => "UCX wireup".to_string(),
        PhaseKind::Warmup => format!("{} (warmup)", case_label(s)),
        PhaseKind::Measure => case_label(s),
    }
}

pub fn local_hello(role: Role, ucx: &LocalUcx, cuda: &CudaInfo, tool: &ToolInfo, peer_errors: bool) -> Hello {
    Hello {
        role,
        tool_version: tool.version.clone(),
        hostname: local::hostname(),
        boot_id: local::boot_id(),
        ucx_version: ucx.version.clone(),
        ucx_library: ucx.library.clone(),
        cuda: cuda.clone(),
        env: local::transport_env(),
        worker_address: HexBytes(ucx.address.clone()),
        peer_errors,
        engine: None,
        nixl: None,
        line_rate_bps: local::line_rate_bps(),
        readiness: Some(local::readiness()),
        auth: None,
    }
}

/// Checks the peer's hello: the same engine as this side (`engine`: `None` for the UCX engine,
/// whose hellos carry none) and the other role.
pub fn check_peer_hello(peer: &Hello, expected: Role, engine: Option<&str>) -> Result<(), EngineError> {
    if peer.engine.as_deref() != engine {
        return Err(EngineError::Settings(format!(
            "the peer runs the {} engine and this side the {} engine: use the same --engine on both sides",
            peer.engine.as_deref().unwrap_or("ucx"),
            engine.unwrap_or("ucx"),
        )));
    }
    if peer.role != expected {
        let what = match expected {
            Role::Server => "connected to another ic-bench client, not a server: point connect at `ic-bench serve`",
            Role::Client => "a server connected to this server: only `ic-bench connect` may connect here",
        };
        return Err(EngineError::Settings(what.into()));
    }
    Ok(())
}

/// UCX aborts the whole process (an assertion, not an error) on a worker address whose header
/// names a packing version it does not know (UCX 1.22: `address.c: Assertion
/// '*addr_version == UCP_OBJECT_VERSION_V2' failed`), so a peer's address is checked for one of
/// the two versions UCX packs (v1 = 0, v2 = 1, in the low nibble of its first byte) before UCX
/// sees it. Deeper garbage UCX itself refuses with an error.
pub fn check_worker_address(address: &[u8]) -> Result<(), EngineError> {
    match address.first() {
        Some(b) if b & 0x0f <= 1 && address.len() >= 9 => Ok(()),
        _ => Err(EngineError::Settings(
            "the peer's UCX worker address is not one UCX can read: the peer is not ic-bench, or broken".into(),
        )),
    }
}

pub fn peer_info(h: &Hello) -> PeerInfo {
    PeerInfo {
        hostname: h.hostname.clone(),
        ucx_version: h.ucx_version.clone(),
        ucx_library: h.ucx_library.clone(),
        cuda: h.cuda.clone(),
        env: h.env.clone(),
        // Set by the NIXL engine's hello; the UCX engine's has none.
        nixl: h.nixl.clone(),
    }
}

/// Resolves `HOST:PORT` (names allowed) to the first address.
pub async fn resolve(addr: &str) -> Result<SocketAddr, EngineError> {
    let bad = |detail: String| EngineError::Address {
        addr: addr.to_string(),
        detail,
    };
    if !addr.contains(':') {
        return Err(bad("no port".into()));
    }
    let mut it = tokio::time::timeout(Duration::from_secs(10), tokio::net::lookup_host(addr))
        .await
        .map_err(|_| bad("name lookup timed out".into()))?
        .map_err(|e| bad(e.to_string()))?;
    it.next().ok_or_else(|| bad("the name resolves to no address".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(role: Role, engine: Option<&str>) -> Hello {
        Hello {
            role,
            tool_version: "0.1.0".into(),
            hostname: "h".into(),
            boot_id: String::new(),
            ucx_version: "1.22.0".into(),
            ucx_library: String::new(),
            cuda: CudaInfo::default(),
            env: Default::default(),
            worker_address: HexBytes(vec![1]),
            peer_errors: false,
            engine: engine.map(Into::into),
            nixl: None,
            line_rate_bps: None,
            readiness: None,
            auth: None,
        }
    }

    #[test]
    fn a_peer_must_run_the_same_engine_in_the_other_role() {
        check_peer_hello(&hello(Role::Client, None), Role::Client, None).unwrap();
        check_peer_hello(&hello(Role::Server, Some("nixl")), Role::Server, Some("nixl")).unwrap();
        let ucx_meets_nixl = check_peer_hello(&hello(Role::Client, Some("nixl")), Role::Client, None).unwrap_err();
        assert_eq!(
            ucx_meets_nixl.to_string(),
            "invalid settings: the peer runs the nixl engine and this side the ucx engine: use the same --engine on both sides"
        );
        let nixl_meets_ucx = check_peer_hello(&hello(Role::Server, None), Role::Server, Some("nixl")).unwrap_err();
        assert!(
            nixl_meets_ucx
                .to_string()
                .contains("the peer runs the ucx engine and this side the nixl engine")
        );
        let two_clients = check_peer_hello(&hello(Role::Client, None), Role::Server, None).unwrap_err();
        assert!(
            two_clients.to_string().contains("point connect at `ic-bench serve`"),
            "{two_clients}"
        );
    }
}
