//! `connect`: the prefill side. It initiates every operation, times them, and builds the report.

use crate::client_finish::{Finished, finish};
use crate::control::{Control, unexpected};
use crate::error::EngineError;
use crate::measure::{MAX_FIXED_ROUNDS, Rounds, Statistic};
use crate::messages::{CaseReady, CaseSetup, Hello, Message, PhaseKind, Role};
use crate::options::ConnectOptions;
use crate::report::{SessionRecord, SessionStart, SessionState, assemble_report};
use crate::run_error::RunError;
use crate::runtime::{LocalUcx, PhaseCtl, PhaseOutcome, Runtime};
use crate::session::{AbortOnDrop, HELLO_TIMEOUT, case_label, local_hello, phase_during};
use crate::settings::{apply_bench_controls, validate};
use crate::stats;
use crate::ucx_thread::UcxThread;
use icb_core::rails::nic_health::HealthSnapshot;
use icb_core::rails::nic_health::case::CaseHealth;
use icb_core::{
    CaseResult, CaseStatus, CudaAllocation, CudaInfo, Lane, Measurement, MemoryType, PairReport, RunSettings, TestKind,
};
use std::time::{Duration, Instant};

/// Fewest round trips in one measured tag_lat round (see `run_case`).
const LATENCY_ROUND_MIN: u64 = 10_000;

/// Test-only: milliseconds the client waits before each case, so that a test can make a run
/// overrun its `--within` deadline on purpose (the watchdog must cut it: not known, exit 2)
/// whatever the machine's speed. The case's own fitting ([`crate::fit`]) keeps a real case
/// within its budget, so no choice of flags overruns it reliably.
pub const TEST_CASE_DELAY_ENV: &str = "IC_BENCH_TEST_CASE_DELAY_MS";
/// Added to every phase deadline: setup, wireup and scheduling slack.
pub(crate) const PHASE_SLACK_S: f64 = 30.0;

/// Runs every case of `opts.settings` against the server and returns the judged report.
pub fn connect(opts: ConnectOptions) -> Result<PairReport, EngineError> {
    // Read beside UCX's start-up; the hello waits for it.
    crate::local::prefetch_readiness();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| EngineError::Internal(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(connect_async(opts))
}

async fn connect_async(mut opts: ConnectOptions) -> Result<PairReport, EngineError> {
    apply_bench_controls(&mut opts.settings, |k| std::env::var(k).ok())?;
    validate(&opts.settings)?;
    let mut start = SessionStart::resolve(&opts.server).await?;
    let ucx_opts = opts.ucx.clone();
    let (mut thread, local) = UcxThread::spawn(move || Runtime::start(&ucx_opts))?;
    let cuda = crate::local::cuda_info();

    // A caller without a token gets one that is never cancelled.
    let cancel = opts.cancel.clone().unwrap_or_default();
    let mut control = crate::control::connect_client(&mut start, &opts, &cancel, &mut thread).await?;
    let mut done = SessionState::default();
    let result = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(EngineError::Interrupted),
        r = run_session(&mut control, &thread, &local, &cuda, &mut opts, &mut done) => r,
    };
    // An interrupted run still reports what it measured, once the server's hello is known.
    let interrupted = crate::control::end_client_session(control, &mut thread, result, done.server.is_some()).await?;
    thread.shutdown(Duration::from_secs(5));
    let mine = local_hello(Role::Client, &local, &cuda, &opts.tool, false);
    let record = SessionRecord {
        start,
        mine,
        session: done,
        interrupted,
    };
    assemble_report(&opts, record)
}

