//! `run_ranks` cancelled once repetitions were measured: what the coordinator gathered so far
//! becomes the partial report, whether it ran here or printed its progress from elsewhere (as
//! `ic-bench kv-coordinate` does in a pod).

use super::*;

/// The plan with repetitions held for a minute (one warm-up): a cancel lands among them.
fn long_plan() -> KvPlan {
    let mut plan = plan();
    plan.pair.settings.warmup_iterations = 1;
    plan.pair.settings.min_time_s = 60.0;
    plan.pair.settings.max_time_s = 60.0;
    plan
}

/// Cancels once both initiators finished repetition `rep` (the warm-up is repetition 0), or
/// after 10 s whatever happened (the test then fails on what it finds).
fn cancel_after(log: Log, rep: u32) -> CancellationToken {
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        for _ in 0..2000 {
            let done = log
                .lock()
                .unwrap()
                .iter()
                .filter(|(_, e)| *e == format!("done {rep}"))
                .count();
            if done == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        c.cancel();
    });
    cancel
}

/// What an interrupted run with measured repetitions reports: marked partial against both
/// peers, each timed in every measured repetition and none verified (the ranks never reached
/// their check), no data path known; `reps` the repetitions it holds.
fn assert_partial(err: PairError, at_least: u64) -> (icb_core::PairReport, u64) {
    let PairError::Interrupted(i) = err else {
        panic!("not interrupted: {err:?}");
    };
    let report = *i.partial.clone().expect("a partial report");
    assert_eq!(report.partial.as_ref().map(|p| p.planned_cases), Some(2));
    let kv = report.kv.as_deref().expect("kv");
    let reps = kv.repetitions.expect("repetitions");
    assert!(reps >= at_least, "{reps} repetitions");
    assert_eq!(report.cases.len(), 2);
    for c in &report.cases {
        let m = c.measurement.as_ref().unwrap();
        assert_eq!(
            (m.warmup_iterations, m.iterations, m.verified),
            (1, reps, false),
            "{c:?}"
        );
        assert_eq!(c.status, icb_core::CaseStatus::Measured, "{c:?}");
        assert!(
            c.reason.as_deref().is_some_and(|r| r.starts_with("not verified")),
            "{c:?}"
        );
        assert!(c.transport.is_none(), "{c:?}");
        // Not UCX's silence: the ranks were stopped before they said.
        let v = c.verdict.as_ref().expect("a case verdict");
        assert!(v.reason.starts_with("data path not known: interrupted"), "{v:?}");
    }
    for p in &kv.peers {
        assert!(!p.verified && p.failure.is_none() && p.data_path.is_none(), "{p:?}");
    }
    // The ranks' own records (from their hellos): pids and CPUs; nothing checked.
    for r in &kv.ranks {
        let decode = r.side == "decode";
        assert_eq!(r.pid, 1000 + r.rank + if decode { 100 } else { 0 }, "{r:?}");
        assert_eq!(r.cpus.as_deref(), Some(if decode { "2-3" } else { "0-1" }), "{r:?}");
        assert!(r.blocks_verified == 0 && r.data_path.is_none(), "{r:?}");
    }
    let (marked, line) = i.partial_marked("SIGINT").unwrap();
    assert_eq!(marked.verdict.status, icb_core::VerdictStatus::Interrupted);
    assert!(
        line.starts_with("wrote the 2 of 2 cases measured before it (marked partial)"),
        "{line}"
    );
    (report, reps)
}

/// A cancel after three measured repetitions (the coordinator here): the run reports them,
/// marked partial, and cleans up.
#[tokio::test]
async fn a_cancel_mid_repetitions_reports_those_measured_marked_partial() {
    let mut seam = seam(|_| Script::Healthy);
    let cancel = cancel_after(seam.log.clone(), 3);
    let err = run_ranks(&long_plan(), &mut seam, &tool(), &cancel).await.unwrap_err();
    assert!(seam.cleaned);
    assert_partial(err, 2);
}

/// A coordinator in a process of its own, scripted: its progress lines, then `cancel` once
/// they are read.
struct ScriptedCoordinator {
    lines: std::collections::VecDeque<String>,
    cancel: CancellationToken,
}

impl Side for ScriptedCoordinator {
    fn name(&self) -> String {
        "the scripted coordinator".into()
    }
    async fn next_line(&mut self) -> Option<String> {
        match self.lines.pop_front() {
            Some(line) => Some(line),
            None => {
                self.cancel.cancel();
                std::future::pending().await
            }
        }
    }
    async fn exit_note(&mut self) -> Option<String> {
        None
    }
    fn last_words(&self) -> String {
        String::new()
    }
    async fn stop(&mut self, _grace: Duration) {}
}

/// Idle ranks and a coordinator "there" printing `lines`.
struct RemoteSeam {
    ranks: FakeSeam,
    lines: Vec<String>,
    cancel: CancellationToken,
}

