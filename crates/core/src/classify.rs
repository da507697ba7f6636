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
//! Everything here is pure string work: no UCX, no I/O, and no input can make it panic.

use crate::model::{DataPath, EvidenceSource, Lane, MemoryPair, TestKind, TransportClass, TransportEvidence};
use crate::units::format_size;

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
            operation = Some(first.to_string());
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
mod tests {
    use super::*;
    use crate::model::MemoryType;

    fn lane(t: &str, d: &str) -> Lane {
        Lane {
            transport: t.into(),
            device: d.into(),
        }
    }

    const CUDA_CUDA: MemoryPair = MemoryPair {
        initiator: MemoryType::Cuda,
        target: MemoryType::Cuda,
    };

    // Strings captured from UCX 1.22 (ucp_request_query on a pending request) on this machine.
    const TAG_CMA: &str = "{proto|cb|init|rk_use} tag_send from host memory length 67108864 rendezvous zero-copy \
                           read from remote cma/memory 11254.9 MB/s 5686.43 us";
    const TAG_TCP_MULTI: &str = "{proto|cb|init|rk_use} tag_send from host memory length 67108864 rendezvous \
                                 zero-copy fenced write to remote 52% on tcp/lo and 48% on tcp/eth0 23.4 MB/s \
                                 2732891.79 us";
    const PUT_CMA: &str = "{proto|cb|init} put from host memory length 67108864 zero-copy cma/memory 11143.9 MB/s \
                           5743.08 us";
    const GET_EMU_TCP: &str = "{proto|cb|init} get into host memory length 67108864 software emulation tcp/lo 11.9 \
                               MB/s 5372112.14 us";
    const GET_EMU_SYSV: &str = "{proto|cb|init} get into host memory length 8192 software emulation sysv/memory \
                                2603.5 MB/s 3.00 us";
    const TAG_SHORT: &str = "{cpml|proto} tag_send from host memory length 8 eager short sysv/memory 74.3 MB/s 0.10 us";
    const TAG_FRAG_POSIX: &str = "{proto|cb|init|rk_use} tag_send from host memory length 67108864 rendezvous \
                                  fragmented copy-in copy-out posix/memory 6945.0 MB/s 9215.24 us";

    #[test]
    fn an_estimate_split_by_a_skipped_token_is_still_stripped() {
        let p = parse_protocol_info("put length 8 11.9 rma_am( MB/s tcp/lo").unwrap();
        assert!(!p.protocol.contains("11.9"), "{p:?}");
        assert!(!p.protocol.contains("MB/s"), "{p:?}");
    }

    #[test]
    fn strips_flags_and_model_estimates() {
        assert_eq!(
            strip_estimates(TAG_CMA),
            "tag_send from host memory length 67108864 rendezvous zero-copy read from remote cma/memory"
        );
        assert_eq!(
            strip_estimates(TAG_TCP_MULTI),
            "tag_send from host memory length 67108864 rendezvous zero-copy fenced write to remote 52% on tcp/lo \
             and 48% on tcp/eth0"
        );
        assert_eq!(strip_estimates("x 12.5GB/s y 3us"), "x y");
        assert!(!strip_estimates(PUT_CMA).contains("MB/s"));
        assert!(!strip_estimates(PUT_CMA).contains("5743"));
    }

    #[test]
    fn parses_the_1_22_format() {
        let p = parse_protocol_info(TAG_CMA).unwrap();
        assert_eq!(p.operation.as_deref(), Some("tag_send"));
        assert_eq!(p.memory.as_deref(), Some("host"));
        assert_eq!(p.length, Some(64 << 20));
        assert_eq!(p.protocol, "rendezvous zero-copy read");
        assert_eq!(p.transports, vec![lane("cma", "memory")]);
        assert!(!p.emulated);

        let g = parse_protocol_info(GET_EMU_TCP).unwrap();
        assert_eq!(g.operation.as_deref(), Some("get"));
        assert_eq!(g.memory.as_deref(), Some("host"));
        assert_eq!(g.protocol, "software emulation");
        assert!(g.emulated);
        assert_eq!(g.transports, vec![lane("tcp", "lo")]);
    }

