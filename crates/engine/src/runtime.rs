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
use crate::stats;
use hdrhistogram::Histogram;
use icb_core::{Lane, TestKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use ucx::{Endpoint, ErrorMode, MemMap, Op, OpOptions, RemoteKey, Worker};

const TAG_DATA: u64 = 0x1cb0_0000_0000_0001;
const TAG_PING: u64 = 0x1cb0_0000_0000_0002;
const TAG_PONG: u64 = 0x1cb0_0000_0000_0003;
const TAG_ACK: u64 = 0x1cb0_0000_0000_0004;
const TAG_MASK: u64 = u64::MAX;
/// Progress calls between two reads of the clock and the abort flag.
const CHECK_EVERY: u32 = 64;

/// What the control side learns about the local UCX when the thread starts.
#[derive(Debug, Clone)]
pub struct LocalUcx {
    pub version: String,
    pub library: String,
    pub address: Vec<u8>,
}

/// Flags the control side uses to end a phase early, and the phase's deadline.
#[derive(Clone)]
pub struct PhaseCtl {
    abort: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    deadline: Instant,
}

impl PhaseCtl {
    pub fn new(deadline: Instant) -> Self {
        PhaseCtl {
            abort: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            deadline,
        }
    }
    /// The peer is gone or misbehaved: give up at the next check.
    pub fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }
    /// The initiator finished a one-sided phase: the target may stop progressing.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
    #[inline]
    fn check(&self) -> Result<(), String> {
        if self.abort.load(Ordering::Relaxed) {
            return Err("aborted: the peer closed the control connection".into());
        }
        if Instant::now() >= self.deadline {
            return Err("did not complete before the phase deadline: is the peer alive and progressing?".into());
        }
        Ok(())
    }
}

/// What the initiator measured in one phase.
pub struct PhaseOutcome {
    /// Time of the timed iterations (the probe operation excluded).
    pub elapsed_s: f64,
    /// The probe operation's protocol info string (warmup phase only).
    pub info: Option<String>,
    /// Round-trip times in ns (latency tests only).
    pub rtt: Option<Histogram<u64>>,
}

struct Case {
    setup: CaseSetup,
    /// Initiator: the source (tag, put, ping) or destination (get). Target: the destination (tag,
    /// put, ping) or source (get).
    buf: Buf,
    /// Initiator of tag_lat: where pongs land.
    pong: Option<Buf>,
    /// Target of RMA: the registration the client's rkey refers to.
    _map: Option<MemMap>,
    rkey: Option<RemoteKey>,
    remote_addr: u64,
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
}

/// Creates the UCX context with `--ucx-config` settings (fatal when rejected) under the profile's
/// defaults (dropped one by one when the loaded UCX rejects them, as NIXL itself does).
fn build_context(lib: &ucx::Ucx, opts: &UcxOptions) -> Result<ucx::Context, EngineError> {
    let v = lib.version();
    let mut profile = match opts.profile {
        crate::options::UcxProfile::Default => Vec::new(),
        crate::options::UcxProfile::Nixl => {
            crate::options::nixl_ucx_defaults((v.major, v.minor), &opts.config, |k| std::env::var_os(k).is_some())
        }
    };
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
            Err(e) => return Err(EngineError::UcxSetup(with_tls_hint(e.to_string()))),
        }
    }
}

fn ucx_err(e: ucx::Error) -> String {
    e.to_string()
}

