//! From a KV geometry to the pairs that move it: one row per rank-to-rank read (a decode rank
//! and the prefill rank it reads from), each with the descriptors laid out as both ranks'
//! buffers hold them.

use icb_core::{CaseShape, KvLayout, KvSide, TestKind};
use icb_kv::{KvGeometry, RankRead};

/// READ (decode pulls, as vLLM's NIXL connector does) or WRITE (prefill pushes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvOp {
    #[default]
    Read,
    Write,
}

impl KvOp {
    pub fn as_str(self) -> &'static str {
        match self {
            KvOp::Read => "read",
            KvOp::Write => "write",
        }
    }

    /// The RMA test a request is: READ is a get by the decode rank, WRITE a put by the prefill
    /// rank.
    pub fn test(self) -> TestKind {
        match self {
            KvOp::Read => TestKind::GetBw,
            KvOp::Write => TestKind::PutBw,
        }
    }
}

impl std::str::FromStr for KvOp {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read" => Ok(KvOp::Read),
            "write" => Ok(KvOp::Write),
            other => Err(format!(
                "bad --kv-op '{other}': use read (decode pulls, vLLM's way) or write (prefill pushes)"
            )),
        }
    }
}

/// One peer pair of the transfer. Its initiator (the process that posts the descriptors) is
/// the decode rank for READ and the prefill rank for WRITE; the launcher's prefill side is the
/// initiator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvRow {
    pub index: usize,
    pub decode_rank: u32,
    pub prefill_rank: u32,
    pub layout: KvLayout,
}

impl KvRow {
    /// The one case this row's pair runs.
    pub fn case(&self, op: KvOp) -> CaseShape {
        CaseShape::kv(op.test(), self.layout)
    }
}

/// Every read of the geometry, in decode-rank order.
pub fn kv_rows(geometry: &KvGeometry, op: KvOp) -> Vec<KvRow> {
    let mut rows = Vec::new();
    for rank in &geometry.decode_ranks {
        for read in &rank.reads {
            rows.push(KvRow {
                index: rows.len(),
                decode_rank: rank.decode_rank,
                prefill_rank: read.prefill_rank,
                layout: layout(geometry, read, op),
            });
        }
    }
    rows
}

/// A read's descriptors on each side: descriptor `i` (region-major, then block) starts at
/// `i × block bytes + the heads' offset in the block` of its rank's buffer, since a region is
/// `blocks × block bytes` (icb_kv's buffer model).
fn layout(geometry: &KvGeometry, read: &RankRead, op: KvOp) -> KvLayout {
    let prefill = KvSide {
        offset: read.src_offset_in_block,
        stride: read.src_block_bytes,
        buffer_bytes: geometry.prefill_rank_bytes,
    };
    let decode = KvSide {
        offset: read.dst_offset_in_block,
        stride: read.dst_block_bytes,
        buffer_bytes: geometry.decode_rank_bytes,
    };
    let (initiator, target) = match op {
        KvOp::Read => (decode, prefill),
        KvOp::Write => (prefill, decode),
    };
    KvLayout {
        count: read.descriptors,
        len: read.descriptor_bytes,
        initiator,
        target,
    }
}

/// The descriptor-count sweep's points: 1, 10, 100, … up to `max`, each a request of that many
/// blocks of `block` bytes, spaced apart (one pair of ranks). Counts whose buffer would pass
/// `max_bytes` are left out.
pub fn sweep_counts(max: u64, block: u64, max_bytes: u64) -> Vec<u64> {
    let mut counts = Vec::new();
    let mut n = 1u64;
    while n <= max {
        if KvLayout::spaced(block, n).initiator.buffer_bytes <= max_bytes {
            counts.push(n);
        }
        n = n.saturating_mul(10);
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_kv::{KvDtype, KvRequest, KvShape};

    fn geometry(model: &str, isl: u64, a: u32, b: u32) -> KvGeometry {
        let shape = KvShape {
            isl,
            page_size: 16,
            kv_dtype: KvDtype::Bf16,
            prefill_tp: a,
            decode_tp: b,
            max_rank_bytes: None,
        };
        KvRequest::new(icb_kv::builtin(model).unwrap(), shape)
            .unwrap()
            .geometry()
            .clone()
    }

    /// Llama-3.1-70B TP8 → TP4, 64 tokens: 4 blocks, 80 layers × K/V = 160 regions, 640
    /// descriptors of 4096 B per read (one head). Decode rank 1 reads prefill ranks 2 and 3, the
    /// second landing 4096 B into each 8192-byte decode block.
    #[test]
    fn a_gather_is_one_row_per_prefill_rank_with_its_own_offsets() {
        let g = geometry("llama-3.1-70b", 64, 8, 4);
        let rows = kv_rows(&g, KvOp::Read);
        assert_eq!(rows.len(), 8);
        let r = &rows[3];
        assert_eq!((r.decode_rank, r.prefill_rank), (1, 3));
        assert_eq!((r.layout.count, r.layout.len), (640, 4096));
        assert_eq!(r.layout.initiator.offset, 4096);
        assert_eq!(r.layout.initiator.stride, 8192);
        assert_eq!(r.layout.target.offset, 0);
        assert_eq!(r.layout.target.stride, 4096);
        assert_eq!(r.layout.target.buffer_bytes, 640 * 4096);
        assert_eq!(r.layout.initiator.buffer_bytes, 640 * 8192);
        assert!(rows.iter().all(|r| r.layout.is_consistent()));
        // WRITE swaps the sides: the prefill rank posts.
        let w = &kv_rows(&g, KvOp::Write)[3];
        assert_eq!(
            (w.layout.initiator, w.layout.target),
            (r.layout.target, r.layout.initiator)
        );
    }

    #[test]
    fn the_sweep_goes_by_decades_within_the_memory_cap() {
        assert_eq!(
            sweep_counts(100_000, 4096, u64::MAX),
            [1, 10, 100, 1000, 10_000, 100_000]
        );
        // 4160 B a block with its gap: 1000 blocks are 4.2 MB, 10 000 are 42 MB.
        assert_eq!(sweep_counts(100_000, 4096, 10_000_000), [1, 10, 100, 1000]);
    }
}
