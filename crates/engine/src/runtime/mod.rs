//! What lives on the UCX thread: the context, worker and endpoint, the current case's buffers,
//! and the measurement loops.
//!
//! The loops follow ucx_perftest's `run_stream_uni` and `run_pingpong` (src/tools/perf/lib/
//! ucp_tests.cc): a window of outstanding operations on one buffer, receives pre-posted by the
//! target, an acknowledgement (tag) or flush (RMA) closing the timed region, one-sided targets
//! progressing their worker meanwhile. Inside a timed loop there is no allocation (the wrapper's
//! request slots are reused, the op ring is preallocated), no logging and no channel traffic;
//! the abort flag and the clock are read only every few dozen progress calls.

use crate::buffers::{Buf, other_seed, with_region};
use crate::error::EngineError;
use crate::messages::{CaseReady, CaseSetup, HexBytes, PhaseKind};
use crate::options::{PeerFailureMode, UcxOptions};
use crate::run_error::RunError;
use crate::stats;
use hdrhistogram::Histogram;
use icb_core::{Lane, TestKind};
use icb_memory::BlockLayout;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use ucx::{Endpoint, ErrorMode, Op, OpOptions, Registered, RemoteKey, Rma, Worker};

mod kv;
mod ops;
mod phase;
mod target;
mod views;

use kv::{kv_offsets, moved};
use ops::*;
pub use phase::{PhaseCtl, PhaseOutcome};

const TAG_DATA: u64 = 0x1cb0_0000_0000_0001;
const TAG_PING: u64 = 0x1cb0_0000_0000_0002;
const TAG_PONG: u64 = 0x1cb0_0000_0000_0003;
const TAG_ACK: u64 = 0x1cb0_0000_0000_0004;
const TAG_MASK: u64 = u64::MAX;
/// Why a case in benchmark-only mode reports no verification.
const UNTOUCHED: &str = "not verified: untouched buffers (benchmark-only mode)";
/// Progress calls between two reads of the clock and the abort flag.
const CHECK_EVERY: u32 = 64;

/// What the control side learns about the local UCX when the thread starts.
#[derive(Debug, Clone)]
pub struct LocalUcx {
    pub version: String,
    pub library: String,
    pub address: Vec<u8>,
}

struct Case {
    setup: CaseSetup,
    /// Initiator: the source (tag, put, ping) or destination (get). Target: the destination (tag,
    /// put, ping) or source (get).
    buf: Buf,
    /// Where the case's block(s) sit in `buf` (and in the peer's buffer, at the same offsets).
    layout: BlockLayout,
    /// Initiator of tag_lat: where pongs land.
    pong: Option<Buf>,
    /// `buf` registered with UCX (`ucp_mem_map`) where UCX can ([`Registered`]); every
    /// operation runs on it, passing the registration. ucx_perftest registers its buffers and NIXL its KV memory, so UCX's copy
    /// transports may pin them: cuda_copy moves registered host memory ~4× faster to and from a
    /// GPU than pageable memory (H200, BENCHMARKS.md). Target of RMA: what the rkey refers to.
    reg: Option<Rc<Registered>>,
    /// `pong` registered likewise.
    pong_reg: Option<Rc<Registered>>,
    rkey: Option<RemoteKey>,
    remote_addr: u64,
}

impl Case {
    /// The case's buffer as operations use it (registered where UCX could).
    fn registered(&self) -> Result<&Rc<Registered>, RunError> {
        self.reg
            .as_ref()
            .ok_or(RunError::Internal("the case's buffer is not registered"))
    }

    /// Drops the registrations, so the buffers can be read again. Called once no operation is
    /// in flight; for the target of RMA, after the peer's Finish (it flushed before sending it),
    /// so nothing can still reach the memory through the rkey.
    fn unregister(&mut self) {
        for reg in [self.reg.take(), self.pong_reg.take()].into_iter().flatten() {
            match Rc::try_unwrap(reg) {
                Ok(map) => map.unmap_now(),
                // Still held (an operation was not released): ucx::MemMap keeps what it must.
                Err(shared) => drop(shared),
            }
        }
    }
}

pub struct Runtime {
    _ctx: ucx::Context,
    worker: Worker,
    ep: Option<Endpoint>,
    mode: ErrorMode,
    case: Option<Case>,
    /// 8-byte host buffer for acknowledgements.
    ack: Buf,
    /// Preallocated ring of in-flight operations (grown outside timed loops only).
    ring: Vec<Option<Op>>,
    /// CUDA device ordinal for this side's CUDA buffers ([`UcxOptions::cuda_device`]).
    cuda_device: usize,
    /// That GPU's context, held from the first case with GPU memory on either side: a side with
    /// host memory needs it too, to stage through GPU memory as a serving worker does (see
    /// [`icb_memory::CudaActive`]).
    cuda: Option<icb_memory::CudaActive>,
}

