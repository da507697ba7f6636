//! The control messages and the bounds every received message is checked against.
//!
//! One session, in order (the client drives, the server answers):
//!
//! ```text
//! server → client  challenge | denied         a fresh nonce, nothing else (denied: busy, rate)
//! client → server  hello                      worker address, boot id, …, and its token proof
//! server → client  hello | denied             its own proof; both sides now create endpoints
//! per case (the first one is a hidden 8-byte tag_lat that finishes UCX wireup):
//!   client → server  setup                    test, memory pair, size, window, pattern seed
//!   server → client  ready | skipped | case_failed     ready carries address + rkey for RMA
//!   per phase (warmup incl. the probe operation, then measured rounds):
//!     client → server  phase                  kind, iterations, deadline
//!     server → client  phase_ready            receives posted (or progressing, for RMA)
//!     … UCX traffic, timed on the client …
//!     client → server  phase_end              one-sided tests only: the server may stop
//!     server → client  phase_done
//!   client → server  finish                   verify the payload, release the buffers
//!   server → client  finished                 the server-side verification result
//! client → server  bye
//! either side: error (fatal; the sender closes the connection next)
//! ```
//!
//! Serde rejects unknown message types and enum values; [`Message::validate`] bounds every size,
//! count and string a peer can send, so a hostile or confused peer can make a session fail but
//! cannot make this process allocate, loop or wait without limit.

use icb_core::units::format_size;
use icb_core::{CudaInfo, MemoryPair, TestKind};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// Largest message size a peer may ask the server to allocate for.
pub const MAX_MESSAGE_SIZE: u64 = 16 << 30;
/// Most outstanding operations a peer may ask for.
pub const MAX_WINDOW: u32 = 1024;
/// Most blocks one KV-shaped operation may have (NIXL lists run to thousands of descriptors).
pub const MAX_BLOCKS: u32 = 4096;
/// Most descriptors one KV request may list. The buffers alone (≤ 16 GiB) would let a peer ask
/// for ~134 million 1-byte descriptors, each a list entry on both sides; real requests run to
/// ~112k per rank transfer (GB200 P/D, vllm#55434) and ~1.3M for a 70B model at 128k tokens in
/// 16-token pages.
pub const MAX_KV_DESCRIPTORS: u64 = 1 << 22;
/// Most iterations one phase may ask for (a phase is also bounded in time).
pub const MAX_PHASE_ITERATIONS: u64 = 1 << 36;
const MAX_BLOB: usize = 64 << 10;
const MAX_SHORT_STRING: usize = 256;
const MAX_TEXT: usize = 4096;
const MAX_ENV_ENTRIES: usize = 256;

/// Bytes carried as a hex string (worker addresses, packed rkeys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HexBytes(pub Vec<u8>);

impl Serialize for HexBytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = String::with_capacity(self.0.len() * 2);
        for b in &self.0 {
            out.push_str(&format!("{b:02x}"));
        }
        s.serialize_str(&out)
    }
}

impl<'de> Deserialize<'de> for HexBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() % 2 != 0 || s.len() > 2 * MAX_BLOB {
            return Err(serde::de::Error::custom("hex blob of odd or excessive length"));
        }
        let bytes = s.as_bytes();
        let nibble = |c: u8| -> Result<u8, D::Error> {
            (c as char)
                .to_digit(16)
                .map(|v| v as u8)
                .ok_or_else(|| serde::de::Error::custom("non-hex character in a hex blob"))
        };
        let mut out = Vec::with_capacity(bytes.len() / 2);
        for pair in bytes.chunks_exact(2) {
            out.push(nibble(pair[0])? << 4 | nibble(pair[1])?);
        }
        Ok(HexBytes(out))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Server,
    Client,
}

