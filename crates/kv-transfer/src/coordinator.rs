//! The coordinator of the per-rank model: the protocol side of `icb_core::protocol::kv_rank`
//! with every rank (hello, peers, repetitions as barriers, verify, finish), given a
//! [`CoordinatorJob`] and a listening socket. It runs inside the `ic-bench pair` process where
//! every rank can reach it (local ranks), or as `ic-bench kv-coordinate` inside the decode
//! side's bench pod ([`serve`]), which announces its port and prints what it gathered
//! ([`Coordinated`]) as one line for the `pair` process to read.

use super::progress::{Progress, ProgressSink};
use super::rank_report::{RankRecord, RepTimes};
use icb_core::protocol::kv_rank::{self, PeerAddress, RankDown, RankId, RankPlan, RankUp, to_line};
use icb_pair::PairError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Warm-up repetitions before the measured ones (buffers touched, endpoints connected).
pub(super) const MIN_WARMUP: u64 = 1;
/// Measured repetitions: at least this many once `min_time` passed …
const MIN_REPS: u64 = 10;
/// … and never fewer than this, even when `max_time` passed.
pub(super) const FLOOR_REPS: u64 = 3;

/// The line `ic-bench kv-coordinate` announces its port with (`icb-kv-listening PORT`).
pub const LISTENING: &str = "icb-kv-listening ";
/// The line it prints what it gathered with (`icb-kv-coordinated JSON`).
pub const COORDINATED: &str = "icb-kv-coordinated ";
/// The lines it prints its progress with before that (`icb-kv-progress JSON`, one
/// [`super::progress::Progress`] each): what an interrupted run still reports.
pub const PROGRESS: &str = "icb-kv-progress ";

/// When repetitions stop: `--warmup`, `--min-time`, `--max-time` of the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RepRule {
    pub warmup_iterations: u64,
    pub min_time_s: f64,
    pub max_time_s: f64,
}

impl RepRule {
    pub fn of(settings: &icb_core::RunSettings) -> RepRule {
        RepRule {
            warmup_iterations: settings.warmup_iterations,
            min_time_s: settings.min_time_s,
            max_time_s: settings.max_time_s,
        }
    }
}

/// Everything a coordinator needs: every rank's plan (their coordinator address does not
/// matter to it), when repetitions stop, and the bound of every wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoordinatorJob {
    pub plans: Vec<RankPlan>,
    pub reps: RepRule,
    /// The whole run's bound, and so of every single wait (seconds).
    pub limit_s: f64,
    /// Admit only ranks that prove the run's token (`IC_BENCH_TOKEN` in the coordinator's
    /// environment): a coordinator others than the ranks can reach.
    #[serde(default)]
    pub authenticate: bool,
    /// The burst sizes of a burst run ([`super::bursts`]), ascending: every rank's peer list
    /// holds the largest's copies of its requests, the ordinary repetitions post one copy, then
    /// each size is measured in turn. Empty: one request, every peer posted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bursts: Vec<u32>,
}

impl CoordinatorJob {
    pub fn limit(&self) -> Duration {
        Duration::try_from_secs_f64(self.limit_s).unwrap_or(Duration::from_secs(3600))
    }
}

/// What the coordinator gathered: every rank's record (in plan order), the measured
/// repetitions and how many warm-up ones ran before them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Coordinated {
    pub records: Vec<RankRecord>,
    pub reps: Vec<RepTimes>,
    pub warmup: u64,
    /// The cold path: the ranks' preparation and the first (warm-up) repetition. Absent from a
    /// coordinator of an older build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold: Option<ColdTimes>,
    /// A burst run's bursts, one entry per size ([`CoordinatorJob::bursts`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bursts: Vec<super::bursts::BurstReps>,
}

/// What fresh ranks paid before their first request and for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ColdTimes {
    /// From sending the peers' addresses to the last rank's "prepared" (ns).
    pub prepare_ns: u64,
    /// The first repetition.
    pub first: RepTimes,
}

