//! Each case's data path from the protocol tables UCX printed while that case ran (issue 35:
//! "every case names the transport that carried its own bytes").
//!
//! With `UCX_PROTO_INFO=y` (the engine's default) UCX prints a table when it first selects a
//! protocol for an endpoint, remote-key configuration and operation: during the first case that
//! needs it. The client marks the log's length after every case, so a case's tables are the ones
//! printed inside its window; a case that needed no new selection used the latest earlier table
//! for its operation. Tables printed after the last case (UCX's `used` mode prints them all when
//! the worker is destroyed, a user's own `UCX_PROTO_INFO=used`) say nothing about which case
//! used them: they fall back to the whole log's worst row, as before. On the third GPU day one
//! emulated first case (remote memory `cuda`, no context yet) marked every row of its run
//! emulated; per window, only that case is.

use crate::evidence::{ProtoTable, attribute, parse};
use icb_core::{Direction, MemoryPair, TransportEvidence};

/// What one case needs to be attributed: its operation, memory and block size, and where the
/// log stood when it finished (`None`: not marked, e.g. an interrupted case).
#[derive(Debug, Clone, Copy)]
pub struct CaseKey {
    pub direction: Direction,
    pub memory: MemoryPair,
    pub size: u64,
    pub log_end: Option<usize>,
}

/// The latest table before a window that speaks for this case (its operation, a row holding
/// its size, not loopback while another endpoint matches), attributed alone.
fn latest(tables: &[ProtoTable], key: &CaseKey) -> Option<TransportEvidence> {
    tables
        .iter()
        .rev()
        .find_map(|t| attribute(std::slice::from_ref(t), key.direction, key.memory, key.size).map(|_| t))
        .and_then(|t| attribute(std::slice::from_ref(t), key.direction, key.memory, key.size))
}

/// Each case's evidence from `log` (the whole UCX log text), in the order of `cases`.
pub fn attribute_per_case(log: &str, cases: &[CaseKey]) -> Vec<Option<TransportEvidence>> {
    let whole = parse(log);
    let mut start = 0;
    cases
        .iter()
        .map(|key| {
            let end = key.log_end.unwrap_or(log.len()).min(log.len()).max(start);
            let window = log.get(start..end).map(parse).unwrap_or_default();
            let before = log.get(..start).map(parse).unwrap_or_default();
            let found = attribute(&window, key.direction, key.memory, key.size)
                .or_else(|| latest(&before, key))
                .or_else(|| attribute(&whole, key.direction, key.memory, key.size));
            start = end;
            found
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::{MemoryType, TransportClass};

    fn table(config: &str, memory: &str) -> String {
        format!(
            "| initiator intra-node cfg#1 |\n\
             | remote memory write by ucp_put* from {memory} memory to {memory} |\n\
             | Range  | Description | Config |\n\
             | 0..inf | zero-copy   | {config} |\n"
        )
    }

    fn key(end: Option<usize>, memory: MemoryPair) -> CaseKey {
        CaseKey {
            direction: Direction::Write,
            memory,
            size: 1 << 20,
            log_end: end,
        }
    }

    #[test]
    fn each_case_is_named_by_the_tables_of_its_own_window() {
        let cuda = MemoryPair {
            initiator: MemoryType::Cuda,
            target: MemoryType::Cuda,
        };
        // Case 1 selected an emulated path (as the third GPU day's first case), case 2 a new
        // remote-key configuration over cuda_ipc, case 3 needed no new selection.
        let first = table("rma_am(tcp/lo)", "cuda");
        let mut log = format!("noise\n{first}");
        let end1 = log.len();
        log.push_str(&table("cuda_ipc/cuda", "cuda"));
        let end2 = log.len();
        log.push_str("more noise\n");
        let end3 = log.len();
        let out = attribute_per_case(
            &log,
            &[key(Some(end1), cuda), key(Some(end2), cuda), key(Some(end3), cuda)],
        );
        let class = |i: usize| out[i].as_ref().map(|e| e.data_path.class);
        assert_eq!(class(0), Some(TransportClass::RmaEmulated));
        assert_eq!(class(1), Some(TransportClass::CudaIpc));
        assert_eq!(class(2), Some(TransportClass::CudaIpc), "the latest earlier table");
        // The whole log's worst row would have called every case emulated.
        let all = attribute(&parse(&log), Direction::Write, cuda, 1 << 20).unwrap();
        assert_eq!(all.data_path.class, TransportClass::RmaEmulated);
    }

    #[test]
    fn tables_printed_after_the_last_case_fall_back_to_the_whole_log() {
        // `used` mode: everything printed at the worker's destruction, after every mark.
        let hh = MemoryPair::HOST_HOST;
        let log = format!("case output\n{}", table("cma/memory", "host"));
        let out = attribute_per_case(&log, &[key(Some(5), hh), key(Some(11), hh), key(None, hh)]);
        assert!(
            out.iter()
                .all(|e| e.as_ref().map(|e| e.data_path.class) == Some(TransportClass::Cma)),
            "{out:?}"
        );
        // Nothing printed at all: nothing known.
        assert!(attribute_per_case("no tables", &[key(Some(3), hh)])[0].is_none());
    }
}
