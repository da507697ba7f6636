//! The NIXL side of one process: agent, UCX backend, the current case's buffer, registration and
//! request. Lives on one owner thread (`icb_engine::ucx_thread`): NIXL handles are not `Send`.

use crate::error::RuntimeError;
use crate::options::NixlOptions;
use hdrhistogram::Histogram;
use icb_core::{Direction, MemoryType, NixlInfo};
use icb_engine::messages::{CaseReady, CaseSetup, HexBytes};
use icb_engine::{EngineError, messages::MAX_MESSAGE_SIZE};
use icb_memory::{Buffer, MemoryKind};
use nixl::{Agent, Descriptor, MemKind, Nixl, Registration, Transfer, XferOp};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the control side needs to know about this process's NIXL.
#[derive(Debug, Clone)]
pub struct LocalNixl {
    /// The agent's metadata (connection info; registrations come later, per case).
    pub metadata: Vec<u8>,
    pub ucx_version: String,
    pub ucx_library: String,
    pub info: NixlInfo,
    /// The `UCX_PROTO_INFO` mode in force (`used`, `y`, or the user's own value).
    pub proto_info: String,
}

pub use crate::ucx_log::UcxLog;

/// Per-request completion times: the UCX engine's histogram (1 ns … 100 s, 3 digits).
pub use icb_engine::stats::rtt_histogram as latency_histogram;

/// The result of one timed phase on the initiator.
pub struct PhaseOutcome {
    pub iterations: u64,
    pub elapsed_s: f64,
    pub latency_ns: Histogram<u64>,
    /// Time spent inside the post call, over all requests.
    pub post_s: f64,
}

/// How long a phase may run and how to stop it early (abort from the control side).
#[derive(Clone)]
pub struct PhaseCtl {
    pub deadline: Instant,
    pub stop: Arc<AtomicBool>,
}