    #[test]
    fn table_of_info_strings() {
        use TransportClass::*;
        type Row<'a> = (&'a str, TransportClass, &'a str, &'a [(&'a str, &'a str)]);
        let cases: &[Row] = &[
            (TAG_CMA, Cma, "rendezvous zero-copy read", &[("cma", "memory")]),
            (PUT_CMA, Cma, "zero-copy", &[("cma", "memory")]),
            (
                TAG_TCP_MULTI,
                Tcp,
                "rendezvous zero-copy fenced write",
                &[("tcp", "lo"), ("tcp", "eth0")],
            ),
            (GET_EMU_TCP, RmaEmulated, "software emulation", &[("tcp", "lo")]),
            (GET_EMU_SYSV, RmaEmulated, "software emulation", &[("sysv", "memory")]),
            (TAG_SHORT, SharedMemory, "eager short", &[("sysv", "memory")]),
            (
                TAG_FRAG_POSIX,
                SharedMemory,
                "rendezvous fragmented copy-in copy-out",
                &[("posix", "memory")],
            ),
            (
                "tag_send from host memory length 8 eager zero-copy copy-out tcp/lo 0.1 MB/s 111.60 us",
                Tcp,
                "eager zero-copy copy-out",
                &[("tcp", "lo")],
            ),
            (
                "tag_send from host memory length 4194304 rendezvous fragmented copy-in copy-out tcp/lo",
                Tcp,
                "rendezvous fragmented copy-in copy-out",
                &[("tcp", "lo")],
            ),
            (
                "rendezvous zero-copy fenced write to remote tcp/lo",
                Tcp,
                "rendezvous zero-copy fenced write",
                &[("tcp", "lo")],
            ),
            (
                "eager short sysv/memory",
                SharedMemory,
                "eager short",
                &[("sysv", "memory")],
            ),
            // UCX_PROTO_INFO=y table row.
            (
                "|  5029..inf | (?) rendezvous zero-copy read from remote | cma/memory  |",
                Cma,
                "rendezvous zero-copy read",
                &[("cma", "memory")],
            ),
            (
                "put from cuda memory length 67108864 zero-copy rc_mlx5/mlx5_0:1 45000.0 MB/s 1500.0 us",
                Rdma,
                "zero-copy",
                &[("rc_mlx5", "mlx5_0:1")],
            ),
            (
                "tag_send from cuda memory length 67108864 rendezvous zero-copy read from remote cuda_ipc/cuda",
                CudaIpc,
                "rendezvous zero-copy read",
                &[("cuda_ipc", "cuda")],
            ),
            (
                "tag_send from cuda memory length 67108864 rendezvous pipeline cuda_copy/cuda and tcp/eth0",
                Tcp,
                "rendezvous pipeline",
                &[("cuda_copy", "cuda"), ("tcp", "eth0")],
            ),
            (
                "tag_send from cuda memory length 67108864 rendezvous pipeline cuda_copy/cuda, rc_mlx5/mlx5_0:1",
                CudaCopyStaging,
                "rendezvous pipeline",
                &[("cuda_copy", "cuda"), ("rc_mlx5", "mlx5_0:1")],
            ),
            (
                "get into host memory length 1048576 zero-copy dc_mlx5/mlx5_2:1",
                Rdma,
                "zero-copy",
                &[("dc_mlx5", "mlx5_2:1")],
            ),
            (
                "put from host memory length 1048576 zero-copy srd/rdmap0s6:1",
                Rdma,
                "zero-copy",
                &[("srd", "rdmap0s6:1")],
            ),
            (
                "put rma_am(tcp/eth0)",
                RmaEmulated,
                "software RMA emulation",
                &[("tcp", "eth0")],
            ),
            (
                "tag_send from host memory length 8 eager short self/memory",
                SelfLoop,
                "eager short",
                &[("self", "memory")],
            ),
            // A VLAN device keeps its dot in the 1.22 format.
            (
                "put from host memory length 8 zero-copy tcp/eth0.100",
                Tcp,
                "zero-copy",
                &[("tcp", "eth0.100")],
            ),
            // 1.13 (old protocol layer).
            (
                "send length 8 tag lane[0]: 2:sysv/memory.0 eager short",
                SharedMemory,
                "eager short",
                &[("sysv", "memory")],
            ),
            (
                "rndv lane[1]: 4:tcp/eth0.1 zcopy",
                Tcp,
                "rndv zcopy",
                &[("tcp", "eth0")],
            ),
        ];
        for (info, class, protocol, lanes) in cases {
            let dp = data_path_from_info(info).unwrap_or_else(|| panic!("no data path from {info:?}"));
            assert_eq!(dp.class, *class, "class of {info:?}");
            assert_eq!(dp.protocol, *protocol, "protocol of {info:?}");
            let want: Vec<Lane> = lanes.iter().map(|(t, d)| lane(t, d)).collect();
            assert_eq!(dp.transports, want, "transports of {info:?}");
            assert_eq!(dp.source, EvidenceSource::RequestInfo);
        }
    }

    #[test]
    fn nothing_usable_gives_none() {
        for info in [
            "",
            "   ",
            "<no debug info>",
            "{proto} ",
            "recv length 67108864 host memory",
            "12.5 MB/s 3 us",
        ] {
            assert_eq!(data_path_from_info(info), None, "{info:?}");
        }
    }

    #[test]
    fn lanes_tcp_backup_is_not_the_data_path() {
        // hostIPC: separate PID namespaces, shared IPC: UCX lists sysv plus a tcp lane.
        let lanes = [lane("sysv", "memory"), lane("tcp", "lo"), lane("tcp", "eth0")];
        let dp = data_path_from_lanes(&lanes, MemoryPair::HOST_HOST);
        assert_eq!(dp.class, TransportClass::SharedMemory);
        assert_eq!(dp.transports, vec![lane("sysv", "memory")]);
        assert_eq!(dp.source, EvidenceSource::EndpointLanes);

        let dp = data_path_from_lanes(
            &[lane("sysv", "memory"), lane("posix", "memory"), lane("cma", "memory")],
            MemoryPair::HOST_HOST,
        );
        assert_eq!(dp.class, TransportClass::Cma);
        assert_eq!(dp.transports.len(), 3);

        let dp = data_path_from_lanes(
            &[lane("tcp", "eth0"), lane("rc_mlx5", "mlx5_0:1")],
            MemoryPair::HOST_HOST,
        );
        assert_eq!(dp.class, TransportClass::Rdma);
        assert_eq!(dp.transports, vec![lane("rc_mlx5", "mlx5_0:1")]);
    }

    #[test]
    fn lanes_tcp_only_is_tcp() {
        let dp = data_path_from_lanes(&[lane("tcp", "lo"), lane("tcp", "eth0")], MemoryPair::HOST_HOST);
        assert_eq!(dp.class, TransportClass::Tcp);
        assert_eq!(dp.transports.len(), 2);
    }

    #[test]
    fn lanes_for_cuda_memory() {
        let ipc = [lane("cuda_copy", "cuda"), lane("cuda_ipc", "cuda"), lane("tcp", "lo")];
        assert_eq!(data_path_from_lanes(&ipc, CUDA_CUDA).class, TransportClass::CudaIpc);
        let rdma = [
            lane("cuda_copy", "cuda"),
            lane("rc_mlx5", "mlx5_0:1"),
            lane("tcp", "eth0"),
        ];
        assert_eq!(data_path_from_lanes(&rdma, CUDA_CUDA).class, TransportClass::Rdma);
        // Seed 002: pods that cannot see each other's GPUs, staging over tcp.
        let staged_tcp = [lane("cuda_copy", "cuda"), lane("tcp", "eth0")];
        let dp = data_path_from_lanes(&staged_tcp, CUDA_CUDA);
        assert_eq!(dp.class, TransportClass::Tcp);
        assert_eq!(dp.transports, vec![lane("cuda_copy", "cuda"), lane("tcp", "eth0")]);
        let staged_shm = [lane("cuda_copy", "cuda"), lane("sysv", "memory"), lane("tcp", "lo")];
        let dp = data_path_from_lanes(&staged_shm, CUDA_CUDA);
        assert_eq!(dp.class, TransportClass::CudaCopyStaging);
        assert_eq!(dp.transports, vec![lane("cuda_copy", "cuda"), lane("sysv", "memory")]);
        // The same lanes with host memory ignore the cuda lanes.
        assert_eq!(
            data_path_from_lanes(&staged_shm, MemoryPair::HOST_HOST).class,
            TransportClass::SharedMemory
        );
    }

    #[test]
    fn lanes_edge_cases() {
        assert_eq!(
            data_path_from_lanes(&[], MemoryPair::HOST_HOST).source,
            EvidenceSource::None
        );
        assert_eq!(
            data_path_from_lanes(&[lane("self", "memory")], MemoryPair::HOST_HOST).class,
            TransportClass::SelfLoop
        );
        assert_eq!(
            data_path_from_lanes(&[lane("ugni", "x")], MemoryPair::HOST_HOST).class,
            TransportClass::Unknown
        );
    }

    #[test]
    fn info_wins_over_lanes_and_lanes_are_the_fallback() {
        let lanes = [lane("sysv", "memory"), lane("tcp", "lo")];
        let ev = classify(Some(GET_EMU_SYSV), &lanes, MemoryPair::HOST_HOST);
        assert_eq!(ev.data_path.class, TransportClass::RmaEmulated);
        assert_eq!(
            ev.protocol.as_deref(),
            Some("get into host memory length 8192 software emulation sysv/memory")
        );
        assert_eq!(ev.lanes, lanes.to_vec());

        let ev = classify(Some("<no debug info>"), &lanes, MemoryPair::HOST_HOST);
        assert_eq!(ev.protocol, None);
        assert_eq!(ev.data_path.class, TransportClass::SharedMemory);
        assert_eq!(ev.data_path.source, EvidenceSource::EndpointLanes);

        let ev = classify(None, &[], MemoryPair::HOST_HOST);
        assert_eq!(ev.data_path.class, TransportClass::Unknown);
        assert_eq!(ev.data_path.source, EvidenceSource::None);
        assert_eq!(ev.protocol, None);
    }

    #[test]
    fn one_liners() {
        let dp = data_path_from_info(TAG_CMA).unwrap();
        assert_eq!(
            describe(TestKind::TagBw, MemoryPair::HOST_HOST, 64 << 20, &dp),
            "tag 64 MiB host→host: rendezvous zero-copy read, cma/memory"
        );
        let dp = data_path_from_info(TAG_TCP_MULTI).unwrap();
        assert_eq!(
            describe(TestKind::TagLat, MemoryPair::HOST_HOST, 8, &dp),
            "tag 8 B host→host: rendezvous zero-copy fenced write, tcp/lo, tcp/eth0"
        );
        let dp = data_path_from_lanes(&[lane("sysv", "memory"), lane("tcp", "lo")], MemoryPair::HOST_HOST);
        assert_eq!(
            describe(TestKind::PutBw, MemoryPair::HOST_HOST, 4096, &dp),
            "put 4 KiB host→host: sysv/memory (endpoint lanes, shared memory)"
        );
        let dp = data_path_from_lanes(&[], CUDA_CUDA);
        assert!(describe(TestKind::GetBw, CUDA_CUDA, 8, &dp).starts_with("get 8 B cuda→cuda: transport unknown"));
    }

    proptest::proptest! {
        #[test]
        fn random_strings_never_panic(s in "\\PC*") {
            let _ = strip_estimates(&s);
            let _ = parse_protocol_info(&s);
            let _ = classify(Some(&s), &[], MemoryPair::HOST_HOST);
        }

        #[test]
        fn info_like_strings_never_panic_and_keep_no_estimates(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "tag_send", "from", "into", "host", "cuda", "memory", "length", "67108864", "rendezvous",
                    "zero-copy", "read", "remote", "cma/memory", "tcp/lo", "2:sysv/memory.0", "lane[0]:", "52%",
                    "on", "and", "11.9", "MB/s", "3.0", "us", "{proto|cb}", "software", "emulation", "rma_am(",
                    ")", "/", ":", "..", "|", "µs", "ü/é",
                ]),
                0..24,
            )
        ) {
            let s = words.join(" ");
            let stripped = strip_estimates(&s);
            if let Some(p) = parse_protocol_info(&s) {
                proptest::prop_assert!(!p.protocol.contains("11.9 MB/s") && !p.protocol.contains("3.0 us"));
                for l in &p.transports {
                    proptest::prop_assert!(!l.transport.is_empty() && !l.device.is_empty());
                }
            }
            let toks: Vec<&str> = stripped.split_whitespace().collect();
            for w in toks.windows(2) {
                proptest::prop_assert!(!(is_number(w[0]) && !w[0].ends_with('%') && ESTIMATE_UNITS.contains(&w[1])), "{stripped}");
            }
        }
    }
}
