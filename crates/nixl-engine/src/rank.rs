//! One TP rank of `pair --kv-shape` in the per-rank model (`ic-bench kv-rank`): this process
//! owns its rank's whole KV buffer, registered with NIXL once, and exchanges blocks with every
//! peer rank at once — an initiator posts one prepared request per peer (a decode rank reading
//! from every prefill rank that holds its heads, or a prefill rank writing to every decode rank
//! that needs them) and polls them all; a target progresses its agent. The coordinator (the
//! parent, `icb_pair::kv`) drives it over the line protocol of
//! [`icb_core::protocol::kv_rank`]: hello, peers, synchronised repetitions, verify, finish.
//!
//! Blocking and single-threaded on NIXL's side (its handles are not `Send`); the coordinator's
//! connection is the engines' shared [`icb_engine::rank::Link`]. Every wait has the plan's
//! message deadline.

use crate::evidence;
use crate::options::NixlOptions;
use crate::runtime::{LocalNixl, NixlRuntime, UcxLog, agent_name};
use icb_core::protocol::kv_rank::{PeerAddress, RankDown, RankPlan, RankSide, RankUp, hex, unhex};
use icb_core::{Direction, MemoryPair, MemoryType, PeerInfo};
use icb_engine::rank::{Link, LinkError, RankError, unexpected};
use icb_memory::{Buffer, MemoryKind};
use nixl::{Descriptor, MemKind, Registration, Transfer, XferOp};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Runs one rank to the end. `Err` is one line; the coordinator was told it when connected.
pub fn kv_rank(plan: &RankPlan, nixl: &NixlOptions) -> Result<(), RankError> {
    icb_engine::rank::affinity::place(plan)?;
    // NIXL's UCX reads its settings from the environment: the plan's (the TCP control's
    // `TLS=tcp`) go there before NIXL starts, over the user's own, as `connect` does.
    let forced: Vec<(String, String)> = plan
        .ucx_config
        .iter()
        .map(|(k, v)| (format!("UCX_{k}"), v.clone()))
        .collect();
    nixl::set_env_before_start(&forced);
    let log = UcxLog::prepare().map_err(RankError::engine)?;
    let name = agent_name(&format!("{}{}", plan.id.side, plan.id.rank));
    let (rt, local) = NixlRuntime::start(nixl, &name).map_err(RankError::engine)?;
    let mut link = Link::connect(plan)?;
    let result = run(plan, rt, &local, &log, &mut link);
    if let Err(e) = &result {
        link.send(&RankUp::Failed { message: e.to_string() });
    }
    result
}

fn mem_kinds(t: MemoryType) -> (MemoryKind, MemKind) {
    match t {
        MemoryType::Host => (MemoryKind::Host, MemKind::Dram),
        MemoryType::Cuda => (MemoryKind::Cuda, MemKind::Vram),
    }
}

fn run(plan: &RankPlan, rt: NixlRuntime, local: &LocalNixl, log: &UcxLog, link: &mut Link) -> Result<(), RankError> {
    let _cuda = (plan.memory == MemoryType::Cuda).then(|| icb_memory::activate_cuda(0).ok());
    let len = usize::try_from(plan.buffer_bytes).map_err(|_| RankError::TooLarge("the rank's buffer"))?;
    let mut buffer = Buffer::with_mode(mem_kinds(plan.memory).0, len, 0, plan.cuda_alloc).map_err(RankError::engine)?;
    let cuda_alloc = buffer
        .cuda_allocation()
        .map(|(mode, legacy_ipc)| icb_core::CudaAllocation { mode, legacy_ipc });
    buffer.fill(plan.seed).map_err(RankError::engine)?;
    let memory = rt.agent().register(buffer).map_err(RankError::engine)?;
    let metadata = rt.agent().local_metadata().map_err(RankError::engine)?;
    link.send(&RankUp::Hello {
        id: plan.id,
        pid: std::process::id(),
        peer: PeerInfo {
            hostname: icb_engine::local::hostname(),
            ucx_version: local.ucx_version.clone(),
            ucx_library: local.ucx_library.clone(),
            cuda: icb_engine::local::cuda_info(),
            env: icb_engine::local::transport_env(),
            nixl: Some(local.info.clone()),
        },
        metadata: hex(&metadata),
        buffer_addr: memory.addr(),
        proof: link.proof.clone(),
        cpus: icb_engine::rank::affinity::current(),
        cuda_alloc,
    });
    let peers = match link.recv("before the peers' addresses")? {
        RankDown::Peers { peers } => peers,
        other => return Err(unexpected(other, "instead of the peers' addresses")),
    };
    let mut transfers = prepare(plan, &rt, &memory, &peers)?;
    link.send(&RankUp::Prepared);
    let mut repetitions = 0u64;
    loop {
        let msg = if plan.initiator {
            link.recv("between repetitions")?
        } else {
            link.recv_progressing("between repetitions", || {
                rt.agent().progress().map_err(RankError::engine)
            })?
        };
        match msg {
            RankDown::Go { rep, first } if plan.initiator => {
                let n = icb_engine::rank::posted(first, transfers.len())?;
                let done = repetition(&mut transfers[..n], rep, link.timeout)?;
                link.send(&done);
                repetitions += 1;
            }
            RankDown::Go { .. } => repetitions += 1,
            RankDown::Verify => {
                let verified = verify(plan, &memory);
                link.send(&verified);
            }
            RankDown::Finish => break,
            m @ RankDown::Peers { .. } => return Err(unexpected(m, "a second time")),
            m @ RankDown::Challenge { .. } => return Err(unexpected(m, "mid-run")),
        }
    }
    tracing::debug!("{}: {repetitions} repetitions", plan.id);
    // Destroying the agent (its UCX worker) is what makes UCX print the `used` tables.
    drop(transfers);
    drop(memory);
    drop(rt);
    let data_path = plan.initiator.then(|| attribute(plan, log)).flatten();
    link.send(&RankUp::Bye { data_path });
    Ok(())
}

