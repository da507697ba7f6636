//! The third sink of a run, beside stdout and the `--export-*` files: `--history` (the run
//! compared with its baseline and recorded, `icb_history`) and `--push-gateway` (its Prometheus
//! text to a Pushgateway, `icb_push`). Opened before the run ([`RunHistory::open`]: a bad history
//! or ack file is refused before anything is measured), applied when the report is final. A
//! problem found after the run (a lock held past the deadline, an unreachable Pushgateway with
//! `--fail-on-push-error`) is returned once the report is written; a failed push without that
//! flag is a warning line on stderr.

use crate::{ExportError, Format, Report, View, render_primary};
use icb_core::model::{BaselineReport, GateReport, PairReport};
use icb_history::{HistoryError, Options, Prepared};
use icb_push::{Gateway, PushError};
use icb_sweep::SweepResults;
use std::borrow::Cow;
use std::sync::Mutex;
use std::time::Duration;

/// `--push-gateway URL`, `--push-timeout`, `--fail-on-push-error`.
#[derive(Debug, Clone)]
pub struct PushTo {
    pub gateway: Gateway,
    pub deadline: Duration,
    /// A failed push is an error (exit 2), not a warning.
    pub required: bool,
}

/// Why the history or the push failed.
#[derive(Debug, thiserror::Error)]
pub enum RunHistoryError {
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error(transparent)]
    Push(#[from] PushError),
    #[error(transparent)]
    Render(#[from] ExportError),
}

/// The flags, checked and opened: what a command keeps until its report is final.
#[derive(Debug)]
pub struct RunHistory {
    prepared: Option<Mutex<Prepared>>,
    push: Option<PushTo>,
}

impl RunHistory {
    /// Opens the history and reads the ack and baseline files (`None`: no such flag given).
    pub fn open(options: &Options, push: Option<PushTo>) -> Result<Option<RunHistory>, HistoryError> {
        let asked =
            !options.is_empty() || options.fail_on_regression || options.thresholds.is_some() || options.ack.is_some();
        if !asked && push.is_none() {
            return Ok(None);
        }
        let prepared = asked.then(|| options.prepare()).transpose()?.map(Mutex::new);
        Ok(Some(RunHistory { prepared, push }))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Prepared) -> Result<T, HistoryError>) -> Result<Option<T>, RunHistoryError> {
        let Some(m) = &self.prepared else {
            return Ok(None);
        };
        let mut guard = m.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Some(f(&mut guard)?))
    }

    /// `code`, or 1 for a regression under `--fail-on-regression`.
    pub fn exit_code(&self, code: i32, baseline: Option<&BaselineReport>) -> i32 {
        self.with(|p| Ok(p.exit_code(code, baseline)))
            .ok()
            .flatten()
            .unwrap_or(code)
    }

    /// Pushes `report` rendered as Prometheus text to the group `job`/`grouping`: an error only
    /// under `--fail-on-push-error`, else a warning line.
    fn push(&self, job: &str, grouping: &[(&str, &str)], report: Report<'_>) -> Result<(), RunHistoryError> {
        let Some(to) = &self.push else {
            return Ok(());
        };
        let text = render_primary(report, Format::Prometheus, View::default())?;
        match to.gateway.put(job, grouping, &text, to.deadline) {
            Ok(()) => Ok(()),
            Err(e) if to.required => Err(e.into()),
            Err(e) => {
                eprintln!(
                    "ic-bench: warning: {e} (the run's results are written; --fail-on-push-error makes this exit 2)"
                );
                Ok(())
            }
        }
    }

    /// A gate report compared, recorded and its pair pushed (the error, if any, once the report is
    /// written).
    pub fn gate(&self, report: &mut GateReport) -> Option<RunHistoryError> {
        if let Err(e) = self.with(|p| p.gate(report)) {
            return Some(e);
        }
        let pair = report.pair.as_ref()?;
        self.push_pair(pair).err()
    }

    /// A complete sweep compared, recorded and pushed.
    pub fn sweep(&self, results: &mut SweepResults) -> Option<RunHistoryError> {
        if let Err(e) = self.with(|p| p.sweep(results)) {
            return Some(e);
        }
        self.push("ic-bench-sweep", &[], Report::Sweep(results)).err()
    }

    /// An interrupted pair's partial report, recorded as `interrupted` (never judged, never
    /// pushed: it is no night's answer).
    pub fn record_interrupted(&self, report: &PairReport) -> Option<RunHistoryError> {
        let mut report = report.clone();
        self.with(|p| p.pair(&mut report)).err()
    }

    /// A sweep stopped before its end (a signal, the cluster), recorded as it ended; a resumed
    /// run's record replaces it.
    pub fn record_stopped_sweep(&self, results: &mut SweepResults) -> Option<RunHistoryError> {
        self.with(|p| p.sweep(results)).err()
    }

    fn push_pair(&self, report: &PairReport) -> Result<(), RunHistoryError> {
        let (a, b) = (&report.placement.prefill.host, &report.placement.decode.host);
        self.push("ic-bench-pair", &[("prefill", a), ("decode", b)], Report::Pair(report))
    }

    /// A pair report compared, recorded and pushed: the report to print (with its baseline), and
    /// the error to end with once it is written.
    pub fn judge_pair<'a>(
        history: Option<&RunHistory>,
        report: &'a PairReport,
    ) -> (Cow<'a, PairReport>, Option<RunHistoryError>) {
        let Some(h) = history else {
            return (Cow::Borrowed(report), None);
        };
        let mut judged = report.clone();
        let judged = match h.with(|p| p.pair(&mut judged)) {
            Ok(_) => Cow::Owned(judged),
            Err(e) => return (Cow::Borrowed(report), Some(e)),
        };
        let pushed = h.push_pair(&judged).err();
        (judged, pushed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_history_flag_and_no_push_opens_nothing() {
        assert!(RunHistory::open(&Options::default(), None).unwrap().is_none());
    }

    #[test]
    fn a_regression_flag_without_a_baseline_is_refused_before_the_run() {
        let options = Options {
            fail_on_regression: true,
            ..Options::default()
        };
        let e = RunHistory::open(&options, None).unwrap_err();
        assert!(matches!(e, HistoryError::Usage(_)), "{e}");
    }

    #[test]
    fn a_push_alone_records_nothing_and_keeps_the_exit_code() {
        let push = PushTo {
            gateway: Gateway::parse("http://127.0.0.1:9").unwrap(),
            deadline: Duration::from_millis(10),
            required: false,
        };
        let h = RunHistory::open(&Options::default(), Some(push))
            .unwrap()
            .expect("opened for the push");
        assert!(h.prepared.is_none());
        assert_eq!(h.exit_code(1, None), 1);
        assert_eq!(h.exit_code(0, None), 0);
    }
}
