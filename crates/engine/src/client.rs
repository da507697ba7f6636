//! `connect`: the prefill side. It initiates every operation, times them, and builds the report.

use crate::control::{Control, unexpected};
use crate::error::EngineError;
use crate::messages::{CaseReady, CaseSetup, Hello, Message, PhaseKind, Role};
use crate::options::ConnectOptions;
use crate::runtime::{LocalUcx, PhaseCtl, PhaseOutcome, Runtime};
use crate::session::{HELLO_TIMEOUT, case_label, check_peer_hello, local_hello, peer_info, phase_during};
use crate::stats;
use crate::ucx_thread::UcxThread;
use icb_core::{
    CaseResult, CaseStatus, CudaInfo, Endpoint, Lane, Measurement, MemoryType, PAIR_SCHEMA, PairReport, Placement,
    RunSettings, TestKind, Verdict, VerdictStatus,
};
use std::time::{Duration, Instant};

/// Most measured rounds per case (a round is repeated only when the pace estimate fell short).
const MAX_ROUNDS: u32 = 8;
/// Added to every phase deadline: setup, wireup and scheduling slack.
const PHASE_SLACK_S: f64 = 30.0;

/// Runs every case of `opts.settings` against the server and returns the judged report.
pub fn connect(opts: ConnectOptions) -> Result<PairReport, EngineError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| EngineError::Internal(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(connect_async(opts))
}

/// Checks settings against the limits both sides enforce, so front ends can refuse bad values
/// before starting anything (the peer checks them again: nothing it receives is trusted).
pub fn validate(s: &RunSettings) -> Result<(), EngineError> {
    let bad = |m: String| Err(EngineError::Settings(m));
    if s.tests.is_empty() || s.memory.is_empty() || s.sizes.is_empty() {
        return bad("nothing to run: give at least one test, memory pair and size".into());
    }
    if let Some(&z) = s
        .sizes
        .iter()
        .find(|&&z| z == 0 || z > crate::messages::MAX_MESSAGE_SIZE)
    {
        return bad(format!("message size {z} is outside 1 B … 16 GiB"));
    }
    if s.window == 0 || s.window > crate::messages::MAX_WINDOW {
        return bad(format!(
            "window {} is outside 1 … {}",
            s.window,
            crate::messages::MAX_WINDOW
        ));
    }
    let t_ok = |t: f64| t.is_finite() && t > 0.0 && t <= 3600.0;
    if !t_ok(s.min_time_s) || !t_ok(s.max_time_s) || s.min_time_s > s.max_time_s {
        return bad(format!(
            "min time {} s / max time {} s: both must be in (0, 3600] with min ≤ max",
            s.min_time_s, s.max_time_s
        ));
    }
    Ok(())
}

async fn connect_async(mut opts: ConnectOptions) -> Result<PairReport, EngineError> {
    validate(&opts.settings)?;
    let started = Instant::now();
    let started_at = jiff::Timestamp::now().to_string();
    let server_addr = crate::session::resolve(&opts.server).await?;
    let ucx_opts = opts.ucx.clone();
    let (mut thread, local) = UcxThread::spawn(move || Runtime::start(&ucx_opts))?;
    let cuda = crate::buffers::cuda_info();

    let stream = match tokio::time::timeout(opts.connect_timeout, tokio::net::TcpStream::connect(server_addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(EngineError::Connect {
                addr: opts.server.clone(),
                detail: e.to_string(),
            });
        }
        Err(_) => {
            return Err(EngineError::Connect {
                addr: opts.server.clone(),
                detail: format!("no answer within {:.0} s", opts.connect_timeout.as_secs_f64()),
            });
        }
    };
    let local_addr = stream.local_addr().ok();
    let mut control = Control::new(stream);
    let result = run_session(&mut control, &thread, &local, &cuda, &mut opts).await;
    let (server_hello, cases, warnings) = match result {
        Ok(x) => x,
        Err(e) => {
            if !matches!(e, EngineError::Peer(_) | EngineError::Control { .. }) {
                control.send_error(&e.to_string()).await;
            }
            drop(control);
            thread.shutdown(Duration::from_secs(5));
            return Err(e);
        }
    };
    drop(control);
    thread.shutdown(Duration::from_secs(5));

    let mine = local_hello(Role::Client, &local, &cuda, &opts.tool, false);
    let same_boot = !mine.boot_id.is_empty() && mine.boot_id == server_hello.boot_id;
    let expectation = opts
        .expectation_for(same_boot)
        .map_err(|e| EngineError::Settings(e.to_string()))?;
    let locality = expectation.locality;
    let mut report = PairReport {
        schema: PAIR_SCHEMA.to_string(),
        tool: opts.tool.clone(),
        started_at,
        duration_s: started.elapsed().as_secs_f64(),
        placement: Placement {
            locality,
            mode: opts.placement_mode.clone(),
            prefill: Endpoint {
                host: mine.hostname.clone(),
                address: local_addr.map(|a| a.to_string()),
                ..Default::default()
            },
            decode: Endpoint {
                host: server_hello.hostname.clone(),
                address: Some(server_addr.to_string()),
                ..Default::default()
            },
        },
        server: peer_info(&server_hello),
        client: peer_info(&mine),
        settings: opts.settings.clone(),
        expectation,
        cases,
        verdict: Verdict {
            status: VerdictStatus::Pass,
            reason: String::new(),
            hint: None,
            data_paths: Vec::new(),
        },
        warnings,
    };
    icb_core::verdict::judge(&mut report);
    Ok(report)
}

