//! Which transport carried the data, from what UCX reports.
//!
//! Two kinds of evidence exist (see `platform.md`, "Telling which transport carried the data"):
//!
//! * the per-operation protocol info string of a still-pending request (`ucp_request_query`), the
//!   per-operation truth. UCX 1.22 writes e.g.
//!   `{proto|cb|init} tag_send from host memory length 67108864 rendezvous zero-copy read from
//!   remote cma/memory 11254.9 MB/s 5686.43 us`; UCX 1.13 writes `… lane[0]: 2:sysv/memory.0 …` or
//!   `<no debug info>`. The MB/s and µs figures at the end are UCX's *model estimates*, never
//!   measurements, so they are stripped before anything is stored or shown;
//! * the endpoint's lanes (`ucp_ep_query`), which include keepalive, wireup and backup lanes. In the
//!   shared-IPC case UCX lists a `tcp` lane while every byte goes over `sysv`, so a tcp lane is
//!   only reported as the data path when no faster lane exists.
//!
//! A third kind, `UCX_PROTO_INFO`'s protocol selection tables in a UCX log (what the NIXL engine
//! reads), is parsed by [`proto_tables`] and attributed to a case by [`rma_evidence`].
//!
//! Everything here is pure string work: no UCX, no I/O, and no input can make it panic.

use crate::model::{DataPath, EvidenceSource, Lane, MemoryPair, TestKind, TransportClass, TransportEvidence};
use crate::units::format_size;

pub mod proto_tables;
pub mod rma_evidence;
mod side;
pub use side::{TagViews, classify_case, classify_tag};

/// Maps a UCX transport (UCT component) name to the class the verdict rules reason about
/// (the names live in the fabric vocabulary, shared with the recipe and probe rules).
pub use crate::fabric::transport_class as class_of_transport;

/// Verdict-relevant ordering: the lower the number, the more a class explains a slow run. Used to
/// pick one class for a data path that names several transports, and to order a report's classes.
pub fn severity_rank(class: TransportClass) -> u8 {
    match class {
        TransportClass::Tcp => 0,
        TransportClass::RmaEmulated => 1,
        TransportClass::CudaCopyStaging => 2,
        TransportClass::Unknown => 3,
        TransportClass::SelfLoop => 4,
        TransportClass::Rdma => 5,
        TransportClass::SharedMemory => 6,
        TransportClass::Cma => 7,
        TransportClass::CudaIpc => 8,
    }
}

/// A parsed protocol info string (either UCX format, or a `UCX_PROTO_INFO=y` table row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolInfo {
    /// `tag_send`, `put`, `get`, … (1.22 format only).
    pub operation: Option<String>,
    /// Memory type of the local buffer as UCX saw it (`host`, `cuda`, …).
    pub memory: Option<String>,
    /// Message length UCX selected the protocol for.
    pub length: Option<u64>,
    /// Protocol words with estimates and "from/to remote" removed, e.g. `rendezvous zero-copy read`.
    pub protocol: String,
    /// Transports named as carrying the data, in order, deduplicated.
    pub transports: Vec<Lane>,
    /// UCX said RMA is emulated over active messages (`software emulation`, `rma_am`).
    pub emulated: bool,
}

impl ProtocolInfo {
    /// A rendezvous protocol: the receiver, not the sender, chooses how its bytes move.
    pub fn is_rendezvous(&self) -> bool {
        self.protocol
            .split_whitespace()
            .any(|w| w == "rendezvous" || w == "rndv")
    }
}

const ESTIMATE_UNITS: [&str; 9] = ["MB/s", "GB/s", "KB/s", "MiB/s", "GB/sec", "us", "µs", "ms", "ns"];

fn is_number(tok: &str) -> bool {
    let t = tok.trim_end_matches('%');
    !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') && t.chars().any(|c| c.is_ascii_digit())
}

