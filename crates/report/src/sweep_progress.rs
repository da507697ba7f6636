//! A sweep's plan and progress as text: what `--dry-run` prints, the one line a finished pair
//! gets in a log, and the message of the terminal bar fitted to its width. The bar itself
//! (indicatif) is the CLI's.

use crate::text::short_duration;
use icb_sweep::run::{SecondPass, Step};
use icb_sweep::score;
use icb_sweep::{Outcome, SweepResults};
use std::time::Duration;

/// One finished pair of a sweep, as the progress shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PairDone {
    /// 1: the schedule; 2: the second pass.
    pub pass: u8,
    /// Pairs of this pass finished, this one included, and planned.
    pub done: usize,
    pub total: usize,
    /// The round this pair ran in (1-based) and the rounds of this pass.
    pub round: usize,
    pub rounds: usize,
    /// `node-1→node-4`.
    pub pair: String,
    /// `pass (rdma, 22.01 GB/s)`, `fail (tcp, 1.00 GB/s)`, `unschedulable: …`.
    pub outcome: String,
    pub seconds: f64,
    /// Pairs of this pass that are bad so far (failed, nothing measured, or slow against the
    /// pairs so far), this one included.
    pub failures: usize,
    pub eta: Option<Duration>,
}

/// Whether a finished pair stays printed above the bar: bad pairs (`✗`: failed or slow) and
/// pairs that say nothing about the fabric (`!`: unschedulable) do; good pairs only move the bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notable {
    No,
    Failed,
    Other,
}

/// The line a finished pair gets when stderr is not a terminal (CronJob logs, CI): everything on
/// one line, so `grep`, `kubectl logs` and log shippers see whole records.
/// `ic-bench: sweep pass 1 [3/12] round 2/6 node-1→node-4: fail (tcp, 1.00 GB/s) in 14.5s; 1 failed or slow so far; ETA 2m30s`
pub fn sweep_pair_line(p: &PairDone) -> String {
    format!(
        "ic-bench: sweep pass {} [{}/{}] round {}/{} {}: {} in {:.1}s; {} failed or slow so far; ETA {}",
        p.pass,
        p.done,
        p.total,
        p.round,
        p.rounds,
        p.pair,
        p.outcome,
        p.seconds,
        p.failures,
        p.eta.map_or_else(|| "unknown".to_string(), short_duration),
    )
}

/// The sweep bar: fixed-width fields first, then a message fitted to what is left of the line
/// ([`sweep_bar_room`]), so nothing is cut at the terminal's edge.
pub const SWEEP_BAR_TEMPLATE: &str = "{spinner} {elapsed:>4} {prefix} [{bar:12}] {pos}/{len} · {msg}";

/// Columns left for the message on a `width`-column terminal: the template's fixed parts
/// (spinner, elapsed, `pass P round R/N`, the bar, `done/total`) at their widest, and one column
/// spare so the cursor never wraps.
pub fn sweep_bar_room(width: u16, rounds: usize, total: usize) -> usize {
    let digits = |n: usize| n.to_string().len();
    let prefix = "pass 1 round ".len() + 2 * digits(rounds) + 1;
    let fixed = 1 + 1 + 4 + 1 + prefix + 1 + 14 + 1 + 2 * digits(total) + 1 + 3;
    usize::from(width).saturating_sub(fixed + 1)
}

