//! One sweep from its plan to its verdicts: a resume's preparation (the earlier run's leftover
//! pods removed, a new attempt number), the first pass, the second pass on suspects, the outputs
//! (the results file after every pair, the `--export-*` files, `--history`, stdout, the node
//! writes). A signal or a cluster-level API error stops it with the results file still resumable
//! and saying why (`stopped`), and nothing after that point reads as a pass.

use crate::Sweeper;
use crate::plan::{NodeWrites, PrepareError};
use icb_core::BandwidthUnit;
use icb_report::live::StderrObserver;
use icb_report::{ExportError, ExportFileError, Exports, Format, Report, RunHistory, RunHistoryError, View};
use icb_sweep::results::{StopReason, SweepResults, write_atomic};
use icb_sweep::run::{SweepEnd, SweepRun, run_sweep};
use std::path::PathBuf;

/// What the command line decided about a sweep's run and its outputs.
pub struct FlowOptions {
    /// The results file, rewritten atomically after every pair.
    pub path: PathBuf,
    /// `--resume`: the earlier run's leftover pods are removed first.
    pub resumed: bool,
    pub max_concurrent: usize,
    /// `--label-nodes`, `--node-conditions`, `--matrix-configmap`.
    pub writes: NodeWrites,
    /// The bandwidth unit of the node annotations.
    pub unit: BandwidthUnit,
    /// stdout at the end.
    pub format: Format,
    pub view: View,
    /// The name of the signal that stopped the sweep.
    pub signal_name: fn() -> &'static str,
}

/// How the sweep ended, for the process.
#[derive(Debug, PartialEq, Eq)]
pub enum FlowEnd {
    /// The exit code: the verdicts (`--history`'s rule applied), or 2 for a cluster that failed.
    Exit(i32),
    /// Stopped by a signal: the line to end with (the results file stays resumable).
    Interrupted(String),
}