type SessionOutput = (Hello, Vec<CaseResult>, Vec<String>);

async fn run_session(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    local: &LocalUcx,
    cuda: &CudaInfo,
    opts: &mut ConnectOptions,
) -> Result<SessionOutput, EngineError> {
    let server: Hello = match control.recv("the hello exchange", HELLO_TIMEOUT).await? {
        Message::Hello(h) => *h,
        other => return Err(unexpected("the hello exchange", &other, "hello")),
    };
    check_peer_hello(&server, Role::Server)?;
    let peer_errors = opts.ucx.peer_failure == crate::options::PeerFailureMode::UcxPeer;
    let hello = local_hello(Role::Client, local, cuda, &opts.tool, peer_errors);
    control
        .send(&Message::Hello(Box::new(hello)), "the hello exchange")
        .await?;
    let address = server.worker_address.0.clone();
    thread
        .call(move |rt: &mut Runtime| rt.connect_peer(&address, peer_errors))
        .await?
        .map_err(|detail| EngineError::Ucx {
            during: "connecting to the server's UCX worker".into(),
            detail,
        })?;

    // A tiny ping-pong first, so UCX wireup is finished before anything is timed.
    let wireup = CaseSetup {
        test: TestKind::TagLat,
        memory: icb_core::MemoryPair::HOST_HOST,
        size: 8,
        window: 1,
        seed: 0x1cb_0000,
    };
    match prepare(control, thread, wireup, cuda, &server).await? {
        Prepared::Ready => {
            phase(control, thread, &wireup, PhaseKind::Wireup, 1, 30.0).await?;
            finish(control, thread, &wireup).await?;
        }
        Prepared::NotRun(status, reason) => {
            return Err(EngineError::Ucx {
                during: "UCX wireup".into(),
                detail: format!("{status:?}: {reason}"),
            });
        }
    }

    let s = opts.settings.clone();
    let mut cases = Vec::new();
    let mut warnings = Vec::new();
    let mut seed = 0x5eed_0001u64;
    for &test in &s.tests {
        for &memory in &s.memory {
            for &size in &s.sizes {
                seed = seed.wrapping_add(0x9E37_79B9);
                let setup = CaseSetup {
                    test,
                    memory,
                    size,
                    window: if test.is_bandwidth() { s.window } else { 1 },
                    seed,
                };
                let case = run_case(control, thread, setup, &s, cuda, &server, &mut warnings).await?;
                if let Some(cb) = opts.on_case.as_mut() {
                    cb(&case);
                }
                cases.push(case);
            }
        }
    }
    control.send(&Message::Bye, "the goodbye").await?;
    Ok((server, cases, warnings))
}

/// `no CUDA driver on the prefill side`, or the driver's own reason when it is something else.
pub(crate) fn no_cuda_reason(side: &str, cuda: &CudaInfo) -> String {
    if cuda.detail.is_empty() || cuda.detail == "no CUDA driver" {
        format!("no CUDA driver on the {side} side")
    } else {
        format!("CUDA unavailable on the {side} side: {}", cuda.detail)
    }
}

enum Prepared {
    Ready,
    NotRun(CaseStatus, String),
}

