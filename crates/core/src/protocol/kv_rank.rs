//! The control channel of `pair --kv-shape` in its per-rank model: one `ic-bench kv-rank`
//! process per TP rank, each owning its rank's KV buffer (registered once), talking to the
//! parent (the coordinator) over one TCP connection, one JSON object per line.
//!
//! The sequence: the rank sends [`RankUp::Hello`] (its engine's metadata and buffer address);
//! once every rank said hello the coordinator sends each one [`RankDown::Peers`] (its peers'
//! metadata and addresses), the rank prepares one request per peer and answers
//! [`RankUp::Prepared`]. Then for every repetition the coordinator sends [`RankDown::Go`] to
//! every rank at once and waits for every initiator's [`RankUp::Done`] before the next: a
//! barrier, so repetition `k` starts together on every rank and its time is the request's end to
//! end. [`RankDown::Verify`] makes every destination check every block it received
//! ([`RankUp::Verified`]); [`RankDown::Finish`] makes every rank release its engine (NIXL or
//! UCX) and say which data path carried its bytes ([`RankUp::Bye`]).
//!
//! A coordinator reachable beyond its host (in a bench pod) admits only ranks that hold the run's
//! token: it opens every connection with [`RankDown::Challenge`], and the rank's hello carries
//! [`proof`] over that nonce and its identity (the token never crosses the wire; a recorded
//! hello is worthless on another connection). A rank whose plan says [`RankPlan::authenticate`]
//! waits for the challenge before its hello.

use crate::model::{EngineKind, KvLayout, MemoryType, PeerInfo, TransportEvidence};
use serde::{Deserialize, Serialize};

/// Which side of the deployment a rank belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankSide {
    Prefill,
    Decode,
}

impl RankSide {
    pub fn as_str(self) -> &'static str {
        match self {
            RankSide::Prefill => "prefill",
            RankSide::Decode => "decode",
        }
    }
}

impl std::fmt::Display for RankSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rank's identity: its side and its index there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RankId {
    pub side: RankSide,
    pub rank: u32,
}

impl std::fmt::Display for RankId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} rank {}", self.side, self.rank)
    }
}

/// What one rank process is told on its command line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankPlan {
    pub id: RankId,
    /// The engine this rank moves its blocks with: NIXL (one request per peer) or ic-bench's
    /// UCX engine (one RMA operation per block and a flush per peer).
    pub engine: EngineKind,
    /// READ (decode ranks post) or WRITE (prefill ranks post).
    pub read: bool,
    /// Whether this rank posts the requests (the decode ranks for READ, prefill for WRITE).
    pub initiator: bool,
    pub memory: MemoryType,
    /// The memory of every peer rank (the other side's).
    pub peer_memory: MemoryType,
    /// The rank's whole KV buffer.
    pub buffer_bytes: u64,
    /// The pattern seed this rank's buffer is filled with.
    pub seed: u64,
    /// Every rank this one exchanges blocks with, in the coordinator's order.
    pub peers: Vec<RankPeerPlan>,
    /// The coordinator's address (`host:port`).
    pub coordinator: String,
    /// How long the rank may wait for any one message of the coordinator.
    pub message_timeout_s: f64,
    /// The coordinator challenges this rank first: it answers with a [`proof`] of the run's
    /// token (`IC_BENCH_TOKEN` in its environment).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub authenticate: bool,
    /// Where the rank runs: the CPUs it pins itself to before it allocates its buffer (so the
    /// buffer's pages land on that NUMA node), and why. `None`: left where it was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuPlacement>,
    /// UCX settings (names without `UCX_`) the rank applies over its environment before its
    /// engine starts: the KV TCP control's `TLS=tcp` (`pair --kv-shape --control tcp`; NIXL's UCX
    /// reads them as `UCX_*` variables). Empty for every ordinary rank.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ucx_config: Vec<(String, String)>,
    /// How the rank allocates a GPU buffer (`--cuda-alloc`); absent: `legacy`.
    #[serde(default, skip_serializing_if = "crate::CudaAllocMode::is_legacy")]
    pub cuda_alloc: crate::CudaAllocMode,
}

/// A rank's CPUs, decided by the coordinator from the node's topology
/// (`icb_rails::cpus::place_ranks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlacement {
    /// The CPUs to run on; empty: unpinned (every CPU the rank was allowed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<u32>,
    /// The NUMA node those CPUs belong to, where one was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Why, in a few words (`NUMA node 1 of GPU5`, `unpinned: one NUMA node`).
    pub reason: String,
}

/// One peer of a rank: the blocks they exchange, laid out with the initiator's side first
/// (`KvLayout::initiator` is the side that posts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankPeerPlan {
    pub peer: RankId,
    pub layout: KvLayout,
    /// The seed the source of these blocks is filled with (checked at the destination).
    pub source_seed: u64,
}

/// A rank to the coordinator.
// The hello is the large variant (a rank's facts, its proof and CPUs) and is sent once per rank;
// messages live only from one line's parse to its handling, so boxing buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RankUp {
    Hello {
        id: RankId,
        pid: u32,
        peer: PeerInfo,
        /// What a peer needs to reach the registered buffer, hex: the NIXL agent's metadata, or
        /// the UCX engine's worker address and rkey (`icb_engine::rank::RankAddress`).
        metadata: String,
        buffer_addr: u64,
        /// The answer to the coordinator's challenge ([`proof`], hex), when it sent one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        proof: Option<String>,
        /// The CPUs the rank runs on (its affinity once placed), ascending.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cpus: Vec<u32>,
        /// The rank's GPU buffer: its allocation mode and legacy-IPC capability (absent for
        /// host memory, and from ranks older than `--cuda-alloc`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cuda_alloc: Option<crate::CudaAllocation>,
    },
    Prepared,
    /// One repetition on an initiator: when it started (Unix ns, this host's clock) and, per
    /// peer in plan order, the time in the post call and the completion, both in ns from start.
    Done {
        rep: u64,
        start_unix_ns: u64,
        post_ns: Vec<u64>,
        done_ns: Vec<u64>,
    },
    /// Every block this rank received, checked (a source rank checks nothing: `blocks` 0).
    Verified {
        blocks: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The engine released: the data path this rank's requests took (UCX's protocol tables under
    /// NIXL, the endpoint's lanes and the first block's protocol under the UCX engine).
    Bye {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data_path: Option<TransportEvidence>,
    },
    Failed {
        message: String,
    },
}