impl PhaseCtl {
    pub fn new(limit: Duration) -> Self {
        PhaseCtl {
            deadline: Instant::now() + limit,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// When a measured phase ends.
#[derive(Debug, Clone, Copy)]
pub struct PhaseGoal {
    pub min_iterations: u64,
    pub min_time_s: f64,
    pub max_time_s: f64,
}

struct Case {
    setup: CaseSetup,
    direction: Direction,
    /// Payload bytes of the whole case buffer (block × batch, or a KV rank's buffer).
    len: usize,
    // Drop order: the request, then the registration (which owns the memory).
    transfer: Option<Transfer>,
    memory: Registration,
    /// The GPU buffer's allocation (`None` for host memory).
    cuda_alloc: Option<icb_core::CudaAllocation>,
}

pub struct NixlRuntime {
    agent: Agent,
    /// What a fresh agent is made from ([`NixlRuntime::renew_agent`]).
    lib: Nixl,
    agent_name: String,
    backend_params: Vec<(String, String)>,
    remote: Option<String>,
    case: Option<Case>,
    /// GPU 0's context, held from the first case with VRAM on either side, as the UCX engine
    /// does (see [`icb_memory::CudaActive`]): a serving worker always holds one.
    cuda: std::cell::OnceCell<Option<icb_memory::CudaActive>>,
}

fn mem_kind(t: MemoryType) -> (MemoryKind, MemKind) {
    match t {
        MemoryType::Host => (MemoryKind::Host, MemKind::Dram),
        MemoryType::Cuda => (MemoryKind::Cuda, MemKind::Vram),
    }
}

/// The direction a case asks for (`get_bw` is READ, `put_bw` is WRITE).
pub fn direction_of(setup: &CaseSetup) -> Option<Direction> {
    match setup.test {
        icb_core::TestKind::GetBw => Some(Direction::Read),
        icb_core::TestKind::PutBw => Some(Direction::Write),
        _ => None,
    }
}

/// Block × batch, bounded like any other case buffer.
pub fn case_len(setup: &CaseSetup) -> Result<usize, RuntimeError> {
    setup
        .size
        .checked_mul(u64::from(setup.window))
        .filter(|&n| n > 0 && n <= MAX_MESSAGE_SIZE)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            RuntimeError::TooLarge(format!(
                "{} B × {} descriptors is outside 1 B … 16 GiB: use smaller sizes or batches",
                setup.size, setup.window
            ))
        })
}

/// Where the pattern of the case's payload starts: the data source gets `seed`, the destination
/// is pre-filled with its complement so stale bytes never verify.
fn fill_seed(is_source: bool, seed: u64) -> u64 {
    if is_source { seed } else { !seed }
}

impl NixlRuntime {
    /// Loads NIXL, creates the agent and its UCX backend. Runs on the owner thread.
    pub fn start(opts: &NixlOptions, agent_name: &str) -> Result<(NixlRuntime, LocalNixl), EngineError> {
        let lib = Nixl::load(opts.library_dir.as_deref()).map_err(|e| EngineError::Nixl(e.to_string()))?;
        let setup_err = |e: nixl::NixlError| EngineError::Nixl(e.to_string());
        let mut agent = lib.agent(agent_name).map_err(setup_err)?;
        let mut proto_info = std::env::var("UCX_PROTO_INFO").unwrap_or_default();
        let params = match agent.create_ucx_backend(&opts.backend_params) {
            Ok(p) => p,
            // UCX < 1.21 rejects `used` (its PROTO_INFO is a plain boolean): retry with `y`.
            Err(e) if proto_info == "used" => {
                nixl::set_env_before_start(&[("UCX_PROTO_INFO".into(), "y".into())]);
                proto_info = "y".into();
                agent = lib.agent(agent_name).map_err(setup_err)?;
                agent
                    .create_ucx_backend(&opts.backend_params)
                    .map_err(|e2| EngineError::Nixl(format!("{e2} (first attempt: {e})")))?
            }
            Err(e) => return Err(setup_err(e)),
        };
        let ucx = nixl::loaded_ucx();
        if ucx.len() > 1 {
            let list: Vec<String> = ucx.iter().map(|p| p.display().to_string()).collect();
            return Err(EngineError::Nixl(format!(
                "two UCX copies are loaded in this process ({}); NIXL must be the only UCX user: run the NIXL engine in its own process",
                list.join(", ")
            )));
        }
        let ucx_library = ucx.first().map(|p| p.display().to_string()).unwrap_or_default();
        let ucx_version = ucx
            .first()
            .and_then(|p| nixl::ucx_version_of(p))
            .unwrap_or_else(|| "unknown".into());
        let metadata = agent.local_metadata().map_err(setup_err)?;
        let info = NixlInfo {
            version: lib.version().unwrap_or_default().to_string(),
            library: lib.library().display().to_string(),
            backend: "UCX".into(),
            backend_params: params.into_iter().collect(),
        };
        let local = LocalNixl {
            metadata,
            ucx_version,
            ucx_library,
            info,
            proto_info,
        };
        Ok((
            NixlRuntime {
                agent,
                lib,
                agent_name: agent_name.to_string(),
                backend_params: opts.backend_params.clone(),
                remote: None,
                case: None,
                cuda: std::cell::OnceCell::new(),
            },
            local,
        ))
    }

    /// The agent, for a caller that drives its own requests (a KV rank, `crate::rank`).
    pub(crate) fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Loads the peer's metadata (again, after it registered memory); returns its agent name.
    pub fn load_peer(&mut self, md: &[u8]) -> Result<String, RuntimeError> {
        let name = self.agent.load_remote_metadata(md)?;
        if let Some(old) = &self.remote
            && *old != name
        {
            return Err(RuntimeError::PeerChanged {
                was: old.clone(),
                now: name,
            });
        }
        self.remote = Some(name.clone());
        Ok(name)
    }

    /// A fresh agent and UCX backend for the next client (`serve`), the old one destroyed;
    /// returns the new agent's metadata. Why not keep the agent and invalidate the peer: NIXL
    /// 1.5.1 then keeps what the agent built for that peer, and the agent keeps the memory of
    /// every registration it exported (see `nixl::Agent::register`) until it is destroyed, so
    /// a long-running `serve` grew by what each client registered (18 MiB per client of 17 MiB
    /// case buffers: 3.7 GiB after 200, BENCHMARKS.md). The UCX engine renews its worker per
    /// client for the same reason.
    pub fn renew_agent(&mut self) -> Result<Vec<u8>, RuntimeError> {
        self.case = None;
        self.remote = None;
        let mut agent = self.lib.agent(&self.agent_name)?;
        agent.create_ucx_backend(&self.backend_params)?;
        let metadata = agent.local_metadata()?;
        // The old agent (its backend, UCX context and kept buffers) goes here.
        self.agent = agent;
        Ok(metadata)
    }

