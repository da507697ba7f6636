//! The gate's policy without a cluster: scripted steps end it in every way it can end — pass,
//! fail, a pair that measured nothing, a setup error at each step, the budget spent at each step,
//! a signal at each step — and every time the report exists, its verdict is the right one and a
//! signalled gate never passes. Time is paused: budgets are exact and the tests instant.

use icb_core::model::{Finding, GateVerdict, PairReport, Status, VerdictStatus};
use icb_gate::{GatePlan, GateSteps, PairEnd, Prepared, StepError, run_gate};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const REPORT: &str = include_str!("../../core/tests/fixtures/pair_report.json");

fn pair_report() -> PairReport {
    serde_json::from_str(REPORT).expect("the fixture is a v1 report")
}

/// What one scripted step does.
#[derive(Clone)]
enum Act<T> {
    Give(T),
    Fail(&'static str),
    /// Runs until the deadline passes (a step that will not finish in time).
    Slow,
    /// Cancels the run's token (a signal arriving during the step), then returns as a real
    /// step does after cleaning up.
    Signal,
}

#[derive(Clone)]
struct Script {
    env: Option<Vec<Finding>>,
    env_fails: bool,
    prepare: Act<Prepared>,
    probe: Act<Vec<Finding>>,
    pair: Act<PairEnd>,
    cancel: CancellationToken,
    /// The signal arrives just after the pair returned its (passing) report.
    signal_after_pair: bool,
    calls: Vec<&'static str>,
}

fn finding(step: &str, status: Status) -> Finding {
    Finding {
        step: step.into(),
        status,
        check: Some("x.y".into()),
        detail: format!("{step} says {status}"),
        hint: None,
    }
}

impl Script {
    fn healthy() -> Script {
        Script {
            env: Some(vec![finding("probe env", Status::Warn)]),
            env_fails: false,
            prepare: Act::Give(Prepared {
                nodes: vec!["gpu-1".into(), "gpu-2".into()],
                modelled_on: vec![("prefill".into(), "recipe prefill".into())],
                notes: vec![],
            }),
            probe: Act::Give(vec![]),
            pair: Act::Give(PairEnd::Judged(Box::new(pair_report()))),
            cancel: CancellationToken::new(),
            signal_after_pair: false,
            calls: vec![],
        }
    }
}

async fn act<T: Clone>(a: &Act<T>, deadline: Instant, cancel: &CancellationToken) -> Result<T, StepError> {
    match a {
        Act::Give(v) => Ok(v.clone()),
        Act::Fail(why) => Err(StepError::Setup(why.to_string())),
        Act::Slow => {
            tokio::time::sleep_until(deadline + Duration::from_secs(3600)).await;
            Err(StepError::Setup("slow step ended".into()))
        }
        Act::Signal => {
            cancel.cancel();
            Err(StepError::Interrupted("cleaned up: the scripted pods".into()))
        }
    }
}

impl GateSteps for Script {
    fn probe_env(&mut self) -> Result<Option<Vec<Finding>>, StepError> {
        self.calls.push("probe env");
        if self.env_fails {
            return Err(StepError::Setup("cannot read recipe deploy/: no such file".into()));
        }
        Ok(self.env.clone())
    }
    async fn prepare(&mut self, deadline: Instant) -> Result<Prepared, StepError> {
        self.calls.push("prepare");
        let cancel = self.cancel.clone();
        act(&self.prepare, deadline, &cancel).await
    }
    async fn probe_nodes(
        &mut self,
        _nodes: &[String],
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Vec<Finding>, StepError> {
        self.calls.push("probe node");
        act(&self.probe, deadline, cancel).await
    }
    async fn pair(&mut self, deadline: Instant, cancel: &CancellationToken) -> Result<PairEnd, StepError> {
        self.calls.push("pair");
        if matches!(self.pair, Act::Signal) {
            // A real pair reports what it measured before the signal, as evidence.
            cancel.cancel();
            let mut partial = pair_report();
            partial.cases.truncate(1);
            partial.verdict.status = VerdictStatus::Pass;
            return Ok(PairEnd::Interrupted {
                cleanup: "cleaned up: both bench pods".into(),
                partial: Some(Box::new(partial)),
            });
        }
        let end = act(&self.pair, deadline, cancel).await;
        if self.signal_after_pair {
            cancel.cancel();
        }
        end
    }
}

fn plan() -> GatePlan {
    GatePlan {
        budget: Duration::from_secs(60),
        probe_nodes: true,
        signal_name: || "SIGTERM",
        criteria: Some(icb_core::model::Criteria {
            tests: vec!["put_bw".into()],
            allow_tcp: true,
            engine: "ucx".into(),
            profile: "gate".into(),
            ..Default::default()
        }),
    }
}

async fn gate(script: &mut Script) -> icb_core::model::GateReport {
    let cancel = script.cancel.clone();
    run_gate(&plan(), script, &cancel).await
}

#[tokio::test(start_paused = true)]
async fn a_healthy_gate_passes_with_its_warnings_and_steps() {
    let mut s = Script::healthy();
    let r = gate(&mut s).await;
    assert_eq!(r.verdict, GateVerdict::Pass, "{}", r.reason);
    assert_eq!(s.calls, ["probe env", "prepare", "probe node", "pair"]);
    let steps: Vec<&str> = r.steps.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(steps, ["probe env", "probe node", "pair"]);
    assert_eq!(r.findings.len(), 1, "the warning is kept");
    assert_eq!(r.modelled_on.len(), 1);
    assert!(r.pair.is_some());
    let criteria = r.criteria.as_ref().expect("the report states its criteria");
    assert!(criteria.allow_tcp && criteria.profile == "gate");
}

#[tokio::test(start_paused = true)]
async fn failing_findings_and_a_pair_that_measured_nothing_fail() {
    let mut s = Script::healthy();
    s.probe = Act::Give(vec![finding("probe node/gpu-1", Status::Fail)]);
    let r = gate(&mut s).await;
    assert_eq!(r.verdict, GateVerdict::Fail);
    assert!(
        r.reason
            .starts_with("probe node/gpu-1: x.y: probe node/gpu-1 says fail"),
        "{}",
        r.reason
    );

    let mut s = Script::healthy();
    let mut empty = pair_report();
    empty.cases.clear();
    empty.verdict.status = VerdictStatus::Warn;
    s.pair = Act::Give(PairEnd::Judged(Box::new(empty)));
    let r = gate(&mut s).await;
    assert_eq!(r.verdict, GateVerdict::Fail, "nothing measured is never a pass");
}

/// The pair step's report as `--allow-tcp` and a knobs-off control leave it: both measured cases
/// warn that TCP carried them, and the recipe's knobs were slower than UCX's defaults.
fn pair_with_two_warnings() -> PairReport {
    use icb_core::model::{CheckVerdict, ControlKind, ControlResult, KnobsEffect};
    let mut pair = pair_report();
    for c in pair.cases.iter_mut().filter(|c| c.measurement.is_some()) {
        c.verdict = Some(CheckVerdict {
            status: Status::Warn,
            reason: "tcp fallback: data went over tcp/lo".into(),
            hint: Some("run both roles in one pod".into()),
            finding: None,
        });
    }
    let knobs = ControlResult {
        kind: ControlKind::KnobsOff,
        caught: true,
        seen_as: vec![],
        case: "put_bw 4 KiB host→host".into(),
        bandwidth_bps: Some(6e9),
        main_bandwidth_bps: Some(1e9),
        detail: "the recipe's UCX_RNDV_THRESH made put_bw 4 KiB host→host slower than UCX's defaults".into(),
        removed: vec!["UCX_RNDV_THRESH".into()],
        effect: Some(KnobsEffect::Slower),
    };
    // The pair's own verdict: the worst case's warning with the knobs-off line added to it.
    pair.verdict.status = VerdictStatus::Warn;
    pair.verdict.reason = format!(
        "tcp fallback: data went over tcp/lo (2 of 4 cases); and {}",
        knobs.detail
    );
    pair.controls = vec![knobs];
    pair
}

/// Issue 36 item 4: a PASS listed only the probes' warnings while its pair step warned. Every
/// warning of the pair step is a finding of step `pair` naming where it was seen, each once (the
/// knobs-off control's is not also the verdict line it produced); the verdict stays a pass.
#[tokio::test(start_paused = true)]
async fn the_pair_steps_warnings_are_findings_each_once() {
    let mut s = Script::healthy();
    s.pair = Act::Give(PairEnd::Judged(Box::new(pair_with_two_warnings())));
    let r = gate(&mut s).await;
    assert_eq!(
        r.verdict,
        GateVerdict::Pass,
        "warnings never fail the gate: {}",
        r.reason
    );
    let pair: Vec<&Finding> = r.findings.iter().filter(|f| f.step == "pair").collect();
    assert!(pair.iter().all(|f| f.status == Status::Warn), "{pair:?}");
    assert_eq!(pair.len(), 2, "one finding per warning: {pair:?}");
    let tcp = pair
        .iter()
        .find(|f| f.detail.starts_with("tcp fallback"))
        .expect("the TCP warning");
    // Both cases that went over TCP are named on the one line.
    assert!(
        tcp.detail.contains("tag_lat 4 KiB host→host") && tcp.detail.contains("put_bw 4 KiB host→host"),
        "{}",
        tcp.detail
    );
    assert_eq!(tcp.hint.as_deref(), Some("run both roles in one pod"));
    let knobs: Vec<_> = pair.iter().filter(|f| f.detail.contains("UCX_RNDV_THRESH")).collect();
    assert_eq!(knobs.len(), 1, "the knobs-off warning once: {pair:?}");
    assert!(
        knobs[0].hint.as_deref().unwrap().contains("UCX_RNDV_THRESH"),
        "{:?}",
        knobs[0]
    );
    // The probe env warning is still there too.
    assert_eq!(r.findings.len(), 3, "{:?}", r.findings);
}

/// A pair whose side could not start UCX under the recipe's own environment is the gate's
/// finding (the recipe is wrong), not a setup error of the gate.
#[tokio::test(start_paused = true)]
async fn ucx_failing_under_the_recipes_env_is_a_finding() {
    let mut s = Script::healthy();
    s.pair = Act::Give(PairEnd::Finding(Finding {
        step: "pair".into(),
        status: Status::Fail,
        check: Some("pair.ucx_init".into()),
        detail: "the decode side cannot start UCX under the recipe's UCX_TLS=bogus".into(),
        hint: Some("fix UCX_TLS in the recipe".into()),
    }));
    let r = gate(&mut s).await;
    assert_eq!(r.verdict, GateVerdict::Fail, "{}", r.reason);
    assert_eq!(r.verdict.exit_code(), 1);
    assert!(r.reason.contains("UCX_TLS=bogus"), "{}", r.reason);
}

#[tokio::test(start_paused = true)]
async fn every_step_failing_in_turn_is_an_error_with_a_report() {
    let mut env = Script::healthy();
    env.env_fails = true;
    let mut prepare = Script::healthy();
    prepare.prepare = Act::Fail("cannot reach the Kubernetes API at https://x (connection refused)");
    let mut probe = Script::healthy();
    probe.probe = Act::Fail("probe pods forbidden");
    let mut pair = Script::healthy();
    pair.pair = Act::Fail("the decode side exited: ucp_init failed");
    for (mut s, said, ran) in [
        (env, "cannot read recipe", vec!["probe env"]),
        (prepare, "connection refused", vec!["probe env", "prepare"]),
        (
            probe,
            "probe pods forbidden",
            vec!["probe env", "prepare", "probe node"],
        ),
        (
            pair,
            "ucp_init failed",
            vec!["probe env", "prepare", "probe node", "pair"],
        ),
    ] {
        let r = gate(&mut s).await;
        assert_eq!(r.verdict, GateVerdict::Error, "{said}");
        assert_eq!(r.verdict.exit_code(), 2);
        assert!(r.reason.contains(said), "{}", r.reason);
        assert!(r.criteria.is_some(), "criteria on every path");
        assert_eq!(s.calls, ran);
    }
}

#[tokio::test(start_paused = true)]
async fn the_budget_spent_at_each_step_names_what_still_ran() {
    let mut prepare = Script::healthy();
    prepare.prepare = Act::Slow;
    let mut probe = Script::healthy();
    probe.probe = Act::Slow;
    let mut pair = Script::healthy();
    pair.pair = Act::Slow;
    for (mut s, running) in [
        (prepare, "while preparing the bench pods still ran"),
        (probe, "while probe node on gpu-1, gpu-2 still ran"),
        (pair, "while the pair (slow step ended) still ran"),
    ] {
        let started = Instant::now();
        let r = gate(&mut s).await;
        assert_eq!(r.verdict, GateVerdict::Error);
        assert!(r.reason.contains("over the --budget of 60s"), "{}", r.reason);
        assert!(r.reason.contains(running), "{}", r.reason);
        assert!(started.elapsed() <= Duration::from_secs(60) || running.contains("pair"));
    }
}

#[tokio::test(start_paused = true)]
async fn a_signal_at_any_step_is_interrupted_never_pass() {
    let mut prepare = Script::healthy();
    prepare.prepare = Act::Signal;
    let mut probe = Script::healthy();
    probe.probe = Act::Signal;
    let mut pair = Script::healthy();
    pair.pair = Act::Signal;
    let before = Script::healthy();
    before.cancel.cancel();
    for (what, mut s) in [
        ("before", before),
        ("prepare", prepare),
        ("probe", probe),
        ("pair", pair),
    ] {
        let r = gate(&mut s).await;
        assert_eq!(r.verdict, GateVerdict::Interrupted, "{what}: {}", r.reason);
        assert_eq!(r.verdict.exit_code(), 130);
        assert!(
            r.reason.starts_with("interrupted by SIGTERM: no verdict"),
            "{what}: {}",
            r.reason
        );
        if let Some(p) = &r.pair {
            assert_eq!(
                p.verdict.status,
                VerdictStatus::Interrupted,
                "{what}: the evidence is marked"
            );
            assert!(p.partial.is_some());
        }
    }
    // A signal right after the pair's report still wins: the steps all passed, the gate was
    // signalled.
    let mut late = Script::healthy();
    late.signal_after_pair = true;
    let r = gate(&mut late).await;
    assert_eq!(r.verdict, GateVerdict::Interrupted, "{}", r.reason);
}