/// The coordinator to a rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RankDown {
    /// The first line on a connection to a coordinator that admits by token: a fresh nonce
    /// (hex) for the rank's [`proof`].
    Challenge {
        nonce: String,
    },
    /// Every peer's metadata and buffer address, in the rank plan's peer order.
    Peers {
        peers: Vec<PeerAddress>,
    },
    /// Start repetition `rep` now: post the first `first` requests of the plan's peer list
    /// (a burst of requests in flight, `pair --kv-shape`'s burst run), or every one (absent).
    Go {
        rep: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first: Option<u32>,
    },
    Verify,
    Finish,
}

/// How many of a rank's `peers` requests a [`RankDown::Go`] posts: its `first` (at least 1, at
/// most every peer), or every one.
pub fn posted(first: Option<u32>, peers: usize) -> Result<usize, String> {
    match first.map(|n| n as usize) {
        None => Ok(peers),
        Some(n) if (1..=peers).contains(&n) => Ok(n),
        Some(n) => Err(format!("a go for the first {n} requests of {peers}")),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerAddress {
    pub id: RankId,
    pub metadata: String,
    pub buffer_addr: u64,
}

/// What a rank proves it holds the run's token with: HMAC-SHA256(token, "ic-bench kv-rank" ‖
/// nonce ‖ its identity), hex.
pub fn proof(token: &str, nonce: &[u8], id: RankId) -> String {
    hex(ring::hmac::sign(&proof_key(token), &transcript(nonce, id)).as_ref())
}

/// Checks a rank's [`proof`] in constant time (anything that is not one simply fails).
pub fn verify_proof(token: &str, nonce: &[u8], id: RankId, proof_hex: &str) -> bool {
    unhex(proof_hex).is_ok_and(|p| ring::hmac::verify(&proof_key(token), &transcript(nonce, id), &p).is_ok())
}

/// A fresh nonce for a [`RankDown::Challenge`], from the system's random source.
pub fn nonce() -> Result<[u8; 32], String> {
    use ring::rand::SecureRandom;
    let mut out = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .map_err(|_| "the system random number generator failed".to_string())?;
    Ok(out)
}

fn proof_key(token: &str) -> ring::hmac::Key {
    ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes())
}

fn transcript(nonce: &[u8], id: RankId) -> Vec<u8> {
    let mut m = b"ic-bench kv-rank\0".to_vec();
    m.extend_from_slice(nonce);
    m.extend_from_slice(format!("\0{}\0{}", id.side, id.rank).as_bytes());
    m
}

/// One line of the channel.
pub fn to_line<T: Serialize>(msg: &T) -> String {
    let mut s = serde_json::to_string(msg).expect("protocol messages always serialize");
    s.push('\n');
    s
}

/// Bytes as lower-case hex (NIXL metadata is binary).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of [`hex`]'s text.
pub fn unhex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err("odd-length hex".into());
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("bad hex at {i}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_as_one_line_each() {
        let up = RankUp::Done {
            rep: 3,
            start_unix_ns: 17,
            post_ns: vec![1, 2],
            done_ns: vec![5, 9],
        };
        let line = to_line(&up);
        assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
        assert_eq!(serde_json::from_str::<RankUp>(&line).unwrap(), up);
        let down = RankDown::Go { rep: 4, first: None };
        assert_eq!(serde_json::from_str::<RankDown>(&to_line(&down)).unwrap(), down);
        // A burst's go names how many requests to post; a go without one posts them all.
        assert_eq!(to_line(&down), "{\"type\":\"go\",\"rep\":4}\n");
        let burst = RankDown::Go { rep: 5, first: Some(3) };
        assert_eq!(serde_json::from_str::<RankDown>(&to_line(&burst)).unwrap(), burst);
        assert_eq!(posted(None, 8), Ok(8));
        assert_eq!(posted(Some(3), 8), Ok(3));
        assert!(posted(Some(0), 8).is_err() && posted(Some(9), 8).is_err());
        assert!(to_line(&RankDown::Verify).contains("\"type\":\"verify\""));
        assert_eq!(unhex(&hex(&[0, 0xab, 7])).unwrap(), [0, 0xab, 7]);
        assert!(unhex("abc").is_err() && unhex("zz").is_err());
    }

    #[test]
    fn a_proof_holds_only_for_its_token_nonce_and_rank() {
        let id = RankId {
            side: RankSide::Decode,
            rank: 1,
        };
        let other = RankId {
            side: RankSide::Prefill,
            rank: 1,
        };
        let (n1, n2) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(n1, n2);
        let p = proof("secret", &n1, id);
        assert!(verify_proof("secret", &n1, id, &p));
        assert!(!verify_proof("other", &n1, id, &p));
        assert!(!verify_proof("secret", &n2, id, &p));
        assert!(!verify_proof("secret", &n1, other, &p));
        assert!(!verify_proof("secret", &n1, id, "zz"));
        assert!(!verify_proof("secret", &n1, id, ""));
    }
}
