//! Which transport NIXL's UCX used, from UCX's own protocol selection tables.
//!
//! With `UCX_PROTO_INFO=used` (UCX ≥ 1.21) UCX prints, when a worker is destroyed, one table per
//! endpoint configuration and operation it actually used, with a count per row; with
//! `UCX_PROTO_INFO=y` it prints every selection as it is made, without counts:
//!
//! ```text
//! | initiator intra-node cfg#1                                       |
//! | remote memory read by ucp_get*(multi) into host memory from host |
//! | Count | Range  | Description |              Config               |
//! |     8 | 0..inf | zero-copy   | cma/memory                        |
//! ```
//!
//! [`parse`](crate::classify::proto_tables::parse) reads those tables out of a UCX log (prefixes
//! and separators ignored); [`attribute`]
//! picks the rows for one case — the RMA operation of its direction (`ucp_get` for READ,
//! `ucp_put` for WRITE), its memory types, a range holding its block size, a non-zero count —
//! and feeds them to the UCX engine's classifier ([`crate::classify`]). Loopback (`self`)
//! endpoints are ignored while any other endpoint matches. Several matching rows (several
//! endpoint configurations) yield the worst class, as the UCX engine does for several lanes.

use crate::classify::{data_path_from_info, severity_rank};
use crate::{DataPath, Direction, EvidenceSource, MemoryPair, TransportEvidence};

use crate::classify::proto_tables::{ProtoRow, ProtoTable, memory_after};
fn operation_matches(op: &str, direction: Direction, memory: MemoryPair) -> bool {
    let (init, target) = (memory.initiator.as_str(), memory.target.as_str());
    // Read: "… ucp_get* into INIT from TARGET"; write: "… ucp_put* from INIT to TARGET".
    let (verb, local, remote) = match direction {
        Direction::Read => ("ucp_get", " into ", " from "),
        Direction::Write => ("ucp_put", " from ", " to "),
    };
    let Some(at) = op.find(verb) else { return false };
    let op = &op[at..];
    let Some(local_at) = op.find(local) else { return false };
    memory_after(op, local) == Some(init) && memory_after(&op[local_at + local.len()..], remote) == Some(target)
}

fn is_loopback(t: &ProtoTable) -> bool {
    t.endpoint.split_whitespace().any(|w| w == "self")
}

