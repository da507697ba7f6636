//! Launch failures keep the kind their launcher tells (a side the scheduler cannot place, the
//! platform's API down …) through `run_pair`, with the same one line and exit code as before;
//! failures of no kind stay `PairError::Setup`. A minimal fake launcher, no root.

use icb_core::model::{Locality, PairReport, Placement};
use icb_core::protocol::{ChildPlan, Listening, SideEvent, side_line};
use icb_pair::{
    CancellationToken, ExpectationInput, LaunchError, LaunchFailure, Launcher, PairError, PairPlan, Side, run_pair,
};
use std::time::Duration;

const REPORT: &str = include_str!("../../core/tests/fixtures/pair_report.json");

/// A side that prints `lines`, then ends with `note`, telling `failure` when asked.
struct Scripted {
    name: &'static str,
    lines: Vec<String>,
    note: &'static str,
    failure: Option<LaunchFailure>,
    ended: bool,
    /// A healthy decode side: after its lines it stays up (as `serve` does), never ending first.
    stays: bool,
}

impl Side for Scripted {
    fn name(&self) -> String {
        format!("the {} side (fake)", self.name)
    }
    async fn next_line(&mut self) -> Option<String> {
        if self.lines.is_empty() {
            if self.stays {
                std::future::pending::<()>().await;
            }
            self.ended = true;
            return None;
        }
        Some(self.lines.remove(0))
    }
    async fn exit_note(&mut self) -> Option<String> {
        Some(self.note.into())
    }
    fn last_words(&self) -> String {
        String::new()
    }
    fn failure(&self) -> Option<LaunchFailure> {
        assert!(self.ended, "asked only after the side ended");
        self.failure.clone()
    }
    async fn stop(&mut self, _grace: Duration) {}
}

struct Fake {
    decode: Result<Option<LaunchFailure>, LaunchError>,
    prefill: Option<LaunchFailure>,
    cleanups: usize,
}

fn side(name: &'static str, lines: Vec<String>, failure: Option<LaunchFailure>) -> Scripted {
    Scripted {
        name,
        lines,
        note: "pod x: not running",
        failure,
        ended: false,
        stays: false,
    }
}

impl Launcher for Fake {
    type Side = Scripted;
    fn locality(&self) -> Locality {
        Locality::DifferentHosts
    }
    fn mode(&self) -> String {
        "fake".into()
    }
    async fn start_decode(&mut self) -> Result<Scripted, LaunchError> {
        let failure = self.decode.clone()?;
        // A decode side that fails ends before listening; a healthy one listens and stays.
        let lines = match failure {
            Some(_) => vec![],
            None => vec![side_line(&SideEvent::Listening(Listening::new(
                "127.0.0.1:1",
                "1.22.0",
            )))],
        };
        let stays = failure.is_none();
        Ok(Scripted {
            stays,
            ..side("decode", lines, failure)
        })
    }
    async fn start_prefill(&mut self, _: &Listening, _: &ChildPlan) -> Result<Scripted, LaunchError> {
        Ok(side("prefill", vec![], self.prefill.clone()))
    }
    fn placement(&self, _: &Listening, _: &PairReport) -> Placement {
        Placement {
            locality: Locality::DifferentHosts,
            mode: self.mode(),
            prefill: Default::default(),
            decode: Default::default(),
        }
    }
    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        self.cleanups += 1;
        Ok(String::new())
    }
}

async fn run(mut fake: Fake) -> (PairError, usize) {
    let report: PairReport = serde_json::from_str(REPORT).unwrap();
    let mut plan = PairPlan::new(report.settings, ExpectationInput::default());
    plan.startup_timeout = Duration::from_secs(30);
    plan.deadline = Duration::from_secs(300);
    let e = run_pair(&plan, &mut fake, &CancellationToken::new(), &mut |_| {})
        .await
        .expect_err("no report");
    (e, fake.cleanups)
}

fn unschedulable() -> LaunchFailure {
    LaunchFailure::Unschedulable {
        pod: "ic-bench-x-server".into(),
        node: Some("node-2".into()),
    }
}

#[tokio::test(start_paused = true)]
async fn a_decode_side_the_scheduler_cannot_place_is_typed_with_the_same_line() {
    let (e, cleanups) = run(Fake {
        decode: Ok(Some(unschedulable())),
        prefill: None,
        cleanups: 0,
    })
    .await;
    assert_eq!(
        e.to_string(),
        "the decode side (fake) exited before listening (pod x: not running)"
    );
    assert_eq!(e.exit_code(), 2);
    assert!(matches!(&e, PairError::Launch(l) if l.kind == unschedulable()), "{e:?}");
    assert_eq!(cleanups, 1);
}

#[tokio::test(start_paused = true)]
async fn a_prefill_side_that_exited_is_typed_with_its_code() {
    let exited = LaunchFailure::SideExited { code: Some(137) };
    let (e, _) = run(Fake {
        decode: Ok(None),
        prefill: Some(exited.clone()),
        cleanups: 0,
    })
    .await;
    // The decode side stays up (as a healthy `serve` does): the prefill side's end is the one
    // line, with its kind. (The fake's decode side used to end at the same instant, and which end
    // the pipeline saw first was a race.)
    assert_eq!(
        e.to_string(),
        "the prefill side (fake) exited without printing a result (pod x: not running)"
    );
    assert!(matches!(&e, PairError::Launch(l) if l.kind == exited), "{e:?}");
}

#[tokio::test(start_paused = true)]
async fn a_side_of_no_known_kind_stays_a_setup_error() {
    let (e, _) = run(Fake {
        decode: Ok(None),
        prefill: None,
        cleanups: 0,
    })
    .await;
    assert!(matches!(e, PairError::Setup(_)), "{e:?}");
}

#[tokio::test(start_paused = true)]
async fn a_launcher_error_keeps_its_kind_and_one_of_no_kind_is_setup() {
    let down = LaunchError::of(LaunchFailure::Cluster, "create pod: the API server did not answer");
    let (e, cleanups) = run(Fake {
        decode: Err(down.clone()),
        prefill: None,
        cleanups: 0,
    })
    .await;
    assert_eq!(e, PairError::Launch(down));
    assert_eq!((e.exit_code(), cleanups), (2, 1));
    let (e, _) = run(Fake {
        decode: Err(LaunchError::new("no such node")),
        prefill: None,
        cleanups: 0,
    })
    .await;
    assert_eq!(e, PairError::Setup("no such node".into()));
}
