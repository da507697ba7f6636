//! Shared by the KV test binaries, local (`pair_kv`: `mod kv_support;`) and on the emulated
//! cluster (through `pair_kube_support`): what every rank of the per-rank model must show
//! whatever its placement. A directory without a main.rs is not a test target of its own.
#![allow(dead_code)]

use icb_core::KvOutcome;
use icb_core::model::KvRank;

/// Each side's ranks are exactly 0..n: `a` prefill ranks and `b` decode ranks.
pub fn assert_ranks_numbered(kv: &KvOutcome, (a, b): (u32, u32)) {
    for (side, n) in [("prefill", a), ("decode", b)] {
        let mut ranks: Vec<u32> = kv.ranks.iter().filter(|r| r.side == side).map(|r| r.rank).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..n).collect::<Vec<_>>(), "{side} ranks: {:?}", kv.ranks);
    }
}

/// A rank's own counts are the sums over its peers (those naming it on its side): how many, the
/// bytes, and on a decode rank the blocks it verified, one per descriptor received.
pub fn assert_rank_sums_its_peers(kv: &KvOutcome, r: &KvRank) {
    let mine: Vec<_> = kv
        .peers
        .iter()
        .filter(|p| {
            if r.side == "decode" {
                p.decode_rank == r.rank
            } else {
                p.prefill_rank == r.rank
            }
        })
        .collect();
    assert_eq!(r.peers as usize, mine.len(), "{r:?}");
    assert_eq!(r.bytes, mine.iter().map(|p| p.bytes).sum::<u64>(), "{r:?}");
    if r.side == "decode" {
        assert_eq!(
            r.blocks_verified,
            mine.iter().map(|p| p.descriptors).sum::<u64>(),
            "{r:?}"
        );
    }
}