async fn run_session(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    local: &LocalUcx,
    cuda: &CudaInfo,
    opts: &mut ConnectOptions,
    done: &mut SessionState,
) -> Result<(), EngineError> {
    // Something that accepts but never speaks ic-bench must not hold the run past --connect-timeout.
    let hello_limit = opts.connect_timeout.min(HELLO_TIMEOUT);
    let peer_errors = opts.ucx.peer_failure == crate::options::PeerFailureMode::UcxPeer;
    let hello = local_hello(Role::Client, local, cuda, &opts.tool, peer_errors);
    let server =
        crate::admit::client_admit(control, hello, None, opts.token.as_ref(), hello_limit, &opts.server).await?;
    crate::session::check_worker_address(&server.worker_address.0)?;
    let address = server.worker_address.0.clone();
    thread
        .call(move |rt: &mut Runtime| rt.connect_peer(&address, peer_errors))
        .await?
        .map_err(|e| EngineError::ucx("connecting to the server's UCX worker", e))?;

    // A tiny ping-pong first, so UCX wireup is finished before anything is timed.
    let wireup = CaseSetup {
        test: TestKind::TagLat,
        memory: icb_core::MemoryPair::HOST_HOST,
        size: 8,
        window: 1,
        seed: 0x1cb_0000,
        blocks: 1,
        untouched: false,
        kv: None,
        cuda_alloc: Default::default(),
    };
    match prepare(control, thread, wireup, cuda, &server).await? {
        Prepared::Ready(..) => {
            phase(
                control,
                thread,
                &wireup,
                PhaseKind::Wireup,
                1,
                PhaseOpts::default(),
                30.0,
            )
            .await?;
            finish(control, thread, &wireup).await?;
        }
        Prepared::NotRun(status, reason) => {
            return Err(EngineError::ucx(
                "UCX wireup",
                RunError::Remote(format!("{status:?}: {reason}")),
            ));
        }
    }

    done.server = Some(server.clone());
    let s = opts.settings.clone();
    let mut seed = 0x5eed_0001u64;
    for (shape, memory) in s.case_list() {
        seed = seed.wrapping_add(0x9E37_79B9);
        let setup = CaseSetup {
            test: shape.test,
            memory,
            size: shape.size,
            // A KV-shaped case has one list outstanding at a time (all its blocks in flight).
            window: if shape.test.is_bandwidth() && shape.blocks.unwrap_or(1) <= 1 && shape.kv.is_none() {
                s.window
            } else {
                1
            },
            seed,
            blocks: shape.blocks.unwrap_or(1),
            untouched: s.untouched_buffers,
            kv: shape.kv,
            cuda_alloc: s.cuda_alloc,
        };
        if let Some(delay) = test_case_delay() {
            tokio::time::sleep(delay).await;
        }
        let case = match not_run_on_a_slow_link(&setup, &s, &done.cases) {
            Some(case) => case,
            None => run_case(control, thread, setup, &s, cuda, &server, &mut done.warnings).await?,
        };
        if let Some(cb) = opts.on_case.as_mut() {
            cb(&case);
        }
        done.cases.push(case);
    }
    control.send(&Message::Bye, "the goodbye").await?;
    Ok(())
}

/// [`TEST_CASE_DELAY_ENV`], where a test set it.
fn test_case_delay() -> Option<Duration> {
    let ms = std::env::var(TEST_CASE_DELAY_ENV).ok()?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ms))
}

/// The result of `setup` before it ran (measured, nothing recorded yet).
fn case_result(setup: &CaseSetup) -> CaseResult {
    CaseResult {
        test: setup.test,
        memory: setup.memory,
        size: setup.size,
        blocks: setup.is_list().then_some(setup.descriptors()),
        status: CaseStatus::Measured,
        reason: None,
        measurement: None,
        transport: None,
        verdict: None,
        run_by: Default::default(),
        rail: None,
        cuda_alloc: None,
        nic_health: None,
    }
}

