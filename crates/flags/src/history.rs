//! The nightly flags of `pair`, `gate` and `sweep`: `--history`, `--baseline`, `--regression`,
//! `--ack`, `--fail-on-regression` (the history, `icb_history`) and `--push-gateway` (the run's
//! Prometheus text to a Pushgateway, `icb_push`). Parsed here, opened before the run
//! ([`HistoryArgs::prepare`]); what they do with the final report is `icb_report::RunHistory`'s.

use icb_history::{BaselineSource, Options, Thresholds};
use icb_push::Gateway;
use icb_report::PushTo;
use std::path::PathBuf;
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
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::common::parse_duration)]
    pub history_timeout: Duration,

    /// Push the run's Prometheus text to this Pushgateway (http://HOST:PORT) when the run ends
    #[arg(long, value_name = "URL", value_parser = |s: &str| Gateway::parse(s))]
    pub push_gateway: Option<Gateway>,

    /// Deadline of the push: connecting, sending and the answer
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::common::parse_duration, requires = "push_gateway")]
    pub push_timeout: Duration,

    /// Exit 2 when the push fails (default: a warning; the run's own exit code)
    #[arg(long, requires = "push_gateway")]
    pub fail_on_push_error: bool,
}

pub use icb_report::RunHistory;

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
        let push = self.push_gateway.clone().map(|gateway| PushTo {
            gateway,
            deadline: self.push_timeout,
            required: self.fail_on_push_error,
        });
        Ok(RunHistory::open(&options, push)?)
    }
}
