//! `connect`: the prefill side by hand (a live bar on stderr, a preflight under `--within`) or
//! under a launcher's `--plan` (one protocol line per case), each to its exit code
//! ([`run_by_hand`], [`run_planned`]); and what a preflight the deadline cut short says and
//! exits with. The binary keeps the flags and the report's output.

use super::{EngineChoice, ucx_options};
use icb_core::protocol::{ChildPlan, SideWriter};
use icb_core::verdict::{ExpectationConfig, ExpectationOverrides};
use icb_core::{CaseResult, Locality, PairReport, RunSettings, ToolInfo};
use icb_engine::preflight::Preflight;
use icb_engine::{ConnectOptions, EngineError, OnCase, UcxProfile};
use icb_interrupt::{Interrupt, Interrupted};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What both ways of connecting share: the server, the engine, UCX as the flags say, and who
/// this side is.
pub struct Side {
    /// `HOST:PORT` of `ic-bench serve`.
    pub server: String,
    pub engine: EngineChoice,
    /// `--ucx-lib` and `--ucx-profile`.
    pub ucx_lib: Option<PathBuf>,
    pub ucx_profile: UcxProfile,
    pub tool: ToolInfo,
    /// The token shared with the server (`--token-file`, `IC_BENCH_TOKEN`).
    pub token: Option<icb_engine::auth::Token>,
}

/// A `connect` by hand: the settings (already fitted into `within`) and the expectation flags.
pub struct ByHand {
    pub settings: RunSettings,
    pub connect_timeout: Duration,
    /// `--within`: the preflight's whole budget.
    pub within: Option<Duration>,
    /// `--placement`: a forced locality, `None` for the boot ids' answer.
    pub locality: Option<Locality>,
    pub expect_flags: ExpectationOverrides,
    pub expect_config: Option<(ExpectationConfig, String)>,
    pub ucx_peer_errors: bool,
}

/// Runs every case against the server, each on a live bar; under `within` the preflight's
/// deadline cancels the run too, and a server still starting is asked again within the
/// budget's connect share. Returns the preflight with the result: `Preflight::cut` says whether
/// its deadline ended the run.
pub fn by_hand(
    side: &Side,
    run: ByHand,
    signals: &CancellationToken,
) -> (Result<PairReport, EngineError>, Option<Preflight>) {
    let unit = run.settings.unit;
    let total = icb_report::live::total_cases(&run.settings);
    let live = Arc::new(Mutex::new(icb_report::live::CaseProgress::start(total, unit)));
    let preflight = run.within.map(|within| Preflight::arm(within, signals));
    let cancel = preflight.as_ref().map_or(signals, |p| p.token()).clone();
    let opts_for = |connect_timeout: Duration| ConnectOptions {
        server: side.server.clone(),
        settings: run.settings.clone(),
        connect_timeout,
        locality: run.locality,
        expect_flags: run.expect_flags.clone(),
        expect_config: run.expect_config.clone(),
        expectation: None,
        ucx: ucx_options(side.ucx_lib.clone(), run.ucx_peer_errors, side.ucx_profile),
        tool: side.tool.clone(),
        placement_mode: "manual".into(),
        on_case: Some(on_case(Arc::clone(&live), unit, total)),
        cancel: Some(cancel.clone()),
        token: side.token.clone(),
    };
    let result = match &preflight {
        // A sidecar still starting refuses: asked again within the budget's connect share.
        Some(p) => p.retry_refused(run.connect_timeout, |timeout| side.engine.connect(opts_for(timeout))),
        None => side.engine.connect(opts_for(run.connect_timeout)),
    };
    if let Ok(live) = live.lock() {
        live.finish();
    }
    (result, preflight)
}

/// Prints each case as it arrives: a log line, and the live progress bar.
fn on_case(live: Arc<Mutex<icb_report::live::CaseProgress>>, unit: icb_core::BandwidthUnit, total: usize) -> OnCase {
    let mut index = 0;
    Box::new(move |c: &CaseResult| {
        index += 1;
        tracing::info!("{}", icb_report::text::case_line(c, unit));
        if let Ok(mut live) = live.lock() {
            live.case(index, total, c);
        }
    })
}

