//! `--history`, `--baseline`, `--regression`, `--ack`, `--fail-on-regression` of `pair`, `gate`
//! and `sweep`: parsed here, checked before the run ([`HistoryArgs::prepare`]), applied by
//! `icb_history::Prepared` when the report is final. A history problem found after the run
//! (a lock held past the deadline) still lets the report be written, then exits 2.

use icb_core::model::{BaselineReport, GateReport, PairReport};
use icb_history::{BaselineSource, Options, Prepared, Thresholds};
use icb_sweep::SweepResults;
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct HistoryArgs {
    /// Record every measured case in this SQLite history (created when missing; safe to share between overlapping runs)
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,

    /// Compare each case with the mean of its last N matching runs in --history (last:N), or with a results file
    #[arg(long, value_name = "last:N|FILE", value_parser = BaselineSource::parse)]
    pub baseline: Option<BaselineSource>,

    /// Worse than the baseline by more than this is "regressed": 10% (every metric) or bandwidth=10%,latency=25% [default: bandwidth=10%,latency=25%]
    #[arg(long, value_name = "PERCENT", value_parser = Thresholds::parse)]
    pub regression: Option<Thresholds>,

    /// Known regressions (pair, metric, reason, expires), reported as acknowledged and never failing
    #[arg(long, value_name = "FILE")]
    pub ack: Option<PathBuf>,

    /// Exit 1 when a case passed but regressed (not acknowledged)
    #[arg(long)]
    pub fail_on_regression: bool,

    /// How long to wait for another run's lock on --history
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = super::common::parse_duration)]
    pub history_timeout: Duration,
}

/// The flags, checked and opened: what a command keeps until its report is final.
#[derive(Debug)]
pub struct RunHistory(Mutex<Prepared>);

impl HistoryArgs {
    /// Opens the history and reads the ack and baseline files (`None`: no history flag given).
    pub fn prepare(&self) -> anyhow::Result<Option<RunHistory>> {
        let options = Options {
            history: self.history.clone(),
            baseline: self.baseline.clone(),
            thresholds: self.regression,
            ack: self.ack.clone(),
            fail_on_regression: self.fail_on_regression,
            lock_deadline: Some(self.history_timeout),
        };
        if options.is_empty() && !self.fail_on_regression && self.regression.is_none() && self.ack.is_none() {
            return Ok(None);
        }
        Ok(Some(RunHistory(Mutex::new(options.prepare()?))))
    }
}

impl RunHistory {
    fn with<T>(&self, f: impl FnOnce(&mut Prepared) -> T) -> T {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// `code`, or 1 for a regression under `--fail-on-regression`.
    pub fn exit_code(&self, code: i32, baseline: Option<&BaselineReport>) -> i32 {
        self.with(|p| p.exit_code(code, baseline))
    }

    /// A gate report compared and recorded (the error, if any, once the report is written).
    pub fn gate(&self, report: &mut GateReport) -> Option<anyhow::Error> {
        self.with(|p| p.gate(report)).err().map(Into::into)
    }

    /// A complete sweep compared and recorded.
    pub fn sweep(&self, results: &mut SweepResults) -> Option<anyhow::Error> {
        self.with(|p| p.sweep(results)).err().map(Into::into)
    }
}

/// A pair report compared and recorded: the report to print (with its baseline), and the error to
/// end with once it is written.
pub fn judge_pair<'a>(
    history: Option<&RunHistory>,
    report: &'a PairReport,
) -> (Cow<'a, PairReport>, Option<anyhow::Error>) {
    let Some(h) = history else {
        return (Cow::Borrowed(report), None);
    };
    let mut judged = report.clone();
    match h.with(|p| p.pair(&mut judged)) {
        Ok(()) => (Cow::Owned(judged), None),
        Err(e) => (Cow::Borrowed(report), Some(e.into())),
    }
}
