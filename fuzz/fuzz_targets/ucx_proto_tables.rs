//! A UCX log as the NIXL engine reads it back (`UCX_PROTO_INFO=used|y` protocol tables, with
//! whatever else UCX logged around them): `icb_core::classify::proto_tables::parse` (the NIXL
//! engine's `evidence`), then `rma_evidence::attribute` for every direction and memory pair at a
//! few sizes (the NIXL evidence), and the UCX engine's receiver and sender views (`receive_view`,
//! `send_view`, the same tables from `ucp_worker_print_info`). Properties: rows have min ≤ max;
//! evidence and views are only given for rows whose range holds the size; a view names a
//! rendezvous protocol and the side whose table it is.
#![no_main]

use icb_core::classify::proto_tables::{parse, receive_view, send_view};
use icb_core::classify::rma_evidence::attribute;
use icb_core::{Direction, MemoryPair, ProtocolSide};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let tables = parse(&text);
    for t in &tables {
        assert!(!t.rows.is_empty(), "a table without rows");
        for r in &t.rows {
            assert!(r.min <= r.max, "row range {}..{}", r.min, r.max);
        }
    }
    for size in [1u64, 8, 4096, 65536, 1 << 20, u64::MAX] {
        let holds = tables
            .iter()
            .flat_map(|t| &t.rows)
            .any(|r| r.min <= size && size <= r.max);
        for mem in MemoryPair::ALL {
            if let Some(view) = receive_view(&tables, mem, size) {
                assert!(view.protocol.starts_with("rendezvous "), "{view:?}");
                assert_eq!(view.side, ProtocolSide::Target, "{view:?}");
                assert!(holds, "a receive view for size {size} without a row holding it");
            }
            if let Some(view) = send_view(&tables, mem, size) {
                assert!(view.protocol.starts_with("rendezvous "), "{view:?}");
                assert_eq!(view.side, ProtocolSide::Initiator, "{view:?}");
                assert!(holds, "a send view for size {size} without a row holding it");
            }
        }
        for dir in [Direction::Read, Direction::Write] {
            for mem in MemoryPair::ALL {
                if let Some(ev) = attribute(&tables, dir, mem, size) {
                    assert!(
                        ev.protocol.as_deref().is_some_and(|p| !p.is_empty()),
                        "evidence without the rows it came from"
                    );
                    let any = tables
                        .iter()
                        .flat_map(|t| &t.rows)
                        .any(|r| r.min <= size && size <= r.max);
                    assert!(any, "evidence for size {size} without a row holding it");
                }
            }
        }
    }
});
