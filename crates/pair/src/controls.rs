//! In-run negative controls (issue 35): after the main run, a short extra run on the same two
//! sides, configured to be bad on purpose, that the detector must catch. The control runs through
//! the same [`run_pair`] and the same launcher (it starts both sides again and cleans them up
//! again), so it crosses exactly the path the main run crossed; `icb_core::verdict::controls`
//! judges it, and the main verdict then rests on a detector shown to work here.

use crate::plan::PairPlan;
use crate::run::{Interrupted, PairError, run_pair};
use crate::{CancellationToken, Launcher};
use icb_core::model::{ControlKind, ControlResult, PairReport};
use icb_core::verdict::controls::{control_not_run, judge_knobs_off_control, judge_tcp_control, tcp_control_shape};
use std::time::Duration;

/// Test-only: the `TLS` value the TCP control forces instead of `tcp`, so that a test can make
/// the control undetectable on purpose (e.g. `sm,cma,self`) and see the run turn inconclusive.
pub const TEST_CONTROL_TLS_ENV: &str = "IC_BENCH_TEST_CONTROL_TLS";

/// The longest a control may measure its one case: controls stay short (≤ 1 s of measuring on
/// the 2-core build machine).
pub const CONTROL_MAX_TIME_S: f64 = 0.3;

/// The recipe's variables a knobs-off control runs without: the `UCX_*` and `NIXL_*` either side
/// sets (the knobs of the transport; `NCCL_*` and the rest stay), sorted.
pub fn knob_vars(env: &crate::local::RecipeEnv) -> Vec<String> {
    let mut names: Vec<String> = env
        .prefill
        .iter()
        .chain(&env.decode)
        .map(|(k, _)| k.clone())
        .filter(|k| k.starts_with("UCX_") || k.starts_with("NIXL_"))
        .collect();
    names.sort();
    names.dedup();
    names
}

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
        let (control, removed) = match kind {
            ControlKind::Tcp => (tcp_control_plan(plan, main), Vec::new()),
            ControlKind::KnobsOff => (short_control_plan(plan, main), plan.knob_vars.clone()),
            // `pair` refuses it without --rails; a caller that asked anyway learns it did not run.
            ControlKind::WrongNic => {
                out.push(control_not_run(
                    *kind,
                    "it needs --rails (a rank per rail to pin elsewhere)",
                ));
                continue;
            }
        };
        let result = match control {
            None => control_not_run(*kind, "the main run measured no bandwidth case to repeat"),
            Some(_) if *kind == ControlKind::KnobsOff && removed.is_empty() => {
                control_not_run(*kind, "no recipe sets UCX_* or NIXL_* variables for these sides")
            }
            Some(control) => match rearm_and_run(&control, &removed, launcher, cancel).await {
                Ok(o) if *kind == ControlKind::KnobsOff => judge_knobs_off_control(&o.report, main, &removed),
                Ok(o) => judge_tcp_control(&o.report, main),
                // The main run finished: its cases are the evidence to write out.
                Err(PairError::Interrupted(mut i)) => {
                    i.partial = Some(Box::new(main.clone()));
                    return Err(i);
                }
                Err(e) => control_not_run(*kind, &e.to_string()),
            },
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

/// The launcher made ready again (its sides to start without `removed`), then one run of
/// `control`; the launcher's env is as configured again afterwards, whatever the run's end.
async fn rearm_and_run<L: Launcher>(
    control: &PairPlan,
    removed: &[String],
    launcher: &mut L,
    cancel: &CancellationToken,
) -> Result<crate::PairOutcome, PairError> {
    launcher.rearm().map_err(PairError::Launch)?;
    launcher.set_removed_env(removed).map_err(PairError::Launch)?;
    let ran = run_pair(control, launcher, cancel, &mut |_| {}).await;
    let restored = launcher.set_removed_env(&[]);
    let outcome = ran?;
    restored.map_err(PairError::Launch)?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35 item 4: knobs-off turns off the transport's knobs either side sets (UCX_*,
    /// NIXL_*), each once, and leaves the rest of the recipe's env (NCCL_*, tokens) alone.
    #[test]
    fn knob_vars_are_the_ucx_and_nixl_variables_of_either_side() {
        let env = |vars: &[(&str, &str)]| vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let recipe = crate::local::RecipeEnv {
            prefill: env(&[
                ("UCX_TLS", "rc"),
                ("NCCL_IB_HCA", "mlx5_0"),
                ("UCX_RNDV_THRESH", "8192"),
            ]),
            decode: env(&[("UCX_TLS", "rc"), ("NIXL_PLUGIN_DIR", "/x"), ("HF_TOKEN", "t")]),
        };
        assert_eq!(knob_vars(&recipe), ["NIXL_PLUGIN_DIR", "UCX_RNDV_THRESH", "UCX_TLS"]);
        assert!(knob_vars(&crate::local::RecipeEnv::default()).is_empty());
    }
}
