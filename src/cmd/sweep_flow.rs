//! One sweep from its plan to its verdicts: a resume's preparation (the earlier run's leftover
//! pods removed, a new attempt number), the first pass, the second pass on suspects, the outputs.
//! A signal or a cluster-level API error stops it with the results file still resumable and
//! saying why (`stopped`), and nothing after that point reads as a pass.

use super::interrupt::Interrupt;
use super::sweep::Args;
use super::sweep_run::{RoundsEnd, Sweeper, cluster_level};
use anyhow::Context as _;
use icb_sweep::results::{StopReason, Stopped, SweepResults, write_atomic};
use icb_sweep::schedule::Schedule;
use icb_sweep::score::{self, NodeStatus};
use std::path::{Path, PathBuf};

/// Runs `results`' missing pairs and, when every pair is in, judges the nodes.
pub async fn sweep(
    args: &Args,
    sweeper: &Sweeper,
    mut results: SweepResults,
    interrupt: &Interrupt,
) -> anyhow::Result<i32> {
    let path = args
        .resume
        .clone()
        .or_else(|| args.results.clone())
        .unwrap_or_else(|| PathBuf::from(format!("ic-bench-sweep-{}.json", results.sweep_id)));
    let exports = args.exports();
    let mut save = |r: &SweepResults| -> anyhow::Result<()> {
        write_atomic(&path, &r.to_json()).with_context(|| format!("cannot write {}", path.display()))?;
        for (p, exporter) in &exports {
            let text = exporter.sweep(&icb_report::masked_sweep(r))?;
            write_atomic(p, &text).with_context(|| format!("cannot write {}", p.display()))?;
        }
        Ok(())
    };
    let token = sweeper.token.clone();
    let prepared = tokio::select! {
        p = prepare(args, sweeper, &mut results) => p?,
        _ = token.cancelled() => RoundsEnd::Interrupted,
    };
    if prepared != RoundsEnd::Done {
        return stop(prepared, &mut results, &mut save, interrupt, &path);
    }
    eprintln!(
        "ic-bench: sweep {}: {} nodes, {} pairs in {} rounds ({} done); results in {}",
        results.sweep_id,
        results.nodes.len(),
        results.planned(),
        results.rounds.len(),
        results.pairs.iter().filter(|p| p.pass == 1).count(),
        path.display()
    );
    save(&results)?;
    // First pass: only what the file does not have yet.
    let missing = results.missing();
    let end = sweeper.run_rounds(&missing, 1, &mut results, &mut save).await?;
    if end != RoundsEnd::Done {
        return stop(end, &mut results, &mut save, interrupt, &path);
    }
    let end = second_pass(args, sweeper, &mut results, &mut save).await?;
    if end != RoundsEnd::Done {
        return stop(end, &mut results, &mut save, interrupt, &path);
    }
    if token.is_cancelled() {
        // Every pair is in, but a signal came: the contract is 130 and no verdict printed.
        return stop(RoundsEnd::Interrupted, &mut results, &mut save, interrupt, &path);
    }
    results.node_verdicts = score::final_verdicts(&results.nodes, &results.pairs);
    results.complete = true;
    results.updated_at = jiff::Timestamp::now().to_string();
    save(&results)?;
    print!(
        "{}",
        icb_report::render_sweep_in(&results, args.output, super::sweep::stdout_view(args.output))?
    );
    if args.label_nodes {
        super::sweep_labels::apply(&sweeper.cluster, &results, args.unit).await?;
    }
    Ok(exit_code(&results))
}

/// Before any pair: a resume removes the earlier run's leftover pods and counts one more
/// attempt; `--label-nodes` checks its access.
async fn prepare(args: &Args, sweeper: &Sweeper, results: &mut SweepResults) -> anyhow::Result<RoundsEnd> {
    if args.resume.is_some() {
        results.stopped = None;
        results.attempt = results.attempt.max(1) + 1;
        match super::sweep_resume::clean_leftovers(&sweeper.cluster, &results.sweep_id).await {
            Ok(0) => {}
            Ok(n) => eprintln!(
                "ic-bench: removed {n} bench pod(s) an earlier run of sweep {} left behind",
                results.sweep_id
            ),
            Err(e) if cluster_level(&e) => return Ok(RoundsEnd::ClusterDown(e.to_string())),
            Err(e) => return Err(e.into()),
        }
    }
    if args.label_nodes
        && let Some(first) = results.nodes.first()
    {
        // Before hours of pairs, not after: may this account patch nodes at all?
        icb_kube::node_labels::check_access(&sweeper.cluster, first).await?;
    }
    Ok(RoundsEnd::Done)
}

