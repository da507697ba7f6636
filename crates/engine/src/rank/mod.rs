//! One TP rank of `pair --kv-shape` in the per-rank model on the UCX engine (`ic-bench kv-rank`
//! with a plan for `ucx`): the counterpart of the NIXL engine's rank, for where NIXL is absent.
//! This process owns its rank's whole KV buffer, registered with UCX once (`ucp_mem_map`, its
//! rkey packed once), and exchanges blocks with every peer rank at once: an initiator connects
//! one endpoint per peer and, per repetition, issues every peer's block list as one RMA
//! operation per block (`ucp_get_nbx` for READ, decode pulling; `ucp_put_nbx` for WRITE,
//! prefill pushing) and one flush per endpoint — the engine's `--blocks` machinery, as NIXL's
//! UCX backend moves a descriptor list — then polls them all. A target progresses its worker
//! (software transports serve one-sided operations through it). The coordinator drives it over
//! [`icb_core::protocol::kv_rank`] exactly as it drives a NIXL rank; the `metadata` of the
//! hello is this engine's [`RankAddress`].
//!
//! Blocking and single-threaded (UCX objects are not `Send`); the coordinator's connection is
//! [`Link`]. Every wait has the plan's message deadline.

mod address;
pub mod affinity;
mod error;
mod link;

pub use address::RankAddress;
pub use error::{LinkError, RankError};
pub use link::Link;

use crate::options::UcxOptions;
use icb_core::protocol::kv_rank::{PeerAddress, RankDown, RankPlan, RankSide, RankUp, hex, unhex};
use icb_core::{KvLayout, Lane, MemoryPair, MemoryType, PeerInfo};
use icb_memory::{Buffer, MemoryKind, Moved};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use ucx::{Endpoint, ErrorMode, MemMap, Op, OpOptions, RemoteKey, Rma, Worker};

/// Progress calls between two reads of the clock.
const CHECK_EVERY: u32 = 64;

/// Runs one rank to the end. `Err` is one line; the coordinator was told it when connected.
pub fn kv_rank(plan: &RankPlan, opts: &UcxOptions) -> Result<(), RankError> {
    affinity::place(plan)?;
    let lib = ucx::Ucx::load(opts.library_dir.as_deref()).map_err(RankError::engine)?;
    let ctx = crate::runtime::build_context(&lib, opts).map_err(RankError::engine)?;
    let worker = ctx.worker().map_err(RankError::engine)?;
    let mut link = Link::connect(plan)?;
    let local = LocalFacts {
        ucx_version: lib.version_string().to_string(),
        ucx_library: lib.library_dir().display().to_string(),
        mode: match opts.peer_failure {
            crate::options::PeerFailureMode::ControlChannel => ErrorMode::None,
            crate::options::PeerFailureMode::UcxPeer => ErrorMode::Peer,
        },
        cuda_device: opts.cuda_device,
    };
    let result = run(plan, &ctx, &worker, &local, &mut link);
    if let Err(e) = &result {
        link.send(&RankUp::Failed { message: e.to_string() });
    }
    result
}

struct LocalFacts {
    ucx_version: String,
    ucx_library: String,
    mode: ErrorMode,
    cuda_device: usize,
}

fn mem_kind(t: MemoryType) -> MemoryKind {
    match t {
        MemoryType::Host => MemoryKind::Host,
        MemoryType::Cuda => MemoryKind::Cuda,
    }
}

/// The rank's buffer and its registration. Operations hold the registration (`Rc<MemMap>`, so
/// UCX uses it instead of looking the buffer up); the buffer is read back only once the map was
/// unmapped and every operation released ([`Owned::verify`]).
struct Owned {
    buffer: Rc<Buffer>,
    map: Option<Rc<MemMap>>,
}

/// One peer of an initiator: its endpoint, its rkey, where its buffer sits, and the ops of the
/// current repetition (reused, so a repetition allocates nothing once warm).
struct Peer {
    ep: Endpoint,
    rkey: RemoteKey,
    remote_addr: u64,
    layout: KvLayout,
    ops: Vec<Op>,
    flush: Option<Op>,
    /// How many of `ops` are known complete (they complete roughly in order).
    cursor: usize,
}

