//! Bursts of requests in flight (issue 42): after the paged run, fresh ranks of the same engine,
//! operation, memory and sides whose destination buffers hold `n` copies of the request (copy `k`
//! of every block `k` decode buffers further, so copies never overlap and each is verified
//! against its source; the sources are shared, as replicas are), posting the first 1, 2, 4, …
//! copies together per repetition. Each request of a burst is timed from the burst's first post
//! (any rank) to its own last completion (any rank): p50 and p95 of those within the burst, and
//! the burst's aggregate rate (every copy's bytes over the burst's end to end).
//!
//! **The frontier** is the smallest burst size whose aggregate rate reaches 90 % of the best one
//! measured: past it, more requests in flight only queue (their p95 grows, the bandwidth does
//! not); before it, the fabric had room for more.
//!
//! **Bounded** so a default run pays about a second for it: the sizes stop at the largest whose
//! estimated cost (one warm-up and [`BURST_REPS`] measured bursts per size at the paged request's
//! own p50 per request, plus filling and verifying the extra copies' destination buffers at
//! [`FILL_BPS`]) fits [`BURST_BUDGET_S`] (1 and 2 run whatever their repetitions cost, a frontier
//! needs two points, unless their buffers alone are past it), whose
//! every copy fits the ranks' memory, and whose peer lists (on Kubernetes the coordinator's job,
//! every rank's plan in it, crosses `exec` as one argument, which Linux caps at 128 KiB: ~230
//! bytes a request) hold at most [`BURST_MAX_ENTRIES`] requests over every rank together.

use super::control::KvRuns;
use super::rank_report::RepTimes;
use super::{KvPlan, KvRow};
use icb_core::protocol::kv_rank::{RankId, RankPlan};
use icb_core::{KvBurst, KvBursts, KvOutcome};
use icb_pair::{Interrupted, PairError, PairOutcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// The burst sizes asked for: 1 to 64 requests in flight, doubling.
pub const BURST_SIZES: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];
/// Warm-up bursts per size (endpoints and pages of the new copies touched).
pub const BURST_WARMUP: u64 = 1;
/// Measured bursts per size.
pub const BURST_REPS: u64 = 4;
/// What the burst run may add to `pair --kv-shape` (estimated, seconds).
pub const BURST_BUDGET_S: f64 = 1.5;
/// The most requests every rank's peer list may hold together (each peer pair is on two lists:
/// 2 × peers × burst size).
pub const BURST_MAX_ENTRIES: u64 = 400;
/// The rate the estimate fills and verifies a destination buffer at (bytes/s): the ranks write
/// their pattern into every byte and check every byte afterwards. A debug build on the loaded
/// 2-core build machine does ~20 MB/s (the run deadlines' own figure; a burst run of 16 copies
/// of 8 MiB spent 13 of its 18 s there before this bound), a release build well over 1 GB/s.
const FILL_BPS: f64 = if cfg!(debug_assertions) { 20e6 } else { 1e9 };
/// The sizes the repetitions' time never cuts (a frontier needs two points; their buffers, memory
/// and the list still bound them: a default 1 GiB request's second copy alone is past the budget).
const LADDER_FLOOR: u32 = 2;
/// The frontier's share of the best aggregate rate.
const FRONTIER_SHARE: f64 = 0.9;

/// How-manieth run the burst one is ([`KvRuns::run`]; the TCP control is 1, the bulk row 2): on
/// Kubernetes its rank pods are `<run>-c3`.
pub const BURST_RUN: u32 = 3;

/// One burst size's measured repetitions, as the coordinator gathered them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BurstReps {
    pub size: u32,
    pub reps: Vec<RepTimes>,
}

/// The burst sizes a plan whose paged request took `paged_ms` (p50) measures, and why they stop
/// where they do (`None`: all of [`BURST_SIZES`]). `rank_limit` is the most bytes one rank's
/// buffer may hold. Fewer than two sizes: no burst run, and the reason says what would fit.
pub fn burst_sizes(plan: &KvPlan, paged_ms: f64, rank_limit: u64) -> (Vec<u32>, Option<String>) {
    with_advice(plan, paged_ms, rank_limit, FILL_BPS)
}

