//! The per-rank model of `pair --kv-shape`: one `ic-bench kv-rank` process per TP rank (`a`
//! prefill ranks, `b` decode ranks), each owning its whole KV buffer and posting to every peer
//! rank at once, driven by this coordinator over `icb_core::protocol::kv_rank`:
//!
//! 1. listen, start every rank through a [`RankSeam`] (each pinned as the seam says), read each
//!    one's hello (its engine's metadata and buffer), send everyone its peers' addresses and wait
//!    until every rank prepared its requests;
//! 2. repetitions as barriers: `go k` to every rank, then wait for every initiator's `done k`
//!    before `go k+1`, so a repetition is one request on every rank together and its time is
//!    the request's end to end (first post of any rank to last completion of any rank, on the
//!    initiators' own clocks: every initiator is on one side, so one host's clock, on two
//!    nodes too — the decode node for READ, the prefill node for WRITE);
//! 3. every destination verifies every block it received; every rank releases its engine (the
//!    initiators first, so that their targets progress while they close) and says which data
//!    path its requests took; every process must then exit cleanly.
//!
//! The protocol itself is [`super::coordinator`]'s. It runs in this process when the seam gives
//! a socket every rank reaches ([`Coordinator::Here`]: local ranks), or in a process the seam
//! starts next to the ranks ([`Coordinator::There`]: `ic-bench kv-coordinate` in the decode
//! side's bench pod, which a real cluster's pods can reach where the `pair` process may not be),
//! read back as one line.
//!
//! A rank that exits early, a message that does not come within the deadline or a rank's
//! `failed` line ends the run with that rank's one line; the seam removes every process.
//! Interrupted once a repetition was measured, the run still reports what the coordinator had
//! gathered ([`super::progress`]): the measured repetitions, marked partial, every block not
//! verified and every data path not known (the ranks never reached their check and goodbye).

use super::KvPlan;
use super::coordinator::{COORDINATED, Coordinated, CoordinatorJob, FLOOR_REPS, MIN_WARMUP, RepRule, coordinate};
use super::progress::{PartialKv, Progress, into_shared};
use icb_core::model::{Locality, Placement};
use icb_core::protocol::kv_rank::{CpuPlacement, RankId, RankPeerPlan, RankPlan, RankSide};
use icb_pair::launcher::{LaunchError, Side};
use icb_pair::{Interrupted, PairError, PairOutcome};
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Where the coordinator runs.
pub enum Coordinator<S> {
    /// In this process, on this socket (every rank can reach it).
    Here(std::net::TcpListener),
    /// `ic-bench kv-coordinate`, started by the seam, reached by every rank at `addr`; it prints
    /// what it gathered as its [`COORDINATED`] line.
    There { side: S, addr: SocketAddr },
}

/// Starts rank processes and removes them. Everything a rank needs is in its plan.
#[allow(async_fn_in_trait)]
pub trait RankSeam {
    type S: Side;

    /// A socket the coordinator listens on that every rank can reach (it may live in another
    /// network namespace: its address is what the ranks are told).
    fn listener(&self) -> Result<std::net::TcpListener, LaunchError>;

    /// Where the coordinator of `job` runs: by default in this process, on [`RankSeam::listener`].
    async fn coordinator(&mut self, job: &CoordinatorJob) -> Result<Coordinator<Self::S>, LaunchError> {
        let _ = job;
        self.listener().map(Coordinator::Here)
    }

    /// Starts one rank (`ic-bench kv-rank --plan …`), pinned as the seam pins ranks.
    async fn start(&mut self, plan: &RankPlan) -> Result<Self::S, LaunchError>;

    /// Where a rank should run (it pins itself to these CPUs); `None`: where it is started.
    fn cpus(&self, _id: RankId) -> Option<CpuPlacement> {
        None
    }

    fn locality(&self) -> Locality;

    fn placement(&self) -> Placement;

    /// Removes what the seam created (namespaces); every rank was stopped before.
    async fn cleanup(&mut self) -> Result<String, LaunchError>;
}

