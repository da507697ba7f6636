//! Turning raw timings into iteration counts and latency percentiles.

use hdrhistogram::Histogram;
use icb_core::LatencyStats;

/// Round-trip times are recorded in nanoseconds, 1 ns … 100 s, 3 significant digits.
pub fn rtt_histogram() -> Histogram<u64> {
    // Fixed bounds and 3 significant digits are valid arguments, so creation cannot fail.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid fixed histogram bounds")
}

/// One-way latency statistics (half of each round trip), in microseconds.
pub fn one_way_latency(rtt_ns: &Histogram<u64>) -> Option<LatencyStats> {
    if rtt_ns.is_empty() {
        return None;
    }
    let us = |ns: f64| ns / 2.0 / 1000.0;
    let q = |p: f64| us(rtt_ns.value_at_quantile(p) as f64);
    Some(LatencyStats {
        min: us(rtt_ns.min() as f64),
        mean: us(rtt_ns.mean()),
        p50: q(0.50),
        p90: q(0.90),
        p99: q(0.99),
        p999: q(0.999),
        max: us(rtt_ns.max() as f64),
    })
}

/// Iterations for the next measured round: enough to reach `want_s` at the observed pace, at
/// least `min_iterations` in total, and no more than fits in what is left of `max_time_s`.
pub fn next_round(
    per_iter_s: f64,
    done_iters: u64,
    done_s: f64,
    min_iterations: u64,
    min_time_s: f64,
    max_time_s: f64,
) -> u64 {
    let per_iter = if per_iter_s.is_finite() && per_iter_s > 0.0 {
        per_iter_s
    } else {
        1e-7
    };
    let need_iters = min_iterations.saturating_sub(done_iters);
    let need_time = (min_time_s - done_s).max(0.0);
    // Over the estimate so a slightly optimistic pace does not cost another round: 5 % for the
    // first round (paced by the warmup), 50 % for a top-up round (whose pace includes the fixed
    // cost of starting and draining a round, so it tends to fall short).
    let margin = if done_iters == 0 { 1.05 } else { 1.5 };
    let by_time = (need_time / per_iter * margin).ceil() as u64;
    let left = (max_time_s - done_s).max(0.0);
    let cap = ((left / per_iter).floor() as u64).max(1);
    let want = need_iters.max(by_time.min(cap)).max(1);
    want.min(crate::messages::MAX_PHASE_ITERATIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_half_the_round_trip_in_microseconds() {
        let mut h = rtt_histogram();
        for ns in [1000u64, 2000, 3000, 4000] {
            h.record(ns).unwrap();
        }
        let s = one_way_latency(&h).unwrap();
        assert!((s.min - 0.5).abs() < 0.01, "{s:?}");
        assert!((s.max - 2.0).abs() < 0.01, "{s:?}");
        assert!((s.mean - 1.25).abs() < 0.01, "{s:?}");
        assert!(s.p50 >= s.min && s.p50 <= s.p99 && s.p99 <= s.max);
        assert!(one_way_latency(&rtt_histogram()).is_none());
    }

    #[test]
    fn rounds_reach_min_time_and_min_iterations_within_max_time() {
        // 1 µs per iteration, 0.2 s wanted: about 210 000 iterations.
        let n = next_round(1e-6, 0, 0.0, 32, 0.2, 5.0);
        assert!((200_000..=220_000).contains(&n), "{n}");
        // min_iterations dominates a slow case.
        assert_eq!(next_round(1.0, 0, 0.0, 32, 0.2, 5.0), 32);
        // max_time caps the time-driven count.
        let n = next_round(1e-3, 0, 0.0, 1, 100.0, 1.0);
        assert_eq!(n, 1000);
        // Already enough: one more iteration at most (never zero).
        assert_eq!(next_round(1e-6, 1000, 0.3, 32, 0.2, 5.0), 1);
        // Garbage pace does not divide by zero.
        assert!(next_round(0.0, 0, 0.0, 4, 0.001, 1.0) >= 4);
    }
}