/// Creates the UCX context with `--ucx-config` settings (fatal when rejected) under the profile's
/// defaults (dropped one by one when the loaded UCX rejects them, as NIXL itself does).
pub(crate) fn build_context(lib: &ucx::Ucx, opts: &UcxOptions) -> Result<ucx::Context, EngineError> {
    let v = lib.version();
    let mut profile = match opts.profile {
        crate::options::UcxProfile::Default => Vec::new(),
        crate::options::UcxProfile::Nixl => {
            crate::options::nixl_ucx_defaults((v.major, v.minor), &opts.config, |k| std::env::var_os(k).is_some())
        }
    };
    profile.extend(rendezvous_tables_setting(&opts.config, |k| {
        std::env::var_os(k).is_some()
    }));
    loop {
        let mut builder = lib.context();
        for (k, v) in profile.iter().chain(&opts.config) {
            builder = builder.config(k, v);
        }
        match builder.build() {
            Ok(ctx) => return Ok(ctx),
            Err(ucx::Error::Config { key, .. }) if profile.iter().any(|(k, _)| *k == key) => {
                profile.retain(|(k, _)| *k != key);
            }
            Err(ucx::Error::Config { key, value, text }) => {
                let variable = Some(format!("UCX_{key}={value}"));
                let detail = ucx::Error::Config { key, value, text }.to_string();
                return Err(EngineError::UcxInit { detail, variable });
            }
            Err(e) => return Err(init_error(e)),
        }
    }
}

/// `PROTO_INFO` set to the rendezvous data tables only (the receiver's "rendezvous data fetch",
/// the sender's "rendezvous data send"), unless the user chose a `PROTO_INFO` (environment or
/// `--ucx-config`): `ucp_worker_print_info` then prints them on demand ([`Runtime::receive_view`],
/// [`Runtime::send_view`]). UCX makes a receiver's fetch selection as an internal one, which it
/// never traces to its log; a sender's data send selection it does trace, once per endpoint
/// configuration, when a receiver first has it send (a put scheme, tcp): a few table lines in
/// UCX's log (stderr on 1.22), which a parent skips as lines that are not ours (measured on 1.22;
/// with `y` every endpoint's tag tables would go to UCX's log). Dropped like a profile default where the
/// loaded UCX has no such setting.
fn rendezvous_tables_setting(config: &[(String, String)], env_has: impl Fn(&str) -> bool) -> Option<(String, String)> {
    let chosen = config.iter().any(|(k, _)| k.eq_ignore_ascii_case("PROTO_INFO")) || env_has("UCX_PROTO_INFO");
    (!chosen).then(|| ("PROTO_INFO".to_string(), RENDEZVOUS_TABLES.to_string()))
}

/// UCX's glob for the tables [`Runtime::receive_view`] and [`Runtime::send_view`] read: UCX
/// matches it against a table's operation title (`rendezvous data fetch(multi) into host memory
/// from host`, `rendezvous data send(multi) from host memory to host`).
const RENDEZVOUS_TABLES: &str = "*rendezvous data *";

impl Runtime {
    /// Loads UCX, creates the context and worker. Runs on the UCX thread.
    pub fn start(opts: &UcxOptions) -> Result<(Runtime, LocalUcx), EngineError> {
        let lib = ucx::Ucx::load(opts.library_dir.as_deref()).map_err(|e| EngineError::UcxNotFound(e.to_string()))?;
        let ctx = build_context(&lib, opts)?;
        let worker = ctx.worker().map_err(init_error)?;
        let address = worker.address().map_err(|e| EngineError::UcxSetup(e.to_string()))?;
        let ack = Buf::alloc(icb_core::MemoryType::Host, 8, 0, Default::default())
            .map_err(|e| EngineError::UcxSetup(e.to_string()))?;
        let local = LocalUcx {
            version: lib.version_string().to_string(),
            library: lib.library_dir().display().to_string(),
            address,
        };
        let mode = match opts.peer_failure {
            PeerFailureMode::ControlChannel => ErrorMode::None,
            PeerFailureMode::UcxPeer => ErrorMode::Peer,
        };
        Ok((
            Runtime {
                _ctx: ctx,
                worker,
                ep: None,
                mode,
                case: None,
                ack,
                ring: Vec::new(),
                cuda_device: opts.cuda_device,
                cuda: None,
            },
            local,
        ))
    }