/// Pattern seeds: prefill rank p's buffer, decode rank d's (distinct, so a block from the
/// wrong rank or a stale byte never verifies).
fn seed(id: RankId) -> u64 {
    match id.side {
        RankSide::Prefill => 0x5eed_0000_0000 + u64::from(id.rank),
        RankSide::Decode => 0xdec0_0000_0000 + u64::from(id.rank),
    }
}

/// Every rank's plan: prefill ranks first, then decode ranks, each with the rows it is part of.
/// A burst run's ([`KvPlan::in_flight`]) lists hold its largest burst's copies of every request,
/// request by request ([`super::bursts::copy_of`]), and its decode buffers every copy.
pub fn rank_plans(plan: &KvPlan, coordinator: &str, message_timeout: Duration) -> Vec<RankPlan> {
    let g = plan.request.geometry();
    let read = plan.op == super::KvOp::Read;
    let memory = plan.memory();
    let copies = plan.in_flight.iter().copied().max().unwrap_or(1).max(1);
    let mut plans = Vec::new();
    for (side, count, bytes) in [
        (RankSide::Prefill, g.prefill_tp, g.prefill_rank_bytes),
        (RankSide::Decode, g.decode_tp, g.decode_rank_bytes * u64::from(copies)),
    ] {
        let initiator = (side == RankSide::Decode) == read;
        let (mine, theirs) = if initiator {
            (memory.initiator, memory.target)
        } else {
            (memory.target, memory.initiator)
        };
        for rank in 0..count {
            let id = RankId { side, rank };
            let peers = (0..copies)
                .flat_map(|k| plan.rows.iter().map(move |row| (k, row)))
                .filter_map(|(k, row)| {
                    let (me, other) = match side {
                        RankSide::Prefill => (row.prefill_rank, row.decode_rank),
                        RankSide::Decode => (row.decode_rank, row.prefill_rank),
                    };
                    let other_side = match side {
                        RankSide::Prefill => RankSide::Decode,
                        RankSide::Decode => RankSide::Prefill,
                    };
                    (me == rank).then(|| RankPeerPlan {
                        peer: RankId {
                            side: other_side,
                            rank: other,
                        },
                        layout: match copies {
                            1 => row.layout,
                            _ => super::bursts::copy_of(row, k, copies, read, g.decode_rank_bytes),
                        },
                        source_seed: seed(RankId {
                            side: RankSide::Prefill,
                            rank: row.prefill_rank,
                        }),
                    })
                })
                .collect();
            plans.push(RankPlan {
                id,
                engine: plan.engine,
                read,
                initiator,
                memory: mine,
                peer_memory: theirs,
                buffer_bytes: bytes,
                seed: seed(id),
                peers,
                coordinator: coordinator.to_string(),
                message_timeout_s: message_timeout.as_secs_f64(),
                authenticate: false,
                cpus: None,
                ucx_config: plan.pair.ucx_config.clone(),
                cuda_alloc: plan.pair.settings.cuda_alloc,
            });
        }
    }
    plans
}

/// The run's deadline: the pair's, plus filling, registering and verifying every rank's buffer
/// at 20 MB/s (all ranks at once on a loaded 2-core machine), plus
/// the warm-up and the floor of measured repetitions at 100 MB/s per request.
fn run_limit(plan: &KvPlan) -> Duration {
    let g = plan.request.geometry();
    let copies = u64::from(plan.in_flight.iter().copied().max().unwrap_or(1));
    let buffers =
        u64::from(g.prefill_tp) * g.prefill_rank_bytes + u64::from(g.decode_tp) * g.decode_rank_bytes * copies;
    let moved: u64 = plan.rows.iter().map(|r| r.layout.bytes()).sum();
    let burst_requests: u64 = plan.in_flight.iter().map(|&n| u64::from(n)).sum();
    let bursts = (super::bursts::BURST_WARMUP + super::bursts::BURST_REPS) * burst_requests * moved;
    let reps = ((MIN_WARMUP + FLOOR_REPS) * moved + bursts) / 100_000_000;
    plan.pair.deadline + Duration::from_secs(buffers / 20_000_000 + reps)
}

