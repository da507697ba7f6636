//! Running a sweep, without the I/O: the first pass (only the pairs the results do not have yet,
//! so a resumed file runs what is missing), the second-pass plan and the second pass, and the
//! final verdicts. How one pair runs is a [`PairRunner`]'s (`ic-bench sweep`: a `run_pair` with
//! its own Kubernetes launcher; tests: a script); progress goes to a [`SweepObserver`]; the
//! results are handed to a save callback after every recorded pair.
//!
//! Every pair of a round runs at once. A cancelled token stops every pair, and nothing that ends
//! after it is recorded; the first cluster-level failure a runner reports stops the sweep the
//! same way (the pairs still running are not recorded: their failures would be the outage's).

use crate::results::{Outcome, PairResult, StopReason, Stopped, SweepResults};
use crate::schedule::{Pair, Round, Schedule};
use crate::score::{self, NodeStatus};
use futures::stream::{FuturesUnordered, StreamExt};
use icb_core::launch::LaunchFailure;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How one pair ended.
#[derive(Debug, Clone, PartialEq)]
pub enum PairEnd {
    /// A result to record (measured, unschedulable, or an error of the pair itself).
    Recorded(Outcome),
    /// The cancel token fired before the pair's outcome was in: whatever came back (a partial
    /// report, an error of any kind) is not this pair's result, so `--resume` runs it in full.
    Interrupted,
    /// The cluster's API failed (unreachable, timing out, 429/5xx beyond its retries): not the
    /// pair's fault and no node's, and nothing more can run. One line.
    ClusterDown(String),
}

impl PairEnd {
    /// A pair whose sides could not be launched, sorted on the launcher's kind (never on its
    /// message, which is kept as the reason): the API failing stops the sweep; a pod the
    /// scheduler cannot place is not a fabric verdict; an image that cannot be pulled or a side
    /// that exited is the pair's own error. `None` for a kind that does not say where the fault
    /// is (a deadline, other): the runner then asks the API once and reads the pods' status.
    pub fn of_launch_failure(kind: &LaunchFailure, message: String) -> Option<PairEnd> {
        match kind {
            LaunchFailure::Cluster => Some(PairEnd::ClusterDown(message)),
            LaunchFailure::Unschedulable { node, .. } => Some(PairEnd::Recorded(Outcome::Unschedulable {
                node: node.clone(),
                reason: message,
            })),
            LaunchFailure::ImagePull | LaunchFailure::SideExited { .. } => {
                Some(PairEnd::Recorded(Outcome::Error { reason: message }))
            }
            LaunchFailure::SideKilled => Some(PairEnd::Recorded(Outcome::Disrupted { reason: message })),
            LaunchFailure::Deadline | LaunchFailure::Other => None,
        }
    }
}

/// Which pass a pair runs in: the first measures the schedule; the second re-measures each
/// first-pass suspect with nodes that passed, and its pairs are the ones that accuse a node, so
/// a runner may do more there (`ic-bench sweep` runs its negative controls on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pass {
    First,
    Second,
}

impl Pass {
    /// The pass as the results file numbers it (`PairResult::pass`: 1 or 2).
    pub fn number(self) -> u8 {
        match self {
            Pass::First => 1,
            Pass::Second => 2,
        }
    }
}

/// Runs one pair of pass `pass`. `stop` is cancelled at a signal or when another pair found the
/// cluster down; the runner then cleans up and returns (its end is not recorded).
// One sweep drives its runner from one task and never spawns the futures: no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait PairRunner {
    async fn run(&self, pair: &Pair, pass: Pass, run_id: &str, stop: &CancellationToken) -> PairEnd;

    /// The RDMA readiness the pair of `run_id` read of its two nodes (each side its own, in its
    /// hello), asked once after its end is in: the fleet view's input ([`crate::fleet`]).
    /// `None`: not read (a runner that reads none, a pair that never got that far).
    fn readiness(&self, _run_id: &str) -> Option<icb_core::readiness::PairReadiness> {
        None
    }
}

/// Where a pass stands when a pair was recorded (the pair is the last of `results.pairs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub pass: u8,
    /// Pairs of this pass recorded so far, of `total`.
    pub done: usize,
    pub total: usize,
    /// The running round (1-based), of `rounds`.
    pub round: usize,
    pub rounds: usize,
    /// Since this pass started.
    pub elapsed: Duration,
}