    pub fn connect_peer(&mut self, address: &[u8], peer_errors: bool) -> Result<(), RunError> {
        self.reset();
        let mode = if peer_errors { ErrorMode::Peer } else { self.mode };
        self.ep = Some(self.worker.connect(address, mode)?);
        Ok(())
    }

    /// Replaces the worker with a fresh one and returns its address: the only way to drop what
    /// UCX created for a finished peer on its own (the reply endpoint a rendezvous or multi-
    /// fragment tag transfer makes, with the peer's shared-memory segments attached), which
    /// otherwise stays until the worker goes and grows a long-running server per client.
    pub fn renew_worker(&mut self) -> Result<Vec<u8>, RunError> {
        self.reset();
        self.ring.clear();
        let fresh = self._ctx.worker()?;
        let address = fresh.address()?;
        // The old worker (and every endpoint UCX kept in it) is destroyed here.
        self.worker = fresh;
        Ok(address)
    }

    /// Cancels whatever is in flight and forgets the endpoint and the case, in that order: the
    /// close flushes what the endpoint still owes the peer (software GET replies are packed from
    /// the case's memory) while the case still holds it. The other order is safe too, since
    /// `ucx::MemMap` keeps exposed memory until the worker is destroyed; this one just does not
    /// lean on that.
    pub fn reset(&mut self) {
        self.drain_now();
        if let Some(ep) = self.ep.take() {
            let _ = ep.close(Instant::now() + std::time::Duration::from_secs(1));
        }
        self.case = None;
    }

    /// Cancels every pending operation (after an abort or a failure) so buffers can be reused.
    fn drain_now(&mut self) {
        if self.worker.pending() > 0 {
            let _ = self.worker.wait_all(Instant::now());
        }
        self.ring.iter_mut().for_each(|s| *s = None);
    }

    /// The endpoint's lanes; `None` when the loaded UCX cannot report them.
    pub fn lanes(&mut self) -> Option<Vec<Lane>> {
        let ep = self.ep.as_ref()?;
        let lanes = ep.transports().ok()??;
        Some(
            lanes
                .into_iter()
                .map(|t| Lane {
                    transport: t.transport,
                    device: t.device,
                })
                .collect(),
        )
    }

    fn ep(&self) -> Result<&Endpoint, RunError> {
        self.ep.as_ref().ok_or(RunError::NoEndpoint)
    }

    /// Makes this side's GPU context current for a case with GPU memory on either side. Best
    /// effort: a host-memory side on a machine without a GPU measures what such a machine can.
    fn hold_cuda_context(&mut self, memory: icb_core::MemoryPair) {
        let gpu_case = memory.initiator == icb_core::MemoryType::Cuda || memory.target == icb_core::MemoryType::Cuda;
        if gpu_case && self.cuda.is_none() {
            self.cuda = icb_memory::activate_cuda(self.cuda_device).ok();
        }
    }

    /// The case's buffer layout, checked against this machine's address space. A KV case's
    /// blocks sit at each side's own offsets ([`kv_offsets`]); its layout gives their size,
    /// count and this side's stride.
    fn layout(setup: &CaseSetup, initiator: bool) -> Result<BlockLayout, RunError> {
        let Some(kv) = setup.kv else {
            return setup.layout().ok_or(RunError::TooLarge(setup.size));
        };
        let side = if initiator { kv.initiator } else { kv.target };
        let n = |v: u64| usize::try_from(v).map_err(|_| RunError::TooLarge(v));
        Ok(BlockLayout {
            block: n(kv.len)?,
            stride: n(side.stride)?,
            count: n(kv.count)?,
        })
    }

    /// Bytes of this side's buffer: a KV rank's whole buffer, else the layout's span.
    fn span(setup: &CaseSetup, layout: BlockLayout, initiator: bool) -> Result<usize, RunError> {
        match setup.kv {
            Some(kv) => {
                let bytes = if initiator {
                    kv.initiator.buffer_bytes
                } else {
                    kv.target.buffer_bytes
                };
                usize::try_from(bytes).map_err(|_| RunError::TooLarge(bytes))
            }
            None => Ok(layout.span()),
        }
    }

    // ------------------------------------------------------------- initiator (client) side