impl Runtime {
    /// Loads UCX, creates the context and worker. Runs on the UCX thread.
    pub fn start(opts: &UcxOptions) -> Result<(Runtime, LocalUcx), EngineError> {
        let lib = ucx::Ucx::load(opts.library_dir.as_deref()).map_err(|e| EngineError::UcxSetup(e.to_string()))?;
        let ctx = build_context(&lib, opts)?;
        let worker = ctx
            .worker()
            .map_err(|e| EngineError::UcxSetup(with_tls_hint(e.to_string())))?;
        let address = worker.address().map_err(|e| EngineError::UcxSetup(e.to_string()))?;
        let ack = Buf::alloc(icb_core::MemoryType::Host, 8).map_err(EngineError::UcxSetup)?;
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
            },
            local,
        ))
    }

    pub fn connect_peer(&mut self, address: &[u8], peer_errors: bool) -> Result<(), String> {
        self.reset();
        let mode = if peer_errors { ErrorMode::Peer } else { self.mode };
        self.ep = Some(self.worker.connect(address, mode).map_err(ucx_err)?);
        Ok(())
    }

    /// Cancels whatever is in flight and forgets the case and the endpoint.
    pub fn reset(&mut self) {
        self.drain_now();
        self.case = None;
        if let Some(ep) = self.ep.take() {
            let _ = ep.close(Instant::now() + std::time::Duration::from_secs(1));
        }
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

    fn ep(&self) -> Result<&Endpoint, String> {
        self.ep
            .as_ref()
            .ok_or_else(|| "no UCX endpoint to the peer".to_string())
    }

    fn size(setup: &CaseSetup) -> Result<usize, String> {
        usize::try_from(setup.size).map_err(|_| format!("{} bytes do not fit this machine's address space", setup.size))
    }

    // ---------------------------------------------------------------- target (server) side

    pub fn target_setup(&mut self, setup: CaseSetup) -> Result<CaseReady, String> {
        self.drain_now();
        self.case = None;
        let len = Self::size(&setup)?;
        let mut buf = Buf::alloc(setup.memory.target, len)?;
        // The target holds the data's source for get, its destination otherwise.
        let seed = if setup.test == TestKind::GetBw {
            setup.seed
        } else {
            other_seed(setup.seed)
        };
        buf.fill(seed)?;
        let mut ready = CaseReady::default();
        let mut map = None;
        if setup.test.is_rma() {
            let m = buf.map(&self._ctx)?;
            ready.remote_addr = m.address();
            ready.rkey = HexBytes(m.pack_rkey().map_err(ucx_err)?);
            map = Some(m);
        }
        self.case = Some(Case {
            setup,
            buf,
            pong: None,
            _map: map,
            rkey: None,
            remote_addr: 0,
        });
        Ok(ready)
    }

    /// The target's part of a phase; `ready` fires once receives are posted.
    pub fn target_phase(
        &mut self,
        kind: PhaseKind,
        iterations: u64,
        ready: tokio::sync::oneshot::Sender<()>,
        ctl: &PhaseCtl,
    ) -> Result<(), String> {
        let r = self.target_phase_inner(kind, iterations, ready, ctl);
        if r.is_err() {
            self.drain_now();
        }
        r
    }

    fn target_phase_inner(
        &mut self,
        _kind: PhaseKind,
        n: u64,
        ready: tokio::sync::oneshot::Sender<()>,
        ctl: &PhaseCtl,
    ) -> Result<(), String> {
        let case = self.case.as_ref().ok_or("no case prepared")?;
        let ep = self.ep.as_ref().ok_or("no UCX endpoint to the peer")?;
        let w = &self.worker;
        let size = Self::size(&case.setup)?;
        match case.setup.test {
            TestKind::TagBw => {
                let window = case.setup.window.max(1) as usize;
                ensure_ring(&mut self.ring, window);
                let ring = &mut self.ring;
                with_region!(&case.buf, b => {
                    let mut posted = 0u64;
                    while posted < n && (posted as usize) < window {
                        ring[posted as usize] = Some(w.tag_recv(b, 0..size, TAG_DATA, TAG_MASK, OpOptions::default()).map_err(ucx_err)?);
                        posted += 1;
                    }
                    let _ = ready.send(());
                    let mut done = 0u64;
                    while done < n {
                        let slot = (done % window as u64) as usize;
                        let op = ring[slot].take().ok_or("internal: empty ring slot")?;
                        let got = wait_op(w, op, ctl)?;
                        if got != size {
                            return Err(format!("received a {got}-byte message, expected {size}"));
                        }
                        done += 1;
                        if posted < n {
                            ring[slot] = Some(w.tag_recv(b, 0..size, TAG_DATA, TAG_MASK, OpOptions::default()).map_err(ucx_err)?);
                            posted += 1;
                        }
                    }
                    Ok::<(), String>(())
                })?;
                send_ack(w, ep, &self.ack, ctl)
            }
            TestKind::TagLat => {
                with_region!(&case.buf, b => {
                    let mut recv = w.tag_recv(b, 0..size, TAG_PING, TAG_MASK, OpOptions::default()).map_err(ucx_err)?;
                    let _ = ready.send(());
                    for i in 0..n {
                        poll_done(w, recv, ctl)?;
                        // The echo leaves first; releasing the receive and posting the next one
                        // happen while the pong is in flight (ucx_perftest's order).
                        let send = w.tag_send(ep, b, 0..size, TAG_PONG, OpOptions::default()).map_err(ucx_err)?;
                        let got = finish_op(w, recv, ctl)?;
                        if got != size {
                            return Err(format!("received a {got}-byte ping, expected {size}"));
                        }
                        // The next ping lands in the buffer the echo is sent from: wait for it.
                        wait_op(w, send, ctl)?;
                        if i + 1 < n {
                            recv = w.tag_recv(b, 0..size, TAG_PING, TAG_MASK, OpOptions::default()).map_err(ucx_err)?;
                        }
                    }
                    Ok(())
                })
            }
            TestKind::PutBw | TestKind::GetBw => {
                // One-sided: nothing to post, but keep progressing (software RMA emulation, e.g.
                // over tcp, needs the target's worker) until the initiator says it is done.
                let _ = ready.send(());
                let mut i = 0u32;
                while !ctl.stop.load(Ordering::Relaxed) {
                    w.progress();
                    i = i.wrapping_add(1);
                    if i.is_multiple_of(CHECK_EVERY) {
                        ctl.check()?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Checks the payload (tag and put land here) and releases the case.
    pub fn target_finish(&mut self) -> (bool, Option<String>) {
        self.drain_now();
        let Some(mut case) = self.case.take() else {
            return (false, Some("no case prepared".into()));
        };
        // The registration holds the buffer; unmap it so the buffer can be read again.
        case._map = None;
        if case.setup.test == TestKind::GetBw {
            // The client checks what it read; the source buffer must still be intact.
            return match case.buf.verify(case.setup.seed) {
                Ok(()) => (true, None),
                Err(e) => (false, Some(format!("source buffer changed during get: {e}"))),
            };
        }
        match case.buf.verify(case.setup.seed) {
            Ok(()) => (true, None),
            Err(e) => (false, Some(e)),
        }
    }

    // ------------------------------------------------------------- initiator (client) side

    pub fn initiator_setup(&mut self, setup: CaseSetup, ready: &CaseReady) -> Result<(), String> {
        self.drain_now();
        self.case = None;
        let len = Self::size(&setup)?;
        let mut buf = Buf::alloc(setup.memory.initiator, len)?;
        let seed = if setup.test == TestKind::GetBw {
            other_seed(setup.seed)
        } else {
            setup.seed
        };
        buf.fill(seed)?;
        let pong = if setup.test == TestKind::TagLat {
            let mut p = Buf::alloc(setup.memory.initiator, len)?;
            p.fill(other_seed(setup.seed))?;
            Some(p)
        } else {
            None
        };
        let rkey = if setup.test.is_rma() {
            Some(
                self.ep()?
                    .unpack_rkey(&ready.rkey.0)
                    .map_err(|e| format!("the server's rkey: {e}"))?,
            )
        } else {
            None
        };
        self.case = Some(Case {
            setup,
            buf,
            pong,
            _map: None,
            rkey,
            remote_addr: ready.remote_addr,
        });
        Ok(())
    }

    pub fn initiator_phase(
        &mut self,
        kind: PhaseKind,
        iterations: u64,
        ctl: &PhaseCtl,
    ) -> Result<PhaseOutcome, String> {
        let r = self.initiator_phase_inner(kind, iterations, ctl);
        if r.is_err() {
            self.drain_now();
        }
        r
    }

    fn initiator_phase_inner(&mut self, kind: PhaseKind, n: u64, ctl: &PhaseCtl) -> Result<PhaseOutcome, String> {
        let case = self.case.as_ref().ok_or("no case prepared")?;
        let ep = self.ep.as_ref().ok_or("no UCX endpoint to the peer")?;
        let w = &self.worker;
        let size = Self::size(&case.setup)?;
        let probe = kind == PhaseKind::Warmup;
        let timed = if probe { n - 1 } else { n };
        let window = case.setup.window.max(1) as usize;
        ensure_ring(&mut self.ring, window);
        let ring = &mut self.ring;
        let mut info = None;
        match case.setup.test {
            TestKind::TagBw => with_region!(&case.buf, b => {
                let ack = post_ack_recv(w, &self.ack)?;
                if probe {
                    let op = w.tag_send(ep, b, 0..size, TAG_DATA, OpOptions::QUERYABLE).map_err(ucx_err)?;
                    info = w.info_string(op).ok().flatten();
                    wait_op(w, op, ctl)?;
                }
                let t0 = Instant::now();
                for i in 0..timed {
                    let slot = (i % window as u64) as usize;
                    if let Some(op) = ring[slot].take() {
                        wait_op(w, op, ctl)?;
                    }
                    ring[slot] = Some(w.tag_send(ep, b, 0..size, TAG_DATA, OpOptions::default()).map_err(ucx_err)?);
                }
                drain_ring(w, ring, ctl)?;
                wait_op(w, ack, ctl)?;
                Ok(PhaseOutcome { elapsed_s: t0.elapsed().as_secs_f64(), info, rtt: None })
            }),
            TestKind::TagLat => {
                let pong = case.pong.as_ref().ok_or("internal: no pong buffer")?;
                let mut hist = (kind == PhaseKind::Measure).then(stats::rtt_histogram);
                with_region!(&case.buf, b => {
                    with_region!(pong, p => {
                        let mut total = 0.0f64;
                        // A round trip's time is recorded during the next one's flight, so the
                        // histogram's cost stays off the measured path.
                        let mut unrecorded: Option<u64> = None;
                        let mut prev = Instant::now();
                        for i in 0..n {
                            let first_probe = probe && i == 0;
                            let opts = if first_probe { OpOptions::QUERYABLE } else { OpOptions::default() };
                            // Send first, then post the receive (ucx_perftest's order): the post
                            // overlaps the ping's flight instead of delaying it.
                            let send = w.tag_send(ep, b, 0..size, TAG_PING, opts).map_err(ucx_err)?;
                            let recv = w.tag_recv(p, 0..size, TAG_PONG, TAG_MASK, OpOptions::default()).map_err(ucx_err)?;
                            if first_probe {
                                info = w.info_string(send).ok().flatten();
                            }
                            if let (Some(ns), Some(h)) = (unrecorded.take(), hist.as_mut()) {
                                h.saturating_record(ns);
                            }
                            poll_done(w, recv, ctl)?;
                            let now = Instant::now();
                            wait_op(w, send, ctl)?;
                            let got = finish_op(w, recv, ctl)?;
                            if got != size {
                                return Err(format!("received a {got}-byte pong, expected {size}"));
                            }
                            if first_probe {
                                // The probe round trip is not part of the warmup pace.
                                prev = now;
                                continue;
                            }
                            let rtt = now.duration_since(prev);
                            prev = now;
                            total += rtt.as_secs_f64();
                            unrecorded = Some(rtt.as_nanos() as u64);
                        }
                        if let (Some(ns), Some(h)) = (unrecorded, hist.as_mut()) {
                            h.saturating_record(ns);
                        }
                        Ok(PhaseOutcome { elapsed_s: total, info, rtt: hist })
                    })
                })
            }
            TestKind::PutBw | TestKind::GetBw => {
                let rkey = case.rkey.as_ref().ok_or("internal: no rkey")?;
                let addr = case.remote_addr;
                let is_put = case.setup.test == TestKind::PutBw;
                with_region!(&case.buf, b => {
                    let submit = |opts: OpOptions| {
                        if is_put {
                            w.put(ep, b, 0..size, addr, rkey, opts)
                        } else {
                            w.get(ep, b, 0..size, addr, rkey, opts)
                        }
                    };
                    if probe {
                        let op = submit(OpOptions::QUERYABLE).map_err(ucx_err)?;
                        info = w.info_string(op).ok().flatten();
                        wait_op(w, op, ctl)?;
                    }
                    let t0 = Instant::now();
                    for i in 0..timed {
                        let slot = (i % window as u64) as usize;
                        if let Some(op) = ring[slot].take() {
                            wait_op(w, op, ctl)?;
                        }
                        ring[slot] = Some(submit(OpOptions::default()).map_err(ucx_err)?);
                    }
                    drain_ring(w, ring, ctl)?;
                    let flush = w.flush(ep, OpOptions::default()).map_err(ucx_err)?;
                    wait_op(w, flush, ctl)?;
                    Ok(PhaseOutcome { elapsed_s: t0.elapsed().as_secs_f64(), info, rtt: None })
                })
            }
        }
    }

    /// Checks what landed on this side (get, tag_lat pongs) and releases the case.
    pub fn initiator_finish(&mut self) -> Result<(), String> {
        self.drain_now();
        let Some(mut case) = self.case.take() else {
            return Ok(());
        };
        match case.setup.test {
            TestKind::GetBw => case.buf.verify(case.setup.seed),
            TestKind::TagLat => match case.pong.as_mut() {
                Some(p) => p.verify(case.setup.seed).map_err(|e| format!("echoed {e}")),
                None => Err("internal: no pong buffer".into()),
            },
            TestKind::TagBw | TestKind::PutBw => Ok(()),
        }
    }
}

fn ensure_ring(ring: &mut Vec<Option<Op>>, window: usize) {
    ring.iter_mut().for_each(|s| *s = None);
    if ring.len() < window {
        ring.resize(window, None);
    }
}

/// Progresses until `op` completes (checking the abort flag and the deadline now and then),
/// then releases it; returns the completion's length.
#[inline]
fn wait_op(w: &Worker, op: Op, ctl: &PhaseCtl) -> Result<usize, String> {
    poll_done(w, op, ctl)?;
    finish_op(w, op, ctl)
}

/// Progresses until `op` has completed, without releasing it.
#[inline]
fn poll_done(w: &Worker, op: Op, ctl: &PhaseCtl) -> Result<(), String> {
    let mut i = 0u32;
    while !w.is_done(op) {
        w.progress();
        i = i.wrapping_add(1);
        if i.is_multiple_of(CHECK_EVERY) {
            ctl.check()?;
        }
    }
    Ok(())
}

/// Releases a completed `op`; returns its length, or its error.
#[inline]
fn finish_op(w: &Worker, op: Op, ctl: &PhaseCtl) -> Result<usize, String> {
    w.wait(op, ctl.deadline).map(|c| c.length).map_err(ucx_err)
}

fn drain_ring(w: &Worker, ring: &mut [Option<Op>], ctl: &PhaseCtl) -> Result<(), String> {
    for slot in ring.iter_mut() {
        if let Some(op) = slot.take() {
            wait_op(w, op, ctl)?;
        }
    }
    Ok(())
}

fn post_ack_recv(w: &Worker, ack: &Buf) -> Result<Op, String> {
    with_region!(ack, a => w.tag_recv(a, 0..8, TAG_ACK, TAG_MASK, OpOptions::default()).map_err(ucx_err))
}

fn send_ack(w: &Worker, ep: &Endpoint, ack: &Buf, ctl: &PhaseCtl) -> Result<(), String> {
    let op = with_region!(ack, a => w.tag_send(ep, a, 0..8, TAG_ACK, OpOptions::default()).map_err(ucx_err))?;
    wait_op(w, op, ctl).map(|_| ())
}

/// UCX reports a `UCX_TLS` naming no usable transport as "No such device" from ucp_init or worker
/// creation, which does not point at the cause: name the variable when it is set.
fn with_tls_hint(message: String) -> String {
    match std::env::var("UCX_TLS") {
        Ok(tls) if !tls.trim().is_empty() => {
            format!("{message} (UCX_TLS={tls} is set: check that it names transports this UCX has, see `ucx_info -d`)")
        }
        _ => message,
    }
}