/// `ic-bench kv-coordinate`: listens on `listen` (port 0: any), prints [`LISTENING`] with the
/// port on `out`, coordinates within the job's limit, printing each step as a [`PROGRESS`] line,
/// and prints [`COORDINATED`] with the result (the ranks' engine metadata left out: only the
/// ranks needed it).
pub async fn serve(
    job: &CoordinatorJob,
    listen: std::net::SocketAddr,
    out: &mut (dyn std::io::Write + Send),
) -> Result<(), PairError> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| PairError::Setup(format!("the KV coordinator cannot listen on {listen}: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| PairError::Setup(format!("the KV coordinator's address: {e}")))?
        .port();
    let announce = |out: &mut (dyn std::io::Write + Send), line: String| {
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| PairError::Setup(format!("the KV coordinator cannot write its output: {e}")))
    };
    let token = match job.authenticate {
        true => Some(
            std::env::var(icb_core::protocol::TOKEN_ENV)
                .ok()
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    PairError::Setup(format!(
                        "the KV coordinator admits ranks by the run's token, but {} is not set",
                        icb_core::protocol::TOKEN_ENV
                    ))
                })?,
        ),
        false => None,
    };
    announce(out, format!("{LISTENING}{port}"))?;
    let limit = job.limit();
    let mut done = {
        let mut print = |step: Progress| announce(out, step.to_line()?);
        tokio::time::timeout(limit, coordinate(job, &listener, token.as_deref(), &mut print))
            .await
            .map_err(|_| PairError::Setup(format!("the KV ranks did not finish within {} s", limit.as_secs())))??
    };
    for r in &mut done.records {
        r.metadata.clear();
    }
    let json = serde_json::to_string(&done).map_err(|e| PairError::Setup(format!("internal: the KV result: {e}")))?;
    announce(out, format!("{COORDINATED}{json}"))
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

/// Hello, peers, repetitions, verify, finish: the whole protocol with every rank of `job`, whose
/// connections come to `listener` (with a `token`: only those that prove it). Every wait is
/// bounded by the job's limit. Each step (the records, each measured repetition) goes to
/// `progress` as it is done.
pub async fn coordinate(
    job: &CoordinatorJob,
    listener: &tokio::net::TcpListener,
    token: Option<&str>,
    progress: &mut ProgressSink<'_>,
) -> Result<Coordinated, PairError> {
    let plans = &job.plans[..];
    let limit = job.limit();
    let (mut conns, mut records) = accept_all(plans, listener, limit, token).await?;
    let mut stripped = records.clone();
    stripped.iter_mut().for_each(|r| r.metadata.clear());
    progress(Progress::Ranks { records: stripped })?;
    let by_id: BTreeMap<RankId, &RankRecord> = records.iter().map(|r| (r.id, r)).collect();
    let preparing = Instant::now();
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
    let prepare_ns = u64::try_from(preparing.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let one = super::bursts::firsts(job, 1);
    let (reps, warmup, first) = repetitions(&job.reps, (plans, &one), &mut conns, limit, progress).await?;
    let cold = first.map(|first| ColdTimes { prepare_ns, first });
    let bursts = burst_repetitions(job, &mut conns, warmup + reps.len() as u64).await?;
    verify_all(&mut conns, &mut records, limit).await?;
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
    Ok(Coordinated {
        records,
        reps,
        warmup,
        cold,
        bursts,
    })
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
/// as the plans. Hellos are read concurrently, so a slow rank (a large buffer to register) or a
/// silent stray connection holds up no other. With a `token`, every connection is challenged
/// first and one whose hello does not prove the token is dropped (a warning) and the wait goes
/// on; without one, a bad first line ends the run.
async fn accept_all(
    plans: &[RankPlan],
    listener: &tokio::net::TcpListener,
    limit: Duration,
    token: Option<&str>,
) -> Result<(Vec<Conn>, Vec<RankRecord>), PairError> {
    use futures::StreamExt;
    let mut slots: Vec<Option<(Conn, RankRecord)>> = plans.iter().map(|_| None).collect();
    let mut handshakes = futures::stream::FuturesUnordered::new();
    let deadline = tokio::time::Instant::now() + limit;
    let mut filled = 0;
    while filled < plans.len() {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {
                return Err(PairError::Setup(format!("not every KV rank connected within {} s", limit.as_secs())));
            }
            accepted = listener.accept() => {
                let (stream, from) = accepted.map_err(|e| PairError::Setup(format!("accepting a KV rank: {e}")))?;
                handshakes.push(async move { (from, handshake(stream, limit, token).await) });
            }
            Some((from, shook)) = handshakes.next(), if !handshakes.is_empty() => {
                let (conn, record) = match (shook, token) {
                    (Ok(done), _) => done,
                    (Err(e), Some(_)) => {
                        tracing::warn!("the KV coordinator dropped a connection from {from}: {e}");
                        continue;
                    }
                    (Err(e), None) => return Err(e),
                };
                let id = record.id;
                let i = plans
                    .iter()
                    .position(|p| p.id == id)
                    .ok_or_else(|| PairError::Setup(format!("an unknown rank ({id}) connected")))?;
                if slots[i].is_some() {
                    return Err(PairError::Setup(format!("{id} connected twice")));
                }
                slots[i] = Some((conn, record));
                filled += 1;
            }
        }
    }
    Ok(slots.into_iter().flatten().unzip())
}

/// One connection up to its hello: challenged first with a `token`, and then admitted only with
/// the hello's proof of it for the rank it names.
async fn handshake(
    stream: tokio::net::TcpStream,
    limit: Duration,
    token: Option<&str>,
) -> Result<(Conn, RankRecord), PairError> {
    let _ = stream.set_nodelay(true);
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let nonce = match token {
        Some(_) => {
            let nonce = kv_rank::nonce().map_err(PairError::Setup)?;
            let challenge = RankDown::Challenge {
                nonce: kv_rank::hex(&nonce),
            };
            write
                .write_all(to_line(&challenge).as_bytes())
                .await
                .map_err(|e| PairError::Setup(format!("challenging a KV rank: {e}")))?;
            Some(nonce)
        }
        None => None,
    };
    match recv_line(&mut lines, "a KV rank", limit, "before its hello").await? {
        RankUp::Hello {
            id,
            pid,
            peer,
            metadata,
            buffer_addr,
            proof,
            cpus,
            cuda_alloc,
        } => {
            if let (Some(token), Some(nonce)) = (token, nonce) {
                let proven = proof.is_some_and(|p| kv_rank::verify_proof(token, &nonce, id, &p));
                if !proven {
                    return Err(PairError::Setup(format!(
                        "a connection naming itself {id} did not prove the run's token"
                    )));
                }
            }
            Ok((
                Conn { id, lines, write },
                RankRecord {
                    cpus,
                    cuda_alloc,
                    ..RankRecord::new(id, pid, peer, metadata, buffer_addr)
                },
            ))
        }
        other => Err(PairError::Setup(format!(
            "a KV rank sent {other:?} instead of its hello"
        ))),
    }
}

/// Warm-up, then measured repetitions, each a barrier over every rank (each measured one also
/// to `progress`); and the first repetition, the cold one.
async fn repetitions(
    s: &RepRule,
    (plans, firsts): (&[RankPlan], &[Option<u32>]),
    conns: &mut [Conn],
    limit: Duration,
    progress: &mut ProgressSink<'_>,
) -> Result<(Vec<RepTimes>, u64, Option<RepTimes>), PairError> {
    // `--warmup` repetitions (1 … 10), fewer once they took `max_time`: a multi-second
    // request warms up once.
    let mut warmup = s.warmup_iterations.clamp(MIN_WARMUP, 10);
    let warmup_started = Instant::now();
    let mut measured = Vec::new();
    let mut rep = 0u64;
    let mut first_measured: Option<Instant> = None;
    let mut cold = None;
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
        let times = one_repetition(rep, (plans, firsts), conns, limit).await?;
        if rep == 0 {
            cold = Some(times.clone());
        }
        if rep >= warmup {
            progress(Progress::Measured {
                warmup,
                rep: times.clone(),
            })?;
            measured.push(times);
        }
        rep += 1;
    }
    Ok((measured, warmup, cold))
}