/// [`sizes_within`], and where fewer than two sizes fit, what to do in the same line: the
/// longest `--isl` (halving the plan's) whose bursts of 2 fit, or how to leave bursts out.
fn with_advice(plan: &KvPlan, paged_ms: f64, rank_limit: u64, fill_bps: f64) -> (Vec<u32>, Option<String>) {
    let (sizes, why) = sizes_within(plan, paged_ms, rank_limit, fill_bps);
    if sizes.len() >= LADDER_FLOOR as usize {
        return (sizes, why);
    }
    let advice = match fitting_isl(plan, paged_ms, rank_limit, fill_bps) {
        Some(isl) => format!("--isl {isl} or shorter fits {LADDER_FLOOR} in flight"),
        None => "no shorter --isl fits either: leave bursts out with --kv-extra-runs bulk,other-op".into(),
    };
    let why = why.unwrap_or_else(|| "fewer than two burst sizes".into());
    (sizes, Some(format!("{why}; {advice}")))
}

/// The longest prompt, halving the plan's `isl` down to one block, whose burst run measures
/// [`LADDER_FLOOR`] sizes: its request's p50 taken as proportional to its tokens (the buffers,
/// the memory and the lists are its own geometry's; its peers are the plan's, whatever the isl).
fn fitting_isl(plan: &KvPlan, paged_ms: f64, rank_limit: u64, fill_bps: f64) -> Option<u64> {
    let shape = *plan.request.shape();
    let mut isl = shape.isl / 2;
    while isl >= u64::from(shape.page_size) && isl > 0 {
        let request = icb_kv::KvRequest::new(plan.request.model().clone(), icb_kv::KvShape { isl, ..shape }).ok()?;
        let shorter = KvPlan {
            request,
            ..plan.clone()
        };
        let ms = paged_ms * isl as f64 / shape.isl as f64;
        if sizes_within(&shorter, ms, rank_limit, fill_bps).0.len() >= LADDER_FLOOR as usize {
            return Some(isl);
        }
        isl /= 2;
    }
    None
}

