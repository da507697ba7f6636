//! Fitting a case to its time budget.
//!
//! On a degraded link (TCP fallback, a rate-limited NIC: 30 Mbit/s moves a 4 MiB message in
//! about 1.1 s) the planned warmup (16 operations) and one full window (32 operations) take
//! minutes, far past the phase deadline, and the run ended in a deadline error instead of the
//! measured, slow figure the operator needs. So the client times the probe operation first and
//! commits to no more than the budget allows: a shorter warmup, a smaller window, a phase
//! deadline sized from the measured pace. On a healthy link every function returns the plan.

/// Share of the case's `max_time_s` the warmup may take after the probe.
const WARMUP_SHARE: f64 = 0.5;
/// A phase may run this many times longer than the pace predicts before it is a fault.
const PACE_MARGIN: f64 = 4.0;

/// Warmup operations to run after the probe: the planned count when they fit within half the
/// case's budget at the probe's pace, else as many as fit (none when one does not).
pub fn warmup_after_probe(planned: u64, probe_s: Option<f64>, max_time_s: f64) -> u64 {
    match probe_s {
        Some(p) if p.is_finite() && p > 0.0 => {
            let fit = (max_time_s * WARMUP_SHARE / p).floor();
            if fit >= planned as f64 {
                planned
            } else {
                fit.max(0.0) as u64
            }
        }
        // No estimate (the probe took no measurable time): a fast path, run the plan.
        _ => planned,
    }
}

/// The window for measured rounds: the planned one when a full window (each operation taking
/// `pace_s`) fits into the `left_s` seconds the case has left, else the largest that fits, at
/// least one operation.
pub fn window(planned: u32, pace_s: f64, left_s: f64) -> u32 {
    if !(pace_s.is_finite() && pace_s > 0.0) || f64::from(planned) * pace_s <= left_s {
        return planned;
    }
    let fit = (left_s.max(0.0) / pace_s).floor();
    (fit as u32).clamp(1, planned.max(1))
}

/// What the pair's deadline allows each case on top of `max_time_s` (`icb_pair`'s per-case
/// margin: warmup, registration, verification).
const CASE_MARGIN_S: f64 = 2.0;

/// `Some(seconds per operation)` when a case moving `bytes` per operation cannot finish within
/// its share of the pair's deadline at `slowest_bps` (the slowest rate measured so far): a
/// measured case needs its probe and at least one timed operation.
pub fn too_slow(bytes: u64, slowest_bps: f64, max_time_s: f64) -> Option<f64> {
    if !(slowest_bps.is_finite() && slowest_bps > 0.0) {
        return None;
    }
    let op_s = bytes as f64 / slowest_bps;
    (2.0 * op_s > max_time_s + CASE_MARGIN_S).then_some(op_s)
}

/// The hard deadline of a phase of `n` operations: twice the time the case has left (its soft
/// deadline's slack) or a generous multiple of what the measured pace predicts, whichever is
/// longer, plus `slack_s` for setup. A round that the budget allows never hits it.
pub fn phase_timeout(left_s: f64, n: u64, pace_s: f64, slack_s: f64) -> f64 {
    let predicted = if pace_s.is_finite() && pace_s > 0.0 {
        n as f64 * pace_s * PACE_MARGIN
    } else {
        0.0
    };
    (left_s.max(0.0) * 2.0).max(predicted) + slack_s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 MiB over a 30 Mbit/s link.
    const SLOW_OP_S: f64 = 4.0 * 1048576.0 * 8.0 / 30e6;

    #[test]
    fn a_healthy_link_runs_the_plan() {
        // 4 MiB at 1 GB/s: 4 ms per operation.
        assert_eq!(warmup_after_probe(16, Some(0.004), 1.0), 16);
        assert_eq!(warmup_after_probe(16, None, 1.0), 16);
        assert_eq!(window(32, 0.004, 1.0), 32);
        assert_eq!(phase_timeout(1.0, 32, 0.004, 30.0), 32.0);
    }

    #[test]
    fn a_slow_link_gets_a_warmup_and_window_that_fit() {
        assert_eq!(warmup_after_probe(16, Some(SLOW_OP_S), 1.0), 0);
        assert_eq!(warmup_after_probe(16, Some(0.1), 1.0), 5);
        assert_eq!(window(32, SLOW_OP_S, 1.0), 1);
        assert_eq!(window(32, 0.1, 1.0), 10);
        assert_eq!(window(32, SLOW_OP_S, 0.0), 1);
    }

    #[test]
    fn cases_a_very_slow_link_cannot_finish_are_named_before_they_start() {
        let mib4 = 4 << 20;
        // 30 Mbit/s: 1.1 s per 4 MiB operation, a case fits into 1 s + 2 s.
        assert_eq!(too_slow(mib4, 30e6 / 8.0, 1.0), None);
        // 10 Mbit/s: 3.4 s per operation, two of them do not.
        let op = too_slow(mib4, 10e6 / 8.0, 1.0).expect("too slow");
        assert!((op - 3.36).abs() < 0.01, "{op}");
        // A healthy link, or nothing measured yet: run.
        assert_eq!(too_slow(mib4, 5e9, 1.0), None);
        assert_eq!(too_slow(mib4, 0.0, 1.0), None);
    }

    #[test]
    fn the_phase_deadline_covers_what_the_pace_predicts() {
        // One 4 MiB operation at 1 Mbit/s takes 34 s: more than the old fixed 2 × 1 s + 30 s.
        let one_mbit = SLOW_OP_S * 30.0;
        assert!(phase_timeout(1.0, 1, one_mbit, 30.0) > one_mbit * 2.0);
        assert_eq!(phase_timeout(1.0, 1, f64::NAN, 30.0), 32.0);
    }
}
