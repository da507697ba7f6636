//! A case's warmup and window tuning, fitted to its budget ([`crate::fit`]): the phases that run
//! before a case is measured.

use crate::client::{PHASE_SLACK_S, PhaseOpts, phase};
use crate::control::Control;
use crate::error::EngineError;
use crate::messages::{CaseSetup, PhaseKind};
use crate::runtime::Runtime;
use crate::ucx_thread::UcxThread;
use icb_core::{RunSettings, WindowTrial};

/// What the warmup left: the probe's protocol info, the pace per operation, warmups timed.
pub(crate) struct Warm {
    pub(crate) info: Option<String>,
    pub(crate) pace: f64,
    pub(crate) iterations: u64,
}

/// The probe operation alone first (its protocol info string is the per-case transport
/// evidence, its time the first pace estimate), then as much of the planned warmup as the case's
/// budget allows at that pace ([`crate::fit`]): a degraded link gets a measured figure, not a
/// deadline error.
pub(crate) async fn warm_up(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: &CaseSetup,
    s: &RunSettings,
) -> Result<Warm, EngineError> {
    let timeout = (s.max_time_s * 4.0).max(30.0) + PHASE_SLACK_S;
    let probe = phase(
        control,
        thread,
        setup,
        PhaseKind::Warmup,
        1,
        PhaseOpts::default(),
        timeout,
    )
    .await?;
    let rest = crate::fit::warmup_after_probe(s.warmup_iterations, probe.probe_s, s.max_time_s);
    let mut warm = Warm {
        pace: probe.probe_s.filter(|p| p.is_finite() && *p > 0.0).unwrap_or(0.0),
        info: probe.info,
        iterations: 0,
    };
    if rest > 0 {
        // Another warmup phase: its own probe operation is untimed, the rest warm up.
        let more = phase(
            control,
            thread,
            setup,
            PhaseKind::Warmup,
            1 + rest,
            PhaseOpts::default(),
            timeout,
        )
        .await?;
        warm.iterations = more.iterations;
        if more.iterations > 0 && more.elapsed_s > 0.0 {
            warm.pace = more.elapsed_s / more.iterations as f64;
        }
    }
    Ok(warm)
}

/// Window auto-tuning: a short round at every candidate, each candidate's bandwidth. Candidates
/// whose round would not fit into half the case's budget at `pace` are left out.
pub(crate) async fn tune_window(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: &CaseSetup,
    s: &RunSettings,
    pace: f64,
    bytes_per_op: u64,
) -> Result<Vec<WindowTrial>, EngineError> {
    let mut trials = Vec::new();
    if !setup.test.is_bandwidth() || setup.is_list() {
        return Ok(trials);
    }
    let trial_s = s.stop.map(|r| r.round_s).unwrap_or(0.05).max(0.01);
    for &candidate in &s.window_candidates {
        let n = if pace > 0.0 { (trial_s / pace).ceil() as u64 } else { 1 };
        let n = n
            .max(u64::from(candidate) * 2)
            .min(crate::messages::MAX_PHASE_ITERATIONS);
        if crate::fit::window(candidate, pace, s.max_time_s / 2.0) < candidate {
            continue;
        }
        let timeout = crate::fit::phase_timeout(s.max_time_s, n, pace, PHASE_SLACK_S);
        let opts = PhaseOpts {
            window: Some(candidate),
            soft_deadline_s: None,
        };
        let out = phase(control, thread, setup, PhaseKind::Measure, n, opts, timeout).await?;
        if out.elapsed_s > 0.0 {
            trials.push(WindowTrial {
                window: candidate,
                bandwidth_bps: (out.iterations * bytes_per_op) as f64 / out.elapsed_s,
            });
        }
    }
    Ok(trials)
}
