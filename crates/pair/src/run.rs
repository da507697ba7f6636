//! The one pair run: start the decode side, read its address, start the prefill side with its
//! plan, read progress until the report, stop both, clean up exactly once on every path (success,
//! failure, deadline, cancel), and judge once.

use crate::launcher::{LaunchError, LaunchFailure, Launcher, Side};
use crate::plan::PairPlan;
use icb_core::model::{Expectation, PairReport};
use icb_core::protocol::{
    CaseProgress, Listening, ProtocolError, SideErrorKind, SideEvent, SideFailure, parse_side_line,
};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// After the decode side ended mid-run: how long the prefill side may take to notice and report
/// (or print its own error) before the decode side's failure is the answer.
const PEER_GRACE: Duration = Duration::from_secs(10);
/// Upper bound on stopping one side and on the launcher's cleanup: a launcher bounds its own
/// waits, this only keeps a broken one from hanging the run.
const STOP_BOUND: Duration = Duration::from_secs(60);

/// Why a pair run gave no verdict. `exit_code` maps each to the contract.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PairError {
    /// Nothing measured: a side could not be started or failed, a deadline passed, a line did not
    /// parse. The text names what to fix. Exit 2.
    #[error("{0}")]
    Setup(String),
    /// Nothing measured because a side could not be launched or ended before doing its part, of
    /// a kind the launcher could tell ([`LaunchError::kind`]: unschedulable, image pull, the
    /// platform's API down …); the text is what [`PairError::Setup`] would say. Exit 2.
    #[error("{0}")]
    Launch(LaunchError),
    /// Stopped by the cancel token (Ctrl-C / SIGTERM) after cleanup. Never a verdict, whatever
    /// was measured before it: the cases done so far come as [`Interrupted::partial`]. Exit 130.
    #[error("interrupted: {}", .0.cleanup_text())]
    Interrupted(Interrupted),
    /// The run (or its failure) was followed by a failed cleanup: something may be left. Exit 2.
    #[error("{outcome}; cleaning up also failed: {cleanup}")]
    Cleanup { outcome: String, cleanup: String },
    /// A side gave up and said why in its typed `failed` line: `kind` is the cause a caller can
    /// act on (UCX not found; `ucp_init` failed, naming the variable to blame when one is set),
    /// `message` the one line naming the side and its own error. Exit 2.
    #[error("{message}")]
    SideFailed {
        side: SideRole,
        kind: SideErrorKind,
        message: String,
    },
}

/// Which side of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SideRole {
    /// `ic-bench serve`, the target.
    Decode,
    /// `ic-bench connect`, the initiator.
    Prefill,
}

impl std::fmt::Display for SideRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SideRole::Decode => "decode",
            SideRole::Prefill => "prefill",
        })
    }
}

impl PairError {
    /// `what`: how the side ended, e.g. `exited before listening`, `failed`.
    fn side_failed(role: SideRole, side_name: &str, what: &str, failure: &SideFailure) -> PairError {
        PairError::SideFailed {
            side: role,
            kind: failure.cause.clone(),
            message: format!("{side_name} {what}: {}", failure.message),
        }
    }
}

/// An interrupted run, cleaned up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interrupted {
    /// What the cleanup removed (empty when nothing was left).
    pub cleanup: String,
    /// The report of the cases the prefill side measured before the signal, as it marked it
    /// (`partial` set, not judged as a run): evidence to write out, never a pass or a fail.
    pub partial: Option<Box<PairReport>>,
}

