//! The per-rank coordinator (`icb_kv_transfer::ranks::run_ranks`) without NIXL: every "rank" is a
//! task speaking the rank protocol over real TCP, scripted to be slow, to fail or to vanish, so
//! the barrier (no rank starts repetition k+1 before every initiator finished k), the request's
//! end-to-end time and the failure paths (one line naming the rank, every rank stopped) are
//! checked without a NIXL library.

use icb_core::model::{Endpoint, Locality, Placement};
use icb_core::protocol::kv_rank::{CpuPlacement, RankDown, RankId, RankPlan, RankSide, RankUp, to_line};
use icb_core::{MemoryPair, PeerInfo, ToolInfo};
use icb_kv::{KvDtype, KvRequest, KvShape};
use icb_kv_transfer::ranks::{RankSeam, run_ranks};
use icb_kv_transfer::{KvOp, KvPlan};
use icb_pair::{CancellationToken, ExpectationInput, LaunchError, PairError, PairPlan, Side};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::task::JoinHandle;

/// Interrupted once repetitions were measured: the partial report (here and from a remote
/// coordinator's progress lines).
mod interrupted;

/// What the coordinator and the ranks did, in order.
type Log = Arc<Mutex<Vec<(RankId, String)>>>;

#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// Answers everything; initiators take `rank × 20 ms` per repetition.
    Healthy,
    /// Says `failed` at the second repetition.
    FailsAtRep1,
    /// Exits with an error before connecting.
    DiesAtStart,
    /// Never connects (the coordinator is scripted too).
    Idle,
}

struct FakeRank {
    id: RankId,
    task: Option<JoinHandle<Result<(), String>>>,
    note: Option<String>,
}

impl Side for FakeRank {
    fn name(&self) -> String {
        format!("the {} process", self.id)
    }
    async fn next_line(&mut self) -> Option<String> {
        if let Some(t) = self.task.take() {
            self.note = match t.await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(e) => Some(e.to_string()),
            };
        }
        None
    }
    async fn exit_note(&mut self) -> Option<String> {
        self.note.clone()
    }
    fn last_words(&self) -> String {
        self.note.clone().unwrap_or_default()
    }
    async fn stop(&mut self, _grace: Duration) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

struct FakeSeam {
    script: fn(RankId) -> Script,
    log: Log,
    started: usize,
    cleaned: bool,
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// What a fresh rank's preparation takes, and what its first request takes more than the others.
const PREPARE: Duration = Duration::from_millis(30);
const FIRST_EXTRA: Duration = Duration::from_millis(50);

async fn rank(plan: RankPlan, script: Script, log: Log) -> Result<(), String> {
    match script {
        Script::DiesAtStart => return Err("exit status 2: cannot load NIXL".into()),
        Script::Idle => std::future::pending().await,
        _ => {}
    }
    let stream = tokio::net::TcpStream::connect(&plan.coordinator)
        .await
        .map_err(|e| e.to_string())?;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut send = async |m: RankUp| write.write_all(to_line(&m).as_bytes()).await.map_err(|e| e.to_string());
    send(RankUp::Hello {
        id: plan.id,
        pid: 1000 + plan.id.rank + if plan.id.side == RankSide::Decode { 100 } else { 0 },
        peer: PeerInfo::default(),
        metadata: "00".into(),
        buffer_addr: 4096,
        proof: None,
        // What a real rank reports: the CPUs it was placed on, else all it may use.
        cpus: plan.cpus.as_ref().map_or(vec![0, 1], |c| c.cpus.clone()),
        cuda_alloc: None,
    })
    .await?;
    let blocks: u64 = plan.peers.iter().map(|p| p.layout.count).sum();
    while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
        let msg: RankDown = serde_json::from_str(&line).map_err(|e| e.to_string())?;
        match msg {
            RankDown::Peers { .. } => {
                // Preparing its requests takes a fresh rank 30 ms (the cold path's first part).
                tokio::time::sleep(PREPARE).await;
                send(RankUp::Prepared).await?
            }
            RankDown::Challenge { .. } => return Err("an in-process coordinator challenged a rank".into()),
            RankDown::Go { rep, first: Some(n) } => {
                log.lock().unwrap().push((plan.id, format!("go {rep} first {n}")));
                if plan.initiator {
                    send(burst(rep, n).await).await?;
                }
            }
            RankDown::Go { rep, first: None } => {
                log.lock().unwrap().push((plan.id, format!("go {rep}")));
                if script == Script::FailsAtRep1 && rep == 1 {
                    send(RankUp::Failed {
                        message: "a request failed: remote access error".into(),
                    })
                    .await?;
                    return Err("exit status 2: a request failed: remote access error".into());
                }
                if plan.initiator {
                    let start = unix_ns();
                    // The first request (a warm-up) pays 50 ms more: the cold path's second part.
                    let cold = if rep == 0 { FIRST_EXTRA } else { Duration::ZERO };
                    tokio::time::sleep(Duration::from_millis(20 * u64::from(plan.id.rank + 1)) + cold).await;
                    let took = unix_ns() - start;
                    log.lock().unwrap().push((plan.id, format!("done {rep}")));
                    let n = plan.peers.len();
                    send(RankUp::Done {
                        rep,
                        start_unix_ns: start,
                        post_ns: vec![1_000; n],
                        done_ns: vec![took; n],
                    })
                    .await?;
                }
            }
            RankDown::Verify => {
                let blocks = if plan.id.side == RankSide::Decode { blocks } else { 0 };
                send(RankUp::Verified { blocks, error: None }).await?;
            }
            RankDown::Finish => {
                log.lock().unwrap().push((plan.id, "finish".into()));
                send(RankUp::Bye { data_path: None }).await?;
                return Ok(());
            }
        }
    }
    Err("the coordinator went away".into())
}