async fn prepare(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: CaseSetup,
    cuda: &CudaInfo,
    server: &Hello,
) -> Result<Prepared, EngineError> {
    let label = case_label(&setup);
    if setup.memory.initiator == MemoryType::Cuda && !cuda.available {
        return Ok(Prepared::NotRun(CaseStatus::Skipped, no_cuda_reason("prefill", cuda)));
    }
    if setup.memory.target == MemoryType::Cuda && !server.cuda.available {
        return Ok(Prepared::NotRun(
            CaseStatus::Skipped,
            no_cuda_reason("decode", &server.cuda),
        ));
    }
    control.send(&Message::Setup(setup), &label).await?;
    let ready: CaseReady = match control.recv(&label, HELLO_TIMEOUT * 4).await? {
        Message::Ready(r) => r,
        Message::Skipped { reason } => return Ok(Prepared::NotRun(CaseStatus::Skipped, reason)),
        Message::CaseFailed { reason } => {
            return Ok(Prepared::NotRun(CaseStatus::Failed, format!("decode side: {reason}")));
        }
        other => return Err(unexpected(&label, &other, "ready, skipped or case_failed")),
    };
    let local: Result<(), String> = thread
        .call(move |rt: &mut Runtime| rt.initiator_setup(setup, &ready))
        .await?;
    if let Err(reason) = local {
        // The server holds buffers for this case: let it release them before moving on.
        finish(control, thread, &setup).await?;
        return Ok(Prepared::NotRun(CaseStatus::Failed, format!("prefill side: {reason}")));
    }
    Ok(Prepared::Ready)
}

enum Event {
    Done(Result<Result<PhaseOutcome, String>, EngineError>),
    Msg(Result<Message, EngineError>),
}

/// One phase: the server posts its side, the client runs its operations (timed on the UCX
/// thread), and both report done. The control connection is watched throughout, so a peer that
/// dies mid-phase ends the phase at once instead of at its deadline.
async fn phase(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: &CaseSetup,
    kind: PhaseKind,
    iterations: u64,
    timeout_s: f64,
) -> Result<PhaseOutcome, EngineError> {
    let during = phase_during(setup, kind);
    let limit = Duration::from_secs_f64(timeout_s);
    control
        .send(
            &Message::Phase {
                kind,
                iterations,
                timeout_s,
            },
            &during,
        )
        .await?;
    match control.recv(&during, limit).await? {
        Message::PhaseReady => {}
        Message::CaseFailed { reason } => {
            return Err(EngineError::Ucx {
                during,
                detail: format!("decode side: {reason}"),
            });
        }
        other => return Err(unexpected(&during, &other, "phase_ready")),
    }
    let ctl = PhaseCtl::new(Instant::now() + limit);
    let flags = ctl.clone();
    let fut = thread.call(move |rt: &mut Runtime| rt.initiator_phase(kind, iterations, &flags));
    tokio::pin!(fut);
    let mut server_done = false;
    let outcome = loop {
        let ev = tokio::select! {
            r = &mut fut => Event::Done(r),
            m = control.next(&during), if !server_done => Event::Msg(m),
        };
        match ev {
            Event::Done(r) => break r?,
            Event::Msg(Ok(Message::PhaseDone)) if !setup.test.is_rma() => server_done = true,
            Event::Msg(other) => {
                ctl.abort();
                let _ = (&mut fut).await;
                return match other {
                    Ok(m) => Err(unexpected(&during, &m, "phase_done")),
                    Err(e) => Err(e),
                };
            }
        }
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(detail) => {
            // A UCX error is often the first sign of a dead peer (e.g. cma reading from a process
            // that is gone); if the control connection closed too, say that.
            if let Ok(Err(EngineError::Control { .. })) =
                tokio::time::timeout(Duration::from_millis(300), control.next(&during)).await
            {
                return Err(EngineError::control(
                    format!("{during} (UCX: {detail})"),
                    crate::wire::WireError::Closed,
                ));
            }
            return Err(EngineError::Ucx { during, detail });
        }
    };
    if setup.test.is_rma() {
        control.send(&Message::PhaseEnd, &during).await?;
    }
    if !server_done {
        match control.recv(&during, limit).await? {
            Message::PhaseDone => {}
            other => return Err(unexpected(&during, &other, "phase_done")),
        }
    }
    Ok(outcome)
}