/// Returns the info string with UCX's flag block (`{proto|cb|init}`) and its model estimates
/// (`11254.9 MB/s 5686.43 us`) removed and whitespace collapsed: what is stored as
/// [`TransportEvidence::protocol`]. Estimates are dropped because readers mistake them for
/// measurements.
pub fn strip_estimates(info: &str) -> String {
    let mut text = info.trim();
    if text.starts_with('{')
        && let Some(end) = text.find('}')
    {
        text = &text[end + 1..];
    }
    let mut out: Vec<&str> = Vec::new();
    for tok in text.split_whitespace() {
        // "<number> <unit>": drop both (a stack, so "1 2 us us" loses all four).
        if ESTIMATE_UNITS.contains(&tok) && out.last().is_some_and(|n| is_number(n) && !n.ends_with('%')) {
            out.pop();
            continue;
        }
        // A number glued to its unit ("11254.9MB/s").
        if ESTIMATE_UNITS
            .iter()
            .any(|u| tok.len() > u.len() && tok.ends_with(u) && is_number(&tok[..tok.len() - u.len()]))
        {
            continue;
        }
        out.push(tok);
    }
    out.join(" ")
}

/// Splits `name/device` into a lane when `name` looks like a UCX transport. Accepts the 1.13 form
/// `2:sysv/memory.0` (resource index prefix, path index suffix).
fn lane_token(tok: &str) -> Option<Lane> {
    let tok = tok.trim_matches(|c: char| matches!(c, ',' | ';' | '(' | ')' | '[' | ']' | '|' | '"' | '\''));
    let (name, device) = tok.split_once('/')?;
    let (name, old_format) = match name.split_once(':') {
        Some((idx, rest)) if !idx.is_empty() && idx.chars().all(|c| c.is_ascii_digit()) => (rest, true),
        _ => (name, false),
    };
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.starts_with(|c: char| c.is_ascii_lowercase());
    let mut device = device;
    if old_format
        && let Some((dev, path_idx)) = device.rsplit_once('.')
        && !path_idx.is_empty()
        && path_idx.chars().all(|c| c.is_ascii_digit())
    {
        device = dev;
    }
    let device_ok = !device.is_empty()
        && !device.contains('/')
        && device
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.'));
    // "MB/s" and friends never get here (upper case), and an unknown lower-case name is still
    // a transport UCX named: keep it, classified Unknown, rather than hide it.
    (name_ok && device_ok).then(|| Lane {
        transport: name.to_string(),
        device: device.to_string(),
    })
}

/// Tokenises on whitespace and on the punctuation UCX uses around lanes (`rma_am(tcp/lo)`, `a,b`).
fn tokens(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | '|' | ';'))
        .filter(|t| !t.is_empty())
        .collect()
}

