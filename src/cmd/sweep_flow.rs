//! One sweep from its plan to its verdicts: a resume's preparation (the earlier run's leftover
//! pods removed, a new attempt number), the first pass, the second pass on suspects, the outputs.
//! A signal or a cluster-level API error stops it with the results file still resumable and
//! saying why (`stopped`), and nothing after that point reads as a pass.

use super::interrupt::Interrupt;
use super::sweep::Args;
use anyhow::Context as _;
use icb_report::live::StderrObserver;
use icb_sweep::results::{StopReason, SweepResults, write_atomic};
use icb_sweep::run::{SweepEnd, SweepRun, run_sweep};
use icb_sweep_kube::Sweeper;
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
    let exports = args.exports()?;
    let history = args.history.prepare()?;
    let mut save = |r: &SweepResults| -> anyhow::Result<()> {
        write_atomic(&path, &r.to_json()).with_context(|| format!("cannot write {}", path.display()))?;
        exports.write(icb_report::Report::Sweep(r))?;
        Ok(())
    };
    let token = sweeper.token.clone();
    let prepared = tokio::select! {
        p = prepare(args, sweeper, &mut results) => p?,
        _ = token.cancelled() => SweepEnd::Interrupted,
    };
    if prepared != SweepEnd::Done {
        return stop(prepared, &mut results, &mut save, interrupt, &path, history.as_ref());
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
    let run = SweepRun {
        runner: sweeper,
        max_concurrent: args.max_concurrent,
        observer: &mut StderrObserver::default(),
        save: &mut save,
        cancel: &token,
    };
    let end = run_sweep(&mut results, run).await?;
    if end != SweepEnd::Done {
        return stop(end, &mut results, &mut save, interrupt, &path, history.as_ref());
    }
    finish(args, sweeper, &mut results, &mut save, history).await
}

/// The sweep is complete: compared with its baseline and recorded (the comparison saved with
/// the results), printed, and the node writes asked for done; the exit code.
async fn finish(
    args: &Args,
    sweeper: &Sweeper,
    results: &mut SweepResults,
    save: &mut dyn FnMut(&SweepResults) -> anyhow::Result<()>,
    history: Option<super::history_args::RunHistory>,
) -> anyhow::Result<i32> {
    let history_error = history.as_ref().and_then(|h| h.sweep(results)).map(anyhow::Error::from);
    save(results)?;
    let format = args.output.into();
    let view = super::sweep::stdout_view(args.output.into());
    print!("{}", icb_report::render_sweep_in(results, format, view)?);
    write_nodes(args, sweeper, results).await?;
    if let Some(e) = history_error {
        return Err(e);
    }
    let code = results.exit_code();
    Ok(history.map_or(code, |h| h.exit_code(code, results.baseline.as_deref())))
}

/// `--label-nodes`, `--node-conditions` and `--matrix-configmap`, each one line on stderr.
async fn write_nodes(args: &Args, sweeper: &Sweeper, results: &SweepResults) -> anyhow::Result<()> {
    if args.label_nodes {
        let line = icb_sweep_kube::labels::apply(&sweeper.cluster, results, args.unit).await?;
        eprintln!("ic-bench: {line}");
    }
    if args.node_conditions {
        let line = icb_sweep_kube::conditions::apply(&sweeper.cluster, results, args.unit).await?;
        eprintln!("ic-bench: {line}");
    }
    if let Some(name) = &args.matrix_configmap {
        let matrix = icb_sweep::matrix::FabricMatrix::from_results(results)
            .to_json()
            .context("cannot serialize the node-pair matrix")?;
        let line = icb_kube::fabric_matrix::write(&sweeper.cluster, name, &results.sweep_id, &matrix).await?;
        eprintln!("ic-bench: {line}");
    }
    Ok(())
}

/// Before any pair: a resume removes the earlier run's leftover pods and counts one more
/// attempt; `--label-nodes`, `--node-conditions` and `--matrix-configmap` check their access
/// (`icb_sweep_kube::plan::prepare`).
async fn prepare(args: &Args, sweeper: &Sweeper, results: &mut SweepResults) -> anyhow::Result<SweepEnd> {
    let writes = icb_sweep_kube::plan::NodeWrites {
        labels: args.label_nodes,
        conditions: args.node_conditions,
        matrix_config_map: args.matrix_configmap.clone(),
    };
    let flags = (args.resume.is_some(), writes);
    let said = |n: usize, sweep: &str| {
        eprintln!("ic-bench: removed {n} bench pod(s) an earlier run of sweep {sweep} left behind");
    };
    Ok(icb_sweep_kube::plan::prepare(&sweeper.cluster, results, flags, said).await?)
}

/// The sweep stopped before its end: the file says why and stays resumable, `--history` records
/// it as it ended (a resume replaces that record); one line on stderr. A signal: exit 130. A
/// cluster-level API error or a namespace refusing the bench pods (Pod Security): exit 2, no node
/// blamed.
fn stop(
    end: SweepEnd,
    results: &mut SweepResults,
    save: &mut dyn FnMut(&SweepResults) -> anyhow::Result<()>,
    interrupt: &Interrupt,
    path: &Path,
    history: Option<&super::history_args::RunHistory>,
) -> anyhow::Result<i32> {
    let (reason, detail) = match end {
        SweepEnd::ClusterDown(e) => (StopReason::ClusterError, e),
        SweepEnd::Interrupted | SweepEnd::Done => (
            StopReason::Interrupted,
            format!("interrupted by {}", interrupt.signal()),
        ),
    };
    results.mark_stopped(reason, detail.clone());
    if let Some(e) = history
        .and_then(|h| h.record_stopped_sweep(results))
        .map(anyhow::Error::from)
    {
        eprintln!("ic-bench: warning: the stopped sweep is saved but not recorded in --history: {e:#}");
    }
    let saved = save(results);
    match reason {
        StopReason::Interrupted => Ok(interrupt.report(&match saved {
            Ok(()) => format!("no bench pods left; results so far in {} (--resume it)", path.display()),
            Err(e) => format!("no bench pods left, but the results could not be saved: {e:#}"),
        })),
        StopReason::ClusterError => {
            saved?;
            eprintln!(
                "ic-bench: error: the cluster failed or refused the bench pods mid-sweep, so the sweep stopped and blames no node: {detail}; results so far in {} (--resume it once that is fixed)",
                path.display()
            );
            Ok(icb_core::exit::USAGE_OR_SETUP)
        }
    }
}
