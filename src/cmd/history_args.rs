//! The nightly flags of `pair`, `gate` and `sweep`: `--history`, `--baseline`, `--regression`,
//! `--ack`, `--fail-on-regression` (the history, `icb_history`) and `--push-gateway` (the run's
//! Prometheus text to a Pushgateway, `icb_push`). Parsed here, checked before the run
//! ([`HistoryArgs::prepare`]), applied when the report is final. A problem found after the run
//! (a lock held past the deadline, an unreachable Pushgateway with `--fail-on-push-error`) still
//! lets the report be written, then exits 2; a failed push without that flag is a warning.

use icb_core::model::{BaselineReport, GateReport, PairReport};
use icb_history::{BaselineSource, Options, Prepared, Thresholds};
use icb_push::Gateway;
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

    /// Push the run's Prometheus text to this Pushgateway (http://HOST:PORT) when the run ends
    #[arg(long, value_name = "URL", value_parser = |s: &str| Gateway::parse(s))]
    pub push_gateway: Option<Gateway>,

    /// Deadline of the push: connecting, sending and the answer
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::common::parse_duration, requires = "push_gateway")]
    pub push_timeout: Duration,

    /// Exit 2 when the push fails (default: a warning; the run's own exit code)
    #[arg(long, requires = "push_gateway")]
    pub fail_on_push_error: bool,
}

/// The flags, checked and opened: what a command keeps until its report is final.
#[derive(Debug)]
pub struct RunHistory {
    prepared: Option<Mutex<Prepared>>,
    push: Option<(Gateway, Duration, bool)>,
}

impl HistoryArgs {
    /// Opens the history and reads the ack and baseline files (`None`: no such flag given).
    pub fn prepare(&self) -> anyhow::Result<Option<RunHistory>> {
        let options = Options {
            history: self.history.clone(),
            baseline: self.baseline.clone(),
            thresholds: self.regression,
            ack: self.ack.clone(),
            fail_on_regression: self.fail_on_regression,
            lock_deadline: Some(self.history_timeout),
        };
        let asked = !options.is_empty() || self.fail_on_regression || self.regression.is_some() || self.ack.is_some();
        let push = self
            .push_gateway
            .clone()
            .map(|g| (g, self.push_timeout, self.fail_on_push_error));
        if !asked && push.is_none() {
            return Ok(None);
        }
        let prepared = asked.then(|| options.prepare()).transpose()?.map(Mutex::new);
        Ok(Some(RunHistory { prepared, push }))
    }
}

impl RunHistory {
    fn with<T>(&self, f: impl FnOnce(&mut Prepared) -> anyhow::Result<T>) -> anyhow::Result<Option<T>> {
        let Some(m) = &self.prepared else {
            return Ok(None);
        };
        let mut guard = m.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard).map(Some)
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
    fn push(&self, job: &str, grouping: &[(&str, &str)], report: icb_report::Report<'_>) -> anyhow::Result<()> {
        let Some((gateway, deadline, required)) = &self.push else {
            return Ok(());
        };
        let text = icb_report::render_primary(report, icb_report::Format::Prometheus, icb_report::View::default())?;
        match gateway.put(job, grouping, &text, *deadline) {
            Ok(()) => Ok(()),
            Err(e) if *required => Err(e.into()),
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
    pub fn gate(&self, report: &mut GateReport) -> Option<anyhow::Error> {
        if let Err(e) = self.with(|p| Ok(p.gate(report)?)) {
            return Some(e);
        }
        let pair = report.pair.as_ref()?;
        self.push_pair(pair).err()
    }

    /// A complete sweep compared, recorded and pushed.
    pub fn sweep(&self, results: &mut SweepResults) -> Option<anyhow::Error> {
        if let Err(e) = self.with(|p| Ok(p.sweep(results)?)) {
            return Some(e);
        }
        self.push("ic-bench-sweep", &[], icb_report::Report::Sweep(results))
            .err()
    }

    /// An interrupted pair's partial report, recorded as `interrupted` (never judged, never
    /// pushed: it is no night's answer).
    pub fn record_interrupted(&self, report: &PairReport) -> Option<anyhow::Error> {
        let mut report = report.clone();
        self.with(|p| Ok(p.pair(&mut report)?)).err()
    }

    /// A sweep stopped before its end (a signal, the cluster), recorded as it ended; a resumed
    /// run's record replaces it.
    pub fn record_stopped_sweep(&self, results: &mut SweepResults) -> Option<anyhow::Error> {
        self.with(|p| Ok(p.sweep(results)?)).err()
    }

    fn push_pair(&self, report: &PairReport) -> anyhow::Result<()> {
        let (a, b) = (&report.placement.prefill.host, &report.placement.decode.host);
        self.push(
            "ic-bench-pair",
            &[("prefill", a), ("decode", b)],
            icb_report::Report::Pair(report),
        )
    }
}

/// A pair report compared, recorded and pushed: the report to print (with its baseline), and the
/// error to end with once it is written.
pub fn judge_pair<'a>(
    history: Option<&RunHistory>,
    report: &'a PairReport,
) -> (Cow<'a, PairReport>, Option<anyhow::Error>) {
    let Some(h) = history else {
        return (Cow::Borrowed(report), None);
    };
    let mut judged = report.clone();
    let judged = match h.with(|p| Ok(p.pair(&mut judged)?)) {
        Ok(_) => Cow::Owned(judged),
        Err(e) => return (Cow::Borrowed(report), Some(e)),
    };
    let pushed = h.push_pair(&judged).err();
    (judged, pushed)
}