    /// Makes GPU 0's context current on this thread for a case with GPU memory on either side, and
    /// keeps it for the process's life. Best effort: a host-memory side without a GPU measures
    /// what such a machine can. It must be current before the peer's metadata is loaded, not
    /// only before this side allocates: UCX unpacks the peer's remote keys there, and its
    /// cuda_ipc transport maps the peer's GPU memory only where a primary context is already
    /// active (it does not create one: `uct_cuda_ctx_primary_push_avail` with
    /// `retain_inactive = 0`). Loaded before, the key had no cuda_ipc part and every WRITE into
    /// it was emulated over TCP: measured on an H200, the first GPU case of each process read
    /// 0.09 GB/s (`to cuda` in UCX's tables), the same case later in the run 48 GB/s over
    /// cuda_ipc (`to cuda/dev[1]`).
    fn hold_cuda_for(&self, setup: &CaseSetup) {
        if setup.memory.initiator == MemoryType::Cuda || setup.memory.target == MemoryType::Cuda {
            self.cuda.get_or_init(|| icb_memory::activate_cuda(0).ok());
        }
    }

    fn alloc_registered(
        &self,
        memory: MemoryType,
        setup: &CaseSetup,
        is_source: bool,
        kv_side: Option<icb_core::KvSide>,
    ) -> Result<Case, RuntimeError> {
        let direction = direction_of(setup).ok_or(RuntimeError::Unsupported(
            "the NIXL engine runs get_bw (READ) and put_bw (WRITE) only",
        ))?;
        let len = match kv_side {
            Some(side) => usize::try_from(side.buffer_bytes)
                .map_err(|_| RuntimeError::TooLarge("KV buffer does not fit this platform".into()))?,
            None => case_len(setup)?,
        };
        self.hold_cuda_for(setup);
        let mut buffer = Buffer::with_mode(mem_kind(memory).0, len, 0, setup.cuda_alloc)?;
        let cuda_alloc = buffer
            .cuda_allocation()
            .map(|(mode, legacy_ipc)| icb_core::CudaAllocation { mode, legacy_ipc });
        buffer.fill(fill_seed(is_source, setup.seed))?;
        let memory = self.agent.register(buffer)?;
        Ok(Case {
            setup: *setup,
            direction,
            len,
            transfer: None,
            memory,
            cuda_alloc,
        })
    }

    /// Target side: allocates, fills (READ source) or pre-fills (WRITE destination), registers,
    /// and returns the buffer address and the metadata that now describes it.
    pub fn target_setup(&mut self, setup: CaseSetup) -> Result<CaseReady, RuntimeError> {
        self.case = None;
        let is_source = direction_of(&setup) == Some(Direction::Read);
        let case = self.alloc_registered(setup.memory.target, &setup, is_source, setup.kv.map(|k| k.target))?;
        let remote_addr = case.memory.addr();
        let cuda_alloc = case.cuda_alloc;
        self.case = Some(case);
        let md = self.agent.local_metadata()?;
        Ok(CaseReady {
            remote_addr,
            rkey: HexBytes(md),
            cuda_alloc,
            health: None,
        })
    }

    /// Target side: progresses the agent until told to stop (software transports need it).
    pub fn target_progress(&mut self, ctl: &PhaseCtl) -> Result<(), RuntimeError> {
        while !ctl.stopped() {
            self.agent.progress()?;
            if Instant::now() > ctl.deadline {
                return Err(RuntimeError::Deadline("the phase passed its deadline"));
            }
        }
        Ok(())
    }

    /// Either side: verifies the payload where it was the destination, releases the case.
    pub fn finish(&mut self, is_initiator: bool) -> Result<(), RuntimeError> {
        let Some(mut case) = self.case.take() else {
            return Ok(());
        };
        case.transfer = None;
        let destination = match case.direction {
            Direction::Read => is_initiator,
            Direction::Write => !is_initiator,
        };
        if !destination {
            return Ok(());
        }
        let seed = case.setup.seed;
        match case.setup.kv.map(|kv| moved(&kv, is_initiator)).transpose()? {
            Some(m) => case
                .memory
                .with_memory(|b| b.verify_moved(&m, seed, fill_seed(false, seed)))
                .map_err(|source| RuntimeError::NotIntact { kv: true, source }),
            None => case
                .memory
                .with_memory(|b| b.verify(case.len, seed))
                .map_err(|source| RuntimeError::NotIntact { kv: false, source }),
        }
    }