    /// Prepares the initiator's buffers; returns how its GPU buffer was allocated (`None` for
    /// host memory).
    pub fn initiator_setup(
        &mut self,
        setup: CaseSetup,
        ready: &CaseReady,
    ) -> Result<Option<icb_core::CudaAllocation>, RunError> {
        self.drain_now();
        self.case = None;
        let layout = Self::layout(&setup, true)?;
        self.hold_cuda_context(setup.memory);
        let mut buf = Buf::alloc(
            setup.memory.initiator,
            Self::span(&setup, layout, true)?,
            self.cuda_device,
            setup.cuda_alloc,
        )?;
        if !setup.untouched {
            let seed = if setup.test == TestKind::GetBw {
                other_seed(setup.seed)
            } else {
                setup.seed
            };
            buf.fill(seed)?;
        }
        let allocation = buf.cuda_allocation();
        let pong = if setup.test == TestKind::TagLat {
            let mut p = Buf::alloc(
                setup.memory.initiator,
                layout.span(),
                self.cuda_device,
                setup.cuda_alloc,
            )?;
            if !setup.untouched {
                p.fill(other_seed(setup.seed))?;
            }
            Some(p)
        } else {
            None
        };
        let rkey = if setup.test.is_rma() {
            Some(self.ep()?.unpack_rkey(&ready.rkey.0).map_err(RunError::Rkey)?)
        } else {
            None
        };
        let reg = Some(Rc::new(buf.register(&self._ctx)));
        let pong_reg = pong.as_ref().map(|p| Rc::new(p.register(&self._ctx)));
        self.case = Some(Case {
            setup,
            layout,
            buf,
            pong,
            reg,
            pong_reg,
            rkey,
            remote_addr: ready.remote_addr,
        });
        Ok(allocation)
    }

    /// One phase of `iterations` operations (lists of blocks, for a KV-shaped case) with
    /// `window` outstanding.
    pub fn initiator_phase(
        &mut self,
        kind: PhaseKind,
        iterations: u64,
        window: u32,
        ctl: &PhaseCtl,
    ) -> Result<PhaseOutcome, RunError> {
        let r = self.initiator_phase_inner(kind, iterations, window, ctl);
        if r.is_err() {
            self.drain_now();
        }
        r
    }

    fn initiator_phase_inner(
        &mut self,
        kind: PhaseKind,
        n: u64,
        window: u32,
        ctl: &PhaseCtl,
    ) -> Result<PhaseOutcome, RunError> {
        let case = self.case.as_ref().ok_or(RunError::NoCase)?;
        let ep = self.ep.as_ref().ok_or(RunError::NoEndpoint)?;
        let w = &self.worker;
        let size = case.layout.block;
        let probe = kind == PhaseKind::Warmup;
        let timed = if probe { n - 1 } else { n };
        // A list of blocks is issued whole, then flushed: its blocks are the ops in flight.
        let window = if case.layout.count > 1 || case.setup.kv.is_some() {
            case.layout.count
        } else {
            window.max(1) as usize
        };
        ensure_ring(&mut self.ring, window);
        let ring = &mut self.ring[..window];
        let mut info = None;
        let mut probe_s = None;
        match case.setup.test {
            TestKind::TagBw => {
                let b = case.registered()?;
                let ack = post_ack_recv(w, &self.ack)?;
                if probe {
                    let p0 = Instant::now();
                    let op = w.tag_send(ep, b, 0..size, TAG_DATA, OpOptions::STREAM.queryable())?;
                    info = w.info_string(op).ok().flatten();
                    wait_op(w, op, ctl)?;
                    probe_s = Some(p0.elapsed().as_secs_f64());
                }
                // Checked once, posted `timed` times (see ucx::PreparedTag).
                let data = w.prepare_tag_send(ep, b, 0..size, TAG_DATA, OpOptions::STREAM)?;
                let t0 = Instant::now();
                let sent = w.stream(&data, timed, window, ctl.deadline(), || ctl.check(), || {})?;
                check_stream("send", sent, timed, size)?;
                wait_op(w, ack, ctl)?;
                Ok(PhaseOutcome {
                    elapsed_s: t0.elapsed().as_secs_f64(),
                    info,
                    rtt: None,
                    iterations: timed,
                    probe_s,
                })
            }
            TestKind::TagLat => {
                let pong = case.pong_reg.as_ref().ok_or(RunError::Internal("no pong buffer"))?;
                let hist = (kind == PhaseKind::Measure).then(stats::rtt_histogram);
                ping_pong(w, ep, case.registered()?, pong, size, n, probe, hist, ctl)
            }
            TestKind::PutBw | TestKind::GetBw => {
                let rkey = case.rkey.as_ref().ok_or(RunError::Internal("no rkey"))?;
                let addr = case.remote_addr;
                let rma = if case.setup.test == TestKind::PutBw {
                    Rma::Put
                } else {
                    Rma::Get
                };
                let layout = case.layout;
                let kv = case.setup.kv;
                let b = case.registered()?;
                {
                    let submit = |block: usize, opts: OpOptions| {
                        let (at, remote) = kv_offsets(kv.as_ref(), layout, block);
                        w.rma(rma, ep, b, at..at + size, addr + remote, rkey, opts)
                    };
                    if probe {
                        let p0 = Instant::now();
                        let op = submit(0, OpOptions::STREAM.queryable())?;
                        info = w.info_string(op).ok().flatten();
                        wait_op(w, op, ctl)?;
                        probe_s = Some(p0.elapsed().as_secs_f64());
                    }
                    if layout.count > 1 || kv.is_some() {
                        // KV-shaped: every operation is one list (all blocks, then one flush),
                        // timed on its own.
                        let mut hist = (kind == PhaseKind::Measure).then(stats::rtt_histogram);
                        let mut total = 0.0f64;
                        let mut lists = 0u64;
                        while lists < timed {
                            let t0 = Instant::now();
                            let mut next = 0usize;
                            run_window(
                                w,
                                ring,
                                layout.count as u64,
                                ctl,
                                || {
                                    let op = submit(next, OpOptions::STREAM)?;
                                    next += 1;
                                    Ok(op)
                                },
                                || {},
                                |_| Ok(()),
                            )?;
                            wait_op(w, w.flush(ep, OpOptions::default())?, ctl)?;
                            let now = Instant::now();
                            let took = now.duration_since(t0);
                            total += took.as_secs_f64();
                            lists += 1;
                            if let Some(h) = hist.as_mut() {
                                h.saturating_record(took.as_nanos() as u64);
                            }
                            if ctl.past_soft_deadline(now) {
                                break;
                            }
                        }
                        return Ok(PhaseOutcome {
                            elapsed_s: total,
                            info,
                            rtt: hist,
                            iterations: lists,
                            probe_s,
                        });
                    }
                    let t0 = Instant::now();
                    run_window(
                        w,
                        ring,
                        timed,
                        ctl,
                        || Ok(submit(0, OpOptions::STREAM)?),
                        || {},
                        |_| Ok(()),
                    )?;
                    let flush = w.flush(ep, OpOptions::default())?;
                    wait_op(w, flush, ctl)?;
                    Ok(PhaseOutcome {
                        elapsed_s: t0.elapsed().as_secs_f64(),
                        info,
                        rtt: None,
                        iterations: timed,
                        probe_s,
                    })
                }
            }
        }
    }