/// Why the sweep could not go on (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("cannot write {}", path.display())]
    Save {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Export(#[from] ExportFileError),
    #[error(transparent)]
    Render(#[from] ExportError),
    #[error(transparent)]
    History(#[from] RunHistoryError),
    /// Boxed: the cluster's errors are large, and this one travels through every save.
    #[error(transparent)]
    Cluster(Box<PrepareError>),
    #[error("cannot serialize the node-pair matrix")]
    Matrix(#[source] serde_json::Error),
}

impl From<PrepareError> for FlowError {
    fn from(e: PrepareError) -> FlowError {
        FlowError::Cluster(Box::new(e))
    }
}

type Save<'a> = dyn FnMut(&SweepResults) -> Result<(), FlowError> + 'a;

/// Runs `results`' missing pairs and, when every pair is in, judges the nodes.
pub async fn sweep(
    opts: &FlowOptions,
    sweeper: &Sweeper,
    mut results: SweepResults,
    exports: &Exports,
    history: Option<RunHistory>,
) -> Result<FlowEnd, FlowError> {
    let path = opts.path.clone();
    let mut save = |r: &SweepResults| -> Result<(), FlowError> {
        write_atomic(&path, &r.to_json()).map_err(|source| FlowError::Save {
            path: path.clone(),
            source,
        })?;
        exports.write(Report::Sweep(r))?;
        Ok(())
    };
    let token = sweeper.token.clone();
    let prepared = tokio::select! {
        p = prepare(opts, sweeper, &mut results) => p?,
        _ = token.cancelled() => SweepEnd::Interrupted,
    };
    if prepared != SweepEnd::Done {
        return stop(opts, prepared, &mut results, &mut save, history.as_ref());
    }
    eprintln!(
        "ic-bench: sweep {}: {} nodes, {} pairs in {} rounds ({} done); results in {}",
        results.sweep_id,
        results.nodes.len(),
        results.planned(),
        results.rounds.len(),
        results.pairs.iter().filter(|p| p.pass == 1).count(),
        opts.path.display()
    );
    save(&results)?;
    let run = SweepRun {
        runner: sweeper,
        max_concurrent: opts.max_concurrent,
        observer: &mut StderrObserver::default(),
        save: &mut save,
        cancel: &token,
    };
    let end = run_sweep(&mut results, run).await?;
    if end != SweepEnd::Done {
        return stop(opts, end, &mut results, &mut save, history.as_ref());
    }
    finish(opts, sweeper, &mut results, &mut save, history).await
}

/// The sweep is complete: compared with its baseline and recorded (the comparison saved with
/// the results), printed, and the node writes asked for done; the exit code.
async fn finish(
    opts: &FlowOptions,
    sweeper: &Sweeper,
    results: &mut SweepResults,
    save: &mut Save<'_>,
    history: Option<RunHistory>,
) -> Result<FlowEnd, FlowError> {
    let history_error = history.as_ref().and_then(|h| h.sweep(results));
    save(results)?;
    print!("{}", icb_report::render_sweep_in(results, opts.format, opts.view)?);
    write_nodes(opts, sweeper, results).await?;
    if let Some(e) = history_error {
        return Err(e.into());
    }
    let code = results.exit_code();
    Ok(FlowEnd::Exit(
        history.map_or(code, |h| h.exit_code(code, results.baseline.as_deref())),
    ))
}

/// `--label-nodes`, `--node-conditions` and `--matrix-configmap`, each one line on stderr.
async fn write_nodes(opts: &FlowOptions, sweeper: &Sweeper, results: &SweepResults) -> Result<(), FlowError> {
    if opts.writes.labels {
        let line = crate::labels::apply(&sweeper.cluster, results, opts.unit)
            .await
            .map_err(PrepareError::from)?;
        eprintln!("ic-bench: {line}");
    }
    if opts.writes.conditions {
        let line = crate::conditions::apply(&sweeper.cluster, results, opts.unit)
            .await
            .map_err(PrepareError::from)?;
        eprintln!("ic-bench: {line}");
    }
    if let Some(name) = &opts.writes.matrix_config_map {
        let matrix = icb_sweep::matrix::FabricMatrix::from_results(results)
            .to_json()
            .map_err(FlowError::Matrix)?;
        let line = icb_kube::fabric_matrix::write(&sweeper.cluster, name, &results.sweep_id, &matrix)
            .await
            .map_err(PrepareError::from)?;
        eprintln!("ic-bench: {line}");
    }
    Ok(())
}

/// Before any pair: a resume removes the earlier run's leftover pods and counts one more
/// attempt; the node writes check their access (`plan::prepare`).
async fn prepare(opts: &FlowOptions, sweeper: &Sweeper, results: &mut SweepResults) -> Result<SweepEnd, FlowError> {
    let said = |n: usize, sweep: &str| {
        eprintln!("ic-bench: removed {n} bench pod(s) an earlier run of sweep {sweep} left behind");
    };
    let flags = (opts.resumed, opts.writes.clone());
    Ok(crate::plan::prepare(&sweeper.cluster, results, flags, said).await?)
}

/// The sweep stopped before its end: the file says why and stays resumable, `--history` records
/// it as it ended (a resume replaces that record); one line on stderr. A signal: the line to end
/// with (exit 130). A cluster-level API error or a namespace refusing the bench pods (Pod
/// Security): exit 2, no node blamed.
fn stop(
    opts: &FlowOptions,
    end: SweepEnd,
    results: &mut SweepResults,
    save: &mut Save<'_>,
    history: Option<&RunHistory>,
) -> Result<FlowEnd, FlowError> {
    let (reason, detail) = match end {
        SweepEnd::ClusterDown(e) => (StopReason::ClusterError, e),
        SweepEnd::Interrupted | SweepEnd::Done => (
            StopReason::Interrupted,
            format!("interrupted by {}", (opts.signal_name)()),
        ),
    };
    results.mark_stopped(reason, detail.clone());
    if let Some(e) = history.and_then(|h| h.record_stopped_sweep(results)) {
        eprintln!(
            "ic-bench: warning: the stopped sweep is saved but not recorded in --history: {}",
            icb_core::error_line::one_line(&e)
        );
    }
    let saved = save(results);
    let path = opts.path.display();
    match reason {
        StopReason::Interrupted => Ok(FlowEnd::Interrupted(match saved {
            Ok(()) => format!("no bench pods left; results so far in {path} (--resume it)"),
            Err(e) => format!(
                "no bench pods left, but the results could not be saved: {}",
                icb_core::error_line::one_line(&e)
            ),
        })),
        StopReason::ClusterError => {
            saved?;
            eprintln!(
                "ic-bench: error: the cluster failed or refused the bench pods mid-sweep, so the sweep stopped and blames no node: {detail}; results so far in {path} (--resume it once that is fixed)"
            );
            Ok(FlowEnd::Exit(icb_core::exit::USAGE_OR_SETUP))
        }
    }
}