/// Runs the whole per-rank transfer and returns one pair report with its `kv` section.
pub async fn run_ranks<R: RankSeam>(
    plan: &KvPlan,
    seam: &mut R,
    tool: &icb_core::ToolInfo,
    cancel: &CancellationToken,
) -> Result<PairOutcome, PairError> {
    let started = Instant::now();
    let started_at = jiff::Timestamp::now().to_string();
    let limit = run_limit(plan);
    let mut job = CoordinatorJob {
        plans: rank_plans(plan, "", limit),
        reps: RepRule::of(&plan.pair.settings),
        limit_s: limit.as_secs_f64(),
        authenticate: false,
        bursts: plan.in_flight.clone(),
    };
    for p in &mut job.plans {
        p.cpus = seam.cpus(p.id);
    }
    let (mut sides, mut coordinator) = (Vec::new(), None);
    let partial = Mutex::new(PartialKv::default());
    let outcome = start_and_drive(seam, &mut job, &mut coordinator, &mut sides, cancel, &partial).await;
    let launched: Vec<Option<u32>> = sides.iter().map(|s| s.pid()).collect();
    let grace = outcome.is_ok().then_some(plan.pair.exit_grace);
    let mut unclean = stop_all(&mut sides, grace).await;
    if let Some(Coordinator::There { side, .. }) = coordinator.as_mut() {
        unclean.extend(stop_all(std::slice::from_mut(side), grace).await);
    }
    drop((sides, coordinator));
    let placement = seam.placement();
    let locality = seam.locality();
    let removed = match seam.cleanup().await {
        Ok(r) => r,
        Err(c) => {
            return Err(PairError::Cleanup {
                outcome: outcome
                    .err()
                    .map_or_else(|| "the run finished".into(), |e| e.to_string()),
                cleanup: c.message,
            });
        }
    };
    let frame = plan
        .pair
        .expectation
        .resolve(locality)
        .map_err(|e| PairError::Setup(e.to_string()))
        .map(|expectation| {
            move |checked| super::rank_report::Frame {
                tool: tool.clone(),
                started_at,
                placement,
                expectation,
                elapsed: started.elapsed(),
                checked,
            }
        });
    if cancel.is_cancelled() {
        let gathered = (outcome, partial.into_inner().unwrap_or_else(PoisonError::into_inner));
        let partial = interrupted_report(plan, gathered, frame, &job.plans, &launched);
        return Err(PairError::Interrupted(Interrupted {
            cleanup: removed,
            partial: partial.map(Box::new),
        }));
    }
    let Coordinated {
        records,
        reps,
        warmup,
        cold,
        bursts,
    } = outcome?;
    if let Some(first) = unclean.first() {
        return Err(PairError::Setup(format!("a KV rank did not exit cleanly: {first}")));
    }
    let frame = frame?(true);
    let mut report = super::rank_report::assemble(plan, frame, &job.plans, &records, &launched, (&reps, warmup))?;
    if let Some(kv) = report.kv.as_mut() {
        kv.cold = cold
            .as_ref()
            .map(|c| super::rank_report::cold_path(c, kv.request_ms_p50));
        if !bursts.is_empty() {
            let sizes = super::bursts::burst_rows(&bursts, &job.plans, kv.bytes_moved_per_request);
            kv.bursts = Some(icb_core::KvBursts {
                frontier: super::bursts::frontier(&sizes),
                sizes,
                bounded_by: None,
                verified: false,
                data_paths: Vec::new(),
                failure: None,
            });
        }
    }
    Ok(PairOutcome {
        report,
        cleanup: removed,
        orchestration: Duration::ZERO,
    })
}