/// [`burst_sizes`] at a buffer rate of `fill_bps`: the extra copies (beyond the one any fresh
/// run of ranks fills, as the bulk row's) are filled and checked once each.
fn sizes_within(plan: &KvPlan, paged_ms: f64, rank_limit: u64, fill_bps: f64) -> (Vec<u32>, Option<String>) {
    let g = plan.request.geometry();
    let entries = 2 * plan.rows.len() as u64;
    let decode_bytes = u64::from(g.decode_tp) * g.decode_rank_bytes;
    let mut sizes = Vec::new();
    let mut spent_s = 0.0;
    for &n in &BURST_SIZES {
        let per_size = (BURST_WARMUP + BURST_REPS) as f64 * f64::from(n) * paged_ms / 1e3;
        let buffers = 2.0 * (f64::from(n - 1) * decode_bytes as f64) / fill_bps;
        let why = if u64::from(n) * entries > BURST_MAX_ENTRIES {
            Some(format!(
                "{n} in flight: {} requests on the ranks' lists, over {BURST_MAX_ENTRIES}",
                u64::from(n) * entries
            ))
        } else if g.decode_rank_bytes.saturating_mul(u64::from(n)) > rank_limit {
            Some(format!("{n} in flight: a decode rank's copies would pass its memory"))
        } else if buffers > BURST_BUDGET_S || (n > LADDER_FLOOR && spent_s + per_size + buffers > BURST_BUDGET_S) {
            Some(format!(
                "{n} in flight: estimated past the burst run's {BURST_BUDGET_S} s"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return (sizes, Some(why));
        }
        spent_s += per_size;
        sizes.push(n);
    }
    (sizes, None)
}

/// The burst run's plan: bounded as the bulk row is, its ranks holding `sizes`' largest copies.
pub fn burst_plan(plan: &KvPlan, sizes: &[u32]) -> KvPlan {
    let mut burst = plan.short_extra_run();
    burst.in_flight = sizes.to_vec();
    burst
}

/// The copies of a row a burst run's rank plans carry: copy `k` lands `k` decode buffers further
/// (the decode side's buffer holding every copy); the prefill side stays where it was.
pub(super) fn copy_of(row: &KvRow, k: u32, copies: u32, read: bool, decode_rank_bytes: u64) -> icb_core::KvLayout {
    let mut layout = row.layout;
    let decode = if read {
        &mut layout.initiator
    } else {
        &mut layout.target
    };
    decode.offset += u64::from(k) * decode_rank_bytes;
    decode.buffer_bytes = decode_rank_bytes * u64::from(copies);
    layout
}

/// What each rank posts for a burst of `size` in a job: its first `size` requests' peers (its
/// peer list holds the largest size's copies, request by request), or every peer (no bursts).
pub fn firsts(job: &super::CoordinatorJob, size: u32) -> Vec<Option<u32>> {
    let copies = job.bursts.iter().copied().max().unwrap_or(1).max(1);
    job.plans
        .iter()
        .map(|p| {
            let per_request = p.peers.len() as u32 / copies;
            (!job.bursts.is_empty() && per_request > 0).then_some(per_request * size)
        })
        .collect()
}

/// Every burst size's row from the coordinator's times; each rank's peers per request from its
/// plan (the lists hold `copies` requests).
pub fn burst_rows(bursts: &[BurstReps], plans: &[RankPlan], request_bytes: u64) -> Vec<KvBurst> {
    let copies = bursts.iter().map(|b| b.size).max().unwrap_or(1).max(1) as usize;
    let per_request: BTreeMap<RankId, usize> = plans.iter().map(|p| (p.id, p.peers.len() / copies)).collect();
    bursts
        .iter()
        .filter_map(|b| burst_row(b, &per_request, request_bytes))
        .collect()
}

/// One size's row: per repetition, each request's completion from the burst's first post; the
/// burst's end to end is its last request's.
fn burst_row(b: &BurstReps, per_request: &BTreeMap<RankId, usize>, request_bytes: u64) -> Option<KvBurst> {
    let mut completions = Vec::new();
    let mut bursts = Vec::new();
    for rep in &b.reps {
        let start = rep.ranks.iter().map(|r| r.1).min()?;
        let mut last = 0u64;
        for k in 0..b.size as usize {
            let done = rep
                .ranks
                .iter()
                .filter_map(|(id, s, _, done)| {
                    let n = *per_request.get(id)?;
                    done.get(k * n..(k + 1) * n)?.iter().max().map(|d| s + d - start)
                })
                .max()?;
            completions.push(done);
            last = last.max(done);
        }
        bursts.push(last);
    }
    let burst_ns = nearest_rank(&mut bursts, 0.5)?;
    let secs = burst_ns as f64 / 1e9;
    Some(KvBurst {
        requests: b.size,
        repetitions: b.reps.len() as u64,
        burst_ms_p50: burst_ns as f64 / 1e6,
        burst_ms_p95: nearest_rank(&mut bursts, 0.95)? as f64 / 1e6,
        aggregate_bps: if secs > 0.0 {
            f64::from(b.size) * request_bytes as f64 / secs
        } else {
            0.0
        },
        request_ms_p50: nearest_rank(&mut completions, 0.5)? as f64 / 1e6,
        request_ms_p95: nearest_rank(&mut completions, 0.95)? as f64 / 1e6,
        // Sorted by `nearest_rank` above.
        burst_ms_min: bursts.first().map(|ns| *ns as f64 / 1e6),
        burst_ms_max: bursts.last().map(|ns| *ns as f64 / 1e6),
        request_ms_min: completions.first().map(|ns| *ns as f64 / 1e6),
        request_ms_max: completions.last().map(|ns| *ns as f64 / 1e6),
    })
}

/// The nearest-rank percentile `q` of `v` (sorted here).
fn nearest_rank(v: &mut [u64], q: f64) -> Option<u64> {
    v.sort_unstable();
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1)) - 1;
    v.get(i).copied()
}