/// Verifies on both sides and releases the case's buffers; returns the first verification error.
async fn finish(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: &CaseSetup,
) -> Result<Option<String>, EngineError> {
    let label = case_label(setup);
    let local: Result<(), String> = thread.call(|rt: &mut Runtime| rt.initiator_finish()).await?;
    control.send(&Message::Finish, &label).await?;
    let remote = match control.recv(&label, HELLO_TIMEOUT * 4).await? {
        Message::Finished { verified: true, .. } => None,
        Message::Finished { detail, .. } => Some(format!(
            "decode side: {}",
            detail.unwrap_or_else(|| "payload not verified".into())
        )),
        other => return Err(unexpected(&label, &other, "finished")),
    };
    Ok(local.err().map(|e| format!("prefill side: {e}")).or(remote))
}

async fn run_case(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: CaseSetup,
    s: &RunSettings,
    cuda: &CudaInfo,
    server: &Hello,
    warnings: &mut Vec<String>,
) -> Result<CaseResult, EngineError> {
    let mut result = CaseResult {
        test: setup.test,
        memory: setup.memory,
        size: setup.size,
        status: CaseStatus::Measured,
        reason: None,
        measurement: None,
        transport: None,
        verdict: None,
        shape: Default::default(),
    };
    match prepare(control, thread, setup, cuda, server).await? {
        Prepared::Ready => {}
        Prepared::NotRun(status, reason) => {
            result.status = status;
            result.reason = Some(reason);
            return Ok(result);
        }
    }
    let label = case_label(&setup);

    // Probe operation (its protocol info string is the per-case transport evidence) + warmup.
    let warmup_timeout = (s.max_time_s * 4.0).max(30.0) + PHASE_SLACK_S;
    let warm = phase(
        control,
        thread,
        &setup,
        PhaseKind::Warmup,
        1 + s.warmup_iterations,
        warmup_timeout,
    )
    .await?;
    let lanes: Option<Vec<Lane>> = thread.call(|rt: &mut Runtime| rt.lanes()).await?;
    let mut pace = if s.warmup_iterations > 0 && warm.elapsed_s > 0.0 {
        warm.elapsed_s / s.warmup_iterations as f64
    } else {
        0.0
    };

    let mut done_iters = 0u64;
    let mut done_s = 0.0f64;
    let mut rtt = stats::rtt_histogram();
    let mut rounds = 0u32;
    while rounds < MAX_ROUNDS {
        let n = if pace > 0.0 {
            stats::next_round(pace, done_iters, done_s, s.min_iterations, s.min_time_s, s.max_time_s)
        } else {
            s.min_iterations.max(1)
        };
        let timeout = (s.max_time_s - done_s).max(0.0) * 2.0 + PHASE_SLACK_S;
        let out = phase(control, thread, &setup, PhaseKind::Measure, n, timeout).await?;
        rounds += 1;
        done_iters += n;
        done_s += out.elapsed_s;
        if let Some(h) = &out.rtt {
            let _ = rtt.add(h);
        }
        pace = done_s / done_iters as f64;
        let enough = done_iters >= s.min_iterations && done_s >= s.min_time_s;
        if enough || done_s >= s.max_time_s {
            break;
        }
    }
    if done_s < s.min_time_s && done_s < s.max_time_s {
        warnings.push(format!(
            "{label}: measured {done_s:.3} s, less than --min-time {} s (pace estimate fell short {MAX_ROUNDS} times)",
            s.min_time_s
        ));
    }

    let verify_error = finish(control, thread, &setup).await?;
    let bytes = done_iters.saturating_mul(setup.size);
    let measurement = Measurement {
        warmup_iterations: s.warmup_iterations,
        iterations: done_iters,
        elapsed_s: done_s,
        bytes,
        bandwidth_bps: (setup.test.is_bandwidth() && done_s > 0.0).then(|| bytes as f64 / done_s),
        latency_us: if setup.test == TestKind::TagLat {
            stats::one_way_latency(&rtt)
        } else {
            None
        },
        window: setup.window,
        verified: verify_error.is_none(),
    };
    let lanes = lanes.unwrap_or_default();
    result.transport = Some(icb_core::classify::classify(warm.info.as_deref(), &lanes, setup.memory));
    result.measurement = Some(measurement);
    if let Some(e) = verify_error {
        result.status = CaseStatus::Failed;
        result.reason = Some(e);
    }
    Ok(result)
}