/// What the second pass runs, or why nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct SecondPass {
    /// First-pass suspects.
    pub suspects: usize,
    /// Pairs still to run in the second pass.
    pub pairs: usize,
    /// Intra-node schedule: each suspect runs its own pair again.
    pub intra_node: bool,
    /// Why suspects cannot be re-paired (too few nodes passed), when so.
    pub skipped: Option<String>,
}

/// Progress of a sweep: the CLI draws a bar or prints lines; tests record.
pub trait SweepObserver {
    /// Pass `pass` starts: `pairs` pairs in `rounds` rounds (never called for an empty pass).
    fn pass_started(&mut self, pass: u8, pairs: usize, rounds: usize);
    /// Round `round` (1-based) of the pass starts with `pairs` pairs.
    fn round(&mut self, pass: u8, round: usize, pairs: usize);
    /// A pair was recorded: the last of `results.pairs`.
    fn pair(&mut self, results: &SweepResults, step: &Step);
    /// The pass ended (done, interrupted or stopped).
    fn pass_ended(&mut self, _pass: u8) {}
    /// The second pass was planned.
    fn second_pass(&mut self, _plan: &SecondPass) {}
}

/// An observer that shows nothing.
pub struct Silent;

impl SweepObserver for Silent {
    fn pass_started(&mut self, _: u8, _: usize, _: usize) {}
    fn round(&mut self, _: u8, _: usize, _: usize) {}
    fn pair(&mut self, _: &SweepResults, _: &Step) {}
}

/// How a sweep (or a pass of it) ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepEnd {
    /// Every pair is in and the nodes are judged (`results.complete`).
    Done,
    /// Stopped by the cancel token: the results are resumable, no verdicts.
    Interrupted,
    /// The first cluster-level failure, one line: the results are resumable, no node blamed.
    ClusterDown(String),
}

/// A sweep's run: the runner, what observes it, where results are saved, and what stops it.
pub struct SweepRun<'a, R, E> {
    pub runner: &'a R,
    /// At most this many pairs at once in the second pass (0: a whole round).
    pub max_concurrent: usize,
    pub observer: &'a mut dyn SweepObserver,
    pub save: &'a mut dyn FnMut(&SweepResults) -> Result<(), E>,
    pub cancel: &'a CancellationToken,
}

/// Runs `results`' missing first-pass pairs, then the second pass on suspects, then judges the
/// nodes (`node_verdicts`, `complete`) and saves. Stops at the cancel token or the first
/// cluster-level failure with the results as far as they got (saved after every pair); the
/// caller marks them [`SweepResults::mark_stopped`]. Only a failed save is an error.
pub async fn run_sweep<R: PairRunner, E>(results: &mut SweepResults, run: SweepRun<'_, R, E>) -> Result<SweepEnd, E> {
    let SweepRun {
        runner,
        max_concurrent,
        observer,
        save,
        cancel,
    } = run;
    let mut rounds = Rounds {
        runner,
        observer,
        save,
        cancel,
    };
    let missing = results.missing();
    let end = rounds.run(&missing, Pass::First, results).await?;
    if end != SweepEnd::Done {
        return Ok(end);
    }
    let (second, plan) = second_pass(results, max_concurrent);
    rounds.observer.second_pass(&plan);
    let end = rounds.run(&second, Pass::Second, results).await?;
    if end != SweepEnd::Done {
        return Ok(end);
    }
    if cancel.is_cancelled() {
        // Every pair is in, but a signal came: no verdict.
        return Ok(SweepEnd::Interrupted);
    }
    results.node_verdicts = score::final_verdicts(&results.nodes, &results.pairs);
    results.complete = true;
    results.updated_at = now();
    (rounds.save)(results)?;
    Ok(SweepEnd::Done)
}

/// The second pass still to run (each first-pass suspect with two nodes that passed;
/// intra-node: its own pair again), less what the results already have.
pub fn second_pass(results: &SweepResults, max_concurrent: usize) -> (Vec<Round>, SecondPass) {
    let first = score::first_pass_verdicts(&results.nodes, &results.pairs);
    let intra_node = results.schedule == Schedule::IntraNode;
    let rounds: Vec<Round> = score::second_pass_plan(&first, max_concurrent, intra_node)
        .into_iter()
        .map(|r| r.into_iter().filter(|p| !results.has(p, 2)).collect::<Vec<_>>())
        .filter(|r| !r.is_empty())
        .collect();
    let plan = SecondPass {
        suspects: first.iter().filter(|v| v.status == NodeStatus::Suspect).count(),
        pairs: rounds.iter().map(Vec::len).sum(),
        intra_node,
        skipped: score::second_pass_skipped(&first, intra_node),
    };
    (rounds, plan)
}

