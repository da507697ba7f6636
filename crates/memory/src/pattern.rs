//! The payload pattern: every byte depends on its offset and a seed, so a copy that is shifted,
//! short, stale (from an earlier iteration with another seed) or zeroed does not verify.

/// Where a payload first differs from the pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset}: expected {expected:#04x}, found {found:#04x}")]
pub struct Mismatch {
    pub offset: usize,
    pub expected: u8,
    pub found: u8,
}

#[inline(always)]
fn word(index: usize, seed: u64) -> u64 {
    // A multiplicative hash of the word index: cheap, and no two nearby words are equal.
    ((index as u64).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed).rotate_left(17)
}

/// The pattern byte at `offset` for `seed`.
pub fn pattern_byte(offset: usize, seed: u64) -> u8 {
    word(offset / 8, seed).to_le_bytes()[offset % 8]
}

/// Fills `buf` with the pattern for `seed`, a word at a time.
pub fn fill_pattern(buf: &mut [u8], seed: u64) {
    let mut chunks = buf.chunks_exact_mut(8);
    for (i, c) in chunks.by_ref().enumerate() {
        c.copy_from_slice(&word(i, seed).to_le_bytes());
    }
    let base = buf.len() / 8 * 8;
    for (j, b) in buf[base..].iter_mut().enumerate() {
        *b = pattern_byte(base + j, seed);
    }
}

/// Checks `buf` against the pattern for `seed`; reports the first differing byte.
pub fn verify_pattern(buf: &[u8], seed: u64) -> Result<(), Mismatch> {
    verify_pattern_at(buf, 0, seed)
}

/// Checks `buf`, which sits at byte `start` of a larger patterned buffer, against the pattern
/// for `seed` at those offsets; reports the first differing byte as an offset in the larger one.
pub fn verify_pattern_at(buf: &[u8], start: usize, seed: u64) -> Result<(), Mismatch> {
    let mismatch = |offset: usize, found: u8| Mismatch {
        offset,
        expected: pattern_byte(offset, seed),
        found,
    };
    // Bytes before the first word boundary, then whole words, then the tail.
    let head = ((8 - start % 8) % 8).min(buf.len());
    for (j, &b) in buf[..head].iter().enumerate() {
        if b != pattern_byte(start + j, seed) {
            return Err(mismatch(start + j, b));
        }
    }
    let body = &buf[head..];
    let first_word = (start + head) / 8;
    let mut chunks = body.chunks_exact(8);
    for (i, c) in chunks.by_ref().enumerate() {
        let expected = word(first_word + i, seed).to_le_bytes();
        if c != expected {
            let j = (0..8).find(|&j| c[j] != expected[j]).unwrap_or(0);
            return Err(mismatch(start + head + i * 8 + j, c[j]));
        }
    }
    let base = head + body.len() / 8 * 8;
    for (j, &b) in buf[base..].iter().enumerate() {
        if b != pattern_byte(start + base + j, seed) {
            return Err(mismatch(start + base + j, b));
        }
    }
    Ok(())
}

/// Pure arithmetic, defined in icb-core so that the control protocol (icb-control) can bound a
/// case's span without depending on this FFI crate.
pub use icb_core::BlockLayout;

/// Checks a destination after a block transfer: every block holds the pattern for `seed`, every
/// gap still holds `gap_seed`'s (nothing landed between the blocks), offsets as in the buffer.
pub fn verify_blocks(buf: &[u8], layout: BlockLayout, seed: u64, gap_seed: u64) -> Result<(), Mismatch> {
    for i in 0..layout.count {
        let o = layout.offset(i);
        let end = (o + layout.stride).min(buf.len());
        let block_end = (o + layout.block).min(end);
        verify_pattern_at(&buf[o.min(end)..block_end], o, seed)?;
        verify_pattern_at(&buf[block_end..end], block_end, gap_seed)?;
    }
    Ok(())
}

