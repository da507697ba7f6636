//! When a case has measured enough: the round planner behind `connect`'s measured phases.
//!
//! Two rules (see [`icb_core::StopRule`]). The fixed rule runs until `min_time_s` and
//! `min_iterations` are reached, sizing rounds from the warmup's pace (at most [`MAX_FIXED_ROUNDS`]).
//! The adaptive rule runs rounds of about `round_s` and stops once the confidence interval of
//! the per-round statistic (bandwidth, or the round's latency p50) is narrower than the bound,
//! after `min_rounds` and `min_time_s`; `max_time_s` ends a case that never gets there. Pure
//! logic: the client feeds it what each round measured.

use crate::stats;
use icb_core::{Precision, RunSettings, StopReason, StopRule};

/// Most measured rounds under the fixed rule (a round repeats only when the pace fell short).
pub const MAX_FIXED_ROUNDS: u32 = 8;
/// Most rounds under the adaptive rule, whatever the clock says (rounds are ≥ 1 operation each).
pub const MAX_ADAPTIVE_ROUNDS: u32 = 100_000;

/// The per-round statistic the adaptive rule watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statistic {
    Bandwidth,
    LatencyP50,
}

impl Statistic {
    fn name(self) -> &'static str {
        match self {
            Statistic::Bandwidth => "bandwidth",
            Statistic::LatencyP50 => "latency_p50",
        }
    }
}

pub struct Rounds {
    rule: Option<StopRule>,
    statistic: Statistic,
    min_iterations: u64,
    min_time_s: f64,
    max_time_s: f64,
    /// Fewest operations per round (a bandwidth round fills its window at least once).
    min_per_round: u64,
    /// Seconds per operation, from the warmup and then from the rounds so far (0: unknown).
    pace: f64,
    samples: Vec<f64>,
    /// A round ended early at the soft deadline (`max_time_s`): the time is up.
    out_of_time: bool,
    pub done_iters: u64,
    pub done_s: f64,
    pub rounds: u32,
}

impl Rounds {
    pub fn new(s: &RunSettings, statistic: Statistic, warmup_pace_s: f64, min_per_round: u64) -> Rounds {
        Rounds {
            rule: s.stop,
            statistic,
            min_iterations: s.min_iterations,
            min_time_s: s.min_time_s,
            max_time_s: s.max_time_s,
            min_per_round: min_per_round.max(1),
            pace: if warmup_pace_s.is_finite() && warmup_pace_s > 0.0 {
                warmup_pace_s
            } else {
                0.0
            },
            samples: Vec::new(),
            out_of_time: false,
            done_iters: 0,
            done_s: 0.0,
            rounds: 0,
        }
    }

    /// Operations for the next round.
    pub fn next_iterations(&self) -> u64 {
        match self.rule {
            None if self.pace > 0.0 => stats::next_round(
                self.pace,
                self.done_iters,
                self.done_s,
                self.min_iterations,
                self.min_time_s,
                self.max_time_s,
            ),
            None => self.min_iterations.max(1),
            Some(rule) => {
                if self.pace <= 0.0 {
                    return self.min_per_round.max(self.min_iterations.min(1024));
                }
                let left = (self.max_time_s - self.done_s).max(0.0);
                let want = rule.round_s.min(left).max(0.0);
                // The small shave keeps 0.01 / 0.001 from rounding up to 11.
                let n = (want / self.pace * (1.0 - 1e-9)).ceil() as u64;
                n.max(self.min_per_round).min(crate::messages::MAX_PHASE_ITERATIONS)
            }
        }
    }

    /// Records a round of `iterations` operations that took `elapsed_s`, with its statistic
    /// (bytes/s for bandwidth, µs for latency; ignored when not finite and positive).
    pub fn record(&mut self, iterations: u64, elapsed_s: f64, sample: f64) {
        self.rounds += 1;
        self.done_iters += iterations;
        self.done_s += elapsed_s.max(0.0);
        if self.done_iters > 0 && self.done_s > 0.0 {
            self.pace = self.done_s / self.done_iters as f64;
        }
        if sample.is_finite() && sample > 0.0 {
            self.samples.push(sample);
        }
    }

    /// The last round ended early because `max_time_s` came (the runtime's soft deadline).
    pub fn cut_short(&mut self) {
        self.out_of_time = true;
    }

