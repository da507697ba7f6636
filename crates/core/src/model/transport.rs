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
    /// The side whose view `data_path` names: the side whose own table names how the bytes
    /// moved (for a rendezvous tag message the target, the receiver, where it reads them, and
    /// the initiator where the receiver's `(?)` row had the sender write them, a put scheme;
    /// the initiator for an eager one and for RMA). Absent: not known (older results, lanes-only
    /// evidence, or no side's table named the rendezvous: `other_view` then holds the guess).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_by: Option<ProtocolSide>,
    /// The other side's view, present only when it names another protocol or transport than
    /// `data_path`: e.g. the sender's `(?)` rendezvous row ("zero-copy read") when the receiver
    /// had the data written to it instead. With `chosen_by` absent: the `(?)` row that only
    /// guessed, beside a data path that is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_view: Option<ProtocolView>,
}

impl TransportEvidence {
    /// A note for the case's row when the two sides' views differ: who chose, and what the other
    /// side named (`target chose; initiator named rendezvous zero-copy read, cma/memory`).
    pub fn views_note(&self) -> Option<String> {
        let other = self.other_view.as_ref()?;
        let chooser = self
            .chosen_by
            .map_or("the choosing side is not known".to_string(), |s| format!("{s} chose"));
        let lanes: Vec<String> = other.transports.iter().map(Lane::to_string).collect();
        let named = if lanes.is_empty() {
            other.protocol.clone()
        } else {
            format!("{}, {}", other.protocol, lanes.join(", "))
        };
        Some(format!("{chooser}; {} named {named}", other.side))
    }
}

/// A side of a case, as it takes part in choosing the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolSide {
    /// The side that starts the operations (the tag sender, the RMA initiator).
    Initiator,
    /// The other side (the tag receiver, the RMA target).
    Target,
}

impl ProtocolSide {
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolSide::Initiator => "initiator",
            ProtocolSide::Target => "target",
        }
    }
}

impl fmt::Display for ProtocolSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One side's view of how a case's bytes moved, from its own UCX.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolView {
    pub side: ProtocolSide,
    /// e.g. `rendezvous zero-copy flushed write`, `rendezvous zero-copy read`.
    pub protocol: String,
    #[serde(default)]
    pub transports: Vec<Lane>,
    pub class: TransportClass,
    /// UCX marked the row `(?)`: what it names depends on the peer (the sender's rendezvous row
    /// assumes the receiver reads; the receiver's put row depends on what the sender can write).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub depends_on_peer: bool,
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