/// The report of an interrupted run: what was gathered (a coordination that finished, the
/// signal coming while the ranks stopped, was checked; else the progress so far, not checked),
/// marked partial; `None` before the first measured repetition (a report of no repetition says
/// nothing: the one line does).
fn interrupted_report(
    plan: &KvPlan,
    (outcome, progress): (Result<Coordinated, PairError>, PartialKv),
    frame: Result<impl FnOnce(bool) -> super::rank_report::Frame, PairError>,
    plans: &[RankPlan],
    launched: &[Option<u32>],
) -> Option<icb_core::PairReport> {
    let (
        Coordinated {
            records, reps, warmup, ..
        },
        checked,
    ) = match outcome {
        Ok(done) => (done, true),
        Err(_) => (progress.into(), false),
    };
    if reps.is_empty() {
        return None;
    }
    let assembled = frame.and_then(|frame| {
        super::rank_report::assemble(plan, frame(checked), plans, &records, launched, (&reps, warmup))
    });
    let mut report = match assembled {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("the interrupted KV run's partial report is left out: {e}");
            return None;
        }
    };
    // The descriptor sweep, when planned, would have come after the ranks.
    report.partial = Some(icb_core::model::PartialRun {
        reason: "interrupted".into(),
        planned_cases: plan.rows.len() + plan.sweep.len(),
    });
    Some(report)
}

impl From<PartialKv> for Coordinated {
    fn from(p: PartialKv) -> Coordinated {
        Coordinated {
            records: p.records,
            reps: p.reps,
            warmup: p.warmup,
            cold: None,
            bursts: Vec::new(),
        }
    }
}

/// Starts the coordinator, then every rank told its address (each kept in `sides` or
/// `coordinator` as soon as it runs, for the caller to stop), and [`supervise`]s them, each
/// step of their progress kept in `partial`.
async fn start_and_drive<R: RankSeam>(
    seam: &mut R,
    job: &mut CoordinatorJob,
    coordinator: &mut Option<Coordinator<R::S>>,
    sides: &mut Vec<R::S>,
    cancel: &CancellationToken,
    partial: &Mutex<PartialKv>,
) -> Result<Coordinated, PairError> {
    let interrupted = || PairError::Interrupted(Interrupted::default());
    let started = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(interrupted()),
        c = seam.coordinator(job) => c?,
    };
    let coordinator = coordinator.insert(started);
    let addr = match coordinator {
        Coordinator::Here(listener) => listener
            .local_addr()
            .map_err(|e| PairError::Setup(format!("the coordinator's address: {e}")))?,
        Coordinator::There { addr, .. } => *addr,
    };
    for p in &mut job.plans {
        p.coordinator = addr.to_string();
    }
    for p in &job.plans {
        let side = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(interrupted()),
            s = seam.start(p) => s?,
        };
        sides.push(side);
    }
    supervise(job, coordinator, sides, cancel, partial).await
}