    /// Why to stop now, or `None` to run another round.
    pub fn finished(&self) -> Option<StopReason> {
        if self.rounds == 0 {
            return None;
        }
        let enough_basics = self.done_iters >= self.min_iterations && self.done_s >= self.min_time_s;
        match self.rule {
            None => {
                if enough_basics {
                    Some(StopReason::MinTime)
                } else if self.done_s >= self.max_time_s || self.rounds >= MAX_FIXED_ROUNDS {
                    Some(StopReason::MaxTime)
                } else {
                    None
                }
            }
            Some(rule) => {
                let precise = self
                    .rel_half_width(rule.confidence)
                    .is_some_and(|hw| hw <= rule.rel_half_width);
                if enough_basics && self.rounds >= rule.min_rounds && precise {
                    Some(StopReason::Precision)
                } else if self.out_of_time || self.done_s >= self.max_time_s || self.rounds >= MAX_ADAPTIVE_ROUNDS {
                    Some(StopReason::MaxTime)
                } else {
                    None
                }
            }
        }
    }

    fn rel_half_width(&self, confidence: f64) -> Option<f64> {
        stats::rel_half_width(&self.samples, confidence)
    }

    /// What the JSON records about how the case stopped.
    pub fn precision(&self, stopped_by: StopReason) -> Precision {
        let confidence = self.rule.map(|r| r.confidence).unwrap_or(0.95);
        Precision {
            stopped_by,
            statistic: self.statistic.name().to_string(),
            rounds: self.rounds,
            rel_half_width: self.rel_half_width(confidence),
            confidence,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adaptive(max_time_s: f64) -> RunSettings {
        RunSettings {
            max_time_s,
            ..RunSettings::verdict_profile()
        }
    }

    #[test]
    fn steady_rounds_stop_on_precision_after_the_minimum() {
        let s = adaptive(1.0);
        let mut r = Rounds::new(&s, Statistic::Bandwidth, 1e-3, 32);
        // 20 ms rounds at 1 ms per operation: 20 operations, raised to fill the window.
        assert_eq!(r.next_iterations(), 32);
        let mut stopped = None;
        for i in 0..100 {
            let bw = 5e9 * (1.0 + 0.002 * ((i % 3) as f64 - 1.0));
            r.record(32, 0.02, bw);
            stopped = r.finished();
            if stopped.is_some() {
                break;
            }
        }
        assert_eq!(stopped, Some(StopReason::Precision));
        // Five rounds is the rule's minimum, and min_time (0.05 s) is reached by then.
        assert_eq!(r.rounds, 5);
        let p = r.precision(StopReason::Precision);
        assert!(p.rel_half_width.unwrap() < 0.02 && p.statistic == "bandwidth", "{p:?}");
    }

    #[test]
    fn noisy_rounds_run_to_max_time_and_say_so() {
        let s = adaptive(0.2);
        let mut r = Rounds::new(&s, Statistic::LatencyP50, 1e-6, 1);
        let mut stopped = None;
        let mut i = 0u32;
        while stopped.is_none() {
            let v = if i.is_multiple_of(2) { 0.2 } else { 0.6 };
            r.record(20_000, 0.02, v);
            stopped = r.finished();
            i += 1;
        }
        assert_eq!(stopped, Some(StopReason::MaxTime));
        assert!(
            r.done_s >= 0.2 - 1e-9 && (10..=11).contains(&r.rounds),
            "{} rounds",
            r.rounds
        );
        let p = r.precision(StopReason::MaxTime);
        assert!(p.rel_half_width.unwrap() > 0.02, "{p:?}");
    }

    #[test]
    fn a_round_cut_short_by_the_deadline_ends_the_case() {
        let s = adaptive(1.0);
        let mut r = Rounds::new(&s, Statistic::LatencyP50, 1e-6, 1);
        r.record(1000, 0.2, 0.3);
        assert_eq!(r.finished(), None);
        r.record(10, 0.7, 0.3);
        r.cut_short();
        assert_eq!(r.finished(), Some(StopReason::MaxTime));
    }

    #[test]
    fn rounds_never_outrun_max_time() {
        let s = adaptive(1.0);
        let mut r = Rounds::new(&s, Statistic::Bandwidth, 1e-3, 1);
        r.record(990, 0.99, 1e9);
        // 10 ms left at 1 ms per operation.
        assert_eq!(r.next_iterations(), 10);
    }

    #[test]
    fn fixed_rule_keeps_the_old_behaviour() {
        let mut s = adaptive(5.0);
        s.stop = None;
        s.min_time_s = 0.2;
        s.min_iterations = 32;
        let mut r = Rounds::new(&s, Statistic::Bandwidth, 1e-6, 1);
        let n = r.next_iterations();
        assert!((200_000..=220_000).contains(&n), "{n}");
        r.record(n, 0.21, 1e9);
        assert_eq!(r.finished(), Some(StopReason::MinTime));
        let p = r.precision(StopReason::MinTime);
        assert_eq!((p.rounds, p.rel_half_width), (1, None));
    }
}