fn run(
    plan: &RankPlan,
    ctx: &ucx::Context,
    worker: &Worker,
    local: &LocalFacts,
    link: &mut Link,
) -> Result<(), RankError> {
    let _cuda = (plan.memory == MemoryType::Cuda).then(|| icb_memory::activate_cuda(local.cuda_device).ok());
    let (mut owned, hello) = register(plan, ctx, worker, local, link.proof.clone())?;
    link.send(&hello);
    let addrs = match link.recv("before the peers' addresses")? {
        RankDown::Peers { peers } => peers,
        other => return Err(unexpected(other, "instead of the peers' addresses")),
    };
    let mut peers = connect(plan, worker, local.mode, &addrs)?;
    link.send(&RankUp::Prepared);
    let mut info = None;
    loop {
        let msg = if plan.initiator {
            link.recv("between repetitions")?
        } else {
            link.recv_progressing("between repetitions", || {
                worker.progress();
                Ok(())
            })?
        };
        match msg {
            RankDown::Go { rep, first } if plan.initiator => {
                let map = owned
                    .map
                    .clone()
                    .ok_or_else(|| unexpected(RankDown::Go { rep, first }, "after the check"))?;
                let n = posted(first, peers.len())?;
                let done = repetition(plan, worker, &map, &mut peers[..n], rep, link.timeout, &mut info);
                drop(map);
                link.send(&done?);
            }
            RankDown::Go { .. } => {}
            RankDown::Verify => {
                let verified = owned.verify(plan, worker);
                link.send(&verified);
            }
            RankDown::Finish => break,
            m @ RankDown::Peers { .. } => return Err(unexpected(m, "a second time")),
            m @ RankDown::Challenge { .. } => return Err(unexpected(m, "mid-run")),
        }
    }
    let data_path = peers
        .first()
        .filter(|_| plan.initiator)
        .map(|p| data_path(plan, p, info.as_deref()));
    // Endpoints close (flushed, or forced with peer error handling) before the worker goes: the
    // coordinator finishes initiators first, so their targets still progress meanwhile.
    let deadline = Instant::now() + Duration::from_secs(2);
    for p in peers {
        let _ = p.ep.close(deadline);
    }
    link.send(&RankUp::Bye { data_path });
    Ok(())
}

/// The rank's buffer, filled with its pattern and registered once, and the hello that
/// publishes it (worker address, rkey, where the buffer sits, the CPUs the rank runs on).
fn register(
    plan: &RankPlan,
    ctx: &ucx::Context,
    worker: &Worker,
    local: &LocalFacts,
    proof: Option<String>,
) -> Result<(Owned, RankUp), RankError> {
    let len = usize::try_from(plan.buffer_bytes).map_err(|_| RankError::TooLarge("the rank's buffer"))?;
    let mut buffer =
        Buffer::with_mode(mem_kind(plan.memory), len, local.cuda_device, plan.cuda_alloc).map_err(RankError::engine)?;
    let cuda_alloc = buffer
        .cuda_allocation()
        .map(|(mode, legacy_ipc)| icb_core::CudaAllocation { mode, legacy_ipc });
    buffer.fill(plan.seed).map_err(RankError::engine)?;
    let buffer = Rc::new(buffer);
    let map = Rc::new(
        ctx.mem_map(&buffer)
            .map_err(|e| RankError::Engine(format!("registering the KV buffer: {e}")))?,
    );
    let address = RankAddress {
        worker: worker.address().map_err(RankError::engine)?,
        rkey: map.pack_rkey().map_err(RankError::engine)?,
    };
    let hello = RankUp::Hello {
        id: plan.id,
        pid: std::process::id(),
        peer: PeerInfo {
            hostname: crate::local::hostname(),
            ucx_version: local.ucx_version.clone(),
            ucx_library: local.ucx_library.clone(),
            cuda: crate::local::cuda_info(),
            env: crate::local::transport_env(),
            nixl: None,
        },
        metadata: hex(&address.encode()),
        buffer_addr: map.address(),
        proof,
        cpus: affinity::current(),
        cuda_alloc,
    };
    Ok((Owned { buffer, map: Some(map) }, hello))
}

/// An initiator's data path: its first endpoint's lanes and UCX's description of the first
/// block it issued, classified as the UCX engine's cases are.
fn data_path(plan: &RankPlan, peer: &Peer, info: Option<&str>) -> icb_core::TransportEvidence {
    let lanes: Vec<Lane> = peer
        .ep
        .transports()
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .map(|t| Lane {
            transport: t.transport,
            device: t.device,
        })
        .collect();
    let memory = MemoryPair {
        initiator: plan.memory,
        target: plan.peer_memory,
    };
    icb_core::classify::classify(info, &lanes, memory)
}