/// Every destination checks what it received; each rank's answer goes into its record.
async fn verify_all(conns: &mut [Conn], records: &mut [RankRecord], limit: Duration) -> Result<(), PairError> {
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
    Ok(())
}

/// A burst run's bursts ([`CoordinatorJob::bursts`]), numbered on from `next_rep`: per size, one
/// warm-up burst and the measured ones.
async fn burst_repetitions(
    job: &CoordinatorJob,
    conns: &mut [Conn],
    mut next_rep: u64,
) -> Result<Vec<super::bursts::BurstReps>, PairError> {
    use super::bursts::{BURST_REPS, BURST_WARMUP, BurstReps, firsts};
    let mut bursts = Vec::new();
    for &size in &job.bursts {
        let firsts = firsts(job, size);
        let mut burst = BurstReps { size, reps: Vec::new() };
        for n in 0..BURST_WARMUP + BURST_REPS {
            let times = one_repetition(next_rep, (&job.plans, &firsts), conns, job.limit()).await?;
            next_rep += 1;
            if n >= BURST_WARMUP {
                burst.reps.push(times);
            }
        }
        bursts.push(burst);
    }
    Ok(bursts)
}

/// One repetition as a barrier: `go` to every rank (each initiator posting its first `firsts[i]`
/// requests, or all), then every initiator's `done` with one time per request it posted.
async fn one_repetition(
    rep: u64,
    (plans, firsts): (&[RankPlan], &[Option<u32>]),
    conns: &mut [Conn],
    limit: Duration,
) -> Result<RepTimes, PairError> {
    for (c, &first) in conns.iter_mut().zip(firsts) {
        c.send(&RankDown::Go { rep, first }).await?;
    }
    let mut times = RepTimes::default();
    for ((c, p), first) in conns
        .iter_mut()
        .zip(plans)
        .zip(firsts)
        .filter(|((_, p), _)| p.initiator)
    {
        let posted = first.map_or(p.peers.len(), |n| n as usize);
        match c.recv(limit, &format!("during repetition {rep}")).await? {
            RankUp::Done {
                rep: r,
                start_unix_ns,
                post_ns,
                done_ns,
            } if r == rep && done_ns.len() == posted && post_ns.len() == posted => {
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
    Ok(times)
}
