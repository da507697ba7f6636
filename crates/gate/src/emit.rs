//! The one emit of a gate's end: the report compared and recorded in `--history` (and pushed),
//! printed as `-o` asks, written to every export on every path (a CI job reads them whatever
//! happened) ([`write`]), and its verdict turned into the exit code ([`exit_code`]). The binary
//! writes the node conditions between the two.

use icb_core::model::{GateReport, GateVerdict};
use icb_interrupt::Interrupt;
use icb_report::{ExportError, ExportFileError, Exports, Format, Report, RunHistory, RunHistoryError, View};

/// Why the gate's report could not be shown or written (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    #[error(transparent)]
    Render(#[from] ExportError),
    #[error(transparent)]
    Export(#[from] ExportFileError),
}

/// The report held to `--history`, printed on stdout in `format` fitted to `view`, and written
/// to `exports`; returns `--history`'s error, which [`exit_code`] decides on.
pub fn write(
    report: &mut GateReport,
    (format, view): (Format, View),
    exports: &Exports,
    history: Option<&RunHistory>,
) -> Result<Option<RunHistoryError>, EmitError> {
    let history_error = history.and_then(|h| h.gate(report));
    print!("{}", icb_report::render_gate_in(report, format, view)?);
    exports.write(Report::Gate(report))?;
    Ok(history_error)
}

/// The verdict's exit code (0 pass, 1 fail, 2 setup, 130 interrupted), `--history`'s rule
/// applied; a report that passed or failed but is not recorded is `--history`'s error.
pub fn exit_code(
    report: &GateReport,
    history_error: Option<RunHistoryError>,
    history: Option<&RunHistory>,
    interrupt: &Interrupt,
) -> Result<i32, RunHistoryError> {
    if let (GateVerdict::Interrupted | GateVerdict::Error, Some(e)) = (report.verdict, &history_error) {
        let why = icb_core::error_line::one_line(e);
        eprintln!("ic-bench: warning: the gate's report is written but not recorded in --history: {why}");
    }
    match report.verdict {
        GateVerdict::Interrupted => {
            Ok(interrupt.report("gate stopped, no verdict (the report says what it found so far)"))
        }
        GateVerdict::Error => {
            eprintln!("ic-bench: error: gate: {}", report.reason);
            Ok(report.verdict.exit_code())
        }
        GateVerdict::Pass | GateVerdict::Fail => match (history_error, history) {
            (Some(e), _) => Err(e),
            (None, Some(h)) => Ok(h.exit_code(
                report.verdict.exit_code(),
                report.pair.as_ref().and_then(|p| p.baseline.as_deref()),
            )),
            (None, None) => Ok(report.verdict.exit_code()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(verdict: GateVerdict) -> GateReport {
        let mut r = GateReport::new();
        r.stop(verdict, "why".into());
        r
    }

    /// Without `--history` the verdict is the exit code: pass 0, fail 1, a setup error 2.
    #[test]
    fn the_verdict_is_the_exit_code() {
        let interrupt = Interrupt::install().unwrap();
        for (verdict, code) in [
            (GateVerdict::Pass, icb_core::exit::OK),
            (GateVerdict::Fail, icb_core::exit::VERDICT_FAILED),
            (GateVerdict::Error, icb_core::exit::USAGE_OR_SETUP),
        ] {
            assert_eq!(
                exit_code(&report(verdict), None, None, &interrupt).unwrap(),
                code,
                "{verdict:?}"
            );
        }
        let interrupted = exit_code(&report(GateVerdict::Interrupted), None, None, &interrupt);
        assert_eq!(interrupted.unwrap(), icb_core::exit::INTERRUPTED);
    }

    /// Every export is written, whatever the verdict (a CI job reads them after an error too).
    #[test]
    fn the_exports_are_written_on_every_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gate.json");
        let mut exports = Exports::new();
        exports.add(icb_report::FileFormat::Format(Format::Json), &file);
        let mut r = report(GateVerdict::Error);
        let history_error = write(&mut r, (Format::Json, View::default()), &exports, None).unwrap();
        assert!(history_error.is_none());
        let written: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(written["verdict"], "error", "{written}");
    }
}