/// The smallest burst size whose aggregate rate reaches [`FRONTIER_SHARE`] of the best.
pub fn frontier(sizes: &[KvBurst]) -> Option<u32> {
    let best = sizes.iter().map(|b| b.aggregate_bps).fold(0.0, f64::max);
    sizes
        .iter()
        .filter(|b| best > 0.0 && b.aggregate_bps >= FRONTIER_SHARE * best)
        .map(|b| b.requests)
        .min()
}

/// After a complete paged run (`outcome`) of a plan that asks for bursts, the burst run on fresh
/// ranks, its rows put into the report's `kv.bursts` (a run that failed or was bounded out: why).
/// An interruption during it ends as [`PairError::Interrupted`] carrying the paged run's report.
pub async fn add_bursts<R: KvRuns>(
    plan: &KvPlan,
    runs: &mut R,
    outcome: &mut PairOutcome,
    cancel: &CancellationToken,
) -> Result<(), PairError> {
    if !plan.bursts || outcome.report.partial.is_some() {
        return Ok(());
    }
    let Some(paged_ms) = outcome.report.kv.as_deref().and_then(|kv| kv.request_ms_p50) else {
        return Ok(());
    };
    let (sizes, bounded_by) = burst_sizes(plan, paged_ms, plan.rank_limit);
    let mut bursts = if sizes.len() < LADDER_FLOOR as usize {
        not_measured(bounded_by.as_deref().unwrap_or("fewer than two burst sizes"))
    } else {
        match runs
            .run(&burst_plan(plan, &sizes), BURST_RUN, cancel, &mut |_| {})
            .await
        {
            Ok(o) => {
                if !o.cleanup.is_empty() {
                    outcome.cleanup = format!("{}; bursts: {}", outcome.cleanup, o.cleanup);
                }
                match o.report.kv.as_deref() {
                    Some(kv) => of_run(kv),
                    None => not_measured("the burst run's report has no KV section"),
                }
            }
            Err(PairError::Interrupted(i)) => return Err(PairError::Interrupted(Interrupted::after(outcome, i))),
            Err(e) => not_measured(&e.to_string()),
        }
    };
    bursts.bounded_by = bounded_by;
    tracing::info!("bursts: {:?} frontier {:?}", bursts.sizes.len(), bursts.frontier);
    if let Some(kv) = outcome.report.kv.as_mut() {
        kv.bursts = Some(bursts);
    }
    Ok(())
}

/// The burst run's own report: its rows (set by the run), checked and with its data paths.
fn of_run(kv: &KvOutcome) -> KvBursts {
    let sizes = kv.bursts.as_ref().map(|b| b.sizes.clone()).unwrap_or_default();
    let failure = kv
        .peers
        .iter()
        .find_map(|p| p.failure.clone())
        .or_else(|| sizes.is_empty().then(|| "the burst run measured no burst".to_string()));
    KvBursts {
        frontier: frontier(&sizes),
        sizes,
        bounded_by: None,
        verified: super::bulk::all_verified(kv),
        data_paths: super::bulk::distinct_data_paths(kv),
        failure,
    }
}

