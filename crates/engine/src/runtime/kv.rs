//! A KV case's blocks (`pair --kv-shape`): each side's own offsets, and where a destination's
//! blocks came from for verification.

use icb_memory::BlockLayout;

/// Block `i`'s offsets here and in the peer's buffer: a KV case's own per side (this side is
/// the initiator), else the shared layout's.
pub(super) fn kv_offsets(kv: Option<&icb_core::KvLayout>, layout: BlockLayout, i: usize) -> (usize, u64) {
    match kv {
        // In range: `check_kv` validated the layout against both buffers.
        Some(kv) => (kv.initiator.at(i as u64) as usize, kv.target.at(i as u64)),
        None => (layout.offset(i), layout.offset(i) as u64),
    }
}

/// Where a KV case's blocks land on this side (the destination) and where they came from.
pub(super) fn moved(kv: &icb_core::KvLayout, initiator: bool) -> icb_memory::Moved {
    let (dst, src) = if initiator {
        (kv.initiator, kv.target)
    } else {
        (kv.target, kv.initiator)
    };
    // In range: `check_kv` validated the layout and the buffers were allocated from it.
    icb_memory::Moved {
        count: kv.count as usize,
        len: kv.len as usize,
        dst_offset: dst.offset as usize,
        dst_stride: dst.stride as usize,
        src_offset: src.offset as usize,
        src_stride: src.stride as usize,
    }
}
