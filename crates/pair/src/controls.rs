//! In-run negative controls (issue 35): after the main run, a short extra run on the same two
//! sides, configured to be bad on purpose, that the detector must catch. The control runs through
//! the same [`run_pair`] and the same launcher (it starts both sides again and cleans them up
//! again), so it crosses exactly the path the main run crossed; `icb_core::verdict::controls`
//! judges it, and the main verdict then rests on a detector shown to work here.

use crate::plan::PairPlan;
use crate::run::{Interrupted, PairError, run_pair};
use crate::{CancellationToken, Launcher};
use icb_core::model::{ControlKind, ControlResult, PairReport};
use icb_core::verdict::controls::{control_not_run, judge_tcp_control, tcp_control_shape};
use std::time::Duration;

/// Test-only: the `TLS` value the TCP control forces instead of `tcp`, so that a test can make
/// the control undetectable on purpose (e.g. `sm,cma,self`) and see the run turn inconclusive.
pub const TEST_CONTROL_TLS_ENV: &str = "IC_BENCH_TEST_CONTROL_TLS";

/// The longest a control may measure its one case: controls stay short (≤ 1 s of measuring on
/// the 2-core build machine).
const CONTROL_MAX_TIME_S: f64 = 0.3;

/// The plan of the TCP control: [`short_control_plan`] with UCX forced to TCP on the prefill
/// side. `None` when the main run measured no bandwidth case to compare with.
pub fn tcp_control_plan(plan: &PairPlan, main: &PairReport) -> Option<PairPlan> {
    let mut control = short_control_plan(plan, main)?;
    let tls = std::env::var(TEST_CONTROL_TLS_ENV).unwrap_or_else(|_| "tcp".into());
    control.ucx_config.push(("TLS".into(), tls));
    Some(control)
}

/// What every control runs: the main plan's sides and deadlines, one short case of the main
/// run's shape (its largest host-memory bandwidth case, at most 4 MiB and 0.3 s). `None` when
/// the main run measured no bandwidth case.
pub fn short_control_plan(plan: &PairPlan, main: &PairReport) -> Option<PairPlan> {
    let (shape, memory) = tcp_control_shape(main)?;
    let mut control = plan.clone();
    let s = &mut control.settings;
    s.tests = vec![shape.test];
    s.sizes = vec![shape.size];
    s.memory = vec![memory];
    s.blocks = shape.blocks;
    s.plan = vec![shape];
    s.window_candidates.clear();
    s.warmup_iterations = s.warmup_iterations.min(4);
    s.min_iterations = 1;
    s.max_time_s = CONTROL_MAX_TIME_S;
    s.min_time_s = s.min_time_s.min(CONTROL_MAX_TIME_S);
    control.deadline = control.deadline.min(plan.deadline).max(Duration::from_secs(30));
    Some(control)
}

/// Runs each control after the main run whose report is `main`, with the same launcher, and
/// returns their results ([`run_pair_with_controls`] puts them into the report and judges it
/// again). Stops at a cancel: `Err` carries the interruption, with the main run's report as its
/// evidence.
async fn run_controls<L: Launcher>(
    kinds: &[ControlKind],
    plan: &PairPlan,
    launcher: &mut L,
    main: &PairReport,
    cancel: &CancellationToken,
) -> Result<Vec<ControlResult>, Interrupted> {
    let mut out = Vec::new();
    for kind in kinds {
        let result = match kind {
            ControlKind::Tcp => match tcp_control_plan(plan, main) {
                None => control_not_run(*kind, "the main run measured no bandwidth case to repeat over TCP"),
                Some(control) => match rearm_and_run(&control, launcher, cancel).await {
                    Ok(o) => judge_tcp_control(&o.report, main),
                    // The main run finished: its cases are the evidence to write out.
                    Err(PairError::Interrupted(mut i)) => {
                        i.partial = Some(Box::new(main.clone()));
                        return Err(i);
                    }
                    Err(e) => control_not_run(*kind, &e.to_string()),
                },
            },
            // `pair` refuses it without --rails; a caller that asked anyway learns it did not run.
            ControlKind::WrongNic => control_not_run(*kind, "it needs --rails (a rank per rail to pin elsewhere)"),
        };
        tracing::info!("control {kind}: caught={} ({})", result.caught, result.detail);
        out.push(result);
    }
    Ok(out)
}

/// [`run_pair`], then (when it ended with a complete report) each of `kinds` on the same
/// launcher, their results put into the report and the report judged again: the one way `pair`
/// and `gate` run a pair with its controls. An interruption during a control ends as
/// [`PairError::Interrupted`] carrying the main run's report as its evidence.
pub async fn run_pair_with_controls<L: Launcher>(
    kinds: &[ControlKind],
    plan: &PairPlan,
    launcher: &mut L,
    cancel: &CancellationToken,
    progress: &mut dyn FnMut(&icb_core::protocol::CaseProgress),
) -> Result<crate::PairOutcome, PairError> {
    let mut outcome = run_pair(plan, launcher, cancel, progress).await?;
    if kinds.is_empty() || outcome.report.partial.is_some() {
        return Ok(outcome);
    }
    let controls = run_controls(kinds, plan, launcher, &outcome.report, cancel)
        .await
        .map_err(PairError::Interrupted)?;
    outcome.report.controls = controls;
    icb_core::verdict::judge(&mut outcome.report);
    Ok(outcome)
}

/// The launcher made ready again, then one run of `control`.
async fn rearm_and_run<L: Launcher>(
    control: &PairPlan,
    launcher: &mut L,
    cancel: &CancellationToken,
) -> Result<crate::PairOutcome, PairError> {
    launcher.rearm().map_err(PairError::Launch)?;
    run_pair(control, launcher, cancel, &mut |_| {}).await
}