/// One endpoint and unpacked rkey per peer (an initiator's); a target only checks the list.
fn connect(plan: &RankPlan, worker: &Worker, mode: ErrorMode, addrs: &[PeerAddress]) -> Result<Vec<Peer>, RankError> {
    check_peers(plan, addrs)?;
    let mut peers = Vec::new();
    for (want, addr) in plan.peers.iter().zip(addrs) {
        let remote = unhex(&addr.metadata)
            .and_then(|bytes| RankAddress::decode(&bytes).map_err(|e| e.to_string()))
            .map_err(|reason| LinkError::BadField {
                what: format!("{}'s address", addr.id),
                reason,
            })?;
        if !plan.initiator {
            continue;
        }
        let peer_error = |what: &'static str| {
            move |e: ucx::Error| RankError::Peer {
                what,
                peer: addr.id,
                reason: e.to_string(),
            }
        };
        let ep = worker
            .connect(&remote.worker, mode)
            .map_err(peer_error("connecting to"))?;
        let rkey = ep.unpack_rkey(&remote.rkey).map_err(peer_error("the remote key of"))?;
        let count = usize::try_from(want.layout.count).map_err(|_| RankError::TooLarge("the block count"))?;
        peers.push(Peer {
            ep,
            rkey,
            remote_addr: addr.buffer_addr,
            layout: want.layout,
            ops: Vec::with_capacity(count),
            flush: None,
            cursor: 0,
        });
    }
    Ok(peers)
}

/// A coordinator message with no place here (`instead` says where it came).
pub fn unexpected(msg: RankDown, instead: &'static str) -> RankError {
    LinkError::Unexpected { got: msg, instead }.into()
}

/// How many of its `peers` requests a go posts (a burst's first ones, or all): both engines'
/// initiators ask here, and a go out of range is the coordinator's error, named.
pub fn posted(first: Option<u32>, peers: usize) -> Result<usize, LinkError> {
    icb_core::protocol::kv_rank::posted(first, peers).map_err(|reason| LinkError::BadField {
        what: "the burst size".into(),
        reason,
    })
}

/// The coordinator's address list against the plan's peers: one per peer, in the plan's order.
/// Both engines' ranks check it before connecting.
pub fn check_peers(plan: &RankPlan, addrs: &[PeerAddress]) -> Result<(), LinkError> {
    if addrs.len() != plan.peers.len() {
        return Err(LinkError::BadField {
            what: "the peers' addresses".into(),
            reason: format!("{} addresses for {} peers", addrs.len(), plan.peers.len()),
        });
    }
    match plan.peers.iter().zip(addrs).find(|(want, addr)| want.peer != addr.id) {
        Some((want, addr)) => Err(LinkError::BadField {
            what: format!("the address for {}", want.peer),
            reason: format!("the coordinator sent {}'s", addr.id),
        }),
        None => Ok(()),
    }
}

