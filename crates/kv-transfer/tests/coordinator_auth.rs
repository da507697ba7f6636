//! The KV coordinator's admission by token (`icb_kv_transfer::coordinator`, as `ic-bench
//! kv-coordinate` runs it in a bench pod): every connection is challenged first; a stray one whose
//! hello proves nothing, or proves another token, is dropped and the wait goes on; the rank that
//! proves the run's token is coordinated to the end. No NIXL: the "rank" speaks the protocol
//! over real TCP.

use icb_core::protocol::kv_rank::{self, RankDown, RankId, RankPlan, RankSide, RankUp, to_line, unhex};
use icb_core::{MemoryType, PeerInfo};
use icb_kv_transfer::{CoordinatorJob, RepRule};
use std::net::SocketAddr;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const TOKEN: &str = "the-runs-token";

/// A hello's proof, from the challenge's nonce.
type Answer = dyn Fn(&[u8]) -> Option<String>;

fn rank_id() -> RankId {
    RankId {
        side: RankSide::Prefill,
        rank: 0,
    }
}

/// One passive rank with no peers: the coordinator runs every phase with it.
fn job() -> CoordinatorJob {
    let plan = RankPlan {
        id: rank_id(),
        engine: icb_core::EngineKind::Ucx,
        read: true,
        initiator: false,
        memory: MemoryType::Host,
        peer_memory: MemoryType::Host,
        buffer_bytes: 4096,
        seed: 1,
        peers: Vec::new(),
        coordinator: String::new(),
        message_timeout_s: 10.0,
        authenticate: true,
        cpus: None,
        ucx_config: Vec::new(),
        cuda_alloc: Default::default(),
    };
    CoordinatorJob {
        plans: vec![plan],
        reps: RepRule {
            warmup_iterations: 1,
            min_time_s: 0.0,
            max_time_s: 0.0,
        },
        limit_s: 20.0,
        authenticate: true,
        bursts: Vec::new(),
    }
}

fn hello(proof: Option<String>) -> RankUp {
    RankUp::Hello {
        id: rank_id(),
        pid: 7,
        peer: PeerInfo::default(),
        metadata: "00".into(),
        buffer_addr: 4096,
        proof,
        cpus: vec![2, 5],
        cuda_alloc: None,
    }
}

/// Connects, reads the challenge's nonce and sends the hello `answer` makes from it; the
/// connection's reader, for what comes next.
async fn connect(
    addr: SocketAddr,
    answer: impl Fn(&[u8]) -> Option<String>,
) -> (
    tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    tokio::net::tcp::OwnedWriteHalf,
) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let first = lines.next_line().await.unwrap().expect("a challenge");
    let RankDown::Challenge { nonce } = serde_json::from_str(&first).unwrap() else {
        panic!("not a challenge: {first}");
    };
    let nonce = unhex(&nonce).unwrap();
    assert_eq!(nonce.len(), 32);
    write
        .write_all(to_line(&hello(answer(&nonce))).as_bytes())
        .await
        .unwrap();
    (lines, write)
}

/// The passive rank's side of every phase after its hello.
async fn follow(
    mut lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    mut write: tokio::net::tcp::OwnedWriteHalf,
) -> u64 {
    let mut gos = 0;
    while let Some(line) = lines.next_line().await.unwrap() {
        let reply = match serde_json::from_str::<RankDown>(&line).unwrap() {
            RankDown::Peers { .. } => RankUp::Prepared,
            RankDown::Go { .. } => {
                gos += 1;
                continue;
            }
            RankDown::Verify => RankUp::Verified { blocks: 0, error: None },
            RankDown::Finish => RankUp::Bye { data_path: None },
            RankDown::Challenge { .. } => panic!("challenged twice"),
        };
        let last = matches!(reply, RankUp::Bye { .. });
        write.write_all(to_line(&reply).as_bytes()).await.unwrap();
        if last {
            break;
        }
    }
    gos
}

#[tokio::test]
async fn strays_that_prove_nothing_are_dropped_and_the_proven_rank_runs_to_the_end() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let job = job();
    let coordinator =
        tokio::spawn(async move { icb_kv_transfer::coordinate(&job, &listener, Some(TOKEN), &mut |_| Ok(())).await });
    // No proof, another token's proof, a proof over another nonce: each dropped (its
    // connection closed) without ending the run.
    let strays: [Box<Answer>; 3] = [
        Box::new(|_| None),
        Box::new(|n| Some(kv_rank::proof("another-token", n, rank_id()))),
        Box::new(|_| Some(kv_rank::proof(TOKEN, &[0u8; 32], rank_id()))),
    ];
    for stray in strays {
        let (mut lines, _write) = connect(addr, stray).await;
        let next = tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
            .await
            .expect("the stray's connection is closed at once");
        assert!(matches!(next, Ok(None) | Err(_)), "a stray was answered: {next:?}");
        assert!(!coordinator.is_finished(), "a stray ended the run");
    }
    let (lines, write) = connect(addr, |n| Some(kv_rank::proof(TOKEN, n, rank_id()))).await;
    let gos = follow(lines, write).await;
    let done = coordinator.await.unwrap().expect("the proven rank is coordinated");
    assert_eq!(done.records.len(), 1);
    assert_eq!(done.records[0].id, rank_id());
    // What the rank said it runs on reaches the report through the coordinator.
    assert_eq!(done.records[0].cpus, [2, 5]);
    // One warm-up and the floor of 3 measured repetitions (max_time 0).
    assert_eq!((done.warmup, done.reps.len() as u64, gos), (1, 3, 4));
}
