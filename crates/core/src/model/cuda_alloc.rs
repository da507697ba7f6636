//! How a case's GPU memory was allocated, and whether a peer can map it with legacy CUDA IPC.
//!
//! A serving engine's KV cache is not always `cuMemAlloc` memory: PyTorch's
//! `expandable_segments:True` allocates with the virtual memory API (`cuMemCreate`), whose memory
//! `cuIpcGetMemHandle` cannot export. UCX's cuda_ipc then has to map it another way (POSIX file
//! descriptors through `pidfd_getfd`, in UCX releases that support VMM IPC) or falls back to a
//! much slower transport. The mode is reported per case so that such a fallback is named.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How GPU buffers are allocated (`--cuda-alloc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CudaAllocMode {
    /// `cuMemAlloc`: what `cudaMalloc` and PyTorch's default caching allocator use.
    #[default]
    Legacy,
    /// `cuMemCreate` with POSIX file-descriptor handles, reserved and mapped as PyTorch's
    /// expandable segments do.
    Vmm,
    /// Stream-ordered: `cuMemAllocFromPoolAsync` from a pool of its own.
    Pool,
    /// `cuMemCreate` with fabric handles (multi-node NVLink), where the device supports them.
    Fabric,
}

impl CudaAllocMode {
    pub const ALL: [CudaAllocMode; 4] = [
        CudaAllocMode::Legacy,
        CudaAllocMode::Vmm,
        CudaAllocMode::Pool,
        CudaAllocMode::Fabric,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CudaAllocMode::Legacy => "legacy",
            CudaAllocMode::Vmm => "vmm",
            CudaAllocMode::Pool => "pool",
            CudaAllocMode::Fabric => "fabric",
        }
    }

    pub fn is_legacy(&self) -> bool {
        *self == CudaAllocMode::Legacy
    }
}

impl fmt::Display for CudaAllocMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CudaAllocMode {
    type Err = crate::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CudaAllocMode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            crate::ParseError::new(format!(
                "unknown CUDA allocation mode '{s}': use legacy, vmm, pool or fabric"
            ))
        })
    }
}

/// The PyTorch allocator settings that decide how a serving engine's KV cache is allocated:
/// `PYTORCH_ALLOC_CONF` (the newer name, read first) else `PYTORCH_CUDA_ALLOC_CONF`.
pub const PYTORCH_ALLOC_CONF_VARS: [&str; 2] = ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"];

/// The memory PyTorch's CUDA caching allocator hands out under one allocator setting, a
/// comma-separated `key:value` list: `backend:cudaMallocAsync` takes from a stream-ordered pool
/// (`pool`), `expandable_segments:True` maps `cuMemCreate` memory (`vmm`), anything else is
/// `cudaMalloc` (`legacy`). A repeated key's last value wins, as PyTorch parses it.
pub fn pytorch_alloc_mode(conf: &str) -> CudaAllocMode {
    let mut expandable = false;
    let mut async_backend = false;
    for (key, value) in conf.split(',').filter_map(|item| item.split_once(':')) {
        let value = value.trim();
        match key.trim() {
            "expandable_segments" => expandable = value.eq_ignore_ascii_case("true"),
            "backend" => async_backend = value == "cudaMallocAsync",
            _ => {}
        }
    }
    if async_backend {
        CudaAllocMode::Pool
    } else if expandable {
        CudaAllocMode::Vmm
    } else {
        CudaAllocMode::Legacy
    }
}

/// Whether memory can be exported with `cuIpcGetMemHandle`
/// (`CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LegacyIpc {
    Yes,
    No,
    /// The driver did not say (an older driver, or the query failed): never read as yes.
    NotKnown,
}

impl LegacyIpc {
    /// The capability of a case whose CUDA buffers each have one: no if any is no, yes only if
    /// all are yes, not known otherwise (and for no buffer at all).
    pub fn combine(sides: impl IntoIterator<Item = LegacyIpc>) -> LegacyIpc {
        let mut out = None;
        for side in sides {
            out = Some(match (out, side) {
                (_, LegacyIpc::No) | (Some(LegacyIpc::No), _) => LegacyIpc::No,
                (Some(LegacyIpc::NotKnown), _) | (_, LegacyIpc::NotKnown) => LegacyIpc::NotKnown,
                _ => LegacyIpc::Yes,
            });
        }
        out.unwrap_or(LegacyIpc::NotKnown)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LegacyIpc::Yes => "yes",
            LegacyIpc::No => "no",
            LegacyIpc::NotKnown => "not_known",
        }
    }
}

impl fmt::Display for LegacyIpc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A CUDA case's allocation: the mode both sides used and whether the case's GPU memory can be
/// mapped by a peer with legacy CUDA IPC (combined over its CUDA buffers, [`LegacyIpc::combine`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CudaAllocation {
    pub mode: CudaAllocMode,
    pub legacy_ipc: LegacyIpc,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_serialise_lowercase() {
        for m in CudaAllocMode::ALL {
            assert_eq!(m.as_str().parse::<CudaAllocMode>().unwrap(), m);
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{}\"", m.as_str()));
        }
        let err = "expandable".parse::<CudaAllocMode>().unwrap_err().to_string();
        assert!(err.contains("legacy, vmm, pool or fabric"), "{err}");
        assert_eq!(CudaAllocMode::default(), CudaAllocMode::Legacy);
    }

    #[test]
    fn pytorch_settings_name_their_memory() {
        assert_eq!(pytorch_alloc_mode("expandable_segments:True"), CudaAllocMode::Vmm);
        assert_eq!(
            pytorch_alloc_mode("max_split_size_mb:512, expandable_segments:True"),
            CudaAllocMode::Vmm
        );
        assert_eq!(
            pytorch_alloc_mode("expandable_segments:True,expandable_segments:False"),
            CudaAllocMode::Legacy
        );
        assert_eq!(pytorch_alloc_mode("backend:cudaMallocAsync"), CudaAllocMode::Pool);
        assert_eq!(
            pytorch_alloc_mode("garbage_collection_threshold:0.6"),
            CudaAllocMode::Legacy
        );
        assert_eq!(pytorch_alloc_mode(""), CudaAllocMode::Legacy);
    }

    #[test]
    fn capability_combines_no_over_not_known_over_yes() {
        use LegacyIpc::*;
        assert_eq!(LegacyIpc::combine([Yes, Yes]), Yes);
        assert_eq!(LegacyIpc::combine([Yes, No]), No);
        assert_eq!(LegacyIpc::combine([NotKnown, No]), No);
        assert_eq!(LegacyIpc::combine([Yes, NotKnown]), NotKnown);
        assert_eq!(LegacyIpc::combine([]), NotKnown);
        assert_eq!(serde_json::to_string(&NotKnown).unwrap(), "\"not_known\"");
    }
}
