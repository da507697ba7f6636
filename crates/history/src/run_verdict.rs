//! How a run ended, as the command printed it and exited with it: the `runs.verdict` column that
//! `history list` shows. One mapping per command, from the command's own types, so a night whose
//! nodes stayed suspect (exit 1) is never recorded `pass`.

use icb_core::model::{GateReport, GateVerdict, PairReport, VerdictStatus};
use icb_sweep::results::SweepResults;
use icb_sweep::run::SweepEnding;

/// A recorded run's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunVerdict {
    Pass,
    /// A pair or gate pair that passed with warnings (exit 0).
    Warn,
    Fail,
    /// A sweep whose nodes stayed suspect (exit 1).
    Suspect,
    /// A pair that measured but cannot say whether the fabric is right (exit 1).
    Inconclusive,
    /// A signal stopped it (exit 130); what it measured so far is recorded.
    Interrupted,
    /// No fabric verdict: nothing measured, a setup problem, a gate over its budget, the
    /// cluster failing mid-sweep (exit 2).
    Error,
    /// A sweep recorded before its end (never written by the commands, which record a sweep
    /// once it is complete or stopped).
    Running,
}

impl RunVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            RunVerdict::Pass => "pass",
            RunVerdict::Warn => "warn",
            RunVerdict::Fail => "fail",
            RunVerdict::Suspect => "suspect",
            RunVerdict::Inconclusive => "inconclusive",
            RunVerdict::Interrupted => "interrupted",
            RunVerdict::Error => "error",
            RunVerdict::Running => "running",
        }
    }

    /// Whether the run reached a verdict a baseline may judge (pass, warn, fail, suspect,
    /// inconclusive); an interrupted or failed-to-run night is only recorded.
    pub fn concluded(self) -> bool {
        !matches!(self, RunVerdict::Interrupted | RunVerdict::Error | RunVerdict::Running)
    }

    /// A pair report as `pair` ends it: partial (interrupted), a setup problem (exit 2), or its
    /// verdict.
    pub fn of_pair(report: &PairReport) -> RunVerdict {
        if report.partial.is_some() {
            return RunVerdict::Interrupted;
        }
        if icb_core::exit::setup_problem(report).is_some() {
            return RunVerdict::Error;
        }
        match report.verdict.status {
            VerdictStatus::Pass => RunVerdict::Pass,
            VerdictStatus::Warn => RunVerdict::Warn,
            VerdictStatus::Fail => RunVerdict::Fail,
            VerdictStatus::Interrupted => RunVerdict::Interrupted,
            VerdictStatus::Inconclusive => RunVerdict::Inconclusive,
        }
    }

    pub fn of_gate(report: &GateReport) -> RunVerdict {
        match report.verdict {
            GateVerdict::Pass => RunVerdict::Pass,
            GateVerdict::Fail => RunVerdict::Fail,
            GateVerdict::Error => RunVerdict::Error,
            GateVerdict::Interrupted => RunVerdict::Interrupted,
        }
    }

    pub fn of_sweep(results: &SweepResults) -> RunVerdict {
        match results.ending() {
            SweepEnding::Pass => RunVerdict::Pass,
            SweepEnding::Suspect => RunVerdict::Suspect,
            SweepEnding::Fail => RunVerdict::Fail,
            SweepEnding::Inconclusive => RunVerdict::Inconclusive,
            SweepEnding::NothingMeasured | SweepEnding::ClusterError => RunVerdict::Error,
            SweepEnding::Interrupted => RunVerdict::Interrupted,
            SweepEnding::Running => RunVerdict::Running,
        }
    }
}
