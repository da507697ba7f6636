//! Running a sweep's rounds: every pair of a round at once, each one `run_pair` with its own
//! `KubeLauncher` and run id; progress on stderr (a bar on a terminal, one line per finished
//! pair otherwise: `progress::SweepProgress`); the results saved after every pair. A cancelled token stops every pair (each cleans up its own pods) and returns `false`.

use super::progress::{Notable, PairDone, SweepProgress, sweep_eta};
use futures::stream::{FuturesUnordered, StreamExt};
use icb_kube::devices::DeviceRequest;
use icb_kube::pair::BenchPodsPlan;
use icb_kube::target::Target;
use icb_pair::kube::KubeLauncher;
use icb_pair::{CancellationToken, ExpectationInput, PairError, PairPlan, run_pair};
use icb_sweep::results::{LatencyPoint, Outcome, PairResult, SizePoint, SweepResults};
use icb_sweep::schedule::{Pair, Round};
use icb_sweep::score;
use std::time::{Duration, Instant};

/// What every pair of a sweep runs with.
pub struct PairJob {
    pub settings: icb_core::RunSettings,
    pub expectation: ExpectationInput,
    pub image: String,
    pub host_ipc: bool,
    pub devices: DeviceRequest,
    pub budget: Duration,
}

pub struct Sweeper {
    pub cluster: icb_kube::Cluster,
    pub job: PairJob,
    pub token: CancellationToken,
}