/// Parses one protocol info string. Returns `None` when UCX said nothing usable (empty,
/// `<no debug info>`, or no transport named at all).
pub fn parse_protocol_info(info: &str) -> Option<ProtocolInfo> {
    let cleaned = strip_estimates(info);
    if cleaned.is_empty() || cleaned.contains("<no debug info>") {
        return None;
    }
    let lower = cleaned.to_ascii_lowercase();
    let emulated = lower.contains("emulation") || lower.contains("rma_am");
    let toks = tokens(&cleaned);

    let mut transports: Vec<Lane> = Vec::new();
    for t in &toks {
        if let Some(lane) = lane_token(t)
            && lane.transport != "rma_am"
            && !transports.contains(&lane)
        {
            transports.push(lane);
        }
    }

    let mut operation = None;
    let mut memory = None;
    let mut length = None;
    let mut proto_start = 0;
    // 1.22: "<op> from|into <mem> memory length <N> <protocol…> <lanes…>"
    if let Some(pos) = toks.iter().position(|t| *t == "length")
        && let Some(n) = toks.get(pos + 1).and_then(|n| n.parse::<u64>().ok())
    {
        length = Some(n);
        proto_start = pos + 2;
        if let Some(mpos) = toks[..pos].iter().position(|t| *t == "memory")
            && mpos >= 1
        {
            memory = Some(toks[mpos - 1].to_string());
        }
        if let Some(first) = toks.first()
            && !matches!(*first, "from" | "into" | "memory" | "length")
            && pos > 0
        {
            // "tag_send(multi)", "put(fast-completion)": the suffix names UCX's selection
            // table (a stream's, see ucx::OpOptions::STREAM), not another operation.
            let op = first.split_once('(').map_or(*first, |(op, _)| op);
            operation = Some(op.to_string());
        }
    }

    let old_format = lower.contains("lane[");
    let protocol = if old_format {
        // The 1.13 string has no protocol phrase; keep the keywords it does carry.
        const KEYWORDS: [&str; 8] = [
            "eager",
            "rndv",
            "rendezvous",
            "short",
            "bcopy",
            "zcopy",
            "zero-copy",
            "emulation",
        ];
        let mut words: Vec<&str> = Vec::new();
        for t in &toks {
            let w = t.trim_end_matches(':').to_ascii_lowercase();
            if let Some(k) = KEYWORDS.iter().find(|k| **k == w)
                && !words.contains(k)
            {
                words.push(k);
            }
        }
        words.join(" ")
    } else {
        let mut words: Vec<&str> = Vec::new();
        for t in toks.iter().skip(proto_start) {
            if lane_token(t).is_some() || t.ends_with('%') || *t == "on" {
                break;
            }
            // UCX_PROTO_INFO table rows: range column ("5029..inf") and the "(?)" marker.
            if t.contains("..") || *t == "?" || *t == "rma_am" {
                continue;
            }
            words.push(t);
        }
        while words.len() >= 2 && matches!(words[words.len() - 2..], ["from" | "to", "remote"]) {
            words.truncate(words.len() - 2);
        }
        // Skipping a token can bring a number next to its unit ("11.9 rma_am( MB/s"): strip again.
        strip_estimates(&words.join(" "))
    };

    if transports.is_empty() && !emulated {
        return None;
    }
    Some(ProtocolInfo {
        operation,
        memory,
        length,
        protocol,
        transports,
        emulated,
    })
}

/// The class of a data path that names several transports: emulation first, then the most
/// explanatory (slowest) transport, ignoring Unknown names when a known one is present.
fn class_of_transports(transports: &[Lane], emulated: bool) -> TransportClass {
    if emulated {
        return TransportClass::RmaEmulated;
    }
    let classes: Vec<TransportClass> = transports.iter().map(|l| class_of_transport(&l.transport)).collect();
    let known: Vec<TransportClass> = classes
        .iter()
        .copied()
        .filter(|c| *c != TransportClass::Unknown)
        .collect();
    let pool = if known.is_empty() { classes } else { known };
    pool.into_iter()
        .min_by_key(|c| severity_rank(*c))
        .unwrap_or(TransportClass::Unknown)
}

/// Classifies a request's protocol info string. `None` when it carries no usable evidence.
pub fn data_path_from_info(info: &str) -> Option<DataPath> {
    let parsed = parse_protocol_info(info)?;
    let class = class_of_transports(&parsed.transports, parsed.emulated);
    let protocol = if parsed.emulated && !parsed.protocol.contains("emulation") {
        "software RMA emulation".to_string()
    } else {
        parsed.protocol
    };
    Some(DataPath {
        class,
        transports: parsed.transports,
        protocol,
        source: EvidenceSource::RequestInfo,
    })
}