/// What each side says about itself right after the TCP connection opens (server first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub role: Role,
    pub tool_version: String,
    pub hostname: String,
    /// `/proc/sys/kernel/random/boot_id`: equal on both sides means the same kernel, i.e. same host.
    pub boot_id: String,
    pub ucx_version: String,
    pub ucx_library: String,
    pub cuda: CudaInfo,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub worker_address: HexBytes,
    /// The client asks both endpoints to use UCX peer error handling (as NIXL does).
    #[serde(default)]
    pub peer_errors: bool,
    /// The engine this side runs: absent for the UCX engine, `nixl` for the NIXL engine (whose
    /// `worker_address` is a NIXL agent metadata blob, not a UCX worker address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The NIXL release, library and backend of a NIXL-engine side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nixl: Option<icb_core::NixlInfo>,
    /// What this host's NICs can carry at most, bytes/s, from sysfs (`icb_probe::facts::
    /// line_rate_bps`); absent where nothing is rated. For the physics check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_rate_bps: Option<f64>,
    /// This side's RDMA readiness as it reads it where it runs (`icb_probe::readiness`, the
    /// reader `probe node` uses), compared with the peer's before the transfer; absent from a
    /// peer that reads none (older ic-bench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<icb_core::readiness::Readiness>,
    /// This side's nonce and token proof (`icb_engine::auth`); absent where no token is in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<HelloAuth>,
}

/// A hello's admission proof: its sender's nonce and HMAC (see `icb_engine::auth`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloAuth {
    pub nonce: HexBytes,
    pub proof: HexBytes,
}

/// Why a server turned a client away before any session began (typed: clients decide on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenyCause {
    /// No token, or a proof that does not check.
    Unauthorized,
    /// Another client is being served (one session at a time).
    Busy,
    /// Connections arrive faster than the server admits them.
    RateLimited,
}

/// One (test, memory pair, size) case, as the client asks the server to prepare it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseSetup {
    pub test: TestKind,
    pub memory: MemoryPair,
    pub size: u64,
    pub window: u32,
    /// Seeds the payload pattern of this case.
    pub seed: u64,
    /// KV-shaped RMA: blocks of `size` per operation, spaced apart in both buffers.
    #[serde(default = "one_block", skip_serializing_if = "is_one_block")]
    pub blocks: u32,
    /// Benchmark-only: buffers are neither written nor verified.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untouched: bool,
    /// `pair --kv-shape`: the descriptors of one rank-to-rank KV read, as each side's buffer
    /// holds them (NIXL engine; `size` is the descriptor size, `window` 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<icb_core::KvLayout>,
    /// How both sides allocate the case's GPU memory (`--cuda-alloc`); absent: `legacy`
    /// (`cuMemAlloc`). An older server ignores it and allocates `cuMemAlloc` memory: its
    /// `ready` then carries no `cuda_alloc`, and the client fails the case naming the upgrade.
    #[serde(default, skip_serializing_if = "icb_core::CudaAllocMode::is_legacy")]
    pub cuda_alloc: icb_core::CudaAllocMode,
}

fn one_block() -> u32 {
    1
}

fn is_one_block(b: &u32) -> bool {
    *b == 1
}

/// A KV case: a read or write whose blocks lie inside both buffers, each buffer ≤ 16 GiB.
fn check_kv(s: &CaseSetup, kv: &icb_core::KvLayout) -> Result<(), OutOfBounds> {
    if !s.test.is_rma() || s.blocks != 1 || s.window != 1 || s.size != kv.len {
        return Err(OutOfBounds::Value(format!(
            "a KV case is one get_bw or put_bw request of {}-byte descriptors, window 1",
            kv.len
        )));
    }
    if kv.count > MAX_KV_DESCRIPTORS {
        return Err(OutOfBounds::Value(format!(
            "{} KV descriptors (limit {MAX_KV_DESCRIPTORS})",
            kv.count
        )));
    }
    let biggest = kv.initiator.buffer_bytes.max(kv.target.buffer_bytes);
    if !kv.is_consistent() || biggest > MAX_MESSAGE_SIZE {
        return Err(OutOfBounds::Value(format!(
            "KV layout of {} descriptors of {} B does not fit its buffers (≤ 16 GiB each)",
            kv.count, kv.len
        )));
    }
    Ok(())
}

impl CaseSetup {
    /// Blocks (descriptors) per operation: a KV case's count, else `blocks`.
    pub fn descriptors(&self) -> u32 {
        match self.kv {
            Some(kv) => u32::try_from(kv.count).unwrap_or(u32::MAX),
            None => self.blocks,
        }
    }

    /// Whether one operation is a list of blocks, issued whole and flushed (KV-shaped).
    pub fn is_list(&self) -> bool {
        self.blocks > 1 || self.kv.is_some()
    }

    /// Bytes the server's (target's) buffer needs for this case: a KV rank's whole buffer, else
    /// the blocks' span. `None`: it does not fit this machine's address space.
    pub fn target_bytes(&self) -> Option<u64> {
        match self.kv {
            Some(kv) => Some(kv.target.buffer_bytes),
            None => self.layout().map(|l| l.span() as u64),
        }
    }