/// `connect --plan`: every case as the plan says, one protocol line per case on `out`; an
/// engine error is also written there as the typed `failed` event, for the parent to decide
/// on (an interruption is not: the parent interrupted it).
pub fn planned<W: std::io::Write + Send + 'static>(
    side: &Side,
    plan: &ChildPlan,
    cancel: &CancellationToken,
    out: &Arc<SideWriter<W>>,
) -> Result<PairReport, EngineError> {
    let total = plan.settings.case_list().len();
    let unit = plan.settings.unit;
    let mut index = 0;
    let progress_out = Arc::clone(out);
    let mut ucx = ucx_options(side.ucx_lib.clone(), plan.ucx_peer_errors, side.ucx_profile);
    if let Some(profile) = plan.ucx_profile {
        ucx = ucx.with_profile(profile);
    }
    ucx.config.extend(plan.ucx_config.iter().cloned());
    let opts = ConnectOptions {
        server: side.server.clone(),
        settings: plan.settings.clone(),
        connect_timeout: Duration::from_secs_f64(plan.connect_timeout_s.max(0.001)),
        locality: Some(plan.expectation.locality),
        expect_flags: Default::default(),
        expect_config: None,
        expectation: Some(plan.expectation.clone()),
        ucx,
        tool: side.tool.clone(),
        placement_mode: plan.placement_mode.clone(),
        on_case: Some(Box::new(move |c: &CaseResult| {
            index += 1;
            tracing::info!("{}", icb_report::text::case_line(c, unit));
            // A closed channel is the parent gone: the run ends on its own, nothing to add.
            let _ = progress_out.case(index, total, c);
        })),
        cancel: Some(cancel.clone()),
        token: side.token.clone(),
    };
    side.engine.connect(opts).inspect_err(|e| {
        if !matches!(e, EngineError::Interrupted) {
            let _ = out.failed(e.side_failure());
        }
    })
}

/// A by-hand `connect` to its exit code: the report emitted (`emit`: the binary's output), a
/// preflight the deadline cut said as such ([`cut_short`]), a signal named ([`signal_named`]).
pub fn run_by_hand<E>(
    side: &Side,
    run: ByHand,
    interrupt: &Interrupt,
    mut emit: impl FnMut(&PairReport) -> Result<(), E>,
) -> Result<i32, E>
where
    E: From<EngineError> + From<Interrupted>,
{
    let (result, preflight) = by_hand(side, run, interrupt.token());
    if let Some(p) = preflight.as_ref().filter(|p| p.cut(interrupt.token())) {
        return cut_short(p, &side.server, result, emit);
    }
    let report = signal_named::<E>(result, interrupt)?;
    emit(&report)?;
    Ok(exit_code(&report, interrupt))
}

/// `connect --plan` to its exit code: the report written as the last protocol line on `out`.
/// The parent judges and decides the exit code; the child only says when it was interrupted.
pub fn run_planned<W, E>(
    side: &Side,
    plan: &ChildPlan,
    interrupt: &Interrupt,
    out: &Arc<SideWriter<W>>,
) -> Result<i32, E>
where
    W: std::io::Write + Send + 'static,
    E: From<EngineError> + From<Interrupted> + From<std::io::Error>,
{
    let report = signal_named::<E>(planned(side, plan, interrupt.token(), out), interrupt)?;
    let code = match report.partial {
        Some(_) => exit_code(&report, interrupt),
        None => report.verdict.status.exit_code(),
    };
    out.report(report)?;
    Ok(code)
}

/// The engine's result, with a signal named: before the server's hello an error that already
/// says so (the handler's one line; [`Interrupted`] carries the exit code); after it the partial
/// report, its reason the signal.
pub fn signal_named<E>(result: Result<PairReport, EngineError>, interrupt: &Interrupt) -> Result<PairReport, E>
where
    E: From<EngineError> + From<Interrupted>,
{
    match result {
        Ok(mut report) => {
            if let Some(partial) = report.partial.as_mut() {
                partial.reason = format!("interrupted by {}", interrupt.signal());
            }
            Ok(report)
        }
        Err(EngineError::Interrupted) => Err(Interrupted(interrupt.report("nothing was measured yet")).into()),
        Err(e) => Err(e.into()),
    }
}

