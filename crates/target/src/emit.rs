//! The one emit of a pair run's end, whatever ran it (`pair`, `connect --rails`): a judged report
//! rendered as `-o` asks, written to its exports, compared and recorded in `--history`, and turned
//! into the exit code; an interrupted run's partial report and line; or the run's error.

use icb_core::PairReport;
use icb_interrupt::Interrupt;
use icb_pair::{Interrupted, PairError, PairOutcome};
use icb_report::output::{Output, OutputError};
use icb_report::{ExportError, Report, RunHistory, RunHistoryError};

/// Why a pair run's end could not be emitted, or the run's own error. Each says what it wraps
/// unchanged (`transparent`), so the one-line error reads as before this type.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    /// The run failed before it had a report.
    #[error(transparent)]
    Run(#[from] PairError),
    #[error(transparent)]
    Render(#[from] ExportError),
    #[error(transparent)]
    Output(#[from] OutputError),
    /// `--history`: the report is written, but not compared or recorded.
    #[error(transparent)]
    History(#[from] RunHistoryError),
}

/// A run's end: a judged report ([`emit_pair`]), an interrupted run's partial report and line
/// ([`emit_interrupted`]), or the run's error.
pub fn emit_outcome(
    result: Result<PairOutcome, PairError>,
    output: &Output,
    interrupt: &Interrupt,
    history: Option<&RunHistory>,
) -> Result<i32, EmitError> {
    match result {
        Ok(outcome) => emit_pair(&outcome.report, output, history),
        Err(PairError::Interrupted(i)) => emit_interrupted(&i, output, interrupt, history),
        Err(e) => Err(e.into()),
    }
}

/// An interrupted pair: the cases measured before the signal (when the prefill side reported
/// them) rendered as `-o` asks and marked partial, recorded in `--history` as `interrupted`, then
/// the interruption's one line; exit 130.
pub fn emit_interrupted(
    interrupted: &Interrupted,
    output: &Output,
    interrupt: &Interrupt,
    history: Option<&RunHistory>,
) -> Result<i32, EmitError> {
    // The prefill side was interrupted by its parent; the report names what interrupted the run.
    let Some((report, line)) = interrupted.partial_marked(interrupt.signal()) else {
        return Ok(interrupt.report(&interrupted.cleanup_text()));
    };
    output.emit(&icb_report::render_pair(&report, output.format)?)?;
    output.write_exports(Report::Pair(&report))?;
    if let Some(e) = history.and_then(|h| h.record_interrupted(&report)) {
        // The whole chain (a SQLite error's own cause too), on one line.
        let why = icb_core::error_line::one_line(&e);
        eprintln!("ic-bench: warning: the partial report is written but not recorded: {why}");
    }
    Ok(interrupt.report(&line))
}

/// Renders a judged report as `-o` asks and turns its verdict into the exit code (`--history`'s
/// rules applied to it).
pub fn emit_pair(report: &PairReport, output: &Output, history: Option<&RunHistory>) -> Result<i32, EmitError> {
    let (judged, history_error) = RunHistory::judge_pair(history, report);
    let report = judged.as_ref();
    output.emit(&icb_report::render_pair_in(report, output.format, output.view())?)?;
    output.write_exports(Report::Pair(report))?;
    if let Some(problem) = icb_core::exit::setup_problem(report) {
        eprintln!("ic-bench: error: {problem}");
    }
    if let Some(e) = history_error {
        return Err(e.into());
    }
    let code = icb_core::exit::for_report(report);
    Ok(history.map_or(code, |h| h.exit_code(code, report.baseline.as_deref())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_report::{Exports, Format};

    /// A real report, as `ic-bench pair --local -o json` printed it.
    fn report() -> PairReport {
        serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap()
    }

    #[test]
    fn a_judged_report_is_written_as_asked_and_its_verdict_is_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pair.json");
        let output = Output::new(Format::Json, Some(file.clone()), Exports::default()).unwrap();
        let report = report();
        let code = emit_pair(&report, &output, None).unwrap();
        assert_eq!(code, icb_core::exit::for_report(&report));
        let written: PairReport = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(written.cases.len(), report.cases.len());
        assert_eq!(
            serde_json::to_value(&written.verdict).unwrap(),
            serde_json::to_value(&report.verdict).unwrap()
        );
    }

    /// The run's own error comes back as itself: the same one line, the same exit (main's), no
    /// report written.
    #[test]
    fn a_run_error_reads_as_the_runs_own_line_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pair.json");
        let output = Output::new(Format::Json, Some(file.clone()), Exports::default()).unwrap();
        let interrupt = Interrupt::install().unwrap();
        let run = PairError::Setup("decode side: UCX not found: install UCX or pass --ucx-lib".into());
        let e = emit_outcome(Err(run.clone()), &output, &interrupt, None).unwrap_err();
        assert!(matches!(&e, EmitError::Run(r) if *r == run), "{e:?}");
        assert_eq!(icb_core::error_line::one_line(&e), run.to_string());
        assert!(!file.exists(), "nothing was written for a run without a report");
    }
}
