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

/// Per-operation time statistics (not halved: a KV list's time is issue to flush complete), µs.
pub fn list_latency(ns: &Histogram<u64>) -> Option<LatencyStats> {
    if ns.is_empty() {
        return None;
    }
    let us = |v: f64| v / 1000.0;
    let q = |p: f64| us(ns.value_at_quantile(p) as f64);
    Some(LatencyStats {
        min: us(ns.min() as f64),
        mean: us(ns.mean()),
        p50: q(0.50),
        p90: q(0.90),
        p99: q(0.99),
        p999: q(0.999),
        max: us(ns.max() as f64),
    })
}

/// The standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9).
fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// Two-sided 95 % Student-t critical values for df 1 … 30 (the stop rule's usual case).
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
    2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// Two-sided Student-t critical value for `confidence` with `df` degrees of freedom: the table
/// for 95 % up to df 30, else the Cornish–Fisher expansion around the normal quantile (within
/// 0.3 % of the exact value for df ≥ 4; small df are treated as df 2, within 3 %).
pub fn t_critical(confidence: f64, df: u32) -> f64 {
    if (confidence - 0.95).abs() < 1e-12
        && let Some(&t) = T95.get((df.max(1) - 1) as usize)
    {
        return t;
    }
    let z = normal_quantile(0.5 + confidence.clamp(0.5, 0.999_9) / 2.0);
    let n = f64::from(df.max(2));
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * n)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * n * n)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * n * n * n)
}

/// Half-width of the `confidence` interval of the mean of `samples`, relative to the mean;
/// `None` below 2 samples or for a non-positive mean.
pub fn rel_half_width(samples: &[f64], confidence: f64) -> Option<f64> {
    let n = samples.len();
    if n < 2 {
        return None;
    }
    let mean = samples.iter().sum::<f64>() / n as f64;
    if !(mean.is_finite() && mean > 0.0) {
        return None;
    }
    let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_critical(confidence, (n - 1) as u32) * (var / n as f64).sqrt();
    Some(half / mean)
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
    fn t_critical_values_match_the_table() {
        // Student t, two-sided 95 %: df 2, 4, 9, 29; and the normal limit.
        for (df, exact) in [
            (1, 12.706),
            (2, 4.303),
            (4, 2.776),
            (9, 2.262),
            (29, 2.045),
            (100_000, 1.960),
        ] {
            let t = t_critical(0.95, df);
            assert!((t - exact).abs() / exact < 0.003, "df {df}: {t} vs {exact}");
        }
        // Other levels by the expansion: 99 %, df 9 and 40; 90 %, df 5.
        for (c, df, exact) in [(0.99, 9, 3.250), (0.99, 40, 2.704), (0.90, 5, 2.015)] {
            let t = t_critical(c, df);
            assert!((t - exact).abs() / exact < 0.02, "{c} df {df}: {t} vs {exact}");
        }
    }

    #[test]
    fn relative_half_width_of_the_mean() {
        assert_eq!(rel_half_width(&[5.0], 0.95), None);
        assert_eq!(rel_half_width(&[5.0, 5.0, 5.0], 0.95), Some(0.0));
        // mean 10, sd 1.155, n 4: t(3) 3.182 × 1.155 / 2 / 10 ≈ 0.184.
        let hw = rel_half_width(&[9.0, 11.0, 9.0, 11.0], 0.95).unwrap();
        assert!((hw - 0.1837).abs() < 0.01, "{hw}");
        assert!(rel_half_width(&[0.0, 0.0], 0.95).is_none());
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