struct Rounds<'a, R, E> {
    runner: &'a R,
    observer: &'a mut dyn SweepObserver,
    save: &'a mut dyn FnMut(&SweepResults) -> Result<(), E>,
    cancel: &'a CancellationToken,
}

impl<R: PairRunner, E> Rounds<'_, R, E> {
    /// Records one pair's result, shows it, saves.
    fn record(&mut self, results: &mut SweepResults, result: PairResult, step: &Step) -> Result<(), E> {
        results.pairs.push(result);
        self.observer.pair(results, step);
        results.updated_at = now();
        (self.save)(results)
    }

    /// Runs `rounds` as pass `pass`, recording every pair that ends with a result.
    async fn run(&mut self, rounds: &[Round], kind: Pass, results: &mut SweepResults) -> Result<SweepEnd, E> {
        if rounds.is_empty() {
            return Ok(SweepEnd::Done);
        }
        let pass = kind.number();
        let total: usize = rounds.iter().map(Vec::len).sum();
        self.observer.pass_started(pass, total, rounds.len());
        // Cancelled by a signal (its parent) or by this sweep at a cluster-level failure.
        let stop = self.cancel.child_token();
        let mut down: Option<String> = None;
        let mut step = Step {
            pass,
            done: 0,
            total,
            round: 0,
            rounds: rounds.len(),
            elapsed: Duration::ZERO,
        };
        let started = Instant::now();
        for (i, round) in rounds.iter().enumerate() {
            if stop.is_cancelled() {
                break;
            }
            step.round = i + 1;
            self.observer.round(pass, i + 1, round.len());
            let runner = self.runner;
            let stop = &stop;
            let mut running: FuturesUnordered<_> = round
                .iter()
                .enumerate()
                .map(|(j, pair)| {
                    let run_id = results.run_id(pass, i, j);
                    async move {
                        let t = Instant::now();
                        let end = runner.run(pair, kind, &run_id, stop).await;
                        (pair.clone(), run_id, t.elapsed(), end)
                    }
                })
                .collect();
            while let Some((pair, run_id, elapsed, end)) = running.next().await {
                let outcome = match end {
                    PairEnd::Recorded(outcome) if !stop.is_cancelled() => outcome,
                    PairEnd::ClusterDown(e) => {
                        down.get_or_insert(e);
                        stop.cancel();
                        continue;
                    }
                    _ => continue,
                };
                step.done += 1;
                step.elapsed = started.elapsed();
                if let Some(read) = runner.readiness(&run_id) {
                    results.add_readiness(&pair, read);
                }
                let result = PairResult {
                    pair,
                    pass,
                    run_id,
                    duration_s: elapsed.as_secs_f64(),
                    finished_at: Some(now()),
                    outcome,
                };
                if let Err(e) = self.record(results, result, &step) {
                    self.observer.pass_ended(pass);
                    return Err(e);
                }
            }
        }
        self.observer.pass_ended(pass);
        Ok(match down {
            _ if self.cancel.is_cancelled() => SweepEnd::Interrupted,
            Some(e) => SweepEnd::ClusterDown(e),
            None if stop.is_cancelled() => SweepEnd::Interrupted,
            None => SweepEnd::Done,
        })
    }
}

impl SweepResults {
    /// A resumed run: one more attempt (new run ids), no longer stopped.
    pub fn resume_attempt(&mut self) {
        self.stopped = None;
        self.attempt = self.attempt.max(1) + 1;
    }

    /// The sweep stopped before its end: the file says why and stays resumable, with no verdict.
    pub fn mark_stopped(&mut self, reason: StopReason, detail: String) {
        let now = now();
        self.complete = false;
        self.node_verdicts.clear();
        self.updated_at = now.clone();
        self.stopped = Some(Stopped {
            reason,
            detail,
            at: now,
        });
    }

