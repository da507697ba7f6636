//! The pair pipeline's orchestration, tested without root, UCX or a cluster: a scripted fake
//! launcher plays both sides (what they print, when they end, how they fail), and every test
//! checks the one-line outcome, its exit code, and that cleanup ran exactly once.

use icb_core::model::{Endpoint, Locality, PairReport, Placement, VerdictStatus};
use icb_core::protocol::{
    CaseProgress, ChildPlan, Listening, SIDE_SCHEMA, SideErrorKind, SideEvent, SideFailure, side_line,
};
use icb_core::verdict::ExpectationOverrides;
use icb_pair::{
    CancellationToken, ExpectationInput, LaunchError, Launcher, PairError, PairOutcome, PairPlan, Side, SideRole,
    run_pair,
};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const REPORT: &str = include_str!("../../core/tests/fixtures/pair_report.json");

fn fixture() -> PairReport {
    serde_json::from_str(REPORT).expect("the fixture is a v1 report")
}

/// What a scripted side does, in order.
#[derive(Clone)]
enum Step {
    Line(String),
    Wait(Duration),
    /// Cancels the run's token (to interrupt at exactly this point), then goes on.
    Cancel,
    /// Prints nothing more and never ends.
    Hang,
    /// Output ends; `Some(note)` is a failure.
    End(Option<&'static str>),
}

fn listening() -> Step {
    Step::Line(side_line(&SideEvent::Listening(Listening::new(
        "127.0.0.1:4242",
        "1.22.0",
    ))))
}

fn report_line(report: &PairReport) -> Step {
    Step::Line(side_line(&SideEvent::Report(Box::new(report.clone()))))
}

fn case_lines(report: &PairReport) -> Vec<Step> {
    let total = report.cases.len();
    report
        .cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            Step::Line(side_line(&SideEvent::Case(Box::new(CaseProgress {
                schema: SIDE_SCHEMA.into(),
                index: i + 1,
                total,
                case: case.clone(),
            }))))
        })
        .collect()
}

#[derive(Default)]
struct Log {
    plans: Vec<ChildPlan>,
    stops: Vec<String>,
    cleanups: usize,
}

struct FakeSide {
    name: &'static str,
    steps: VecDeque<Step>,
    note: Option<&'static str>,
    cancel: CancellationToken,
    log: Arc<Mutex<Log>>,
}

impl Side for FakeSide {
    fn name(&self) -> String {
        format!("the {} side (fake)", self.name)
    }

    async fn next_line(&mut self) -> Option<String> {
        loop {
            match self.steps.front().cloned() {
                Some(Step::Line(l)) => {
                    self.steps.pop_front();
                    return Some(l);
                }
                Some(Step::Wait(d)) => {
                    tokio::time::sleep(d).await;
                    self.steps.pop_front();
                }
                Some(Step::Cancel) => {
                    self.steps.pop_front();
                    self.cancel.cancel();
                }
                Some(Step::Hang) => std::future::pending::<()>().await,
                Some(Step::End(note)) => {
                    self.note = note;
                    return None;
                }
                None => return None,
            }
        }
    }

    async fn exit_note(&mut self) -> Option<String> {
        self.note.map(String::from)
    }

    fn last_words(&self) -> String {
        format!("{} was still quiet", self.name)
    }

    async fn stop(&mut self, _grace: Duration) {
        self.log.lock().unwrap().stops.push(self.name.into());
    }
}

struct FakeLauncher {
    decode: Result<Vec<Step>, &'static str>,
    prefill: Result<Vec<Step>, &'static str>,
    cleanup: Result<&'static str, &'static str>,
    locality: Locality,
    cancel: CancellationToken,
    log: Arc<Mutex<Log>>,
}

impl FakeLauncher {
    fn new(decode: Vec<Step>, prefill: Vec<Step>) -> FakeLauncher {
        FakeLauncher {
            decode: Ok(decode),
            prefill: Ok(prefill),
            cleanup: Ok("both fakes"),
            locality: Locality::SameHost,
            cancel: CancellationToken::new(),
            log: Arc::default(),
        }
    }

    fn side(&self, name: &'static str, steps: &Result<Vec<Step>, &'static str>) -> Result<FakeSide, LaunchError> {
        let steps = steps.clone().map_err(LaunchError::new)?;
        Ok(FakeSide {
            name,
            steps: steps.into(),
            note: None,
            cancel: self.cancel.clone(),
            log: Arc::clone(&self.log),
        })
    }
}