    /// Initiator side: local buffer, the target's metadata, and the prepared request; returns
    /// the local GPU buffer's allocation (`None` for host memory).
    pub fn initiator_setup(
        &mut self,
        setup: CaseSetup,
        ready: &CaseReady,
    ) -> Result<Option<icb_core::CudaAllocation>, RuntimeError> {
        self.case = None;
        self.hold_cuda_for(&setup);
        let remote = self.load_peer(&ready.rkey.0)?;
        let is_source = direction_of(&setup) == Some(Direction::Write);
        let mut case =
            self.alloc_registered(setup.memory.initiator, &setup, is_source, setup.kv.map(|k| k.initiator))?;
        let block = usize::try_from(setup.size)
            .map_err(|_| RuntimeError::TooLarge("block size does not fit this platform".into()))?;
        // A KV case posts its geometry's descriptors; any other case `window` contiguous blocks.
        let (count, local_side, remote_side) = match setup.kv {
            Some(kv) => (kv.count, kv.initiator, kv.target),
            None => {
                let side = icb_core::KvSide {
                    offset: 0,
                    stride: setup.size,
                    buffer_bytes: 0,
                };
                (u64::from(setup.window), side, side)
            }
        };
        let descs = |base: u64, side: icb_core::KvSide, dev_id: u64| -> Vec<Descriptor> {
            (0..count)
                .map(|i| Descriptor {
                    addr: base + side.at(i),
                    len: block,
                    dev_id,
                })
                .collect()
        };
        let op = match case.direction {
            Direction::Read => XferOp::Read,
            Direction::Write => XferOp::Write,
        };
        // The target allocated on its GPU 0 as well (device 0 on both sides).
        let transfer = self.agent.transfer(
            op,
            &case.memory,
            &descs(case.memory.addr(), local_side, case.memory.dev_id()),
            mem_kind(setup.memory.target).1,
            &descs(ready.remote_addr, remote_side, 0),
            &remote,
        )?;
        case.transfer = Some(transfer);
        let cuda_alloc = case.cuda_alloc;
        self.case = Some(case);
        Ok(cuda_alloc)
    }

    /// Initiator side: posts the request and waits for it, again and again, timing each one.
    pub fn initiator_phase(&mut self, goal: PhaseGoal, ctl: &PhaseCtl) -> Result<PhaseOutcome, RuntimeError> {
        let transfer = self
            .case
            .as_mut()
            .and_then(|c| c.transfer.as_mut())
            .ok_or(RuntimeError::NoRequest)?;
        let mut latency_ns = latency_histogram();
        let start = Instant::now();
        let mut iterations = 0u64;
        let mut post_s = 0.0f64;
        loop {
            let elapsed = start.elapsed().as_secs_f64();
            let enough = iterations >= goal.min_iterations && elapsed >= goal.min_time_s;
            if enough || (iterations > 0 && elapsed >= goal.max_time_s) {
                break;
            }
            let t0 = Instant::now();
            let mut done = transfer.post()?;
            post_s += t0.elapsed().as_secs_f64();
            while !done {
                if ctl.stopped() {
                    return Err(RuntimeError::Stopped);
                }
                if Instant::now() > ctl.deadline {
                    return Err(RuntimeError::Deadline(
                        "a request did not complete before the phase deadline",
                    ));
                }
                done = transfer.poll()?;
            }
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
            let _ = latency_ns.record(ns.min(latency_ns.high()));
            iterations += 1;
        }
        Ok(PhaseOutcome {
            iterations,
            elapsed_s: start.elapsed().as_secs_f64(),
            latency_ns,
            post_s,
        })
    }
}

/// Where a KV case's blocks land on this side and where they came from.
fn moved(kv: &icb_core::KvLayout, is_initiator: bool) -> Result<icb_memory::Moved, RuntimeError> {
    // READ lands on the initiator, WRITE on the target; `finish` calls this on the destination.
    icb_memory::Moved::of_kv(kv, is_initiator)
        .ok_or_else(|| RuntimeError::TooLarge("KV layout does not fit this platform".into()))
}

/// The agent's name for this process and role (`icb-decode-<pid>` / `icb-prefill-<pid>`, with the
/// host name, since two processes on two hosts can have the same pid).
pub fn agent_name(role: &str) -> String {
    format!("icb-{role}-{}-{}", icb_engine::local::hostname(), std::process::id())
}