/// Bursts that measured nothing: why.
pub fn not_measured(why: &str) -> KvBursts {
    KvBursts {
        sizes: Vec::new(),
        frontier: None,
        bounded_by: None,
        verified: false,
        data_paths: Vec::new(),
        failure: Some(why.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KvOp, MAX_RANK_BYTES};
    use icb_core::protocol::kv_rank::RankSide;

    fn plan((a, b): (u32, u32)) -> KvPlan {
        plan_of((a, b), 64)
    }

    fn plan_of((a, b): (u32, u32), isl: u64) -> KvPlan {
        let shape = icb_kv::KvShape {
            isl,
            page_size: 16,
            kv_dtype: icb_kv::KvDtype::Bf16,
            prefill_tp: a,
            decode_tp: b,
            max_rank_bytes: None,
        };
        let request = icb_kv::KvRequest::new(icb_kv::builtin("llama-3.1-8b").unwrap(), shape).unwrap();
        let pair = icb_pair::PairPlan::new(icb_core::RunSettings::full_curve(), Default::default());
        KvPlan::new(pair, request, KvOp::Read)
    }

    /// Llama-3.1-8B at 64 tokens, TP2 → TP1: one decode rank of 8 MiB reading two peers. At
    /// 1 GB/s and a 1 ms request, 5 bursts of 1 … 32 cost 0.315 s and the 31 extra copies' buffers
    /// (248 MiB filled and checked) 0.52 s: all fit 1.5 s but 64 (1.7 s in all); 2 × 2 peer
    /// pairs × 64 are within the lists' 400. At 10 ms only 1 … 8 fit; 100 MiB of memory per rank holds 8
    /// copies of 8 MiB but not 16, 12 MiB not 2. At a debug build's 20 MB/s the 3 extra copies of
    /// a burst of 4 alone take 2.5 s: 1 and 2, the floor the budget never cuts.
    #[test]
    fn the_sizes_stop_at_the_budget_the_memory_or_the_list() {
        let p = plan((2, 1));
        assert_eq!(p.request.geometry().decode_rank_bytes, 8 << 20);
        let (sizes, why) = sizes_within(&p, 1.0, MAX_RANK_BYTES, 1e9);
        assert_eq!(sizes, [1, 2, 4, 8, 16, 32]);
        assert_eq!(
            why.as_deref(),
            Some("64 in flight: estimated past the burst run's 1.5 s")
        );
        let (sizes, _) = sizes_within(&p, 10.0, MAX_RANK_BYTES, 1e9);
        assert_eq!(sizes, [1, 2, 4, 8]);
        let (sizes, why) = sizes_within(&p, 0.001, 100 << 20, 1e9);
        assert_eq!(sizes, [1, 2, 4, 8]);
        assert_eq!(
            why.as_deref(),
            Some("16 in flight: a decode rank's copies would pass its memory")
        );
        // A 600 ms request is past the budget from the start: only the floor, 1 and 2, runs.
        let (sizes, why) = sizes_within(&p, 600.0, MAX_RANK_BYTES, 1e9);
        assert_eq!(sizes, [1, 2]);
        assert_eq!(
            why.as_deref(),
            Some("4 in flight: estimated past the burst run's 1.5 s")
        );
        let (sizes, why) = sizes_within(&p, 1.0, 12 << 20, 1e9);
        assert_eq!(sizes, [1]);
        assert_eq!(
            why.as_deref(),
            Some("2 in flight: a decode rank's copies would pass its memory")
        );
        let (sizes, why) = sizes_within(&p, 1.0, MAX_RANK_BYTES, 20e6);
        assert_eq!(sizes, [1, 2]);
        assert_eq!(
            why.as_deref(),
            Some("4 in flight: estimated past the burst run's 1.5 s")
        );
        // Bounded below two sizes: the line says what fits.
        let (sizes, why) = with_advice(&p, 1.0, 12 << 20, 1e9);
        assert_eq!(sizes, [1]);
        assert_eq!(
            why.as_deref(),
            Some("2 in flight: a decode rank's copies would pass its memory; --isl 32 or shorter fits 2 in flight")
        );
        // TP8 → TP1: 8 peer pairs, each on two lists: 16 in flight are 256 requests, 32 are 512.
        let (sizes, why) = sizes_within(&plan((8, 1)), 0.001, MAX_RANK_BYTES, 1e9);
        assert_eq!(sizes, [1, 2, 4, 8, 16]);
        assert_eq!(
            why.as_deref(),
            Some("32 in flight: 512 requests on the ranks' lists, over 400")
        );
    }

    /// The default prompt (8192 tokens of Llama-3.1-8B, TP1 → TP1: a 1 GiB decode rank): its
    /// second copy alone (2 GiB filled and checked at 1 GB/s) is past the 1.5 s, so no burst
    /// runs, and the one line says which `--isl` would (4096: 0.5 GiB, 1.07 s); at a debug
    /// build's 20 MB/s only 64 tokens (8 MiB: 0.84 s). Where nothing fits, how to leave them out.
    #[test]
    fn the_default_isl_fits_no_burst_and_the_line_says_which_isl_would() {
        let p = plan_of((1, 1), 8192);
        assert_eq!(p.request.geometry().decode_rank_bytes, 1 << 30);
        let (sizes, why) = with_advice(&p, 50.0, MAX_RANK_BYTES, 1e9);
        assert_eq!(sizes, [1]);
        assert_eq!(
            why.as_deref(),
            Some("2 in flight: estimated past the burst run's 1.5 s; --isl 4096 or shorter fits 2 in flight")
        );
        let (_, why) = with_advice(&p, 50.0, MAX_RANK_BYTES, 20e6);
        assert!(why.is_some_and(|w| w.ends_with("; --isl 64 or shorter fits 2 in flight")));
        let (sizes, why) = with_advice(&p, 50.0, 1 << 10, 1e9);
        assert!(sizes.is_empty());
        assert!(why.is_some_and(|w| {
            w.ends_with("; no shorter --isl fits either: leave bursts out with --kv-extra-runs bulk,other-op")
        }),);
    }

    /// Two decode ranks, two peers per request each, a burst of 2: request 0's peers complete at 3
    /// and 4 ms on rank 0 (started at 0) and 2 ms on rank 1 (started 1 ms later: 3 ms); request 1's
    /// at 6 ms on rank 0 and 7 ms on rank 1 (8 ms). The burst is 8 ms: 2 × 4 MiB over it.
    #[test]
    fn a_request_of_a_burst_ends_with_its_last_peer_on_any_rank() {
        let id = |rank| RankId {
            side: RankSide::Decode,
            rank,
        };
        let ms = |v: u64| v * 1_000_000;
        let rep = RepTimes {
            ranks: vec![
                (id(0), 0, vec![0; 4], vec![ms(3), ms(4), ms(6), ms(5)]),
                (id(1), ms(1), vec![0; 2], vec![ms(2), ms(1), ms(7), ms(6)]),
            ],
        };
        let burst = BurstReps {
            size: 2,
            reps: vec![rep],
        };
        let per_request = BTreeMap::from([(id(0), 2), (id(1), 2)]);
        let row = burst_row(&burst, &per_request, 4 << 20).unwrap();
        assert_eq!((row.requests, row.repetitions), (2, 1));
        assert_eq!((row.request_ms_p50, row.request_ms_p95), (4.0, 8.0));
        assert_eq!((row.burst_ms_p50, row.burst_ms_p95), (8.0, 8.0));
        assert_eq!((row.burst_ms_min, row.burst_ms_max), (Some(8.0), Some(8.0)));
        assert_eq!((row.request_ms_min, row.request_ms_max), (Some(4.0), Some(8.0)));
        assert!((row.aggregate_bps - 2.0 * (4u64 << 20) as f64 / 0.008).abs() < 1.0);
        // The frontier: the smallest size at 90 % of the best aggregate rate.
        let at = |requests, aggregate_bps| KvBurst {
            aggregate_bps,
            requests,
            ..row.clone()
        };
        assert_eq!(
            frontier(&[at(1, 1e9), at(2, 1.9e9), at(4, 2.0e9), at(8, 2.05e9)]),
            Some(2)
        );
        assert_eq!(frontier(&[at(1, 1e9), at(2, 0.9e9)]), Some(1));
        assert_eq!(frontier(&[]), None);
    }
}