    /// Checks what landed on this side (get, tag_lat pongs) and releases the case.
    pub fn initiator_finish(&mut self) -> Result<(), RunError> {
        self.drain_now();
        let Some(mut case) = self.case.take() else {
            return Ok(());
        };
        case.unregister();
        if case.setup.untouched {
            return Ok(());
        }
        let seed = case.setup.seed;
        match case.setup.test {
            TestKind::GetBw => match case.setup.kv {
                Some(kv) => case.buf.verify_moved(&moved(&kv, true), seed, other_seed(seed)),
                None => case.buf.verify_blocks(case.layout, seed, other_seed(seed)),
            },
            TestKind::TagLat => match case.pong.as_mut() {
                Some(p) => p.verify_blocks(case.layout, seed, seed).map_err(RunError::echoed),
                None => Err(RunError::Internal("no pong buffer")),
            },
            TestKind::TagBw | TestKind::PutBw => Ok(()),
        }
    }
}

/// UCX reports a `UCX_TLS` naming no usable transport as "No such device" from ucp_init or worker
/// creation, which does not point at the cause: name the variable when it is set.
fn init_error(e: ucx::Error) -> EngineError {
    let message = e.to_string();
    match std::env::var("UCX_TLS") {
        Ok(tls) if !tls.trim().is_empty() => EngineError::UcxInit {
            detail: format!(
                "{message} (UCX_TLS={tls} is set: check that it names transports this UCX has, see `ucx_info -d`)"
            ),
            variable: Some(format!("UCX_TLS={tls}")),
        },
        _ => EngineError::UcxInit {
            detail: message,
            variable: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rendezvous_tables_are_asked_for_unless_the_user_chose_proto_info() {
        let none = |_: &str| false;
        assert_eq!(
            rendezvous_tables_setting(&[], none),
            Some(("PROTO_INFO".to_string(), RENDEZVOUS_TABLES.to_string()))
        );
        let theirs = vec![("proto_info".to_string(), "used".to_string())];
        assert_eq!(rendezvous_tables_setting(&theirs, none), None);
        assert_eq!(rendezvous_tables_setting(&[], |k| k == "UCX_PROTO_INFO"), None);
    }
}