/// A request of a burst alone takes this long …
const BURST_ALONE: Duration = Duration::from_millis(10);
/// … and the scripted fabric carries this many at once: request `j` of a burst completes after
/// `(1 + j / 4)` times [`BURST_ALONE`], so the aggregate rate grows up to 4 in flight and no
/// further (one request per peer here: request `j` is peer entry `j`).
const BURST_ROOM: u64 = 4;

async fn burst(rep: u64, n: u32) -> RankUp {
    let start = unix_ns();
    let done_ns: Vec<u64> = (0..u64::from(n))
        .map(|j| (1 + j / BURST_ROOM) * BURST_ALONE.as_nanos() as u64)
        .collect();
    tokio::time::sleep(Duration::from_nanos(*done_ns.last().unwrap_or(&0))).await;
    RankUp::Done {
        rep,
        start_unix_ns: start,
        post_ns: vec![1_000; n as usize],
        done_ns,
    }
}

impl RankSeam for FakeSeam {
    type S = FakeRank;
    fn listener(&self) -> Result<std::net::TcpListener, LaunchError> {
        std::net::TcpListener::bind(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0))
            .map_err(|e| LaunchError::new(e.to_string()))
    }
    async fn start(&mut self, plan: &RankPlan) -> Result<FakeRank, LaunchError> {
        self.started += 1;
        let task = tokio::spawn(rank(plan.clone(), (self.script)(plan.id), self.log.clone()));
        Ok(FakeRank {
            id: plan.id,
            task: Some(task),
            note: None,
        })
    }
    fn cpus(&self, id: RankId) -> Option<CpuPlacement> {
        (id.side == RankSide::Decode).then(|| CpuPlacement {
            cpus: vec![2, 3],
            numa_node: Some(1),
            reason: "NUMA node 1 of GPU1".into(),
        })
    }
    fn locality(&self) -> Locality {
        Locality::SameHost
    }
    fn placement(&self) -> Placement {
        Placement {
            locality: Locality::SameHost,
            mode: "scripted".into(),
            prefill: Endpoint::default(),
            decode: Endpoint::default(),
        }
    }
    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        self.cleaned = true;
        Ok(format!("{} fake ranks", self.started))
    }
}

/// Llama-3.1-8B, 32 tokens, TP2 → TP2, READ: two decode ranks, each reading one prefill rank.
fn plan() -> KvPlan {
    let shape = KvShape {
        isl: 32,
        page_size: 16,
        kv_dtype: KvDtype::Bf16,
        prefill_tp: 2,
        decode_tp: 2,
        max_rank_bytes: None,
    };
    let request = KvRequest::new(icb_kv::builtin("llama-3.1-8b").unwrap(), shape).unwrap();
    let settings: icb_core::RunSettings =
        serde_json::from_str::<icb_core::PairReport>(include_str!("../../core/tests/fixtures/pair_report.json"))
            .unwrap()
            .settings;
    let mut pair = PairPlan::new(settings, ExpectationInput::default());
    pair.settings.memory = vec![MemoryPair::HOST_HOST];
    // Five warm-up repetitions asked, but `max_time` 0 cuts the warm-up to one.
    pair.settings.warmup_iterations = 5;
    pair.settings.min_time_s = 0.0;
    pair.settings.max_time_s = 0.0;
    pair.deadline = Duration::from_secs(20);
    pair.exit_grace = Duration::from_secs(2);
    KvPlan::new(pair, request, KvOp::Read)
}

fn tool() -> ToolInfo {
    ToolInfo {
        name: "ic-bench".into(),
        version: "test".into(),
        git_commit: "none".into(),
        ucx_headers: "none".into(),
    }
}

fn seam(script: fn(RankId) -> Script) -> FakeSeam {
    FakeSeam {
        script,
        log: Log::default(),
        started: 0,
        cleaned: false,
    }
}