/// A preflight the deadline cut: what it measured is written (`emit`: evidence), and it exits
/// 2 with one line saying so; not known, never a pass. A run that finished as the deadline
/// fell keeps its verdict.
pub fn cut_short<E: From<EngineError>>(
    p: &Preflight,
    server: &str,
    result: Result<PairReport, EngineError>,
    emit: impl FnOnce(&PairReport) -> Result<(), E>,
) -> Result<i32, E> {
    let budget = p.budget();
    match result {
        Ok(report) if report.partial.is_none() => {
            emit(&report)?;
            Ok(icb_core::exit::for_report(&report))
        }
        Ok(report) => {
            emit(&report)?;
            let planned = report.partial.as_ref().map_or(0, |p| p.planned_cases);
            eprintln!(
                "ic-bench: error: preflight: only {} of {planned} cases measured within --within {budget}: not known, never a pass; give fewer --tests/--memory or a longer --within",
                report.cases.len()
            );
            Ok(icb_core::exit::USAGE_OR_SETUP)
        }
        Err(EngineError::Interrupted) => {
            eprintln!(
                "ic-bench: error: preflight: nothing measured within --within {budget}: ic-bench serve at {server} did not answer in time or the cases did not start: not known, never a pass"
            );
            Ok(icb_core::exit::USAGE_OR_SETUP)
        }
        Err(e) => Err(e.into()),
    }
}

/// A by-hand run's exit code: the verdict's, or 130 (with the handler's one line) when the
/// report is partial; a setup problem the verdict names is said first.
pub fn exit_code(report: &PairReport, interrupt: &icb_interrupt::Interrupt) -> i32 {
    match &report.partial {
        Some(p) => interrupt.report(&format!(
            "wrote the {} of {} cases measured before it (marked partial)",
            report.cases.len(),
            p.planned_cases
        )),
        None => {
            if let Some(problem) = icb_core::exit::setup_problem(report) {
                eprintln!("ic-bench: error: {problem}");
            }
            icb_core::exit::for_report(report)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preflight() -> Preflight {
        Preflight::arm(Duration::from_secs(60), &CancellationToken::new())
    }

    /// Nothing measured within the budget: one line, exit 2, nothing emitted; an engine error
    /// that is not the deadline stays that error.
    #[test]
    fn a_preflight_cut_before_any_case_is_not_known_and_other_errors_stay_errors() {
        let mut emitted = false;
        let code = cut_short::<EngineError>(&preflight(), "h:1", Err(EngineError::Interrupted), |_| {
            emitted = true;
            Ok(())
        });
        assert_eq!(code.unwrap(), icb_core::exit::USAGE_OR_SETUP);
        assert!(!emitted);
        let refused = EngineError::Peer("refused".into());
        let e = cut_short::<EngineError>(&preflight(), "h:1", Err(refused), |_| Ok(())).unwrap_err();
        assert!(matches!(e, EngineError::Peer(_)), "{e}");
    }

    /// What a connect that ended without a report leaves for the caller: a signal before the
    /// server's hello is `Interrupted` with the exit code 130 (its line said); any other engine
    /// error stays that error.
    #[test]
    fn a_signal_before_the_hello_is_interrupted_and_other_errors_stay_errors() {
        #[derive(Debug)]
        enum Ended {
            Engine(EngineError),
            Interrupted(Interrupted),
        }
        impl From<EngineError> for Ended {
            fn from(e: EngineError) -> Ended {
                Ended::Engine(e)
            }
        }
        impl From<Interrupted> for Ended {
            fn from(i: Interrupted) -> Ended {
                Ended::Interrupted(i)
            }
        }
        let interrupt = Interrupt::install().unwrap();
        let e = signal_named::<Ended>(Err(EngineError::Interrupted), &interrupt).unwrap_err();
        assert!(
            matches!(e, Ended::Interrupted(Interrupted(icb_core::exit::INTERRUPTED))),
            "{e:?}"
        );
        let e = signal_named::<Ended>(Err(EngineError::Peer("refused".into())), &interrupt).unwrap_err();
        assert!(matches!(e, Ended::Engine(EngineError::Peer(_))), "{e:?}");
    }

    #[test]
    fn peer_errors_choose_who_notices_a_failed_peer() {
        let ucx = ucx_options(Some("/opt/ucx".into()), true, UcxProfile::Default);
        assert_eq!(ucx.peer_failure, icb_engine::PeerFailureMode::UcxPeer);
        assert_eq!(ucx.library_dir, Some(PathBuf::from("/opt/ucx")));
        let ucx = ucx_options(None, false, UcxProfile::Default);
        assert_eq!(ucx.peer_failure, icb_engine::PeerFailureMode::ControlChannel);
    }
}