/// Blocks moved between two layouts (a KV read or write): block `i` sits at
/// `dst_offset + i × dst_stride` of the destination and came from `src_offset + i × src_stride`
/// of a source patterned with the seed at its own offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub count: usize,
    pub len: usize,
    pub dst_offset: usize,
    pub dst_stride: usize,
    pub src_offset: usize,
    pub src_stride: usize,
}

impl Moved {
    /// Where a KV layout's blocks land on one side and came from: on the initiator where
    /// `lands_on_initiator` (a READ), on the target otherwise (a WRITE). `None` when a figure does
    /// not fit this platform's `usize` (each engine says so in its own error).
    pub fn of_kv(kv: &icb_core::KvLayout, lands_on_initiator: bool) -> Option<Moved> {
        let (dst, src) = if lands_on_initiator {
            (kv.initiator, kv.target)
        } else {
            (kv.target, kv.initiator)
        };
        let n = |v: u64| usize::try_from(v).ok();
        Some(Moved {
            count: n(kv.count)?,
            len: n(kv.len)?,
            dst_offset: n(dst.offset)?,
            dst_stride: n(dst.stride)?,
            src_offset: n(src.offset)?,
            src_stride: n(src.stride)?,
        })
    }
}

/// Checks a destination after a KV transfer: every block holds its source block's bytes for
/// `seed`, and every byte outside the blocks still holds `gap_seed`'s pattern at its own offset
/// (nothing landed in another rank's heads or between blocks). A block's mismatch is reported at
/// its destination offset.
pub fn verify_moved(buf: &[u8], m: &Moved, seed: u64, gap_seed: u64) -> Result<(), Mismatch> {
    let mut cursor = 0usize;
    for i in 0..m.count {
        let d = (m.dst_offset + i * m.dst_stride).min(buf.len());
        let end = (d + m.len).min(buf.len());
        let s = m.src_offset + i * m.src_stride;
        verify_pattern_at(&buf[cursor.min(d)..d], cursor.min(d), gap_seed)?;
        verify_pattern_at(&buf[d..end], s, seed).map_err(|e| Mismatch {
            offset: e.offset - s + d,
            ..e
        })?;
        if end - d < m.len {
            return Err(Mismatch {
                offset: end,
                expected: pattern_byte(s + (end - d), seed),
                found: 0,
            });
        }
        cursor = end;
    }
    verify_pattern_at(&buf[cursor.min(buf.len())..], cursor, gap_seed)
}

/// Checks a destination that gathered blocks from several sources (a decode rank reading from
/// several prefill ranks): each `(moved, seed)` is one source's blocks, checked against that
/// source's pattern; every byte no block covers still holds `gap_seed`'s. Returns the blocks
/// checked. Overlapping blocks are an error (two sources wrote the same bytes).
pub fn verify_gathered(buf: &[u8], sources: &[(Moved, u64)], gap_seed: u64) -> Result<u64, GatherError> {
    // (destination start, source start, length, seed), sorted by destination.
    let mut blocks: Vec<(usize, usize, usize, u64)> = Vec::new();
    for (m, seed) in sources {
        for i in 0..m.count {
            blocks.push((
                m.dst_offset + i * m.dst_stride,
                m.src_offset + i * m.src_stride,
                m.len,
                *seed,
            ));
        }
    }
    blocks.sort_unstable_by_key(|b| b.0);
    let mut cursor = 0usize;
    for &(d, s, len, seed) in &blocks {
        if d < cursor {
            return Err(GatherError::Overlap { offset: d });
        }
        let end = d
            .checked_add(len)
            .filter(|&e| e <= buf.len())
            .ok_or(GatherError::Outside { offset: d })?;
        verify_pattern_at(&buf[cursor..d], cursor, gap_seed)?;
        verify_pattern_at(&buf[d..end], s, seed).map_err(|e| Mismatch {
            offset: e.offset - s + d,
            ..e
        })?;
        cursor = end;
    }
    verify_pattern_at(&buf[cursor.min(buf.len())..], cursor, gap_seed)?;
    Ok(blocks.len() as u64)
}