/// The transport evidence of one case (`size` = one descriptor's length), or `None` when the
/// tables say nothing about it.
pub fn attribute(
    tables: &[ProtoTable],
    direction: Direction,
    memory: MemoryPair,
    size: u64,
) -> Option<TransportEvidence> {
    let matching: Vec<(&ProtoTable, &ProtoRow)> = tables
        .iter()
        .filter(|t| operation_matches(&t.operation, direction, memory))
        .flat_map(|t| t.rows.iter().map(move |r| (t, r)))
        .filter(|(_, r)| r.min <= size && size <= r.max && r.count != Some(0))
        .collect();
    let remote: Vec<_> = matching.iter().filter(|(t, _)| !is_loopback(t)).copied().collect();
    let chosen = if remote.is_empty() { matching } else { remote };
    let mut seen: Vec<String> = Vec::new();
    let mut worst: Option<DataPath> = None;
    for (t, r) in &chosen {
        let raw = format!(
            "{} | {} | {} {} {}{}",
            t.endpoint,
            t.operation,
            r.range_text(),
            r.description,
            r.config,
            r.count.map(|c| format!(" (count {c})")).unwrap_or_default()
        );
        if seen.contains(&raw) {
            continue;
        }
        seen.push(raw);
        if let Some(mut p) = data_path_from_info(&format!("{} {}", r.description, r.config)) {
            p.source = EvidenceSource::ProtoInfo;
            if worst
                .as_ref()
                .is_none_or(|w| severity_rank(p.class) < severity_rank(w.class))
            {
                worst = Some(p);
            }
        }
    }
    let data_path = worst?;
    Some(TransportEvidence {
        lanes: Vec::new(),
        protocol: Some(seen.join("; ")),
        data_path,
        chosen_by: None,
        other_view: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::proto_tables::parse;
    use crate::{MemoryType, TransportClass};

    /// Recorded on this machine: NIXL 1.5.1 (UCX 1.23.0), `UCX_PROTO_INFO=used`, two agents.
    const USED: &str = "\
[1795498384.7] [vm:4996 :0]   +-------+--------+-------------+-----------------------------------+
[1795498384.7] [vm:4996 :0]   | initiator intra-node cfg#1                                       |
[1795498384.7] [vm:4996 :0]   | remote memory read by ucp_get*(multi) into host memory from host |
[1795498384.7] [vm:4996 :0]   +-------+--------+-------------+-----------------------------------+
[1795498384.7] [vm:4996 :0]   | Count | Range  | Description |              Config               |
[1795498384.7] [vm:4996 :0]   +-------+--------+-------------+-----------------------------------+
[1795498384.7] [vm:4996 :0]   |     8 | 0..inf | zero-copy   | cma/memory                        |
[1795498384.7] [vm:4996 :0]   +-------+--------+-------------+-----------------------------------+
[1795498384.7] [vm:4996 :0]   +-------+--------+-------------+----------------------------------+
[1795498384.7] [vm:4996 :0]   | initiator intra-node cfg#1                                      |
[1795498384.7] [vm:4996 :0]   | remote memory write by ucp_put*(multi) from host memory to host |
[1795498384.7] [vm:4996 :0]   +-------+--------+-------------+----------------------------------+
[1795498384.7] [vm:4996 :0]   | Count | Range  | Description |              Config              |
[1795498384.7] [vm:4996 :0]   +-------+--------+-------------+----------------------------------+
[1795498384.7] [vm:4996 :0]   |     8 | 0..8K  | short       | tcp/lo                           |
[1795498384.7] [vm:4996 :0]   |     0 | 8193..inf | zero-copy | tcp/lo                           |
[1795498384.7] [vm:4996 :0]   +-------+--------+-------------+----------------------------------+
";

    /// Found by the `ucx_proto_tables` fuzz target: `744073709551615..8K` was kept as a row whose
    /// start is past its end.
    #[test]
    fn a_range_whose_start_is_past_its_end_is_no_row() {
        use crate::classify::proto_tables::parse_range;
        assert_eq!(parse_range("0..8K"), Some((0, 8192)));
        assert_eq!(parse_range("8K..8K"), Some((8192, 8192)));
        assert_eq!(parse_range("744073709551615..8K"), None);
        let log = USED.replace("0..8K ", "9K..8K");
        let tables = parse(&log);
        assert!(
            tables.iter().flat_map(|t| &t.rows).all(|r| r.min <= r.max),
            "{tables:?}"
        );
        assert_eq!(tables.iter().map(|t| t.rows.len()).sum::<usize>(), 2, "{tables:?}");
    }

    #[test]
    fn parses_used_tables_with_counts_and_units() {
        let t = parse(USED);
        assert_eq!(t.len(), 2, "{t:?}");
        assert_eq!(t[0].endpoint, "initiator intra-node cfg#1");
        assert!(t[1].operation.contains("ucp_put"));
        assert_eq!(t[1].rows[0].max, 8192);
        assert_eq!(t[1].rows[1].count, Some(0));
        assert_eq!(t[0].rows[0].max, u64::MAX);
    }

    #[test]
    fn attributes_by_direction_memory_size_and_count() {
        let t = parse(USED);
        let hh = MemoryPair::HOST_HOST;
        let read = attribute(&t, Direction::Read, hh, 1 << 20).unwrap();
        assert_eq!(read.data_path.class, TransportClass::Cma);
        assert_eq!(read.data_path.source, EvidenceSource::ProtoInfo);
        assert!(read.protocol.unwrap().contains("cma/memory (count 8)"));
        let write = attribute(&t, Direction::Write, hh, 4096).unwrap();
        assert_eq!(write.data_path.class, TransportClass::Tcp);
        // The only row for 1 MiB writes was never used.
        assert!(attribute(&t, Direction::Write, hh, 1 << 20).is_none());
        let cuda = MemoryPair {
            initiator: MemoryType::Cuda,
            target: MemoryType::Cuda,
        };
        assert!(attribute(&t, Direction::Read, cuda, 4096).is_none());
    }

    #[test]
    fn loopback_tables_count_only_when_nothing_else_matches() {
        let y = "\
| target self cfg#0                                        |
| remote memory write by ucp_put* from host memory to host |
| Range  | Description | Config |
| 0..inf | zero-copy   | cma/memory |
| initiator intra-node cfg#1                               |
| remote memory write by ucp_put* from host memory to host |
| Range  | Description | Config |
| 0..inf | software emulation | rma_am(tcp/lo) |
";
        let t = parse(y);
        assert_eq!(t.len(), 2, "{t:?}");
        let w = attribute(&t, Direction::Write, MemoryPair::HOST_HOST, 65536).unwrap();
        assert_eq!(w.data_path.class, TransportClass::RmaEmulated);
        let only_self = &t[..1];
        let w = attribute(only_self, Direction::Write, MemoryPair::HOST_HOST, 65536).unwrap();
        assert_eq!(w.data_path.class, TransportClass::Cma);
    }

    /// Recorded on an H200 (2026-11-26, NIXL 1.5.1's UCX 1.23, two agents on the one GPU,
    /// `UCX_PROTO_INFO=y`): GPU memory is named with its device, or bare, never "cuda memory".
    /// Both cases read "transport unknown" before, though UCX said what it did.
    const VRAM: &str = "\
[1795703502.98] [vm:617  :0]   | icb-decode-vm-617 intra-node cfg#2                             |
[1795703502.98] [vm:617  :0]   | remote memory read by ucp_get*(multi) into cuda/GPU0 from cuda |
[1795703502.98] [vm:617  :0]   +--------+--------------------+----------------------------------+
[1795703502.98] [vm:617  :0]   | Range  |    Description     |              Config              |
[1795703502.98] [vm:617  :0]   +--------+--------------------+----------------------------------+
[1795703502.98] [vm:617  :0]   | 0..inf | software emulation | tcp/lo                           |
[1795703502.98] [vm:617  :0]   +--------+--------------------+----------------------------------+
[1795703506.22] [vm:617  :0]   | icb-prefill-vm-617 intra-node cfg#3                                  |
[1795703506.22] [vm:617  :0]   | remote memory write by ucp_put*(multi) from cuda/GPU0 to cuda/dev[1] |
[1795703506.22] [vm:617  :0]   +--------+-------------+-----------------------------------------------+
[1795703506.22] [vm:617  :0]   | Range  | Description |                    Config                     |
[1795703506.22] [vm:617  :0]   +--------+-------------+-----------------------------------------------+
[1795703506.22] [vm:617  :0]   | 0..inf | zero-copy   | cuda_ipc/cuda                                 |
[1795703506.22] [vm:617  :0]   +--------+-------------+-----------------------------------------------+
[1795703506.17] [vm:617  :0]   | icb-prefill-vm-617 intra-node cfg#2                             |
[1795703506.17] [vm:617  :0]   | remote memory write by ucp_put* from host memory to cuda/dev[1] |
[1795703506.17] [vm:617  :0]   | Range  |    Description     |              Config               |
[1795703506.17] [vm:617  :0]   | 0..inf | software emulation | tcp/lo                            |
";

    #[test]
    fn gpu_memory_is_matched_by_its_type_whatever_device_ucx_names() {
        let t = parse(VRAM);
        assert_eq!(t.len(), 3, "{t:?}");
        let cuda = MemoryPair {
            initiator: MemoryType::Cuda,
            target: MemoryType::Cuda,
        };
        let read = attribute(&t, Direction::Read, cuda, 64 << 20).expect("the VRAM read is attributed");
        assert_eq!(read.data_path.class, TransportClass::RmaEmulated);
        assert!(read.protocol.unwrap().contains("software emulation tcp/lo"));
        let write = attribute(&t, Direction::Write, cuda, 64 << 20).expect("the VRAM write is attributed");
        assert_eq!(write.data_path.class, TransportClass::CudaIpc);
        let host_to_cuda = MemoryPair {
            initiator: MemoryType::Host,
            target: MemoryType::Cuda,
        };
        let w = attribute(&t, Direction::Write, host_to_cuda, 4096).unwrap();
        assert_eq!(w.data_path.class, TransportClass::RmaEmulated);
        // Types never cross: no host-to-host or cuda-to-host table is here.
        assert!(attribute(&t, Direction::Write, MemoryPair::HOST_HOST, 4096).is_none());
        let cuda_to_host = MemoryPair {
            initiator: MemoryType::Cuda,
            target: MemoryType::Host,
        };
        assert!(attribute(&t, Direction::Read, cuda_to_host, 4096).is_none());
    }

    #[test]
    fn memory_words_are_read_up_to_the_device() {
        assert_eq!(memory_after("into host memory from host", " into "), None);
        assert_eq!(memory_after("x into host memory from host", " into "), Some("host"));
        assert_eq!(memory_after("x from cuda/dev[1]", " from "), Some("cuda"));
        assert_eq!(memory_after("x from cuda", " from "), Some("cuda"));
        assert_eq!(memory_after("x from ", " from "), None);
        assert!(!operation_matches(
            "remote memory read by ucp_get* into cudax from cuda",
            Direction::Read,
            MemoryPair {
                initiator: MemoryType::Cuda,
                target: MemoryType::Cuda,
            }
        ));
    }
}