    /// Where the blocks sit in each side's buffer (one contiguous block unless `blocks` > 1).
    pub fn layout(&self) -> Option<icb_core::BlockLayout> {
        let size = usize::try_from(self.size).ok()?;
        if self.blocks <= 1 {
            Some(icb_core::BlockLayout::single(size))
        } else {
            icb_core::BlockLayout::spaced(size, self.blocks as usize)
        }
    }
}

/// The server's buffer for an RMA case (unused for tag cases).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseReady {
    pub remote_addr: u64,
    pub rkey: HexBytes,
    /// The server's GPU buffer for this case: how it was allocated and whether a peer can map
    /// it with legacy CUDA IPC. Absent for host memory, and from servers older than
    /// `--cuda-alloc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_alloc: Option<icb_core::CudaAllocation>,
    /// The server's NIC health counters (every RDMA port of its node) once the case's buffers
    /// are ready: the "before" reading of the case's counter deltas (issue 40). Absent from
    /// older servers (and NIXL servers before issue 40 item 2): not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<icb_core::rails::nic_health::HealthSnapshot>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    /// One tiny ping-pong that finishes UCX wireup before any case.
    Wireup,
    /// The probe operation (transport evidence) followed by the warmup iterations.
    Warmup,
    /// One measured round.
    Measure,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// server → client, first: a fresh nonce to prove the token over; `token_required` says
    /// whether this server checks one.
    Challenge {
        nonce: HexBytes,
        token_required: bool,
    },
    /// server → client: not admitted; the server closes the connection next.
    Denied {
        cause: DenyCause,
        message: String,
    },
    Hello(Box<Hello>),
    /// client → server: prepare a case.
    Setup(CaseSetup),
    /// server → client: buffers ready.
    Ready(CaseReady),
    /// server → client: the case cannot run on the server side (e.g. no CUDA driver).
    Skipped {
        reason: String,
    },
    /// server → client: the case failed on the server side; the session goes on.
    CaseFailed {
        reason: String,
        /// Set when the server refused the case before allocating (its bounds); `reason` is
        /// then this refusal's text. Absent from older servers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<CaseRefusal>,
    },
    /// client → server: run one phase of the current case, within `timeout_s`.
    Phase {
        kind: PhaseKind,
        iterations: u64,
        timeout_s: f64,
        /// Outstanding operations for this phase (window auto-tuning); absent: the case's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<u32>,
    },
    /// server → client: receives are posted, start sending.
    PhaseReady,
    /// client → server: the client finished its operations of a one-sided phase.
    PhaseEnd,
    /// server → client: the server finished its part of the phase.
    PhaseDone,
    /// client → server: check the payload, release the case's buffers.
    Finish,
    /// server → client: result of the server-side payload check.
    Finished {
        verified: bool,
        detail: Option<String>,
        /// What the server's UCX chose for the case's tag receives (its own protocol tables):
        /// for a rendezvous message, the receiver's choice. Absent from older servers, for RMA,
        /// and where the server's UCX did not say.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        receive: Option<icb_core::ProtocolView>,
        /// The server's NIC health counters once the case finished: the "after" reading.
        /// Absent from older servers: not read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        health: Option<icb_core::rails::nic_health::HealthSnapshot>,
    },
    /// client → server: no more cases.
    Bye,
    /// Either side: fatal error, the sender closes the connection next.
    Error {
        message: String,
    },
}

/// Transports a peer's receive view may name (UCX's lanes per protocol are at most 8).
const MAX_VIEW_LANES: usize = 16;

/// Bytes of each side's nonce and of a proof (SHA-256, see `icb_engine::auth`): a hello or
/// challenge carrying a nonce of any other length is malformed.
pub const NONCE_BYTES: usize = 32;