/// One request per peer, each over the peer's descriptors as both buffers lay them out.
fn prepare(
    plan: &RankPlan,
    rt: &NixlRuntime,
    memory: &Registration,
    peers: &[PeerAddress],
) -> Result<Vec<Transfer>, RankError> {
    icb_engine::rank::check_peers(plan, peers)?;
    let mut transfers = Vec::new();
    for (want, addr) in plan.peers.iter().zip(peers) {
        let metadata = unhex(&addr.metadata).map_err(|reason| LinkError::BadField {
            what: format!("{}'s metadata", addr.id),
            reason,
        })?;
        let peer_error = |what: &'static str| {
            move |e: nixl::NixlError| RankError::Peer {
                what,
                peer: addr.id,
                reason: e.to_string(),
            }
        };
        let remote = rt
            .agent()
            .load_remote_metadata(&metadata)
            .map_err(peer_error("loading the metadata of"))?;
        if !plan.initiator {
            continue;
        }
        let kv = want.layout;
        let block = usize::try_from(kv.len).map_err(|_| RankError::TooLarge("the block size"))?;
        let descs = |base: u64, side: icb_core::KvSide, dev_id: u64| -> Vec<Descriptor> {
            (0..kv.count)
                .map(|i| Descriptor {
                    addr: base + side.at(i),
                    len: block,
                    dev_id,
                })
                .collect()
        };
        let op = if plan.read { XferOp::Read } else { XferOp::Write };
        let transfer = rt
            .agent()
            .transfer(
                op,
                memory,
                &descs(memory.addr(), kv.initiator, memory.dev_id()),
                mem_kinds(plan.peer_memory).1,
                &descs(addr.buffer_addr, kv.target, 0),
                &remote,
            )
            .map_err(peer_error("the request to"))?;
        transfers.push(transfer);
    }
    Ok(transfers)
}

fn failed(during: &'static str, rep: u64, e: nixl::NixlError) -> RankError {
    RankError::Transfer {
        during,
        rep,
        reason: e.to_string(),
    }
}

fn since_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Posts every peer's request, then polls them all until the last one completes.
fn repetition(transfers: &mut [Transfer], rep: u64, limit: Duration) -> Result<RankUp, RankError> {
    let start_unix_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let start = Instant::now();
    let mut post_ns = vec![0u64; transfers.len()];
    let mut done_ns: Vec<Option<u64>> = vec![None; transfers.len()];
    for (i, t) in transfers.iter_mut().enumerate() {
        let t0 = since_ns(start);
        let done = t.post().map_err(|e| failed("posting repetition", rep, e))?;
        let now = since_ns(start);
        post_ns[i] = now - t0;
        if done {
            done_ns[i] = Some(now);
        }
    }
    while done_ns.iter().any(Option::is_none) {
        for (i, t) in transfers.iter_mut().enumerate() {
            if done_ns[i].is_none() && t.poll().map_err(|e| failed("repetition", rep, e))? {
                done_ns[i] = Some(since_ns(start));
            }
        }
        if start.elapsed() > limit {
            return Err(RankError::Late { rep, limit });
        }
    }
    Ok(RankUp::Done {
        rep,
        start_unix_ns,
        post_ns,
        done_ns: done_ns.into_iter().flatten().collect(),
    })
}

/// A decode rank is every block's destination (READ lands on it, WRITE too): it checks each
/// peer's blocks against that peer's pattern and every other byte against its own fill.
fn verify(plan: &RankPlan, memory: &Registration) -> RankUp {
    if plan.id.side != RankSide::Decode {
        return RankUp::Verified { blocks: 0, error: None };
    }
    let result =
        icb_engine::rank::sources(plan).and_then(|s| Ok(memory.with_memory(|b| b.verify_gathered(&s, plan.seed))?));
    icb_engine::rank::verified(plan, result)
}

/// The data path of this rank's requests, from UCX's protocol tables.
fn attribute(plan: &RankPlan, log: &UcxLog) -> Option<icb_core::TransportEvidence> {
    let size = plan.peers.first()?.layout.len;
    // An unreadable log leaves the path unknown, which the verdict reports as inconclusive.
    let tables = evidence::parse(&log.read().unwrap_or_default());
    let direction = if plan.read { Direction::Read } else { Direction::Write };
    let memory = MemoryPair {
        initiator: plan.memory,
        target: plan.peer_memory,
    };
    Some(
        evidence::attribute(&tables, direction, memory, size)
            .unwrap_or_else(|| icb_core::classify::classify(None, &[], memory)),
    )
}