/// Each first-pass suspect with two nodes that passed (intra-node: its own pair again); says on
/// stderr what runs, or why nothing can.
async fn second_pass(
    args: &Args,
    sweeper: &Sweeper,
    results: &mut SweepResults,
    save: &mut dyn FnMut(&SweepResults) -> anyhow::Result<()>,
) -> anyhow::Result<RoundsEnd> {
    let first = score::first_pass_verdicts(&results.nodes, &results.pairs);
    let intra_node = results.schedule == Schedule::IntraNode;
    let second: Vec<_> = score::second_pass_plan(&first, args.max_concurrent, intra_node)
        .into_iter()
        .map(|r| r.into_iter().filter(|p| !results.has(p, 2)).collect::<Vec<_>>())
        .filter(|r| !r.is_empty())
        .collect();
    let suspects = first.iter().filter(|v| v.status == NodeStatus::Suspect).count();
    let pairs = second.iter().map(Vec::len).sum::<usize>();
    if let Some(why) = score::second_pass_skipped(&first, intra_node) {
        eprintln!("ic-bench: {why}");
    } else if !second.is_empty() && intra_node {
        eprintln!(
            "ic-bench: second pass: {suspects} suspect(s) run their own intra-node pair again ({pairs} pairs); a failure that repeats is the node's"
        );
    } else if !second.is_empty() {
        eprintln!("ic-bench: second pass: {suspects} suspect(s) re-paired with nodes that passed ({pairs} pairs)");
    }
    sweeper.run_rounds(&second, 2, results, save).await
}

/// The sweep stopped before its end: the file says why and stays resumable; one line on stderr.
/// A signal: exit 130. A cluster-level API error: exit 2, no node blamed.
fn stop(
    end: RoundsEnd,
    results: &mut SweepResults,
    save: &mut dyn FnMut(&SweepResults) -> anyhow::Result<()>,
    interrupt: &Interrupt,
    path: &Path,
) -> anyhow::Result<i32> {
    let (reason, detail) = match end {
        RoundsEnd::ClusterDown(e) => (StopReason::ClusterError, e),
        RoundsEnd::Interrupted | RoundsEnd::Done => (
            StopReason::Interrupted,
            format!("interrupted by {}", interrupt.signal()),
        ),
    };
    let now = jiff::Timestamp::now().to_string();
    results.complete = false;
    results.node_verdicts.clear();
    results.updated_at = now.clone();
    results.stopped = Some(Stopped {
        reason,
        detail: detail.clone(),
        at: now,
    });
    let saved = save(results);
    match reason {
        StopReason::Interrupted => Ok(interrupt.report(&match saved {
            Ok(()) => format!("no bench pods left; results so far in {} (--resume it)", path.display()),
            Err(e) => format!("no bench pods left, but the results could not be saved: {e:#}"),
        })),
        StopReason::ClusterError => {
            saved?;
            eprintln!(
                "ic-bench: error: the Kubernetes API failed mid-sweep, so the sweep stopped and blames no node: {detail}; results so far in {} (--resume it once the API server answers)",
                path.display()
            );
            Ok(icb_core::exit::USAGE_OR_SETUP)
        }
    }
}

fn exit_code(results: &SweepResults) -> i32 {
    let measured = results
        .pairs
        .iter()
        .any(|p| matches!(p.outcome, icb_sweep::Outcome::Measured { .. }));
    if !measured {
        icb_core::exit::USAGE_OR_SETUP
    } else if results
        .node_verdicts
        .iter()
        .any(|v| matches!(v.status, NodeStatus::Fail | NodeStatus::Suspect))
    {
        icb_core::exit::VERDICT_FAILED
    } else {
        icb_core::exit::OK
    }
}