/// Classifies from endpoint lanes alone. A tcp lane is the data path only when nothing faster
/// exists: UCX keeps tcp lanes for wireup/keepalive next to sysv, cma or rdma lanes. For CUDA
/// memory, cuda_ipc then rdma carry GPU data directly; cuda_copy means staging through host
/// memory over whatever host transport exists (tcp staging is reported as tcp, the worse finding).
pub fn data_path_from_lanes(lanes: &[Lane], memory: MemoryPair) -> DataPath {
    let of = |class: TransportClass| -> Vec<Lane> {
        let mut v: Vec<Lane> = lanes
            .iter()
            .filter(|l| class_of_transport(&l.transport) == class)
            .cloned()
            .collect();
        v.dedup();
        v
    };
    let path = |class: TransportClass, transports: Vec<Lane>| DataPath {
        class,
        transports,
        protocol: String::new(),
        source: EvidenceSource::EndpointLanes,
    };
    if lanes.is_empty() {
        return DataPath {
            class: TransportClass::Unknown,
            transports: Vec::new(),
            protocol: String::new(),
            source: EvidenceSource::None,
        };
    }
    let (ipc, rdma, cma, shm, tcp, staging, selfl) = (
        of(TransportClass::CudaIpc),
        of(TransportClass::Rdma),
        of(TransportClass::Cma),
        of(TransportClass::SharedMemory),
        of(TransportClass::Tcp),
        of(TransportClass::CudaCopyStaging),
        of(TransportClass::SelfLoop),
    );
    let intra: Vec<Lane> = shm.iter().chain(cma.iter()).cloned().collect();
    if memory.uses_cuda() {
        if !ipc.is_empty() {
            return path(TransportClass::CudaIpc, ipc);
        }
        if !rdma.is_empty() {
            return path(TransportClass::Rdma, rdma);
        }
        if !staging.is_empty() {
            if intra.is_empty() && !tcp.is_empty() {
                return path(TransportClass::Tcp, staging.into_iter().chain(tcp).collect());
            }
            return path(
                TransportClass::CudaCopyStaging,
                staging.into_iter().chain(intra).collect(),
            );
        }
    }
    if !intra.is_empty() {
        let class = if cma.is_empty() {
            TransportClass::SharedMemory
        } else {
            TransportClass::Cma
        };
        return path(class, intra);
    }
    if !rdma.is_empty() {
        return path(TransportClass::Rdma, rdma);
    }
    if !tcp.is_empty() {
        return path(TransportClass::Tcp, tcp);
    }
    if !selfl.is_empty() {
        return path(TransportClass::SelfLoop, selfl);
    }
    let rest: Vec<Lane> = lanes.to_vec();
    path(class_of_transports(&rest, false), rest)
}

/// Builds the evidence for one case: the info string when it names a transport, otherwise the
/// lanes. `info` is stored with estimates stripped.
pub fn classify(info: Option<&str>, lanes: &[Lane], memory: MemoryPair) -> TransportEvidence {
    let from_info = info.and_then(data_path_from_info);
    let protocol = info
        .map(strip_estimates)
        .filter(|s| !s.is_empty() && !s.contains("<no debug info>"));
    TransportEvidence {
        lanes: lanes.to_vec(),
        protocol,
        data_path: from_info.unwrap_or_else(|| data_path_from_lanes(lanes, memory)),
        chosen_by: None,
        other_view: None,
    }
}

fn op_word(test: TestKind) -> &'static str {
    match test {
        TestKind::TagBw | TestKind::TagLat => "tag",
        TestKind::PutBw => "put",
        TestKind::GetBw => "get",
    }
}

/// Joins lanes as `cma/memory, tcp/lo`.
pub fn join_lanes(lanes: &[Lane]) -> String {
    lanes.iter().map(Lane::to_string).collect::<Vec<_>>().join(", ")
}

/// One line for humans: `tag 64 MiB host→host: rendezvous zero-copy read, cma/memory`.
pub fn describe(test: TestKind, memory: MemoryPair, size: u64, path: &DataPath) -> String {
    let head = format!("{} {} {}", op_word(test), format_size(size), memory);
    let lanes = join_lanes(&path.transports);
    match path.source {
        EvidenceSource::None => format!("{head}: transport unknown (UCX reported neither protocol nor lanes)"),
        EvidenceSource::EndpointLanes => format!("{head}: {lanes} (endpoint lanes, {})", path.class),
        EvidenceSource::RequestInfo | EvidenceSource::ProtoInfo if path.protocol.is_empty() => {
            format!("{head}: {lanes}")
        }
        EvidenceSource::RequestInfo | EvidenceSource::ProtoInfo if lanes.is_empty() => {
            format!("{head}: {}", path.protocol)
        }
        EvidenceSource::RequestInfo | EvidenceSource::ProtoInfo => format!("{head}: {}, {lanes}", path.protocol),
    }
}

#[cfg(test)]
mod tests;