    /// How the sweep ended, as its headline says it: stopped (a signal, the cluster), nothing
    /// measured, a failed node, a suspect one, still running, or a pass. One decision for the
    /// exit status and the history's record of the night.
    pub fn ending(&self) -> SweepEnding {
        let measured = self.pairs.iter().any(|p| matches!(p.outcome, Outcome::Measured { .. }));
        let any = |s: NodeStatus| self.node_verdicts.iter().any(|v| v.status == s);
        match &self.stopped {
            Some(s) if s.reason == StopReason::Interrupted => SweepEnding::Interrupted,
            Some(_) => SweepEnding::ClusterError,
            None if !measured => SweepEnding::NothingMeasured,
            None if any(NodeStatus::Fail) => SweepEnding::Fail,
            None if any(NodeStatus::Suspect) => SweepEnding::Suspect,
            None if any(NodeStatus::Unjudged) => SweepEnding::Inconclusive,
            None if !self.complete => SweepEnding::Running,
            None => SweepEnding::Pass,
        }
    }

    /// The exit status of a complete sweep: 2 when no pair measured anything, 1 when a node
    /// failed, stayed suspect or could not be judged, 0 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self.ending() {
            SweepEnding::NothingMeasured | SweepEnding::ClusterError => icb_core::exit::USAGE_OR_SETUP,
            SweepEnding::Fail | SweepEnding::Suspect | SweepEnding::Inconclusive => icb_core::exit::VERDICT_FAILED,
            SweepEnding::Interrupted => icb_core::exit::INTERRUPTED,
            SweepEnding::Pass | SweepEnding::Running => icb_core::exit::OK,
        }
    }
}

/// How a sweep ended ([`SweepResults::ending`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepEnding {
    Pass,
    /// A node stayed suspect (evidence both ways, or no partner left to confirm): exit 1.
    Suspect,
    Fail,
    /// Every pair ended before a transfer: no fabric verdict, exit 2.
    NothingMeasured,
    /// No node failed or stayed suspect, but a node could not be judged: one of its pairs was
    /// inconclusive (an unattributed data path, a control not caught). Not a pass: exit 1.
    Inconclusive,
    /// A signal stopped it (resumable).
    Interrupted,
    /// The cluster failed or refused the bench pods mid-sweep (resumable, no node blamed).
    ClusterError,
    /// Not every planned pair has run yet, and none failed so far.
    Running,
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(kind: LaunchFailure) -> Option<PairEnd> {
        PairEnd::of_launch_failure(&kind, "why".into())
    }

    #[test]
    fn the_api_failing_stops_the_sweep_and_blames_no_node() {
        assert_eq!(sorted(LaunchFailure::Cluster), Some(PairEnd::ClusterDown("why".into())));
    }

    #[test]
    fn an_unplaceable_pod_is_unschedulable_on_its_node_not_a_fabric_verdict() {
        let kind = LaunchFailure::Unschedulable {
            pod: "bench-1".into(),
            node: Some("node-3".into()),
        };
        assert_eq!(
            sorted(kind),
            Some(PairEnd::Recorded(Outcome::Unschedulable {
                node: Some("node-3".into()),
                reason: "why".into()
            }))
        );
        let nowhere = LaunchFailure::Unschedulable {
            pod: "bench-1".into(),
            node: None,
        };
        assert!(matches!(
            sorted(nowhere),
            Some(PairEnd::Recorded(Outcome::Unschedulable { node: None, .. }))
        ));
    }

    #[test]
    fn an_image_pull_or_an_exited_side_is_the_pairs_own_error() {
        for kind in [LaunchFailure::ImagePull, LaunchFailure::SideExited { code: Some(3) }] {
            assert_eq!(
                sorted(kind),
                Some(PairEnd::Recorded(Outcome::Error { reason: "why".into() }))
            );
        }
    }

    #[test]
    fn a_side_killed_from_outside_is_a_disruption_not_an_error() {
        assert_eq!(
            sorted(LaunchFailure::SideKilled),
            Some(PairEnd::Recorded(Outcome::Disrupted { reason: "why".into() }))
        );
    }

    #[test]
    fn a_deadline_or_an_untyped_failure_is_left_to_the_runner_to_look_into() {
        assert_eq!(sorted(LaunchFailure::Deadline), None);
        assert_eq!(sorted(LaunchFailure::Other), None);
    }
}