/// Why gathered blocks did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatherError {
    #[error(transparent)]
    Mismatch(#[from] Mismatch),
    #[error("two sources' blocks overlap at byte {offset}")]
    Overlap { offset: usize },
    #[error("a block at byte {offset} lies past the end of the buffer")]
    Outside { offset: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The destination side is the one the blocks land on: the initiator's offsets and stride for
    /// a READ, the target's for a WRITE, the source the other side's.
    #[test]
    fn a_kv_layout_lands_on_the_side_it_names() {
        let side = |offset, stride| icb_core::KvSide {
            offset,
            stride,
            buffer_bytes: 1 << 20,
        };
        let kv = icb_core::KvLayout {
            count: 4,
            len: 4096,
            initiator: side(8192, 16384),
            target: side(0, 4096),
        };
        let read = Moved::of_kv(&kv, true).expect("fits");
        assert_eq!((read.count, read.len), (4, 4096));
        assert_eq!(
            (read.dst_offset, read.dst_stride, read.src_offset, read.src_stride),
            (8192, 16384, 0, 4096)
        );
        let write = Moved::of_kv(&kv, false).expect("fits");
        assert_eq!(
            (write.dst_offset, write.dst_stride, write.src_offset, write.src_stride),
            (0, 4096, 8192, 16384)
        );
    }

    #[test]
    fn gathered_blocks_are_checked_per_source_and_the_gaps_stay() {
        // Two sources of 2 blocks × 4 bytes (seeds differing in every byte) interleaved into
        // 8-byte blocks.
        let (a, b) = (0x1111_1111_1111_1111u64, 0x2222_2222_2222_2222u64);
        let mut srcs = [vec![0u8; 8], vec![0u8; 8]];
        fill_pattern(&mut srcs[0], a);
        fill_pattern(&mut srcs[1], b);
        let mut dst = vec![0u8; 20];
        fill_pattern(&mut dst, 9);
        let m = |dst_offset| Moved {
            count: 2,
            len: 4,
            dst_offset,
            dst_stride: 8,
            src_offset: 0,
            src_stride: 4,
        };
        for i in 0..2 {
            dst[i * 8..i * 8 + 4].copy_from_slice(&srcs[0][i * 4..i * 4 + 4]);
            dst[i * 8 + 4..i * 8 + 8].copy_from_slice(&srcs[1][i * 4..i * 4 + 4]);
        }
        let sources = [(m(0), a), (m(4), b)];
        assert_eq!(verify_gathered(&dst, &sources, 9), Ok(4));
        // The seeds swapped: the first block is wrong.
        assert!(
            matches!(verify_gathered(&dst, &[(m(0), b), (m(4), a)], 9), Err(GatherError::Mismatch(e)) if e.offset == 0)
        );
        // A byte past the blocks changed: the gap check sees it.
        let mut bad = dst.clone();
        bad[17] ^= 1;
        assert!(matches!(verify_gathered(&bad, &sources, 9), Err(GatherError::Mismatch(e)) if e.offset == 17));
        assert_eq!(
            verify_gathered(&dst, &[(m(0), a), (m(2), b)], 9),
            Err(GatherError::Overlap { offset: 2 })
        );
    }

    #[test]
    fn moved_blocks_carry_their_source_offsets_and_gaps_stay() {
        // A decode rank holding two heads reads head 1 of three blocks from a prefill rank
        // holding one head: 100-byte blocks there, 200-byte blocks here, landing 100 bytes in.
        let mut src = vec![0u8; 300];
        fill_pattern(&mut src, 5);
        let m = Moved {
            count: 3,
            len: 100,
            dst_offset: 100,
            dst_stride: 200,
            src_offset: 0,
            src_stride: 100,
        };
        let mut dst = vec![0u8; 600];
        fill_pattern(&mut dst, !5);
        for i in 0..3 {
            dst[100 + i * 200..200 + i * 200].copy_from_slice(&src[i * 100..(i + 1) * 100]);
        }
        verify_moved(&dst, &m, 5, !5).unwrap();
        // A block from the wrong source offset, and a byte landing in a gap, are both caught.
        let mut shifted = dst.clone();
        shifted[300..400].copy_from_slice(&src[0..100]);
        assert_eq!(verify_moved(&shifted, &m, 5, !5).unwrap_err().offset, 300);
        let mut stray = dst.clone();
        stray[250] ^= 1;
        assert_eq!(verify_moved(&stray, &m, 5, !5).unwrap_err().offset, 250);
        // A destination too short for its last block fails too.
        assert!(verify_moved(&dst[..550], &m, 5, !5).is_err());
    }

    #[test]
    fn fill_then_verify_for_odd_lengths() {
        for len in [0, 1, 7, 8, 9, 4095, 4097] {
            let mut b = vec![0u8; len];
            fill_pattern(&mut b, 42);
            verify_pattern(&b, 42).unwrap();
            for (i, &v) in b.iter().enumerate() {
                assert_eq!(v, pattern_byte(i, 42));
            }
        }
    }

    #[test]
    fn verifying_a_slice_at_its_offset_matches_the_whole() {
        let mut b = vec![0u8; 4099];
        fill_pattern(&mut b, 9);
        for start in [0, 1, 5, 8, 13, 4096] {
            verify_pattern_at(&b[start..], start, 9).unwrap();
            if start > 0 {
                assert!(verify_pattern(&b[start..], 9).is_err(), "{start}");
            }
        }
        b[4000] ^= 4;
        assert_eq!(verify_pattern_at(&b[13..], 13, 9).unwrap_err().offset, 4000);
    }

    #[test]
    fn blocks_are_checked_and_gaps_must_stay_untouched() {
        // The engine pre-fills destinations with the complement seed, as here.
        let layout = BlockLayout::spaced(100, 3).unwrap();
        assert_eq!((layout.stride, layout.span()), (8192, 3 * 8192));
        let mut src = vec![0u8; layout.span()];
        fill_pattern(&mut src, 1);
        let mut dst = vec![0u8; layout.span()];
        fill_pattern(&mut dst, !1);
        assert!(verify_blocks(&dst, layout, 1, !1).is_err(), "nothing copied yet");
        for i in 0..3 {
            let o = layout.offset(i);
            dst[o..o + 100].copy_from_slice(&src[o..o + 100]);
        }
        verify_blocks(&dst, layout, 1, !1).unwrap();
        // One byte too many copied after block 1: the gap check catches it.
        let o = layout.offset(1) + 100;
        dst[o] = src[o];
        assert_eq!(verify_blocks(&dst, layout, 1, !1).unwrap_err().offset, o);
        assert_eq!(BlockLayout::single(7).span(), 7);
        assert!(BlockLayout::spaced(usize::MAX - 10, 2).is_none());
    }

    #[test]
    fn corruption_shift_and_stale_seed_are_caught() {
        let mut b = vec![0u8; 1000];
        fill_pattern(&mut b, 1);
        let mut bad = b.clone();
        bad[999] ^= 1;
        assert_eq!(verify_pattern(&bad, 1).unwrap_err().offset, 999);
        bad = b.clone();
        bad[3] ^= 0x80;
        assert_eq!(verify_pattern(&bad, 1).unwrap_err().offset, 3);
        assert!(verify_pattern(&b[1..], 1).is_err(), "shifted copy");
        assert!(verify_pattern(&b, 2).is_err(), "other seed");
        assert!(verify_pattern(&vec![0u8; 1000], 1).is_err(), "zeros");
    }
}