impl Launcher for FakeLauncher {
    type Side = FakeSide;

    fn locality(&self) -> Locality {
        self.locality
    }

    fn mode(&self) -> String {
        "fake".into()
    }

    async fn start_decode(&mut self) -> Result<FakeSide, LaunchError> {
        self.side("decode", &self.decode)
    }

    async fn start_prefill(&mut self, server: &Listening, plan: &ChildPlan) -> Result<FakeSide, LaunchError> {
        assert_eq!(server.address, "127.0.0.1:4242");
        self.log.lock().unwrap().plans.push(plan.clone());
        self.side("prefill", &self.prefill)
    }

    fn placement(&self, server: &Listening, _report: &PairReport) -> Placement {
        Placement {
            locality: self.locality,
            mode: self.mode(),
            prefill: Endpoint {
                host: "fake-a".into(),
                ..Default::default()
            },
            decode: Endpoint {
                host: "fake-a".into(),
                address: Some(server.address.clone()),
                ..Default::default()
            },
        }
    }

    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        self.log.lock().unwrap().cleanups += 1;
        self.cleanup.map(String::from).map_err(LaunchError::new)
    }
}

fn plan() -> PairPlan {
    let mut plan = PairPlan::new(fixture().settings, ExpectationInput::default());
    plan.startup_timeout = Duration::from_secs(30);
    plan.deadline = Duration::from_secs(300);
    plan
}

async fn run(plan: &PairPlan, launcher: &mut FakeLauncher) -> (Result<PairOutcome, PairError>, Vec<usize>) {
    let cancel = launcher.cancel.clone();
    let mut seen = Vec::new();
    let r = run_pair(plan, launcher, &cancel, &mut |p: &CaseProgress| seen.push(p.index)).await;
    (r, seen)
}

fn healthy_prefill(report: &PairReport) -> Vec<Step> {
    let mut steps = vec![Step::Line("some UCX noise".into())];
    steps.extend(case_lines(report));
    steps.push(report_line(report));
    steps.push(Step::End(None));
    steps
}

#[tokio::test(start_paused = true)]
async fn a_healthy_run_is_judged_once_with_the_launchers_placement() {
    let report = fixture();
    let mut launcher = FakeLauncher::new(vec![listening(), Step::Hang], healthy_prefill(&report));
    let (outcome, progress) = run(&plan(), &mut launcher).await;
    let outcome = outcome.expect("a healthy run");
    assert_eq!(progress, (1..=report.cases.len()).collect::<Vec<_>>());
    assert_eq!(outcome.report.placement.mode, "fake");
    assert_eq!(
        outcome.report.placement.decode.address.as_deref(),
        Some("127.0.0.1:4242")
    );
    assert_eq!(
        outcome.report.verdict.status,
        VerdictStatus::Pass,
        "{:?}",
        outcome.report.verdict
    );
    assert_eq!(outcome.cleanup, "both fakes");
    let log = launcher.log.lock().unwrap();
    assert_eq!(log.cleanups, 1);
    assert_eq!(log.stops, ["prefill", "decode"]);
    assert_eq!(log.plans.len(), 1);
    assert_eq!(log.plans[0].expectation.locality, Locality::SameHost);
    assert_eq!(log.plans[0].settings, report.settings);
}