/// A bandwidth case that the slowest rate measured so far says cannot finish within its budget
/// ([`crate::fit::too_slow`]): not run, with the figure that decided it, so a run over a very
/// slow link ends with the cases it measured instead of passing the pair's deadline.
fn not_run_on_a_slow_link(setup: &CaseSetup, s: &RunSettings, done: &[CaseResult]) -> Option<CaseResult> {
    if !setup.test.is_bandwidth() {
        return None;
    }
    let bytes = setup.size.saturating_mul(u64::from(setup.descriptors()));
    // Only cases as large or larger, over the same memory pair: small messages measure a low
    // rate on any link (per-operation overhead), and would wrongly predict a slow large one.
    let slowest = done
        .iter()
        .filter(|c| c.memory == setup.memory && c.size.saturating_mul(u64::from(c.blocks.unwrap_or(1))) >= bytes)
        .filter_map(|c| c.measurement.as_ref()?.bandwidth_bps)
        .min_by(f64::total_cmp)?;
    let op_s = crate::fit::too_slow(bytes, slowest, s.max_time_s)?;
    let mut result = case_result(setup);
    result.status = CaseStatus::Skipped;
    result.reason = Some(format!(
        "not run: at the {:.2} MB/s measured so far one operation takes about {op_s:.1} s, more than this case's \
         budget (--max-time {} s plus setup): the link is far below any floor",
        slowest / 1e6,
        s.max_time_s
    ));
    Some(result)
}

enum Prepared {
    /// Both sides' buffers are ready; the case's GPU memory, if it has any, and the server's
    /// NIC health counters then (absent from older servers).
    Ready(Option<CudaAllocation>, Option<HealthSnapshot>),
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
        return Ok(Prepared::NotRun(
            CaseStatus::Skipped,
            crate::local::no_cuda_reason("prefill", cuda),
        ));
    }
    if setup.memory.target == MemoryType::Cuda && !server.cuda.available {
        return Ok(Prepared::NotRun(
            CaseStatus::Skipped,
            crate::local::no_cuda_reason("decode", &server.cuda),
        ));
    }
    control.send(&Message::Setup(setup), &label).await?;
    let ready: CaseReady = match control.recv(&label, HELLO_TIMEOUT * 4).await? {
        Message::Ready(r) => r,
        Message::Skipped { reason } => return Ok(Prepared::NotRun(CaseStatus::Skipped, reason)),
        // The server's bounds (`--max-buffer`, free GPU memory) are its setup, not the fabric:
        // not measured, with the refusal's one line as the reason (a run of only refused cases
        // measured nothing: exit 2, the fix named).
        Message::CaseFailed {
            reason,
            refused: Some(_),
        } => {
            return Ok(Prepared::NotRun(
                CaseStatus::Skipped,
                format!("refused by the decode side: {reason}"),
            ));
        }
        Message::CaseFailed { reason, .. } => {
            return Ok(Prepared::NotRun(CaseStatus::Failed, format!("decode side: {reason}")));
        }
        other => return Err(unexpected(&label, &other, "ready, skipped or case_failed")),
    };
    if let Some(why) = crate::alloc::older_server_allocation(&setup, &ready) {
        // The server holds buffers for this case: let it release them before moving on.
        finish(control, thread, &setup).await?;
        return Ok(Prepared::NotRun(CaseStatus::Failed, why));
    }
    let server_alloc = ready.cuda_alloc;
    let server_health = ready.health.clone();
    let local: Result<Option<CudaAllocation>, RunError> = thread
        .call(move |rt: &mut Runtime| rt.initiator_setup(setup, &ready))
        .await?;
    match local {
        Ok(initiator) => Ok(Prepared::Ready(
            crate::alloc::case_allocation(&setup, initiator, server_alloc),
            server_health,
        )),
        Err(reason) => {
            finish(control, thread, &setup).await?;
            // A GPU that cannot give the asked-for kind of memory is this side's setup: skipped.
            let status = match reason {
                RunError::Memory(icb_memory::MemoryError::AllocModeUnsupported { .. }) => CaseStatus::Skipped,
                _ => CaseStatus::Failed,
            };
            Ok(Prepared::NotRun(status, format!("prefill side: {reason}")))
        }
    }
}

enum Event {
    Done(Result<Result<PhaseOutcome, RunError>, EngineError>),
    Msg(Result<Message, EngineError>),
}