impl RankSeam for RemoteSeam {
    type S = ScriptedSide;
    fn listener(&self) -> Result<std::net::TcpListener, LaunchError> {
        self.ranks.listener()
    }
    async fn coordinator(
        &mut self,
        _job: &icb_kv_transfer::CoordinatorJob,
    ) -> Result<icb_kv_transfer::ranks::Coordinator<ScriptedSide>, LaunchError> {
        let side = ScriptedSide::Coordinator(ScriptedCoordinator {
            lines: self.lines.drain(..).collect(),
            cancel: self.cancel.clone(),
        });
        Ok(icb_kv_transfer::ranks::Coordinator::There {
            side,
            addr: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 9),
        })
    }
    async fn start(&mut self, plan: &RankPlan) -> Result<ScriptedSide, LaunchError> {
        self.ranks.start(plan).await.map(ScriptedSide::Rank)
    }
    fn locality(&self) -> Locality {
        self.ranks.locality()
    }
    fn placement(&self) -> Placement {
        self.ranks.placement()
    }
    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        self.ranks.cleanup().await
    }
}

/// A rank or the coordinator: one side type for the seam.
enum ScriptedSide {
    Rank(FakeRank),
    Coordinator(ScriptedCoordinator),
}

impl Side for ScriptedSide {
    fn name(&self) -> String {
        match self {
            ScriptedSide::Rank(r) => r.name(),
            ScriptedSide::Coordinator(c) => c.name(),
        }
    }
    async fn next_line(&mut self) -> Option<String> {
        match self {
            ScriptedSide::Rank(r) => r.next_line().await,
            ScriptedSide::Coordinator(c) => c.next_line().await,
        }
    }
    async fn exit_note(&mut self) -> Option<String> {
        match self {
            ScriptedSide::Rank(r) => r.exit_note().await,
            ScriptedSide::Coordinator(c) => c.exit_note().await,
        }
    }
    fn last_words(&self) -> String {
        match self {
            ScriptedSide::Rank(r) => r.last_words(),
            ScriptedSide::Coordinator(c) => c.last_words(),
        }
    }
    async fn stop(&mut self, grace: Duration) {
        match self {
            ScriptedSide::Rank(r) => r.stop(grace).await,
            ScriptedSide::Coordinator(c) => c.stop(grace).await,
        }
    }
}

/// The progress lines a remote coordinator prints for the plan's four ranks (pids and CPUs as
/// the fake ranks report them) and `reps` measured repetitions of its two initiators.
fn progress_lines(reps: u64) -> Vec<String> {
    use icb_kv_transfer::progress::Progress;
    use icb_kv_transfer::{RankRecord, RepTimes};
    let ids = [RankSide::Prefill, RankSide::Decode]
        .into_iter()
        .flat_map(|side| (0..2).map(move |rank| RankId { side, rank }));
    let records = ids
        .map(|id| {
            let decode = id.side == RankSide::Decode;
            let pid = 1000 + id.rank + if decode { 100 } else { 0 };
            RankRecord {
                cpus: if decode { vec![2, 3] } else { vec![0, 1] },
                ..RankRecord::new(id, pid, PeerInfo::default(), String::new(), 4096)
            }
        })
        .collect();
    let mut lines = vec![Progress::Ranks { records }.to_line().unwrap()];
    for k in 0..reps {
        let start = 1_000_000 * (k + 1);
        let decode = |rank| RankId {
            side: RankSide::Decode,
            rank,
        };
        let rep = RepTimes {
            ranks: vec![
                (decode(0), start, vec![1_000], vec![20_000_000]),
                (decode(1), start, vec![1_000], vec![40_000_000]),
            ],
        };
        lines.push(Progress::Measured { warmup: 1, rep }.to_line().unwrap());
    }
    lines
}

fn remote_seam(lines: Vec<String>) -> (RemoteSeam, CancellationToken) {
    let cancel = CancellationToken::new();
    let seam = RemoteSeam {
        ranks: seam(|_| Script::Idle),
        lines,
        cancel: cancel.clone(),
    };
    (seam, cancel)
}

/// Kubernetes' way (the coordinator in the decode pod): its progress lines are read into the
/// same partial state, so a cancel after them reports the repetitions they carried.
#[tokio::test]
async fn a_remote_coordinators_progress_lines_make_the_partial_report() {
    let mut lines = progress_lines(3);
    lines.insert(1, "a warning the coordinator's engine printed".into());
    let (mut seam, cancel) = remote_seam(lines);
    let err = run_ranks(&long_plan(), &mut seam, &tool(), &cancel).await.unwrap_err();
    assert!(seam.ranks.cleaned);
    let (report, reps) = assert_partial(err, 3);
    assert_eq!(reps, 3);
    // Decode rank 1's peer completes 40 ms after the request's start, in every repetition.
    let kv = report.kv.as_deref().unwrap();
    assert_eq!(kv.request_ms_p50, Some(40.0));
}

/// A progress line cut short: the run ends with one line naming it, not a panic, not a report.
#[tokio::test]
async fn a_garbled_progress_line_ends_the_run_with_one_line() {
    let mut lines = progress_lines(1);
    let cut = lines[1].len() / 2;
    lines[1].truncate(cut);
    let (mut seam, _cancel) = remote_seam(lines);
    let err = run_ranks(&long_plan(), &mut seam, &tool(), &CancellationToken::new())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PairError::Setup(_)), "{err:?}");
    assert!(
        text.contains("the KV coordinator's progress line does not parse") && !text.contains('\n'),
        "{text}"
    );
    assert!(seam.ranks.cleaned);
}
