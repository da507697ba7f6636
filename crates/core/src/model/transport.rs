//! Which transport carried a case's bytes, and where that evidence came from.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What UCX says about how the bytes of one case travelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportEvidence {
    /// All lanes of the endpoint (`ucp_ep_query`), including keepalive/backup lanes.
    #[serde(default)]
    pub lanes: Vec<Lane>,
    /// UCX's protocol description for this operation, verbatim (model estimates stripped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The transport that carried the data, classified.
    pub data_path: DataPath,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Lane {
    pub transport: String,
    pub device: String,
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.transport, self.device)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataPath {
    pub class: TransportClass,
    /// e.g. `cma/memory`, `tcp/eth0`, `rc_mlx5/mlx5_0:1`; empty when unknown.
    pub transports: Vec<Lane>,
    /// e.g. `rendezvous zero-copy read`, `eager copy-in`, `software RMA emulation`.
    pub protocol: String,
    /// Where the classification came from.
    pub source: EvidenceSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceSource {
    /// `ucp_request_query` info string on a pending request (per-operation truth).
    RequestInfo,
    /// Endpoint lanes only (older UCX, or the operation completed immediately).
    EndpointLanes,
    /// `UCX_PROTO_INFO` protocol tables of the process (the NIXL engine, whose UCX is NIXL's own).
    ProtoInfo,
    /// Nothing usable was reported.
    None,
}

/// The classes the verdict rules reason about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportClass {
    /// TCP sockets: the silent fallback.
    Tcp,
    /// RMA emulated over active messages (`rma_am`, software emulation): slow.
    RmaEmulated,
    /// sysv / posix / xpmem / knem shared memory.
    SharedMemory,
    /// Cross Memory Attach (process_vm_readv): one-copy, same host, same PID namespace.
    Cma,
    /// InfiniBand / RoCE verbs transports (rc, dc, ud) and EFA's srd.
    Rdma,
    /// CUDA IPC over NVLink / PCIe peer-to-peer.
    CudaIpc,
    /// GPU memory staged through host memory with cuda_copy.
    CudaCopyStaging,
    /// Loopback inside one process.
    SelfLoop,
    Unknown,
}

impl TransportClass {
    pub fn as_str(self) -> &'static str {
        match self {
            TransportClass::Tcp => "tcp",
            TransportClass::RmaEmulated => "rma emulated over active messages",
            TransportClass::SharedMemory => "shared memory",
            TransportClass::Cma => "cma",
            TransportClass::Rdma => "rdma",
            TransportClass::CudaIpc => "cuda_ipc",
            TransportClass::CudaCopyStaging => "cuda_copy staging",
            TransportClass::SelfLoop => "self",
            TransportClass::Unknown => "unknown",
        }
    }
}

impl fmt::Display for TransportClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