/// One phase: the server posts its side, the client runs its operations (timed on the UCX
/// thread), and both report done. The control connection is watched throughout, so a peer that
/// dies mid-phase ends the phase at once instead of at its deadline.
/// How one phase deviates from its case: another window (auto-tuning), or a soft deadline after
/// which loops timed per operation end early (so `max_time_s` holds on a busy machine).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PhaseOpts {
    pub(crate) window: Option<u32>,
    pub(crate) soft_deadline_s: Option<f64>,
}

pub(crate) async fn phase(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: &CaseSetup,
    kind: PhaseKind,
    iterations: u64,
    opts: PhaseOpts,
    timeout_s: f64,
) -> Result<PhaseOutcome, EngineError> {
    let window = opts.window;
    let during = phase_during(setup, kind);
    let limit = Duration::from_secs_f64(timeout_s);
    control
        .send(
            &Message::Phase {
                kind,
                iterations,
                timeout_s,
                window,
            },
            &during,
        )
        .await?;
    match control.recv(&during, limit).await? {
        Message::PhaseReady => {}
        Message::CaseFailed { reason, .. } => {
            return Err(EngineError::ucx(
                during,
                RunError::Remote(format!("decode side: {reason}")),
            ));
        }
        other => return Err(unexpected(&during, &other, "phase_ready")),
    }
    let now = Instant::now();
    let soft = opts
        .soft_deadline_s
        .and_then(|s| Duration::try_from_secs_f64(s.max(0.0)).ok())
        .map(|d| now + d);
    let ctl = PhaseCtl::new(now + limit).with_soft_deadline(soft);
    let flags = ctl.clone();
    let window = window.unwrap_or(setup.window);
    // Dropped mid-phase (the run was interrupted): the UCX thread gives up at its next check.
    let _abort = AbortOnDrop(ctl.clone());
    let fut = thread.call(move |rt: &mut Runtime| rt.initiator_phase(kind, iterations, window, &flags));
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
            return Err(EngineError::ucx(during, detail));
        }
    };
    // One-sided targets progress until told; a ping-pong target that the soft deadline cut short
    // waits for a ping that will not come, so it is told too.
    let cut_short = kind == PhaseKind::Measure && outcome.iterations < iterations;
    if setup.test.is_rma() || (cut_short && !server_done) {
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

async fn run_case(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: CaseSetup,
    s: &RunSettings,
    cuda: &CudaInfo,
    server: &Hello,
    warnings: &mut Vec<String>,
) -> Result<CaseResult, EngineError> {
    let mut result = case_result(&setup);
    let server_before = match prepare(control, thread, setup, cuda, server).await? {
        Prepared::Ready(allocation, health) => {
            result.cuda_alloc = allocation;
            health
        }
        Prepared::NotRun(status, reason) => {
            result.status = status;
            result.reason = Some(reason);
            return Ok(result);
        }
    };
    // Both sides read their NIC counters with both buffers ready and again once the case is
    // finished: the deltas cover its phases (issue 40).
    let my_before = crate::local::health_now();
    let label = case_label(&setup);
    let bytes_per_op = setup.size.saturating_mul(u64::from(setup.descriptors()));

    let warm = crate::warmup::warm_up(control, thread, &setup, s).await?;
    let lanes: Option<Vec<Lane>> = thread.call(|rt: &mut Runtime| rt.lanes()).await?;
    let pace = warm.pace;
    // A window the budget cannot finish (a degraded link) shrinks to one that it can.
    let mut window = if setup.test.is_bandwidth() && !setup.is_list() {
        crate::fit::window(setup.window, pace, s.max_time_s)
    } else {
        setup.window
    };
    let trials = crate::warmup::tune_window(control, thread, &setup, s, pace, bytes_per_op).await?;
    if let Some(best) = trials.iter().max_by(|a, b| a.bandwidth_bps.total_cmp(&b.bandwidth_bps)) {
        window = best.window;
    }

    let statistic = if setup.test.is_bandwidth() {
        Statistic::Bandwidth
    } else {
        Statistic::LatencyP50
    };
    // A bandwidth round keeps its window full at least once. A ping-pong round is at least
    // LATENCY_ROUND_MIN round trips: both sides' UCX threads wake at a round's start, and on a
    // busy machine the first round trips wait for the scheduler; rounds sized from such a pace
    // would be all wake-up (measured: p50 9 ms instead of 0.2 µs at load 12 on 2 cores).
    let min_per_round = if setup.test == TestKind::TagLat {
        LATENCY_ROUND_MIN
    } else if setup.test.is_bandwidth() && !setup.is_list() {
        u64::from(window)
    } else {
        1
    };
    let mut rounds = Rounds::new(s, statistic, pace, min_per_round);
    let mut times = stats::rtt_histogram();
    let stopped_by = loop {
        let n = rounds.next_iterations();
        let timeout = crate::fit::phase_timeout(s.max_time_s - rounds.done_s, n, pace, PHASE_SLACK_S);
        let phase_window = (window != setup.window).then_some(window);
        let opts = PhaseOpts {
            window: phase_window,
            // The adaptive rule's max_time_s is a promise: loops that read the clock anyway
            // stop there even when a round runs long.
            soft_deadline_s: s.stop.map(|_| s.max_time_s - rounds.done_s),
        };
        let out = phase(control, thread, &setup, PhaseKind::Measure, n, opts, timeout).await?;
        if out.iterations < n {
            rounds.cut_short();
        }
        let n = out.iterations;
        let sample = match (&out.rtt, statistic) {
            (Some(h), Statistic::LatencyP50) if !h.is_empty() => h.value_at_quantile(0.5) as f64 / 2e3,
            (_, Statistic::Bandwidth) if out.elapsed_s > 0.0 => (n * bytes_per_op) as f64 / out.elapsed_s,
            _ => f64::NAN,
        };
        if let Some(h) = &out.rtt {
            let _ = times.add(h);
        }
        rounds.record(n, out.elapsed_s, sample);
        if let Some(reason) = rounds.finished() {
            break reason;
        }
    };
    let (done_iters, done_s) = (rounds.done_iters, rounds.done_s);
    if s.stop.is_none() && done_s < s.min_time_s && done_s < s.max_time_s {
        warnings.push(format!(
            "{label}: measured {done_s:.3} s, less than --min-time {} s (pace estimate fell short {MAX_FIXED_ROUNDS} times)",
            s.min_time_s
        ));
    }

    let Finished {
        verify_error,
        receive,
        send,
        health: server_after,
    } = finish(control, thread, &setup).await?;
    result.nic_health = Some(Box::new(CaseHealth::read(
        (Some(&my_before), Some(&crate::local::health_now())),
        (server_before.as_ref(), server_after.as_ref()),
    )));
    let bytes = done_iters.saturating_mul(bytes_per_op);
    let measurement = Measurement {
        warmup_iterations: warm.iterations,
        warmup_bytes: Some(warm.iterations.saturating_mul(bytes_per_op)),
        iterations: done_iters,
        elapsed_s: done_s,
        bytes,
        bandwidth_bps: (setup.test.is_bandwidth() && done_s > 0.0).then(|| bytes as f64 / done_s),
        latency_us: if setup.test == TestKind::TagLat {
            stats::one_way_latency(&times)
        } else {
            None
        },
        window,
        // Untouched buffers (benchmark-only mode) are never verified, and say so.
        verified: verify_error.is_none() && !setup.untouched,
        precision: Some(rounds.precision(stopped_by)),
        list_latency_us: if setup.is_list() {
            stats::list_latency(&times)
        } else {
            None
        },
        window_trials: trials,
        post_us: None,
    };
    let lanes = lanes.unwrap_or_default();
    result.transport = Some(icb_core::classify::classify_case(
        setup.test,
        warm.info.as_deref(),
        &lanes,
        setup.memory,
        icb_core::classify::TagViews {
            receive: receive.as_ref(),
            send: send.as_ref(),
        },
    ));
    result.measurement = Some(measurement);
    if let Some(e) = verify_error
        && !setup.untouched
    {
        result.status = CaseStatus::Failed;
        result.reason = Some(e);
    }
    Ok(result)
}
