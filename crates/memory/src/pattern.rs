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
    let mut chunks = buf.chunks_exact(8);
    for (i, c) in chunks.by_ref().enumerate() {
        let expected = word(i, seed).to_le_bytes();
        if c != expected {
            let j = (0..8).find(|&j| c[j] != expected[j]).unwrap_or(0);
            return Err(Mismatch {
                offset: i * 8 + j,
                expected: expected[j],
                found: c[j],
            });
        }
    }
    let base = buf.len() / 8 * 8;
    for (j, &b) in buf[base..].iter().enumerate() {
        let expected = pattern_byte(base + j, seed);
        if b != expected {
            return Err(Mismatch {
                offset: base + j,
                expected,
                found: b,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
