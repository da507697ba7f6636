//! The per-rank model of `pair --kv-shape`: one `ic-bench kv-rank` process per TP rank (`a`
//! prefill ranks, `b` decode ranks), each owning its whole KV buffer and posting to every peer
//! rank at once, driven by this coordinator over `icb_core::protocol::kv_rank`:
//!
//! 1. listen, start every rank through a [`RankSeam`] (each pinned as the seam says), read each
//!    one's hello (its NIXL metadata and buffer), send everyone its peers' addresses and wait
//!    until every rank prepared its requests;
//! 2. repetitions as barriers: `go k` to every rank, then wait for every initiator's `done k`
//!    before `go k+1`, so a repetition is one request on every rank together and its time is
//!    the request's end to end (first post of any rank to last completion of any rank, on the
//!    ranks' own clocks — one host here);
//! 3. every destination verifies every block it received; every rank releases its engine (the
//!    initiators first, so that their targets progress while they close) and says which data
//!    path its requests took; every process must then exit cleanly.
//!
//! A rank that exits early, a message that does not come within the deadline or a rank's
//! `failed` line ends the run with that rank's one line; the seam removes every process.

use super::KvPlan;
use super::rank_report::{RankRecord, RepTimes};
use crate::launcher::{LaunchError, Side};
use crate::run::{Interrupted, PairError, PairOutcome};
use icb_core::model::{Locality, Placement};
use icb_core::protocol::kv_rank::{
    CpuPlacement, PeerAddress, RankDown, RankId, RankPeerPlan, RankPlan, RankSide, RankUp, to_line,
};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::sync::CancellationToken;

/// Starts rank processes and removes them. Everything a rank needs is in its plan.
#[allow(async_fn_in_trait)]
pub trait RankSeam {
    type S: Side;

    /// A socket the coordinator listens on that every rank can reach (it may live in another
    /// network namespace: its address is what the ranks are told).
    fn listener(&self) -> Result<std::net::TcpListener, LaunchError>;

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

/// Warm-up repetitions before the measured ones (buffers touched, endpoints connected).
const MIN_WARMUP: u64 = 1;
/// Measured repetitions: at least this many once `min_time` passed …
const MIN_REPS: u64 = 10;
/// … and never fewer than this, even when `max_time` passed.
const FLOOR_REPS: u64 = 3;

/// Pattern seeds: prefill rank p's buffer, decode rank d's (distinct, so a block from the
/// wrong rank or a stale byte never verifies).
fn seed(id: RankId) -> u64 {
    match id.side {
        RankSide::Prefill => 0x5eed_0000_0000 + u64::from(id.rank),
        RankSide::Decode => 0xdec0_0000_0000 + u64::from(id.rank),
    }
}

/// Every rank's plan: prefill ranks first, then decode ranks, each with the rows it is part of.
pub fn rank_plans(plan: &KvPlan, coordinator: SocketAddr, message_timeout: Duration) -> Vec<RankPlan> {
    let g = plan.request.geometry();
    let read = plan.op == super::KvOp::Read;
    let memory = plan.memory();
    let mut plans = Vec::new();
    for (side, count, bytes) in [
        (RankSide::Prefill, g.prefill_tp, g.prefill_rank_bytes),
        (RankSide::Decode, g.decode_tp, g.decode_rank_bytes),
    ] {
        let initiator = (side == RankSide::Decode) == read;
        let (mine, theirs) = if initiator {
            (memory.initiator, memory.target)
        } else {
            (memory.target, memory.initiator)
        };
        for rank in 0..count {
            let id = RankId { side, rank };
            let peers = plan
                .rows
                .iter()
                .filter_map(|row| {
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
                        layout: row.layout,
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
                cpus: None,
            });
        }
    }
    plans
}

/// One rank's connection.
struct Conn {
    id: RankId,
    lines: Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
}

impl Conn {
    async fn send(&mut self, msg: &RankDown) -> Result<(), PairError> {
        self.write
            .write_all(to_line(msg).as_bytes())
            .await
            .map_err(|e| PairError::Setup(format!("{}: the connection broke: {e}", self.id)))
    }