fn since_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Issues every peer's blocks and its flush, then progresses until the last peer's flush
/// completed. A peer is done when its flush and every one of its blocks completed. The first
/// block of the first repetition is queryable: UCX's protocol description is the data path's.
fn repetition(
    plan: &RankPlan,
    w: &Worker,
    map: &Rc<MemMap>,
    peers: &mut [Peer],
    rep: u64,
    limit: Duration,
    info: &mut Option<String>,
) -> Result<RankUp, RankError> {
    let rma = if plan.read { Rma::Get } else { Rma::Put };
    let start_unix_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let start = Instant::now();
    let deadline = start + limit;
    let mut post_ns = vec![0u64; peers.len()];
    let mut done_ns: Vec<Option<u64>> = vec![None; peers.len()];
    match issue(w, map, peers, rma, &mut post_ns, start, rep == 0) {
        Ok(Some(described)) => *info = Some(described),
        Ok(None) => {}
        Err(e) => {
            let _ = w.wait_all(Instant::now());
            return Err(RankError::Transfer {
                during: "posting repetition",
                rep,
                reason: e.to_string(),
            });
        }
    }
    let mut n = 0u32;
    while done_ns.iter().any(Option::is_none) {
        w.progress();
        for (p, done) in peers.iter_mut().zip(done_ns.iter_mut()).filter(|(_, d)| d.is_none()) {
            while p.cursor < p.ops.len() && w.is_done(p.ops[p.cursor]) {
                p.cursor += 1;
            }
            if p.cursor == p.ops.len() && p.flush.is_none_or(|f| w.is_done(f)) {
                *done = Some(since_ns(start));
            }
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(CHECK_EVERY) && Instant::now() > deadline {
            let _ = w.wait_all(Instant::now());
            return Err(RankError::Late { rep, limit });
        }
    }
    // Everything completed: release the requests, and fail on the first that completed in error.
    w.wait_all(deadline).map_err(|e| RankError::Transfer {
        during: "repetition",
        rep,
        reason: e.to_string(),
    })?;
    Ok(RankUp::Done {
        rep,
        start_unix_ns,
        post_ns,
        done_ns: done_ns.into_iter().flatten().collect(),
    })
}

/// Posts every peer's block list and flush; records each peer's post time. With `query`, the
/// first block is issued queryable and UCX's description of its protocol is returned.
#[allow(clippy::too_many_arguments)] // the repetition's whole context, kept out of the timed path
fn issue(
    w: &Worker,
    map: &Rc<MemMap>,
    peers: &mut [Peer],
    rma: Rma,
    post_ns: &mut [u64],
    start: Instant,
    query: bool,
) -> Result<Option<String>, ucx::Error> {
    let mut info = None;
    for (i, p) in peers.iter_mut().enumerate() {
        let t0 = since_ns(start);
        p.ops.clear();
        p.cursor = 0;
        let kv = p.layout;
        // In range: the coordinator's layout fits both buffers (`icb_kv` computed both), and
        // `Worker::rma` checks the local range anyway.
        let len = kv.len as usize;
        for b in 0..kv.count {
            let at = kv.initiator.at(b) as usize;
            let queried = query && i == 0 && b == 0;
            // A block list is a stream of operations in flight: NIXL's UCX backend posts its
            // reads and writes with UCP_OP_ATTR_FLAG_MULTI_SEND too (see OpOptions::STREAM).
            let opts = if queried {
                OpOptions::STREAM.queryable()
            } else {
                OpOptions::STREAM
            };
            let op = w.rma(
                rma,
                &p.ep,
                map,
                at..at + len,
                p.remote_addr + kv.target.at(b),
                &p.rkey,
                opts,
            )?;
            if queried {
                info = w.info_string(op).ok().flatten();
            }
            p.ops.push(op);
        }
        p.flush = Some(w.flush(&p.ep, OpOptions::default())?);
        post_ns[i] = since_ns(start) - t0;
    }
    Ok(info)
}

impl Owned {
    /// A decode rank is every block's destination (READ lands on it, WRITE too): it checks each
    /// peer's blocks against that peer's pattern and every other byte against its own fill.
    /// Unmaps the buffer first (no peer reaches it any more: every repetition completed).
    fn verify(&mut self, plan: &RankPlan, worker: &Worker) -> RankUp {
        if plan.id.side != RankSide::Decode {
            return RankUp::Verified { blocks: 0, error: None };
        }
        let _ = worker.wait_all(Instant::now());
        if let Some(map) = self.map.take().and_then(|m| Rc::try_unwrap(m).ok()) {
            map.unmap_now();
        }
        let result = match Rc::get_mut(&mut self.buffer) {
            Some(buffer) => sources(plan).and_then(|s| Ok(buffer.verify_gathered(&s, plan.seed)?)),
            None => Err(RankError::Engine("the buffer is still held by UCX".into())),
        };
        verified(plan, result)
    }
}

/// A decode rank's answer to `verify`: the blocks checked, or why they are not intact.
pub fn verified(plan: &RankPlan, result: Result<u64, RankError>) -> RankUp {
    match result {
        Ok(blocks) => RankUp::Verified { blocks, error: None },
        Err(e) => RankUp::Verified {
            blocks: 0,
            error: Some(format!("KV blocks not delivered intact on {}: {e}", plan.id)),
        },
    }
}

/// Where each peer's blocks landed in this (destination) rank's buffer and came from (both
/// engines' decode ranks check their buffer against it).
pub fn sources(plan: &RankPlan) -> Result<Vec<(Moved, u64)>, RankError> {
    plan.peers
        .iter()
        .map(|p| {
            let moved = Moved::of_kv(&p.layout, plan.initiator).ok_or(RankError::TooLarge("the KV layout"))?;
            Ok((moved, p.source_seed))
        })
        .collect()
}