/// `ETA 2m30s · 1 bad · node-1→node-4: fail (tcp, 1.00 GB/s)`, cut with `…` to `room` columns;
/// the ETA and the bad count come first so they are never the part cut.
pub fn sweep_bar_message(p: &PairDone, room: usize) -> String {
    let text = format!(
        "ETA {} · {} bad · {}: {}",
        p.eta.map_or_else(|| "?".to_string(), short_duration),
        p.failures,
        p.pair,
        p.outcome
    );
    if text.chars().count() <= room {
        return text;
    }
    let mut cut: String = text.chars().take(room.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Time left at the rate so far: `elapsed` for `done` of `total` pairs (pairs of a round run
/// at once, so the rate already counts the concurrency). `None` before the first pair.
pub fn sweep_eta(elapsed: Duration, done: usize, total: usize) -> Option<Duration> {
    (done > 0).then(|| elapsed.mul_f64(total.saturating_sub(done) as f64 / done as f64))
}

impl Notable {
    /// Failed pairs and pairs that say nothing about the fabric stay on screen; measured pairs
    /// that did not fail only move the bar (their warnings are in the results).
    pub fn of(outcome: &Outcome) -> Notable {
        match outcome {
            o if o.failed() => Notable::Failed,
            Outcome::Measured { .. } => Notable::No,
            Outcome::Unschedulable { .. } | Outcome::Error { .. } | Outcome::Disrupted { .. } => Notable::Other,
        }
    }
}

/// The plan `sweep --dry-run` prints: rounds, pairs, pods at once, the estimated wall time.
pub fn plan_text(r: &SweepResults) -> String {
    let pairs = r.planned();
    let widest = r.rounds.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = format!(
        "sweep plan: schedule {}, {} nodes, {} pairs in {} rounds, up to {} pairs ({} pods) at once\n\
         estimated wall: {} rounds × {:.0} s per-pair budget = at most {:.0} s (plus a second pass on suspects)\n",
        r.schedule.name(),
        r.nodes.len(),
        pairs,
        r.rounds.len(),
        widest,
        widest * 2,
        r.rounds.len(),
        r.pair_budget_s,
        r.rounds.len() as f64 * r.pair_budget_s
    );
    for (i, round) in r.rounds.iter().enumerate() {
        let list: Vec<String> = round.iter().map(ToString::to_string).collect();
        out.push_str(&format!("round {}: {}\n", i + 1, list.join("  ")));
    }
    out
}

/// The progress line of the pair just recorded (the last of `results.pairs`), with the bad
/// pairs of this pass counted as the node verdicts will count them: failed, nothing measured, or
/// slow against the pairs so far (so the count can move as the reference settles).
pub fn last_pair(results: &SweepResults, step: &Step) -> Option<(PairDone, Notable)> {
    let Step {
        pass,
        done,
        total,
        round,
        rounds,
        elapsed,
    } = *step;
    let reference = score::reference_bandwidth(&results.pairs);
    let failures = results
        .pairs
        .iter()
        .filter(|r| r.pass == pass && score::pair_bad(r, reference))
        .count();
    let last = results.pairs.last()?;
    let slow = score::pair_bad(last, reference) && !last.outcome.failed();
    Some((
        PairDone {
            pass,
            done,
            total,
            round,
            rounds,
            pair: last.pair.to_string(),
            outcome: format!("{}{}", last.outcome.short(), if slow { " (slow)" } else { "" }),
            seconds: last.duration_s,
            failures,
            eta: sweep_eta(elapsed, done, total),
        },
        if slow {
            Notable::Failed
        } else {
            Notable::of(&last.outcome)
        },
    ))
}

/// The second pass's plan in one line (`second pass: 2 suspect(s) re-paired with nodes that
/// passed (4 pairs)`), or why it was skipped; `None` when it has nothing to run.
pub fn second_pass_line(plan: &SecondPass) -> Option<String> {
    let SecondPass {
        suspects,
        pairs,
        intra_node,
        skipped,
    } = plan;
    if let Some(why) = skipped {
        Some(why.clone())
    } else if *pairs > 0 && *intra_node {
        Some(format!(
            "second pass: {suspects} suspect(s) run their own intra-node pair again ({pairs} pairs); a failure that repeats is the node's"
        ))
    } else if *pairs > 0 {
        Some(format!(
            "second pass: {suspects} suspect(s) re-paired with nodes that passed ({pairs} pairs)"
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_pass_is_one_line_or_none() {
        let plan = |pairs, intra_node, skipped: Option<&str>| SecondPass {
            suspects: 2,
            pairs,
            intra_node,
            skipped: skipped.map(String::from),
        };
        assert_eq!(
            second_pass_line(&plan(4, false, None)).as_deref(),
            Some("second pass: 2 suspect(s) re-paired with nodes that passed (4 pairs)")
        );
        let intra = second_pass_line(&plan(2, true, None)).unwrap();
        assert!(
            intra.starts_with("second pass: 2 suspect(s) run their own intra-node pair again"),
            "{intra}"
        );
        assert_eq!(second_pass_line(&plan(0, false, None)), None);
        assert_eq!(
            second_pass_line(&plan(0, false, Some("too few nodes passed"))).as_deref(),
            Some("too few nodes passed")
        );
    }

    fn done(outcome: &str, eta: Option<Duration>) -> PairDone {
        PairDone {
            pass: 1,
            done: 3,
            total: 12,
            round: 2,
            rounds: 6,
            pair: "node-1→node-4".into(),
            outcome: outcome.into(),
            seconds: 14.46,
            failures: 1,
            eta,
        }
    }

    #[test]
    fn a_finished_pair_is_one_whole_log_line() {
        let line = sweep_pair_line(&done("fail (tcp, 1.00 GB/s)", Some(Duration::from_secs(150))));
        assert_eq!(
            line,
            "ic-bench: sweep pass 1 [3/12] round 2/6 node-1→node-4: fail (tcp, 1.00 GB/s) in 14.5s; 1 failed or slow so far; ETA 2m30s"
        );
        assert!(!line.contains('\n'));
        let unknown = sweep_pair_line(&done("pass (rdma, 22.00 GB/s)", None));
        assert!(unknown.ends_with("; 1 failed or slow so far; ETA unknown"), "{unknown}");
    }

    #[test]
    fn the_sweep_bar_fits_100_columns_and_keeps_eta_and_bad_count() {
        let long = PairDone {
            pair: "gpu-node-a100-0017.rack-3.example.internal→gpu-node-a100-0018.rack-3.example.internal".into(),
            ..done("fail (tcp, 1.00 GB/s)", Some(Duration::from_secs(3720)))
        };
        let room = sweep_bar_room(100, 990, 490_545);
        let msg = sweep_bar_message(&long, room);
        // The widest fixed part: spinner, elapsed, prefix, bar and counts at their widest.
        let fixed = "⠁ 1h02 pass 1 round 990/990 [============] 490545/490545 · ";
        assert!(fixed.chars().count() + msg.chars().count() < 100, "{fixed}{msg}");
        assert!(msg.starts_with("ETA 1h02m · 1 bad · gpu-node"), "{msg}");
        assert!(msg.ends_with('…'), "{msg}");
        let short = sweep_bar_message(&done("pass (rdma, 22.00 GB/s)", None), sweep_bar_room(120, 6, 12));
        assert_eq!(short, "ETA ? · 1 bad · node-1→node-4: pass (rdma, 22.00 GB/s)");
    }

    #[test]
    fn eta_is_the_rate_so_far_times_what_is_left() {
        assert_eq!(sweep_eta(Duration::from_secs(30), 0, 12), None);
        // 3 pairs in 45 s (a round of 3 at once): 9 left take 135 s.
        assert_eq!(
            sweep_eta(Duration::from_secs(45), 3, 12),
            Some(Duration::from_secs(135))
        );
        assert_eq!(sweep_eta(Duration::from_secs(45), 12, 12), Some(Duration::ZERO));
    }

    #[test]
    fn the_plan_names_rounds_pairs_and_the_wall_time() {
        let rounds = icb_sweep::Schedule::Ring
            .rounds(&["a".to_string(), "b".to_string(), "c".to_string()], 0)
            .unwrap();
        let r = SweepResults::new(
            "sw1".into(),
            icb_sweep::Schedule::Ring,
            vec!["a".into(), "b".into(), "c".into()],
            120.0,
            rounds,
        );
        let text = plan_text(&r);
        assert!(
            text.starts_with("sweep plan: schedule ring, 3 nodes, 3 pairs in "),
            "{text}"
        );
        assert!(text.contains("s per-pair budget"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("round 1: ")), "{text}");
    }

    fn result(prefill: &str, decode: &str, outcome: Outcome) -> icb_sweep::PairResult {
        icb_sweep::PairResult {
            pair: icb_sweep::Pair::new(prefill, decode),
            pass: 1,
            run_id: "r".into(),
            duration_s: 2.0,
            finished_at: None,
            outcome,
        }
    }

    fn measured(bw: f64) -> Outcome {
        Outcome::Measured {
            verdict: icb_core::VerdictStatus::Pass,
            reason: String::new(),
            data_paths: vec!["rdma".into()],
            bandwidth_bps: Some(bw),
            latency_us: None,
            series: vec![],
            latency: vec![],
            warnings: vec![],
            rails: vec![],
            controls: vec![],
            nic: None,
        }
    }

    #[test]
    fn the_last_pair_counts_slow_and_failed_pairs_as_the_verdicts_will() {
        let mut r = SweepResults::new("sw1".into(), icb_sweep::Schedule::Ring, vec![], 120.0, vec![]);
        let step = Step {
            pass: 1,
            done: 1,
            total: 4,
            round: 1,
            rounds: 2,
            elapsed: Duration::from_secs(10),
        };
        assert!(last_pair(&r, &step).is_none(), "nothing recorded yet");
        for (a, b) in [("a", "b"), ("b", "c"), ("c", "d")] {
            r.pairs.push(result(a, b, measured(20e9)));
        }
        r.pairs.push(result("d", "a", measured(1e9)));
        let (done, notable) = last_pair(&r, &Step { done: 4, ..step }).expect("a pair");
        assert_eq!(notable, Notable::Failed, "a slow pair stays on screen");
        assert!(done.outcome.ends_with(" (slow)"), "{}", done.outcome);
        assert_eq!((done.pair.as_str(), done.failures), ("d→a", 1));
        r.pairs.push(result(
            "a",
            "c",
            Outcome::Unschedulable {
                node: None,
                reason: "full".into(),
            },
        ));
        let (_, notable) = last_pair(
            &r,
            &Step {
                done: 5,
                total: 5,
                ..step
            },
        )
        .expect("a pair");
        assert_eq!(notable, Notable::Other, "unschedulable says nothing about the fabric");
    }
}
