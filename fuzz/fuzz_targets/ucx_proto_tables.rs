//! A UCX log as the NIXL engine reads it back (`UCX_PROTO_INFO=used|y` protocol tables, with
//! whatever else UCX logged around them): `icb_core::classify::proto_tables::parse` (the NIXL
//! engine's `evidence`), then `attribute` for every direction and memory pair at a few sizes (the
//! NIXL evidence). Properties: rows have min ≤ max; evidence is only given for rows whose range
//! holds the size.
#![no_main]

use icb_core::classify::proto_tables::{attribute, parse};
use icb_core::{Direction, MemoryPair};
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