/// Why the server refuses one case before allocating anything; typed on the wire
/// (`case_failed.refused`), its text is the one line the client reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
#[serde(tag = "bound", rename_all = "snake_case")]
pub enum CaseRefusal {
    /// Above `--max-buffer` (`needs`: `None` when the size does not even fit the platform).
    #[error(
        "the case needs a {} buffer on the server, above its --max-buffer of {}: use smaller sizes or raise --max-buffer on serve",
        needs.map_or("too large".to_string(), format_size),
        format_size(*limit)
    )]
    AboveMaxBuffer { needs: Option<u64>, limit: u64 },
    /// Above what the server's GPU can give now (half its free memory, see `icb_engine::admit::gpu_limit`).
    #[error(
        "the case needs a {} buffer on GPU {device} of the server, above the {} that GPU gives one case now (half its {} free): use smaller sizes or free memory on that GPU",
        format_size(*needs),
        format_size(*limit),
        format_size(*free)
    )]
    AboveGpuFree {
        needs: u64,
        device: usize,
        free: u64,
        limit: u64,
    },
}

/// What a peer sent outside this protocol's bounds: the frame is refused as malformed, naming
/// the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutOfBounds {
    /// A text field longer than its limit.
    #[error("{what} is {len} bytes long (limit {max})")]
    TooLong { what: &'static str, len: usize, max: usize },
    /// A number, a count or a layout outside its range (the line names it).
    #[error("{0}")]
    Value(String),
}

/// RDMA ports one health reading may have (a node has at most a few dozen), and counters per
/// port (the vocabulary has ~40, PFC's per-priority ones included).
const MAX_HEALTH_PORTS: usize = 128;
const MAX_HEALTH_COUNTERS: usize = 256;

/// A peer's health reading within bounds: ports, counters per port, and every text's length.
fn check_health(health: Option<&icb_core::rails::nic_health::HealthSnapshot>) -> Result<(), OutOfBounds> {
    let Some(h) = health else { return Ok(()) };
    if h.ports.len() > MAX_HEALTH_PORTS {
        return Err(OutOfBounds::Value(format!(
            "{} ports in a health reading (limit {MAX_HEALTH_PORTS})",
            h.ports.len()
        )));
    }
    check_len(
        "health reading's reason",
        h.unreadable.as_deref().unwrap_or(""),
        MAX_TEXT,
    )?;
    for p in &h.ports {
        check_len("health port", &p.device, MAX_TEXT)?;
        let counters = p.values.len() + p.unreadable.len() + p.drivers.len();
        if counters > MAX_HEALTH_COUNTERS {
            return Err(OutOfBounds::Value(format!(
                "{counters} counters of {} in a health reading (limit {MAX_HEALTH_COUNTERS})",
                p.device
            )));
        }
        let mut names = p.values.keys().chain(p.unreadable.keys()).chain(p.unreadable.values());
        names.try_for_each(|n| check_len("health counter", n, MAX_TEXT))?;
    }
    Ok(())
}

fn check_len(what: &'static str, s: &str, max: usize) -> Result<(), OutOfBounds> {
    if s.len() > max {
        return Err(OutOfBounds::TooLong {
            what,
            len: s.len(),
            max,
        });
    }
    Ok(())
}

impl Message {
    /// `case_failed` for a case that failed while the server prepared it.
    pub fn case_failed(reason: String) -> Message {
        Message::CaseFailed { reason, refused: None }
    }

    /// `case_failed` for a case the server's bounds refused, typed and with its one line.
    pub fn case_refused(refusal: CaseRefusal) -> Message {
        Message::CaseFailed {
            reason: refusal.to_string(),
            refused: Some(refusal),
        }
    }