impl Sweeper {
    /// Runs `rounds` as pass `pass`; `false` when interrupted.
    pub async fn run_rounds(
        &self,
        rounds: &[Round],
        pass: u8,
        results: &mut SweepResults,
        save: &mut dyn FnMut(&SweepResults) -> anyhow::Result<()>,
    ) -> anyhow::Result<bool> {
        if rounds.is_empty() {
            return Ok(true);
        }
        let total: usize = rounds.iter().map(Vec::len).sum();
        let progress = SweepProgress::start(pass, total, rounds.len());
        let mut done = 0usize;
        let started = Instant::now();
        for (i, round) in rounds.iter().enumerate() {
            if self.token.is_cancelled() {
                return Ok(false);
            }
            progress.round(i + 1, round.len());
            let mut running: FuturesUnordered<_> = round
                .iter()
                .enumerate()
                .map(|(j, pair)| self.one(pair.clone(), format!("{}-p{pass}r{i}x{j}", results.sweep_id)))
                .collect();
            let mut interrupted = false;
            while let Some((pair, run_id, elapsed, outcome)) = running.next().await {
                let Some(outcome) = outcome else {
                    interrupted = true;
                    continue;
                };
                done += 1;
                let seconds = elapsed.as_secs_f64();
                results.pairs.push(PairResult {
                    pair,
                    pass,
                    run_id,
                    duration_s: seconds,
                    outcome,
                });
                // Bad as the node verdicts will count it: failed, nothing measured, or slow
                // against the pairs so far (so the count can move as the reference settles).
                let reference = score::reference_bandwidth(&results.pairs);
                let failures = results
                    .pairs
                    .iter()
                    .filter(|r| r.pass == pass && score::pair_bad(r, reference))
                    .count();
                let Some(last) = results.pairs.last() else {
                    continue;
                };
                let slow = score::pair_bad(last, reference) && !last.outcome.failed();
                progress.pair(
                    &PairDone {
                        pass,
                        done,
                        total,
                        round: i + 1,
                        rounds: rounds.len(),
                        pair: &last.pair.to_string(),
                        outcome: &format!("{}{}", last.outcome.short(), if slow { " (slow)" } else { "" }),
                        seconds,
                        failures,
                        eta: sweep_eta(started.elapsed(), done, total),
                    },
                    if slow {
                        Notable::Failed
                    } else {
                        Notable::of(&last.outcome)
                    },
                );
                results.updated_at = jiff::Timestamp::now().to_string();
                save(results)?;
            }
            if interrupted || self.token.is_cancelled() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One pair; `None` when it was interrupted (nothing to record, its pods removed).
    async fn one(&self, pair: Pair, run_id: String) -> (Pair, String, Duration, Option<Outcome>) {
        let started = Instant::now();
        let outcome = self.measure(&pair, &run_id).await;
        (pair, run_id, started.elapsed(), outcome)
    }

    async fn measure(&self, pair: &Pair, run_id: &str) -> Option<Outcome> {
        let job = &self.job;
        let pods = BenchPodsPlan {
            prefill: Target::Node(pair.prefill.clone()),
            decode: Target::Node(pair.decode.clone()),
            run_id: run_id.to_string(),
            image: job.image.clone(),
            image_pull_policy: None,
            serve_args: vec!["--idle-timeout".into(), format!("{}s", job.budget.as_secs().max(1))],
            connect_args: vec![],
            privileged: false,
            host_ipc: job.host_ipc,
            host_pid: false,
            service_account: None,
            devices: job.devices.clone(),
            env: vec![],
            dry_run: false,
            read_nodes: true,
            timeout: job.budget,
            cleanup_timeout: Duration::from_secs(30).max(self.cluster.request_timeout()),
        };
        let mut plan = PairPlan::new(job.settings.clone(), job.expectation.clone());
        plan.startup_timeout = job.budget;
        plan.startup_flag = "--pair-timeout";
        plan.deadline = job.budget;
        let mut launcher = tokio::select! {
            l = KubeLauncher::prepare(self.cluster.clone(), pods) => match l {
                Ok(l) => l,
                Err(e) => return Some(Outcome::Error { reason: e.to_string() }),
            },
            _ = self.token.cancelled() => return None,
        };
        let mut progress = |_: &icb_core::protocol::CaseProgress| {};
        match run_pair(&plan, &mut launcher, &self.token, &mut progress).await {
            // Ctrl-C mid-pair can still end in a report of the cases done so far (marked
            // partial): not this pair's result, so `--resume` runs it again in full.
            Ok(outcome) if outcome.report.partial.is_some() && self.token.is_cancelled() => None,
            Ok(outcome) => Some(measured(&outcome.report)),
            Err(PairError::Interrupted(_)) => None,
            Err(e) => Some(classify_error(pair, &e.to_string())),
        }
    }
}

impl Notable {
    /// Failed pairs and pairs that say nothing about the fabric stay on screen; measured pairs
    /// that did not fail only move the bar (their warnings are in the results).
    fn of(outcome: &Outcome) -> Notable {
        match outcome {
            o if o.failed() => Notable::Failed,
            Outcome::Measured { .. } => Notable::No,
            Outcome::Unschedulable { .. } | Outcome::Error { .. } => Notable::Other,
        }
    }
}

/// A bench pod that cannot be placed is not a fabric verdict; the message names the pod's node.
fn classify_error(pair: &Pair, text: &str) -> Outcome {
    let unschedulable = [
        "cannot be scheduled",
        "Unschedulable",
        "Insufficient ",
        "didn't have enough resource",
    ]
    .iter()
    .any(|m| text.contains(m));
    if !unschedulable {
        return Outcome::Error {
            reason: text.to_string(),
        };
    }
    // "pod P cannot be scheduled on node N: …" — else the side named (server = decode).
    let named = [&pair.prefill, &pair.decode]
        .into_iter()
        .find(|n| text.contains(&format!("node {n}:")) || text.contains(&format!("node {n} ")));
    let node = named.cloned().or_else(|| {
        if text.contains("-server") {
            Some(pair.decode.clone())
        } else if text.contains("-client") {
            Some(pair.prefill.clone())
        } else {
            None
        }
    });
    Outcome::Unschedulable {
        node,
        reason: text.to_string(),
    }
}

/// The pair report reduced to what the sweep scores and plots.
fn measured(report: &icb_core::PairReport) -> Outcome {
    let data_paths = report
        .verdict
        .data_paths
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok()?.as_str().map(String::from))
        .collect();
    let mut series = Vec::new();
    let mut latencies = Vec::new();
    let mut latency: Option<(u64, f64)> = None;
    for c in &report.cases {
        let Some(m) = &c.measurement else { continue };
        let memory = format!("{}-{}", c.memory.initiator, c.memory.target);
        if let Some(bw) = m.bandwidth_bps {
            series.push(SizePoint {
                test: c.test.as_str().to_string(),
                size: c.size,
                bandwidth_bps: bw,
                memory: Some(memory.clone()),
                direction: direction(c).map(String::from),
            });
        }
        if let Some(l) = &m.latency_us {
            latencies.push(LatencyPoint {
                test: c.test.as_str().to_string(),
                size: c.size,
                memory: Some(memory),
                p50_us: l.p50,
                p99_us: l.p99,
            });
            if latency.is_none_or(|(size, _)| c.size < size) {
                latency = Some((c.size, l.p50));
            }
        }
    }
    let largest = series.iter().map(|p| p.size).max();
    let bandwidth_bps = series
        .iter()
        .filter(|p| Some(p.size) == largest)
        .map(|p| p.bandwidth_bps)
        // A pair is as good as its worst direction (put pushes into decode, get pulls out of it).
        .fold(None, |acc: Option<f64>, b| Some(acc.map_or(b, |a| a.min(b))));
    Outcome::Measured {
        verdict: serde_json::to_value(report.verdict.status)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
        reason: report.verdict.reason.clone(),
        data_paths,
        bandwidth_bps,
        latency_us: latency.map(|(_, l)| l),
        series,
        latency: latencies,
    }
}

/// Which way a case's bytes went, seen from the prefill side (NIXL's vocabulary): RMA put and
/// NIXL WRITE push into decode, RMA get and NIXL READ pull out of it; tag tests have no one
/// direction to name.
fn direction(c: &icb_core::model::CaseResult) -> Option<&'static str> {
    use icb_core::model::{Direction, TestKind};
    match (c.run_by.direction, c.test) {
        (Some(d), _) => Some(d.as_str()),
        (None, TestKind::PutBw) => Some(Direction::Write.as_str()),
        (None, TestKind::GetBw) => Some(Direction::Read.as_str()),
        (None, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unschedulable_names_the_node_of_the_stuck_pod() {
        let pair = Pair::new("node-1", "node-2");
        let o = classify_error(
            &pair,
            "the decode side (pod ic-bench-x-server): pod ic-bench-x-server cannot be scheduled on node node-2: 0/3 nodes are available: Insufficient nvidia.com/gpu",
        );
        assert!(
            matches!(o, Outcome::Unschedulable { node: Some(ref n), .. } if n == "node-2"),
            "{o:?}"
        );
        let o = classify_error(&pair, "the prefill side exited with code 1");
        assert!(matches!(o, Outcome::Error { .. }));
    }
}