    async fn recv(&mut self, limit: Duration, during: &str) -> Result<RankUp, PairError> {
        recv_line(&mut self.lines, &self.id.to_string(), limit, during).await
    }
}

async fn recv_line(
    lines: &mut Lines<BufReader<OwnedReadHalf>>,
    who: &str,
    limit: Duration,
    during: &str,
) -> Result<RankUp, PairError> {
    let line = match tokio::time::timeout(limit, lines.next_line()).await {
        Err(_) => {
            return Err(PairError::Setup(format!(
                "{who} said nothing within {} s {during}",
                limit.as_secs()
            )));
        }
        Ok(Err(e)) => return Err(PairError::Setup(format!("{who}: reading its connection: {e}"))),
        Ok(Ok(None)) => return Err(PairError::Setup(format!("{who} closed its connection {during}"))),
        Ok(Ok(Some(line))) => line,
    };
    match serde_json::from_str::<RankUp>(&line) {
        Ok(RankUp::Failed { message }) => Err(PairError::Setup(format!("{who} failed {during}: {message}"))),
        Ok(m) => Ok(m),
        Err(e) => Err(PairError::Setup(format!(
            "{who} sent a line that does not parse ({e}) {during}"
        ))),
    }
}

/// The run's deadline: the pair's, plus filling, registering and verifying every rank's buffer
/// at 20 MB/s (all ranks at once on a loaded 2-core machine, as the per-read rows allow), plus
/// the warm-up and the floor of measured repetitions at 100 MB/s per request.
fn run_limit(plan: &KvPlan) -> Duration {
    let g = plan.request.geometry();
    let buffers = u64::from(g.prefill_tp) * g.prefill_rank_bytes + u64::from(g.decode_tp) * g.decode_rank_bytes;
    let moved: u64 = plan.rows.iter().map(|r| r.layout.bytes()).sum();
    let reps = (MIN_WARMUP + FLOOR_REPS) * moved / 100_000_000;
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
    let std_listener = seam.listener().map_err(PairError::from)?;
    let listener = std_listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(std_listener))
        .map_err(|e| PairError::Setup(format!("cannot listen for the KV ranks: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| PairError::Setup(format!("the coordinator's address: {e}")))?;
    let limit = run_limit(plan);
    let mut plans = rank_plans(plan, addr, limit);
    for p in &mut plans {
        p.cpus = seam.cpus(p.id);
    }
    let mut sides = Vec::with_capacity(plans.len());
    let mut started_all = Ok(());
    for p in &plans {
        match seam.start(p).await {
            Ok(s) => sides.push(s),
            Err(e) => {
                started_all = Err(PairError::from(e));
                break;
            }
        }
    }
    let launched: Vec<Option<u32>> = sides.iter().map(|s| s.pid()).collect();
    let outcome = match started_all {
        Err(e) => Err(e),
        Ok(()) => {
            let (drive, watch) = (drive(plan, &plans, &listener, limit), first_failure(&mut sides, &plans));
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(PairError::Interrupted(Interrupted::default())),
                r = tokio::time::timeout(limit, drive) => r.unwrap_or_else(|_| Err(PairError::Setup(format!(
                    "the KV ranks did not finish within {} s: raise --max-time or use a shorter --isl",
                    limit.as_secs()
                )))),
                e = watch => Err(PairError::Setup(e)),
            }
        }
    };
    let unclean = stop_all(&mut sides, outcome.is_ok().then_some(plan.pair.exit_grace)).await;
    drop(sides);
    let placement = seam.placement();
    let locality = seam.locality();
    let cleanup = seam.cleanup().await;
    let removed = match (cleanup, &outcome) {
        (Ok(r), _) => r,
        (Err(c), _) => {
            return Err(PairError::Cleanup {
                outcome: outcome
                    .err()
                    .map_or_else(|| "the run finished".into(), |e| e.to_string()),
                cleanup: c.message,
            });
        }
    };
    if cancel.is_cancelled() {
        return Err(PairError::Interrupted(Interrupted {
            cleanup: removed,
            partial: None,
        }));
    }
    let (records, reps, warmup) = outcome?;
    if let Some(first) = unclean.first() {
        return Err(PairError::Setup(format!("a KV rank did not exit cleanly: {first}")));
    }
    let expectation = plan
        .pair
        .expectation
        .resolve(locality)
        .map_err(|e| PairError::Setup(e.to_string()))?;
    let frame = super::rank_report::Frame {
        tool: tool.clone(),
        started_at,
        placement,
        expectation,
        elapsed: started.elapsed(),
    };
    let report = super::rank_report::assemble(plan, frame, &plans, &records, &launched, (&reps, warmup))?;
    Ok(PairOutcome {
        report,
        cleanup: removed,
        orchestration: Duration::ZERO,
    })
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

/// The first rank whose process ended with a failure: its one line. Pending while none did.
async fn first_failure<S: Side>(sides: &mut [S], plans: &[RankPlan]) -> String {
    let mut pending: Vec<_> = sides
        .iter_mut()
        .zip(plans)
        .map(|(s, p)| {
            Box::pin(async move {
                while s.next_line().await.is_some() {}
                let note = s.exit_note().await;
                note.map(|n| format!("{} ({}) exited early: {n}", p.id, s.name()))
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

/// Every rank's record, the measured repetitions and how many warm-up ones ran before them.
type Driven = (Vec<RankRecord>, Vec<RepTimes>, u64);

/// Hello, peers, repetitions, verify, finish.
async fn drive(
    plan: &KvPlan,
    plans: &[RankPlan],
    listener: &tokio::net::TcpListener,
    limit: Duration,
) -> Result<Driven, PairError> {
    let (mut conns, mut records) = accept_all(plans, listener, limit).await?;
    let by_id: BTreeMap<RankId, &RankRecord> = records.iter().map(|r| (r.id, r)).collect();
    for (c, p) in conns.iter_mut().zip(plans) {
        let peers = p
            .peers
            .iter()
            .map(|peer| {
                let r = by_id[&peer.peer];
                PeerAddress {
                    id: r.id,
                    metadata: r.metadata.clone(),
                    buffer_addr: r.buffer_addr,
                }
            })
            .collect();
        c.send(&RankDown::Peers { peers }).await?;
    }
    for c in conns.iter_mut() {
        expect(c, limit, "while preparing its requests", |m| {
            matches!(m, RankUp::Prepared)
        })
        .await?;
    }
    let (reps, warmup) = repetitions(plan, plans, &mut conns, limit).await?;
    for c in conns.iter_mut() {
        c.send(&RankDown::Verify).await?;
    }
    for (c, r) in conns.iter_mut().zip(records.iter_mut()) {
        match c.recv(limit, "while verifying").await? {
            RankUp::Verified { blocks, error } => {
                r.blocks_verified = blocks;
                r.verify_error = error;
            }
            other => {
                return Err(PairError::Setup(format!(
                    "{} sent {other:?} instead of its check",
                    c.id
                )));
            }
        }
    }
    // Initiators first: they close their endpoints while their targets still progress.
    for initiators in [true, false] {
        let this_round = |p: &RankPlan| p.initiator == initiators;
        for (c, _) in conns.iter_mut().zip(plans).filter(|(_, p)| this_round(p)) {
            c.send(&RankDown::Finish).await?;
        }
        for ((c, r), _) in conns
            .iter_mut()
            .zip(records.iter_mut())
            .zip(plans)
            .filter(|(_, p)| this_round(p))
        {
            match c.recv(limit, "while releasing its engine").await? {
                RankUp::Bye { data_path } => r.data_path = data_path,
                other => {
                    return Err(PairError::Setup(format!(
                        "{} sent {other:?} instead of its goodbye",
                        c.id
                    )));
                }
            }
        }
    }
    Ok((records, reps, warmup))
}

async fn expect(c: &mut Conn, limit: Duration, during: &str, ok: impl Fn(&RankUp) -> bool) -> Result<(), PairError> {
    let m = c.recv(limit, during).await?;
    if ok(&m) {
        Ok(())
    } else {
        Err(PairError::Setup(format!("{} sent {m:?} {during}", c.id)))
    }
}

/// Accepts one connection per rank, reads each one's hello (it names its rank) and orders them
/// as the plans.
async fn accept_all(
    plans: &[RankPlan],
    listener: &tokio::net::TcpListener,
    limit: Duration,
) -> Result<(Vec<Conn>, Vec<RankRecord>), PairError> {
    let mut slots: Vec<Option<(Conn, RankRecord)>> = plans.iter().map(|_| None).collect();
    for _ in 0..plans.len() {
        let (stream, _) = tokio::time::timeout(limit, listener.accept())
            .await
            .map_err(|_| PairError::Setup(format!("not every KV rank connected within {} s", limit.as_secs())))?
            .map_err(|e| PairError::Setup(format!("accepting a KV rank: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        let record = match recv_line(&mut lines, "a KV rank", limit, "before its hello").await? {
            RankUp::Hello {
                id,
                pid,
                peer,
                metadata,
                buffer_addr,
                cpus,
            } => RankRecord {
                cpus,
                ..RankRecord::new(id, pid, peer, metadata, buffer_addr)
            },
            other => {
                return Err(PairError::Setup(format!(
                    "a KV rank sent {other:?} instead of its hello"
                )));
            }
        };
        let id = record.id;
        let i = plans
            .iter()
            .position(|p| p.id == id)
            .ok_or_else(|| PairError::Setup(format!("an unknown rank ({id}) connected")))?;
        if slots[i].is_some() {
            return Err(PairError::Setup(format!("{id} connected twice")));
        }
        slots[i] = Some((Conn { id, lines, write }, record));
    }
    Ok(slots.into_iter().flatten().unzip())
}

/// Warm-up, then measured repetitions, each a barrier over every rank.
async fn repetitions(
    plan: &KvPlan,
    plans: &[RankPlan],
    conns: &mut [Conn],
    limit: Duration,
) -> Result<(Vec<RepTimes>, u64), PairError> {
    let s = &plan.pair.settings;
    // `--warmup` repetitions (1 … 10), fewer once they took `max_time`: a multi-second
    // request warms up once.
    let mut warmup = s.warmup_iterations.clamp(MIN_WARMUP, 10);
    let warmup_started = Instant::now();
    let mut measured = Vec::new();
    let mut rep = 0u64;
    let mut first_measured: Option<Instant> = None;
    loop {
        if rep < warmup && rep >= MIN_WARMUP && warmup_started.elapsed().as_secs_f64() >= s.max_time_s {
            warmup = rep;
        }
        if rep >= warmup {
            let since = first_measured.get_or_insert_with(Instant::now).elapsed().as_secs_f64();
            let n = rep - warmup;
            if (n >= MIN_REPS && since >= s.min_time_s) || (n >= FLOOR_REPS && since >= s.max_time_s) {
                break;
            }
        }
        for c in conns.iter_mut() {
            c.send(&RankDown::Go { rep }).await?;
        }
        let mut times = RepTimes::default();
        for (c, p) in conns.iter_mut().zip(plans).filter(|(_, p)| p.initiator) {
            match c.recv(limit, &format!("during repetition {rep}")).await? {
                RankUp::Done {
                    rep: r,
                    start_unix_ns,
                    post_ns,
                    done_ns,
                } if r == rep && done_ns.len() == p.peers.len() && post_ns.len() == p.peers.len() => {
                    times.ranks.push((c.id, start_unix_ns, post_ns, done_ns));
                }
                other => {
                    return Err(PairError::Setup(format!(
                        "{} sent {other:?} for repetition {rep}",
                        c.id
                    )));
                }
            }
        }
        if rep >= warmup {
            measured.push(times);
        }
        rep += 1;
    }
    Ok((measured, warmup))
}