#[tokio::test(start_paused = true)]
async fn the_childs_plan_and_the_final_verdict_use_the_same_floor() {
    // A floor no link reaches, applied from 1 byte: the put_bw case must fail it.
    let mut plan = plan();
    plan.expectation = ExpectationInput {
        config: None,
        flags: ExpectationOverrides::from_flags(Some(1000.0), None, Some(1), false).unwrap(),
    };
    let report = fixture();
    let mut launcher = FakeLauncher::new(vec![listening(), Step::Hang], healthy_prefill(&report));
    let (outcome, _) = run(&plan, &mut launcher).await;
    let outcome = outcome.unwrap();
    let sent = launcher.log.lock().unwrap().plans[0].expectation.clone();
    assert_eq!(sent.min_host_bandwidth_bps, 1000e9);
    assert_eq!(
        outcome.report.expectation, sent,
        "the report is judged with the plan's expectation"
    );
    assert_eq!(
        outcome.report.verdict.status,
        VerdictStatus::Fail,
        "{:?}",
        outcome.report.verdict
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_that_never_listens_times_out_naming_the_flag() {
    let mut launcher = FakeLauncher::new(vec![Step::Line("starting".into()), Step::Hang], vec![]);
    let (r, _) = run(&plan(), &mut launcher).await;
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let msg = e.to_string();
    assert!(
        msg.contains("the decode side (fake) did not start listening within 30s (raise --startup-timeout)"),
        "{msg}"
    );
    assert!(msg.contains("decode was still quiet"), "{msg}");
    assert!(!msg.contains('\n'));
    let log = launcher.log.lock().unwrap();
    assert_eq!(log.cleanups, 1);
    assert_eq!(log.stops, ["decode"]);
}

#[tokio::test(start_paused = true)]
async fn a_server_that_exits_before_listening_says_why() {
    let mut launcher = FakeLauncher::new(vec![Step::End(Some("exit status: 2: cannot load UCX"))], vec![]);
    let (r, _) = run(&plan(), &mut launcher).await;
    let msg = r.unwrap_err().to_string();
    assert_eq!(
        msg,
        "the decode side (fake) exited before listening (exit status: 2: cannot load UCX)"
    );
    assert_eq!(launcher.log.lock().unwrap().cleanups, 1);
}

#[tokio::test(start_paused = true)]
async fn a_client_that_dies_without_a_report_says_why() {
    let report = fixture();
    let mut prefill = case_lines(&report);
    prefill.truncate(1);
    prefill.push(Step::End(Some("signal: 9 (SIGKILL)")));
    let mut launcher = FakeLauncher::new(vec![listening(), Step::Hang], prefill);
    let (r, progress) = run(&plan(), &mut launcher).await;
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert_eq!(
        e.to_string(),
        "the prefill side (fake) exited without printing a result (signal: 9 (SIGKILL))"
    );
    assert_eq!(progress, [1]);
    assert_eq!(launcher.log.lock().unwrap().cleanups, 1);
}

#[tokio::test(start_paused = true)]
async fn malformed_and_foreign_reports_are_one_line_errors() {
    for (line, wanted) in [
        (
            r#"{"event":"report","schema":"ic-bench.pair/v1","cases":"nope"}"#,
            "does not parse",
        ),
        (r#"{"schema":"ic-bench.pair/v2"}"#, "speaks ic-bench.pair/v2"),
        (
            r#"{"event":"case","schema":"ic-bench.serve/v1","index":"x"}"#,
            "case line that does not parse",
        ),
    ] {
        let mut launcher = FakeLauncher::new(
            vec![listening(), Step::Hang],
            vec![Step::Line(line.into()), Step::End(None)],
        );
        let (r, _) = run(&plan(), &mut launcher).await;
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let msg = e.to_string();
        assert!(msg.contains(wanted), "{line}: {msg}");
        assert!(!msg.contains('\n'), "{msg}");
        assert_eq!(launcher.log.lock().unwrap().cleanups, 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_client_with_no_result_before_the_deadline_is_reported() {
    let mut launcher = FakeLauncher::new(vec![listening(), Step::Hang], vec![Step::Hang]);
    let mut plan = plan();
    plan.deadline = Duration::from_secs(90);
    let (r, _) = run(&plan, &mut launcher).await;
    let msg = r.unwrap_err().to_string();
    assert!(
        msg.contains("the prefill side (fake) gave no result within 90s"),
        "{msg}"
    );
    assert_eq!(launcher.log.lock().unwrap().cleanups, 1);
}

#[tokio::test(start_paused = true)]
async fn a_server_that_fails_mid_run_ends_the_wait_after_a_grace() {
    let mut launcher = FakeLauncher::new(
        vec![
            listening(),
            Step::Wait(Duration::from_secs(1)),
            Step::End(Some("exit code 137 (OOMKilled)")),
        ],
        vec![Step::Hang],
    );
    let started = tokio::time::Instant::now();
    let (r, _) = run(&plan(), &mut launcher).await;
    let msg = r.unwrap_err().to_string();
    assert!(
        msg.contains("the decode side (fake) failed mid-run (exit code 137 (OOMKilled))"),
        "{msg}"
    );
    // Well before the 300 s deadline: 1 s, then the 10 s grace.
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(launcher.log.lock().unwrap().cleanups, 1);
}

#[tokio::test(start_paused = true)]
async fn a_server_that_exits_cleanly_before_the_report_is_fine() {
    // serve --once exits after the client's goodbye, which comes before the report line.
    let report = fixture();
    let mut prefill = vec![Step::Wait(Duration::from_secs(2))];
    prefill.extend(healthy_prefill(&report));
    let mut launcher = FakeLauncher::new(vec![listening(), Step::End(None)], prefill);
    let (r, _) = run(&plan(), &mut launcher).await;
    assert!(r.is_ok(), "{r:?}");
}

#[tokio::test(start_paused = true)]
async fn a_launcher_that_cannot_start_a_side_still_cleans_up() {
    let mut launcher = FakeLauncher::new(vec![], vec![]);
    launcher.decode = Err("--isolation pod needs root (namespaces): run as root or use --isolation none");
    let (r, _) = run(&plan(), &mut launcher).await;
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().starts_with("--isolation pod needs root"), "{e}");
    assert_eq!(launcher.log.lock().unwrap().cleanups, 1);

    let mut launcher = FakeLauncher::new(vec![listening(), Step::Hang], vec![]);
    launcher.prefill = Err("cannot spawn connect");
    let (r, _) = run(&plan(), &mut launcher).await;
    assert_eq!(r.unwrap_err().to_string(), "cannot spawn connect");
    let log = launcher.log.lock().unwrap();
    assert_eq!(log.cleanups, 1);
    assert_eq!(log.stops, ["decode"]);
}

#[tokio::test(start_paused = true)]
async fn cancel_at_every_step_cleans_up_once_and_exits_130() {
    let report = fixture();
    let scripts: Vec<(&str, Vec<Step>, Vec<Step>)> = vec![
        ("before listening", vec![Step::Cancel, Step::Hang], vec![]),
        (
            "after listening",
            vec![listening(), Step::Cancel, Step::Hang],
            vec![Step::Hang],
        ),
        (
            "while the client starts",
            vec![listening(), Step::Hang],
            vec![Step::Cancel, Step::Hang],
        ),
        ("mid-run", vec![listening(), Step::Hang], {
            let mut s = case_lines(&report);
            s.insert(1, Step::Cancel);
            s.push(Step::Hang);
            s
        }),
    ];
    for (when, decode, prefill) in scripts {
        let mut launcher = FakeLauncher::new(decode, prefill);
        let (r, _) = run(&plan(), &mut launcher).await;
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), 130, "{when}: {e}");
        assert_eq!(e.to_string(), "interrupted: cleaned up: both fakes", "{when}");
        assert_eq!(launcher.log.lock().unwrap().cleanups, 1, "{when}");
    }
    // Cancelled before anything started: nothing to stop, cleanup still once.
    let mut launcher = FakeLauncher::new(vec![listening()], vec![]);
    launcher.cancel.cancel();
    let (r, _) = run(&plan(), &mut launcher).await;
    assert_eq!(r.unwrap_err().exit_code(), 130);
    let log = launcher.log.lock().unwrap();
    assert_eq!(log.cleanups, 1);
    assert!(log.stops.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failed_cleanup_is_reported_after_success_and_after_failure() {
    let report = fixture();
    let mut launcher = FakeLauncher::new(vec![listening(), Step::Hang], healthy_prefill(&report));
    launcher.cleanup = Err("namespace icb-x busy");
    let (r, _) = run(&plan(), &mut launcher).await;
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert_eq!(
        e.to_string(),
        "the run finished; cleaning up also failed: namespace icb-x busy"
    );
    assert_eq!(launcher.log.lock().unwrap().cleanups, 1);

    let mut launcher = FakeLauncher::new(vec![Step::End(Some("exit status: 2: no UCX"))], vec![]);
    launcher.cleanup = Err("namespace icb-x busy");
    let (r, _) = run(&plan(), &mut launcher).await;
    assert_eq!(
        r.unwrap_err().to_string(),
        "the decode side (fake) exited before listening (exit status: 2: no UCX); cleaning up also failed: namespace icb-x busy"
    );

    let mut launcher = FakeLauncher::new(vec![Step::Cancel, Step::Hang], vec![]);
    launcher.cleanup = Err("namespace icb-x busy");
    let (r, _) = run(&plan(), &mut launcher).await;
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2, "something may be left: not a clean interrupt");
    assert_eq!(
        e.to_string(),
        "interrupted; cleaning up also failed: namespace icb-x busy"
    );
}

/// A report the prefill side writes after the signal — even one it judged `pass` — comes back as
/// the interruption's evidence, never as an outcome: no caller can mistake it for a verdict
/// (issue 17: an interrupted gate printed PASS).
#[tokio::test(start_paused = true)]
async fn a_partial_report_after_a_signal_is_evidence_never_an_outcome() {
    let report = fixture();
    let mut partial = report.clone();
    partial.cases.truncate(1);
    partial.verdict.status = VerdictStatus::Pass;
    partial.partial = Some(icb_core::model::PartialRun {
        reason: "interrupted".into(),
        planned_cases: report.cases.len(),
    });
    let mut prefill = case_lines(&report);
    prefill.truncate(1);
    prefill.extend([Step::Cancel, report_line(&partial), Step::Hang]);
    let mut launcher = FakeLauncher::new(vec![listening(), Step::Hang], prefill);
    let (r, _) = run(&plan(), &mut launcher).await;
    let Err(PairError::Interrupted(i)) = r else {
        panic!("an interrupted run must not be Ok: {r:?}");
    };
    let evidence = i.partial.as_ref().expect("the cases measured before the signal");
    assert_eq!(evidence.cases.len(), 1);
    assert_eq!(i.cleanup_text(), "cleaned up: both fakes");
    assert_eq!(PairError::Interrupted(Default::default()).exit_code(), 130);
    assert_eq!(launcher.log.lock().unwrap().cleanups, 1);
}

fn failed_line(kind: SideErrorKind, message: &str) -> Step {
    Step::Line(side_line(&SideEvent::Failed(SideFailure::new(kind, message))))
}

/// Issue 17 item 4: a side's UCX failure reaches the one line and is typed, for any launcher.
#[tokio::test(start_paused = true)]
async fn a_decode_side_whose_ucx_init_fails_is_a_typed_error_naming_the_variable() {
    let why = "UCX setup failed: UCX ucp_init failed: No such device (status -14) (UCX_TLS=bogus is set)";
    let decode = vec![
        failed_line(
            SideErrorKind::UcxInit {
                variable: Some("UCX_TLS=bogus".into()),
            },
            why,
        ),
        Step::End(Some("exit status: 2")),
    ];
    let mut launcher = FakeLauncher::new(decode, vec![]);
    let (r, _) = run(&plan(), &mut launcher).await;
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let PairError::SideFailed { side, kind, message } = &e else {
        panic!("not typed: {e:?}");
    };
    assert_eq!(*side, SideRole::Decode);
    assert_eq!(
        *kind,
        SideErrorKind::UcxInit {
            variable: Some("UCX_TLS=bogus".into())
        }
    );
    assert_eq!(
        message,
        &format!("the decode side (fake) exited before listening: {why}")
    );
    assert!(!message.contains('{') && !message.contains('\n'), "{message}");
    assert_eq!(launcher.log.lock().unwrap().cleanups, 1);
}

#[tokio::test(start_paused = true)]
async fn a_prefill_side_without_ucx_is_typed_and_its_cases_never_reach_the_line() {
    let report = fixture();
    let mut prefill = case_lines(&report);
    prefill.push(failed_line(
        SideErrorKind::UcxNotFound,
        "UCX setup failed: UCX not found",
    ));
    prefill.push(Step::End(Some("exit status: 2")));
    let mut launcher = FakeLauncher::new(vec![listening(), Step::Hang], prefill);
    let (r, _) = run(&plan(), &mut launcher).await;
    let e = r.unwrap_err();
    assert!(
        matches!(
            &e,
            PairError::SideFailed {
                side: SideRole::Prefill,
                kind: SideErrorKind::UcxNotFound,
                ..
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert_eq!(msg, "the prefill side (fake) failed: UCX setup failed: UCX not found");
}

#[tokio::test(start_paused = true)]
async fn a_decode_side_that_fails_first_is_the_cause_of_the_prefill_sides_end() {
    let decode = vec![
        listening(),
        Step::Wait(Duration::from_millis(10)),
        failed_line(
            SideErrorKind::Other,
            "UCX operation failed during tag_bw 4 MiB host→host",
        ),
        Step::End(Some("exit status: 2")),
    ];
    let prefill = vec![
        Step::Wait(Duration::from_secs(1)),
        Step::End(Some("exit status: 2: peer gone")),
    ];
    let mut launcher = FakeLauncher::new(decode, prefill);
    let (r, _) = run(&plan(), &mut launcher).await;
    let e = r.unwrap_err();
    assert!(
        matches!(
            &e,
            PairError::SideFailed {
                side: SideRole::Decode,
                kind: SideErrorKind::Other,
                ..
            }
        ),
        "{e:?}"
    );
}