#[tokio::test]
async fn every_repetition_is_a_barrier_and_a_request_runs_to_its_slowest_rank() {
    let mut seam = seam(|_| Script::Healthy);
    let out = run_ranks(&plan(), &mut seam, &tool(), &CancellationToken::new())
        .await
        .unwrap();
    assert!(seam.cleaned);
    let kv = out.report.kv.expect("kv");
    assert!(kv.synchronised);
    // One warm-up (the others cut by max_time), then the floor of 3 (min and max time 0).
    assert_eq!(kv.repetitions, Some(3));
    let m = out.report.cases[0].measurement.as_ref().unwrap();
    assert_eq!((m.warmup_iterations, m.iterations), (1, 3));
    assert_eq!(kv.ranks.len(), 4);
    // Decode rank 1 takes 40 ms, rank 0 20 ms: the request is the slower one, every time.
    let p50 = kv.request_ms_p50.unwrap();
    assert!(p50 >= 40.0, "{p50}");
    let peer = |d: u32| kv.peers.iter().find(|p| p.decode_rank == d).unwrap();
    assert!(peer(1).request_ms_p50.unwrap() >= 40.0 && peer(0).request_ms_p50.unwrap() < p50);
    // The cold path: every rank prepared for 30 ms (in parallel), then the first request took its
    // slowest rank's 40 ms plus 50 ms: at least 30 + 90 ms, beside the warm p50 (≥ 40 ms).
    let cold = kv.cold.as_ref().expect("the cold path");
    assert!(cold.prepare_ms >= 30.0, "{cold:?}");
    assert!(cold.first_request_ms >= 90.0, "{cold:?}");
    assert!(
        (cold.cold_ms - cold.prepare_ms - cold.first_request_ms).abs() < 1e-9,
        "{cold:?}"
    );
    assert!(cold.first_request_ms > p50, "{cold:?} vs warm {p50}");
    let ratio = cold.cold_over_warm.expect("a cold/warm ratio");
    assert!((ratio - cold.cold_ms / p50).abs() < 1e-9, "{cold:?}");
    assert!(kv.ranks.iter().all(|r| r.repetitions == 3));
    // The barrier: every `done k` of every initiator comes before any rank's `go k+1`.
    let log = seam.log.lock().unwrap().clone();
    for k in 0..3u32 {
        let last_done = log.iter().rposition(|(_, e)| *e == format!("done {k}")).unwrap();
        let first_next = log.iter().position(|(_, e)| *e == format!("go {}", k + 1)).unwrap();
        assert!(last_done < first_next, "repetition {k}: {log:?}");
    }
    // Every rank took part in all four (warm-up included).
    for side in [RankSide::Prefill, RankSide::Decode] {
        for rank in 0..2 {
            let id = RankId { side, rank };
            assert_eq!(log.iter().filter(|(r, e)| *r == id && e.starts_with("go")).count(), 4);
        }
    }
    // Each rank's placement, as the seam chose it, and the CPUs the rank said it ran on.
    for r in &kv.ranks {
        let decode = r.side == "decode";
        assert_eq!(r.cpus.as_deref(), Some(if decode { "2-3" } else { "0-1" }), "{r:?}");
        assert_eq!(r.numa_node, decode.then_some(1), "{r:?}");
        assert_eq!(
            r.cpu_placement.as_deref(),
            decode.then_some("NUMA node 1 of GPU1"),
            "{r:?}"
        );
    }
    // Initiators (the decode ranks, READ) release their engine first, their targets after
    // every one of them said goodbye: a target keeps serving while its initiators close.
    let finish = |side| {
        log.iter()
            .enumerate()
            .filter(|(_, (r, e))| r.side == side && e == "finish")
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    let (initiators, targets) = (finish(RankSide::Decode), finish(RankSide::Prefill));
    assert_eq!((initiators.len(), targets.len()), (2, 2), "{log:?}");
    assert!(initiators.iter().max() < targets.iter().min(), "{log:?}");
    // The verdict speaks TTFT (the fake's bandwidth is below any floor, so not its status).
    let reason = &out.report.verdict.reason;
    assert!(
        reason.starts_with("llama-3.1-8b, 32 tokens, TP2→TP2: KV transfer "),
        "{reason}"
    );
}

/// A burst run of 1, 2, 4 and 8 requests in flight on a fabric with room for 4: every decode
/// rank holds 8 copies of its blocks (checked at the end), each size's go names how many to post,
/// and the aggregate rate stops growing at 4 in flight, the frontier.
#[tokio::test]
async fn a_burst_run_times_each_request_in_its_burst_and_finds_the_frontier() {
    let mut seam = seam(|_| Script::Healthy);
    let plan = icb_kv_transfer::bursts::burst_plan(&plan(), &[1, 2, 4, 8]);
    let out = run_ranks(&plan, &mut seam, &tool(), &CancellationToken::new())
        .await
        .unwrap();
    let kv = out.report.kv.expect("kv");
    // Llama-3.1-8B at 32 tokens, TP2 → TP2: each decode rank reads 2 MiB (64 × 32 KiB), 4 MiB
    // a request; 8 copies of the decode side's blocks, all verified.
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    let decode = kv.ranks.iter().find(|r| r.side == "decode").unwrap();
    assert_eq!(decode.peers, 8, "{decode:?}");
    assert!(
        out.report.cases.iter().all(|c| c.reason.is_none()),
        "{:?}",
        out.report.cases
    );
    let bursts = kv.bursts.expect("the bursts");
    let sizes: Vec<u32> = bursts.sizes.iter().map(|b| b.requests).collect();
    assert_eq!(sizes, [1, 2, 4, 8]);
    for b in &bursts.sizes {
        assert_eq!(b.repetitions, 4, "{b:?}");
        // Up to 4 in flight every request finishes after 10 ms; 8 take 20 ms, half of them 10.
        let (p50, p95) = if b.requests <= 4 { (10.0, 10.0) } else { (10.0, 20.0) };
        assert!(b.request_ms_p50 >= p50 && b.request_ms_p50 < p50 + 8.0, "{b:?}");
        assert!(b.request_ms_p95 >= p95 && b.request_ms_p95 < p95 + 8.0, "{b:?}");
        // A burst ends with its last request: its percentiles bound the requests' (nearest rank
        // over 4 bursts, each of `requests` completions).
        assert!(b.burst_ms_p50 >= b.request_ms_p50 - 1e-9, "{b:?}");
        assert!(b.burst_ms_p95 >= b.request_ms_p95 - 1e-9, "{b:?}");
        let rate = f64::from(b.requests) * (4u64 << 20) as f64 / (b.burst_ms_p50 / 1e3);
        assert!((b.aggregate_bps - rate).abs() < 1.0, "{b:?}");
    }
    let rate = |n: usize| bursts.sizes[n].aggregate_bps;
    assert!(rate(2) > 3.0 * rate(0) && rate(3) < 1.2 * rate(2), "{bursts:?}");
    assert_eq!(bursts.frontier, Some(4), "{bursts:?}");
    // Each decode rank (one peer a request) was told to post 1, then 2, 4 and 8 of its 8.
    let log = seam.log.lock().unwrap().clone();
    let d0 = RankId {
        side: RankSide::Decode,
        rank: 0,
    };
    for n in [1, 2, 4, 8] {
        let gos = log
            .iter()
            .filter(|(r, e)| *r == d0 && e.ends_with(&format!(" first {n}")))
            .count();
        // One warm-up and four measured bursts (and for 1 the ordinary repetitions before).
        assert!(if n == 1 { gos >= 5 + 4 } else { gos == 5 }, "{n}: {gos} in {log:?}");
    }
    assert!(
        !log.iter().any(|(_, e)| e.starts_with("go") && !e.contains("first")),
        "{log:?}"
    );
}

#[tokio::test]
async fn a_rank_that_fails_mid_run_ends_it_with_its_own_line() {
    let mut seam = seam(|id| {
        if id
            == (RankId {
                side: RankSide::Decode,
                rank: 1,
            })
        {
            Script::FailsAtRep1
        } else {
            Script::Healthy
        }
    });
    let err = run_ranks(&plan(), &mut seam, &tool(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, PairError::Setup(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("decode rank 1") && text.contains("remote access error"),
        "{text}"
    );
    assert!(!text.contains('\n'));
    assert!(seam.cleaned);
}

#[tokio::test]
async fn a_rank_that_dies_before_connecting_is_named_without_waiting_for_the_deadline() {
    let mut seam = seam(|id| {
        if id.side == RankSide::Prefill && id.rank == 0 {
            Script::DiesAtStart
        } else {
            Script::Healthy
        }
    });
    let t0 = std::time::Instant::now();
    let err = run_ranks(&plan(), &mut seam, &tool(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(10), "waited {:?}", t0.elapsed());
    let text = err.to_string();
    assert!(
        text.contains("prefill rank 0") && text.contains("cannot load NIXL"),
        "{text}"
    );
    assert!(seam.cleaned);
}

#[tokio::test]
async fn a_cancel_stops_every_rank_and_cleans_up() {
    let mut seam = seam(|_| Script::Healthy);
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        c.cancel();
    });
    let err = run_ranks(&plan(), &mut seam, &tool(), &cancel).await.unwrap_err();
    assert!(matches!(err, PairError::Interrupted(_)), "{err:?}");
    assert!(seam.cleaned);
}