/// Coordinates the running ranks within the job's limit (here, or by reading what the separate
/// coordinator gathered), until a rank fails or the run is interrupted.
async fn supervise<S: Side>(
    job: &CoordinatorJob,
    coordinator: &mut Coordinator<S>,
    sides: &mut [S],
    cancel: &CancellationToken,
    partial: &Mutex<PartialKv>,
) -> Result<Coordinated, PairError> {
    let limit = job.limit();
    let remote = matches!(coordinator, Coordinator::There { .. });
    let drive = async move {
        match coordinator {
            Coordinator::Here(std_listener) => {
                let listener = std_listener
                    .try_clone()
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .and_then(tokio::net::TcpListener::from_std)
                    .map_err(|e| PairError::Setup(format!("cannot listen for the KV ranks: {e}")))?;
                coordinate(job, &listener, None, &mut into_shared(partial)).await
            }
            Coordinator::There { side, .. } => coordinated(side, partial).await,
        }
    };
    let mut drive = std::pin::pin!(tokio::time::timeout(limit, drive));
    let timed_out = || {
        PairError::Setup(format!(
            "the KV ranks did not finish within {} s: raise --max-time or use a shorter --isl",
            limit.as_secs()
        ))
    };
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(PairError::Interrupted(Interrupted::default())),
        r = &mut drive => match r.unwrap_or_else(|_| Err(timed_out())) {
            // The other way round: a rank killed from outside just before is the root cause of
            // what the coordinator saw.
            Err(seen) if remote => match tokio::time::timeout(REMOTE_ERROR_GRACE, first_failure(sides, &job.plans)).await {
                Ok((line, Some(icb_pair::launcher::LaunchFailure::SideKilled))) => Err(PairError::Setup(line)),
                _ => Err(seen),
            },
            r => r,
        },
        (e, how) = first_failure(sides, &job.plans) => {
            // A coordinator in its own process ends as soon as a rank's connection breaks or a
            // rank fails, and the other ranks then end because it went away: which exit is seen
            // first is a race. Unless this rank was killed from outside (the root cause), the
            // coordinator's own error, naming what broke first, wins when it comes.
            let killed = matches!(how, Some(icb_pair::launcher::LaunchFailure::SideKilled));
            if remote && !killed && let Ok(Ok(Err(first))) = tokio::time::timeout(REMOTE_ERROR_GRACE, &mut drive).await {
                return Err(first);
            }
            Err(PairError::Setup(e))
        }
    }
}

/// How long a rank's early exit waits for a separate coordinator's own error.
const REMOTE_ERROR_GRACE: Duration = Duration::from_secs(3);

/// What a coordinator started by the seam gathered: its [`COORDINATED`] line, else why it ended.
/// Its progress lines before that go into `partial`.
async fn coordinated<S: Side>(side: &mut S, partial: &Mutex<PartialKv>) -> Result<Coordinated, PairError> {
    while let Some(line) = side.next_line().await {
        if let Some(json) = line.strip_prefix(COORDINATED) {
            return serde_json::from_str(json)
                .map_err(|e| PairError::Setup(format!("the KV coordinator's result does not parse: {e}")));
        }
        if let Some(step) = Progress::from_line(&line) {
            into_shared(partial)(step?)?;
        }
    }
    let note = side
        .exit_note()
        .await
        .unwrap_or_else(|| "it exited without a result".into());
    Err(PairError::Setup(format!(
        "the KV coordinator ({}) ended: {note}",
        side.name()
    )))
}

/// Stops every rank: after a good run each may exit on its own within `grace` and must then
/// have exited cleanly (the returned lines name those that did not); otherwise at once.
async fn stop_all<S: Side>(sides: &mut [S], grace: Option<Duration>) -> Vec<String> {
    let wait = grace.unwrap_or(Duration::ZERO);
    for s in sides.iter_mut() {
        let bound = wait + Duration::from_secs(30);
        if tokio::time::timeout(bound, s.stop(wait)).await.is_err() {
            tracing::warn!("{} did not stop within {} s", s.name(), bound.as_secs());
        }
    }
    let mut unclean = Vec::new();
    if grace.is_some() {
        for s in sides.iter_mut() {
            if let Some(note) = s.exit_note().await {
                unclean.push(format!("{}: {note}", s.name()));
            }
        }
    }
    unclean
}

/// The first rank whose process ended with a failure: its one line, and what kind of failure
/// when the seam can tell. Pending while none did.
async fn first_failure<S: Side>(
    sides: &mut [S],
    plans: &[RankPlan],
) -> (String, Option<icb_pair::launcher::LaunchFailure>) {
    let mut pending: Vec<_> = sides
        .iter_mut()
        .zip(plans)
        .map(|(s, p)| {
            Box::pin(async move {
                while s.next_line().await.is_some() {}
                let note = s.exit_note().await;
                note.map(|n| (format!("{} ({}) exited early: {n}", p.id, s.name()), s.failure()))
            })
        })
        .collect();
    while !pending.is_empty() {
        let (failed, _, rest) = futures::future::select_all(pending).await;
        if let Some(line) = failed {
            return line;
        }
        pending = rest;
    }
    futures::future::pending().await
}