    /// The message's name as it appears on the wire, for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Challenge { .. } => "challenge",
            Message::Denied { .. } => "denied",
            Message::Hello(_) => "hello",
            Message::Setup(_) => "setup",
            Message::Ready(_) => "ready",
            Message::Skipped { .. } => "skipped",
            Message::CaseFailed { .. } => "case_failed",
            Message::Phase { .. } => "phase",
            Message::PhaseReady => "phase_ready",
            Message::PhaseEnd => "phase_end",
            Message::PhaseDone => "phase_done",
            Message::Finish => "finish",
            Message::Finished { .. } => "finished",
            Message::Bye => "bye",
            Message::Error { .. } => "error",
        }
    }

    /// Bounds everything a peer controls.
    pub fn validate(&self) -> Result<(), OutOfBounds> {
        match self {
            Message::Hello(h) => {
                check_len("tool_version", &h.tool_version, MAX_SHORT_STRING)?;
                check_len("hostname", &h.hostname, MAX_SHORT_STRING)?;
                check_len("boot_id", &h.boot_id, MAX_SHORT_STRING)?;
                check_len("ucx_version", &h.ucx_version, MAX_SHORT_STRING)?;
                check_len("ucx_library", &h.ucx_library, MAX_TEXT)?;
                check_len("cuda detail", &h.cuda.detail, MAX_TEXT)?;
                if h.env.len() > MAX_ENV_ENTRIES {
                    return Err(OutOfBounds::Value(format!(
                        "{} environment entries (limit {MAX_ENV_ENTRIES})",
                        h.env.len()
                    )));
                }
                for (k, v) in &h.env {
                    check_len("environment name", k, MAX_SHORT_STRING)?;
                    check_len("environment value", v, MAX_TEXT)?;
                }
                if h.worker_address.0.is_empty() {
                    return Err(OutOfBounds::Value("empty UCX worker address".into()));
                }
                if let Some(a) = &h.auth
                    && (a.nonce.0.len() != NONCE_BYTES || a.proof.0.len() > 64)
                {
                    return Err(OutOfBounds::Value("a token proof of the wrong length".into()));
                }
                Ok(())
            }
            Message::Challenge { nonce, .. } if nonce.0.len() != NONCE_BYTES => Err(OutOfBounds::Value(format!(
                "a challenge nonce of {} bytes",
                nonce.0.len()
            ))),
            Message::Challenge { .. } => Ok(()),
            Message::Denied { message, .. } => check_len("denial", message, MAX_TEXT),
            Message::Setup(s) => {
                if s.size == 0 || s.size > MAX_MESSAGE_SIZE {
                    return Err(OutOfBounds::Value(format!(
                        "message size {} outside 1 B … 16 GiB",
                        s.size
                    )));
                }
                if s.window == 0 || s.window > MAX_WINDOW {
                    return Err(OutOfBounds::Value(format!(
                        "window {} outside 1 … {MAX_WINDOW}",
                        s.window
                    )));
                }
                if s.blocks == 0 || s.blocks > MAX_BLOCKS {
                    return Err(OutOfBounds::Value(format!(
                        "{} blocks outside 1 … {MAX_BLOCKS}",
                        s.blocks
                    )));
                }
                if s.blocks > 1 && !s.test.is_rma() {
                    return Err(OutOfBounds::Value(format!(
                        "{} blocks for {}: blocks are for put_bw and get_bw",
                        s.blocks, s.test
                    )));
                }
                if let Some(kv) = &s.kv {
                    return check_kv(s, kv);
                }
                match s.layout() {
                    Some(l) if l.span() as u64 <= MAX_MESSAGE_SIZE => Ok(()),
                    _ => Err(OutOfBounds::Value(format!(
                        "{} blocks of {} bytes exceed 16 GiB",
                        s.blocks, s.size
                    ))),
                }
            }
            Message::Ready(r) => check_health(r.health.as_ref()),
            Message::Phase {
                iterations,
                timeout_s,
                window,
                ..
            } => {
                if let Some(w) = window
                    && (*w == 0 || *w > MAX_WINDOW)
                {
                    return Err(OutOfBounds::Value(format!("window {w} outside 1 … {MAX_WINDOW}")));
                }
                if *iterations == 0 || *iterations > MAX_PHASE_ITERATIONS {
                    return Err(OutOfBounds::Value(format!("phase of {iterations} iterations")));
                }
                if !(timeout_s.is_finite() && *timeout_s > 0.0 && *timeout_s <= 86_400.0) {
                    return Err(OutOfBounds::Value(format!("phase timeout of {timeout_s} s")));
                }
                Ok(())
            }
            Message::Skipped { reason } | Message::CaseFailed { reason, .. } => check_len("reason", reason, MAX_TEXT),
            Message::Finished {
                detail,
                receive,
                health,
                ..
            } => {
                check_len("detail", detail.as_deref().unwrap_or(""), MAX_TEXT)?;
                check_health(health.as_ref())?;
                match receive {
                    Some(view) if view.transports.len() > MAX_VIEW_LANES => Err(OutOfBounds::Value(format!(
                        "{} transports in the receive view (limit {MAX_VIEW_LANES})",
                        view.transports.len()
                    ))),
                    Some(view) => check_len("receive protocol", &view.protocol, MAX_TEXT),
                    None => Ok(()),
                }
            }
            Message::Error { message } => check_len("error message", message, MAX_TEXT),
            Message::PhaseReady | Message::PhaseEnd | Message::PhaseDone | Message::Finish | Message::Bye => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "messages_tests.rs"]
mod tests;