impl Interrupted {
    /// What the interrupted runs among `runs` (rails rows, KV sweep rows) cleaned up, as one text.
    pub fn cleanup_of(runs: &[Result<PairOutcome, PairError>]) -> String {
        runs.iter()
            .filter_map(|r| match r {
                Err(PairError::Interrupted(i)) if !i.cleanup.is_empty() => Some(i.cleanup.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// A run after a finished main run (a control, the KV bulk row) was interrupted: the main
    /// run's report is the evidence to write out, and both runs' cleanup is said.
    pub fn after(main: &PairOutcome, later: Interrupted) -> Interrupted {
        let cleanup = [main.cleanup.as_str(), later.cleanup.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        Interrupted {
            cleanup,
            partial: Some(Box::new(main.report.clone())),
        }
    }

    /// "cleaned up: …" or "nothing was left to clean up".
    pub fn cleanup_text(&self) -> String {
        if self.cleanup.is_empty() {
            "nothing was left to clean up".into()
        } else {
            format!("cleaned up: {}", self.cleanup)
        }
    }

    /// The cases measured before `signal` as the report to write (marked partial, naming the
    /// signal) and the one line saying what was written and cleaned up; `None` when the prefill
    /// side reported nothing.
    pub fn partial_marked(&self, signal: &str) -> Option<(PairReport, String)> {
        let mut report = (**self.partial.as_ref()?).clone();
        icb_core::verdict::mark_interrupted(&mut report, &format!("interrupted by {signal}"));
        let planned = report.partial.as_ref().map_or(report.cases.len(), |p| p.planned_cases);
        let line = format!(
            "wrote the {} of {planned} cases measured before it (marked partial); {}",
            report.cases.len(),
            self.cleanup_text()
        );
        Some((report, line))
    }
}

impl PairError {
    pub fn exit_code(&self) -> i32 {
        match self {
            PairError::Interrupted(_) => icb_core::exit::INTERRUPTED,
            PairError::Setup(_) | PairError::Launch(_) | PairError::Cleanup { .. } | PairError::SideFailed { .. } => {
                icb_core::exit::USAGE_OR_SETUP
            }
        }
    }
}

impl From<LaunchError> for PairError {
    fn from(e: LaunchError) -> Self {
        match e.kind {
            LaunchFailure::Other => PairError::Setup(e.message),
            _ => PairError::Launch(e),
        }
    }
}

impl From<ProtocolError> for PairError {
    fn from(e: ProtocolError) -> Self {
        PairError::Setup(e.to_string())
    }
}

/// A judged report of a run that was not interrupted, and what the cleanup removed.
#[derive(Debug, Clone)]
pub struct PairOutcome {
    pub report: PairReport,
    pub cleanup: String,
    /// Time spent outside the measurement: start → report → cleanup minus the prefill side's run.
    pub orchestration: Duration,
}

/// Runs one pair through `launcher`. `progress` sees each case as the prefill side finishes it.
/// The launcher's `cleanup` runs exactly once, whatever happens; `cancel` stops the run at any
/// step.
pub async fn run_pair<L: Launcher>(
    plan: &PairPlan,
    launcher: &mut L,
    cancel: &CancellationToken,
    progress: &mut dyn FnMut(&CaseProgress),
) -> Result<PairOutcome, PairError> {
    let started = Instant::now();
    let mut sides: Sides<L::Side> = Sides {
        decode: None,
        prefill: None,
    };
    let outcome = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(PairError::Interrupted(Interrupted::default())),
        r = drive(plan, launcher, &mut sides, progress, started) => r,
    };
    // Interrupted with the prefill side running: it reports the cases measured so far.
    let partial = match (&outcome, sides.prefill.as_mut()) {
        (Err(PairError::Interrupted(_)), Some(prefill)) => partial_report(prefill, progress).await,
        _ => None,
    };
    // The placement is read while the launcher still holds what it created.
    let outcome = outcome.map(|(mut report, listening, expectation)| {
        report.placement = launcher.placement(&listening, &report);
        (report, expectation)
    });
    let grace = if outcome.is_ok() {
        plan.exit_grace
    } else {
        Duration::ZERO
    };
    for side in [sides.prefill.as_mut(), sides.decode.as_mut()].into_iter().flatten() {
        if tokio::time::timeout(grace + STOP_BOUND, side.stop(grace))
            .await
            .is_err()
        {
            tracing::warn!(
                "{} did not stop within {} s",
                side.name(),
                (grace + STOP_BOUND).as_secs()
            );
        }
    }
    let cleanup = match tokio::time::timeout(STOP_BOUND, launcher.cleanup()).await {
        Ok(r) => r,
        Err(_) => Err(LaunchError::new(format!(
            "cleanup did not finish within {} s",
            STOP_BOUND.as_secs()
        ))),
    };
    let ((mut report, expectation), cleanup) = match (outcome, cleanup) {
        // The signal came after the last case, while the sides stopped: still no verdict (a
        // signalled command never says pass), but every case is evidence.
        (Ok((mut report, _)), Ok(removed)) if cancel.is_cancelled() => {
            report.partial = Some(icb_core::model::PartialRun {
                reason: "interrupted after the last case".into(),
                planned_cases: report.cases.len(),
            });
            return Err(PairError::Interrupted(Interrupted {
                cleanup: removed,
                partial: Some(Box::new(report)),
            }));
        }
        (Ok(done), Ok(removed)) => (done, removed),
        (Ok(_), Err(c)) => {
            return Err(PairError::Cleanup {
                outcome: "the run finished".into(),
                cleanup: c.message,
            });
        }
        // A signal ends the run, whatever the sides did after it (a side killed by the cleanup
        // fails too): what they measured before it is evidence, never the outcome.
        (Err(PairError::Interrupted(_)), Ok(removed)) => {
            return Err(PairError::Interrupted(Interrupted {
                cleanup: removed,
                // A report of no case says nothing: the one line does.
                partial: partial.filter(|r| !r.cases.is_empty()).map(Box::new),
            }));
        }
        (Err(_), Ok(removed)) if cancel.is_cancelled() => {
            return Err(PairError::Interrupted(Interrupted {
                cleanup: removed,
                partial: None,
            }));
        }
        (Err(e), Ok(_)) => return Err(e),
        (Err(e), Err(c)) => {
            return Err(PairError::Cleanup {
                outcome: match e {
                    PairError::Interrupted(_) => "interrupted".into(),
                    other => other.to_string(),
                },
                cleanup: c.message,
            });
        }
    };
    // The one verdict, with the expectation the plan gave the prefill side (which judged with it
    // too, for its own output), whatever the report carries.
    // The NICs' line rate is what the sides read from their hosts, not an expectation: it stays.
    let line_rate = report.expectation.line_rate_bps;
    report.expectation = expectation;
    report.expectation.line_rate_bps = report.expectation.line_rate_bps.or(line_rate);
    if !plan.compare_readiness {
        report.readiness = None;
    }
    icb_core::verdict::judge(&mut report);
    let orchestration = started
        .elapsed()
        .saturating_sub(Duration::from_secs_f64(report.duration_s.max(0.0)));
    Ok(PairOutcome {
        report,
        cleanup,
        orchestration,
    })
}

/// How long an interrupted prefill side gets to write the report of what it measured.
const PARTIAL_GRACE: Duration = Duration::from_secs(5);

/// Interrupts the prefill side and reads its output until its partial report (bounded by
/// [`PARTIAL_GRACE`]); `None` when it gives none (it was starting, or cannot be signalled).
async fn partial_report<S: Side>(prefill: &mut S, progress: &mut dyn FnMut(&CaseProgress)) -> Option<PairReport> {
    prefill.interrupt().await;
    let read = async {
        while let Some(line) = prefill.next_line().await {
            match parse_side_line(&line) {
                Ok(Some(SideEvent::Report(report))) if report.partial.is_some() => return Some(*report),
                Ok(Some(SideEvent::Case(p))) => progress(&p),
                _ => {}
            }
        }
        None
    };
    tokio::time::timeout(PARTIAL_GRACE, read).await.ok().flatten()
}

struct Sides<S> {
    decode: Option<S>,
    prefill: Option<S>,
}

async fn drive<L: Launcher>(
    plan: &PairPlan,
    launcher: &mut L,
    sides: &mut Sides<L::Side>,
    progress: &mut dyn FnMut(&CaseProgress),
    started: Instant,
) -> Result<(PairReport, Listening, Expectation), PairError> {
    let child = plan
        .child_plan(launcher.locality(), &launcher.mode())
        .map_err(|e| PairError::Setup(e.to_string()))?;
    let decode = sides.decode.insert(launcher.start_decode().await?);
    let listening = match tokio::time::timeout_at(started + plan.startup_timeout, await_listening(decode)).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(PairError::Setup(format!(
                "{} did not start listening within {} (raise {}); last words: {}",
                decode.name(),
                humanize(plan.startup_timeout),
                plan.startup_flag,
                decode.last_words()
            )));
        }
    };
    tracing::info!("decode side listening on {}", listening.address);
    let prefill = sides.prefill.insert(launcher.start_prefill(&listening, &child).await?);
    let report = read_report(decode, prefill, progress, started + plan.deadline, plan.deadline).await?;
    Ok((report, listening, child.expectation))
}

async fn await_listening<S: Side>(decode: &mut S) -> Result<Listening, PairError> {
    let mut failure = None;
    loop {
        match decode.next_line().await {
            Some(line) => {
                match parse_side_line(&line)? {
                    Some(SideEvent::Listening(l)) => return Ok(l),
                    Some(SideEvent::Failed(f)) => failure = Some(f),
                    _ => {}
                }
                tracing::debug!("[decode] {line}");
            }
            None => {
                let why = decode.exit_note().await.unwrap_or_else(|| "without an error".into());
                if let Some(f) = failure {
                    return Err(PairError::side_failed(
                        SideRole::Decode,
                        &decode.name(),
                        "exited before listening",
                        &f,
                    ));
                }
                return Err(ended(
                    decode,
                    format!("{} exited before listening ({why})", decode.name()),
                ));
            }
        }
    }
}

/// Reads the prefill side until its report, watching the decode side: when that one ends first,
/// the prefill side gets [`PEER_GRACE`] to finish before the decode side's end is the answer.
async fn read_report<S: Side>(
    decode: &mut S,
    prefill: &mut S,
    progress: &mut dyn FnMut(&CaseProgress),
    until: Instant,
    budget: Duration,
) -> Result<PairReport, PairError> {
    let mut decode_ended: Option<Instant> = None;
    // What each side said about its own failure (typed), if anything.
    let (mut prefill_failed, mut decode_failed) = (None, None);
    loop {
        let grace_end = decode_ended.map_or(until, |at| (at + PEER_GRACE).min(until));
        tokio::select! {
            line = prefill.next_line() => match line {
                Some(line) => match parse_side_line(&line)? {
                    Some(SideEvent::Report(report)) => return Ok(*report),
                    Some(SideEvent::Case(p)) => progress(&p),
                    Some(SideEvent::Failed(f)) => prefill_failed = Some(f),
                    Some(SideEvent::Listening(_)) | None => tracing::debug!("[prefill] {line}"),
                },
                None => {
                    let failed = (prefill_failed.as_ref(), decode_failed.as_ref());
                    return Err(prefill_ended(decode, prefill, decode_ended.is_some(), failed).await);
                }
            },
            line = decode.next_line(), if decode_ended.is_none() => match line {
                Some(line) => match parse_side_line(&line) {
                    Ok(Some(SideEvent::Failed(f))) => decode_failed = Some(f),
                    _ => tracing::debug!("[decode] {line}"),
                },
                None => decode_ended = Some(Instant::now()),
            },
            _ = tokio::time::sleep_until(grace_end) => {
                if decode_ended.is_some() && grace_end < until {
                    if let Some(f) = &decode_failed {
                        return Err(PairError::side_failed(SideRole::Decode, &decode.name(), "failed", f));
                    }
                    let why = decode.exit_note().await.unwrap_or_else(|| "it exited before the report".into());
                    return Err(ended(decode, format!(
                        "{} failed mid-run ({why}); {} gave no result within {} s after that",
                        decode.name(),
                        prefill.name(),
                        PEER_GRACE.as_secs()
                    )));
                }
                return Err(PairError::Setup(format!(
                    "{} gave no result within {} (derived from the cases and --max-time, or --timeout); last words: {}",
                    prefill.name(),
                    humanize(budget),
                    prefill.last_words()
                )));
            }
        }
    }
}

/// Why the run ended when the prefill side's output ended without a report: a decode side that
/// failed first (typed) is the cause; else the prefill side's own failure (typed, or its exit
/// note), followed by how the decode side ended when it ended first.
async fn prefill_ended<S: Side>(
    decode: &mut S,
    prefill: &mut S,
    decode_ended: bool,
    (prefill_failed, decode_failed): (Option<&SideFailure>, Option<&SideFailure>),
) -> PairError {
    if let Some(f) = decode_failed.filter(|_| decode_ended) {
        return PairError::side_failed(SideRole::Decode, &decode.name(), "failed", f);
    }
    let mut err = match prefill_failed {
        Some(f) => PairError::side_failed(SideRole::Prefill, &prefill.name(), "failed", f),
        None => {
            let why = prefill.exit_note().await.unwrap_or_else(|| "exit status 0".into());
            ended(
                prefill,
                format!("{} exited without printing a result ({why})", prefill.name()),
            )
        }
    };
    if decode_ended && let Some(note) = decode.exit_note().await {
        let first = format!("; {} exited first ({note})", decode.name());
        if let PairError::Setup(msg)
        | PairError::Launch(LaunchError { message: msg, .. })
        | PairError::SideFailed { message: msg, .. } = &mut err
        {
            msg.push_str(&first);
        }
    }
    err
}

/// A side ended without doing its part: of the kind its launcher tells, when it tells one.
fn ended<S: Side>(side: &S, message: String) -> PairError {
    match side.failure() {
        Some(kind) => PairError::Launch(LaunchError::of(kind, message)),
        None => PairError::Setup(message),
    }
}

/// The one duration rule (`icb_core::units::format_duration`).
fn humanize(d: Duration) -> String {
    icb_core::units::format_duration(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupted_runs_partial_report_is_marked_and_summed_up_in_one_line() {
        let report: PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        let measured = report.cases.len();
        let nothing = Interrupted::default();
        assert_eq!(nothing.partial_marked("SIGINT"), None);
        let i = Interrupted {
            cleanup: "pod a".into(),
            partial: Some(Box::new(report)),
        };
        let (marked, line) = i.partial_marked("SIGTERM").unwrap();
        assert_eq!(
            marked.partial.map(|p| p.reason).as_deref(),
            Some("interrupted by SIGTERM")
        );
        assert_eq!(
            line,
            format!("wrote the {measured} of {measured} cases measured before it (marked partial); cleaned up: pod a")
        );
    }
}
