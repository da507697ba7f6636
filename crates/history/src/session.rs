//! What `--history`, `--baseline`, `--regression`, `--ack` and `--fail-on-regression` do to a
//! run, in one place so the commands only call it: checked before the run ([`Options::prepare`]:
//! a bad history or ack file is refused before anything is measured), then, when the run's
//! report is final, its baseline comparison attached and its rows recorded.

use crate::ack::Acks;
use crate::baseline::{BaselineSource, Judge, Thresholds};
use crate::record::{RunKind, RunRecord, gate_record, pair_record, sweep_record};
use crate::{History, HistoryError};
use icb_core::model::{BaselineReport, GateReport, PairReport};
use icb_sweep::results::SweepResults;
use std::path::PathBuf;
use std::time::Duration;

/// The history flags of one command line.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub history: Option<PathBuf>,
    pub baseline: Option<BaselineSource>,
    pub thresholds: Option<Thresholds>,
    pub ack: Option<PathBuf>,
    pub fail_on_regression: bool,
    /// How long to wait for another writer (default [`crate::DEFAULT_LOCK_DEADLINE`]).
    pub lock_deadline: Option<Duration>,
}

/// The flags, checked and opened.
#[derive(Debug, Default)]
pub struct Prepared {
    history: Option<History>,
    /// `--baseline FILE`: the file's run, in memory.
    file_baseline: Option<History>,
    source: Option<BaselineSource>,
    thresholds: Thresholds,
    acks: Acks,
    fail_on_regression: bool,
}

impl Options {
    pub fn is_empty(&self) -> bool {
        self.history.is_none() && self.baseline.is_none()
    }

    /// Opens the history and reads the ack and baseline files: every problem before the run.
    pub fn prepare(&self) -> Result<Prepared, HistoryError> {
        let wanted = self.thresholds.is_some() || self.ack.is_some() || self.fail_on_regression;
        if self.baseline.is_none() && wanted {
            return Err(HistoryError::Usage(
                "--regression, --ack and --fail-on-regression compare with a baseline: add --baseline last:N (with --history) or --baseline FILE".into(),
            ));
        }
        if matches!(self.baseline, Some(BaselineSource::Last(_))) && self.history.is_none() {
            return Err(HistoryError::Usage(
                "--baseline last:N reads the history: add --history FILE (or give --baseline FILE)".into(),
            ));
        }
        let deadline = self.lock_deadline.unwrap_or(crate::DEFAULT_LOCK_DEADLINE);
        let history = self
            .history
            .as_deref()
            .map(|p| History::open(p, deadline))
            .transpose()?;
        let file_baseline = match &self.baseline {
            Some(BaselineSource::File(f)) => {
                let mut h = History::in_memory()?;
                h.import(std::slice::from_ref(f))?;
                Some(h)
            }
            _ => None,
        };
        Ok(Prepared {
            history,
            file_baseline,
            source: self.baseline.clone(),
            thresholds: self.thresholds.unwrap_or_default(),
            acks: self.ack.as_deref().map(Acks::load).transpose()?.unwrap_or_default(),
            fail_on_regression: self.fail_on_regression,
        })
    }
}

impl Prepared {
    /// A pair's report, final: compared with its baseline when it concluded, then recorded as it
    /// ended (an interrupted pair's partial cases too, under `interrupted`).
    pub fn pair(&mut self, report: &mut PairReport) -> Result<(), HistoryError> {
        let run = pair_record(report, RunKind::Pair);
        report.baseline = self.judge_concluded(&run)?.map(Box::new);
        self.save(&run)
    }

    /// A gate's report, final: its pair's cases (nothing when the pair never ran), compared with
    /// their baseline only when the gate concluded (pass or fail), recorded as the gate ended.
    pub fn gate(&mut self, report: &mut GateReport) -> Result<(), HistoryError> {
        let Some(run) = gate_record(report) else {
            return Ok(());
        };
        let baseline = self.judge_concluded(&run)?.map(Box::new);
        if let Some(pair) = report.pair.as_mut() {
            pair.baseline = baseline;
        }
        self.save(&run)
    }

    /// A sweep's results, complete or stopped: compared with their baseline when complete, then
    /// recorded as the sweep ended (a resumed sweep's record replaces its stopped one).
    pub fn sweep(&mut self, results: &mut SweepResults) -> Result<(), HistoryError> {
        let run = sweep_record(results);
        results.baseline = self.judge_concluded(&run)?.map(Box::new);
        self.save(&run)
    }

    /// The baseline comparison of a run that reached a verdict; none for an interrupted one.
    fn judge_concluded(&self, run: &RunRecord) -> Result<Option<BaselineReport>, HistoryError> {
        match run.verdict.concluded() {
            true => self.judge(run),
            false => Ok(None),
        }
    }

    fn judge(&self, run: &RunRecord) -> Result<Option<BaselineReport>, HistoryError> {
        let Some(source) = &self.source else {
            return Ok(None);
        };
        let (store, last, before) = match (source, &self.file_baseline, &self.history) {
            // The file's run, whenever it was measured.
            (BaselineSource::File(_), Some(h), _) => (h, u32::MAX, "9999"),
            (BaselineSource::Last(n), _, Some(h)) => (h, *n, run.started_at.as_str()),
            _ => return Ok(None),
        };
        let judge = Judge {
            last,
            thresholds: self.thresholds,
            acks: &self.acks,
            today: jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date(),
            run_id: &run.run_id,
            started_at: before,
            source: source.describe(),
        };
        let mut report = store.compare(&run.rows, &judge)?;
        report.nodes = store.compare_nodes(&run.nodes, &judge)?;
        Ok(Some(report))
    }

    fn save(&mut self, run: &RunRecord) -> Result<(), HistoryError> {
        if let Some(h) = self.history.as_mut() {
            h.record(run, None)?;
        }
        Ok(())
    }

    /// The exit code: `code`, or 1 when `--fail-on-regression` and a regression is not
    /// acknowledged (a failed or interrupted run keeps its own).
    pub fn exit_code(&self, code: i32, baseline: Option<&BaselineReport>) -> i32 {
        let regressed = baseline.is_some_and(|b| b.regressed > 0);
        if code == icb_core::exit::OK && self.fail_on_regression && regressed {
            icb_core::exit::VERDICT_FAILED
        } else {
            code
        }
    }
}
