//! `connect --engine nixl`: the prefill side. It initiates every READ and WRITE through its NIXL
//! agent, times them, verifies the payload outside the timed region, names the data path from
//! UCX's own protocol report, and builds the judged report.

use crate::error::NixlEngineError;
use crate::error::RuntimeError;
use crate::evidence;
use crate::nixl_failed;
use crate::options::NixlOptions;
use crate::per_case::{CaseKey, attribute_per_case};
use crate::runtime::{LocalNixl, NixlRuntime, PhaseCtl, PhaseGoal, PhaseOutcome, UcxLog, agent_name, case_len};
use crate::session::{ENGINE, HELLO_TIMEOUT, case_label, cuda_info, local_hello, no_cuda_reason};
use icb_core::rails::nic_health::HealthSnapshot;
use icb_core::rails::nic_health::case::CaseHealth;
use icb_core::{
    CaseEngine, CaseResult, CaseShape, CaseStatus, CudaAllocMode, CudaInfo, Direction, EngineKind, Measurement,
    MemoryPair, MemoryType, PairReport,
};
use icb_engine::control::{Control, unexpected};
use icb_engine::messages::{CaseReady, CaseSetup, Hello, Message, PhaseKind, Role};
use icb_engine::ucx_thread::UcxThread;
use icb_engine::{ConnectOptions, EngineError, SessionRecord, SessionStart, SessionState};
use std::time::Duration;

/// Added to every phase deadline: setup and scheduling slack.
const PHASE_SLACK_S: f64 = 30.0;

/// Runs every (direction, memory pair, block size, batch) case against a `serve --engine nixl`
/// and returns the judged report. Of `opts.ucx` only `config` applies (as `UCX_*` variables: NIXL
/// brings its own UCX);
/// `opts.settings.window` is replaced by the batches. The caller must leave the process through
/// [`crate::exit_process`] afterwards.
pub fn connect(mut opts: ConnectOptions, nixl: NixlOptions) -> Result<PairReport, NixlEngineError> {
    // Read beside UCX's start-up; the hello waits for it.
    icb_engine::local::prefetch_readiness();
    validate(&mut opts, &nixl)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| EngineError::Internal(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(connect_async(opts, nixl))
}

/// Checks the settings and turns them into the NIXL engine's cases ([`crate::nixl_settings`]).
fn validate(opts: &mut ConnectOptions, nixl: &NixlOptions) -> Result<(), EngineError> {
    let settings =
        crate::options::nixl_settings(opts.settings.clone(), nixl).map_err(|e| EngineError::Settings(e.to_string()))?;
    icb_engine::validate_settings(&settings)?;
    for (shape, memory) in settings.case_list() {
        let probe = case_setup(&shape, memory, 0, Default::default());
        match shape.kv {
            Some(_) => icb_engine::messages::Message::Setup(probe)
                .validate()
                .map_err(|e| EngineError::Settings(e.to_string()))?,
            None => {
                case_len(&probe).map_err(|e| EngineError::Settings(e.to_string()))?;
            }
        }
    }
    opts.settings = settings;
    Ok(())
}

/// One case's setup as this engine runs it (the check of `validate` and the measured case): a
/// NIXL request's descriptors are this engine's `window` (one for a KV request, whose layout
/// says the rest); UCX's block layout is unused.
fn case_setup(shape: &CaseShape, memory: MemoryPair, seed: u64, cuda_alloc: CudaAllocMode) -> CaseSetup {
    CaseSetup {
        test: shape.test,
        memory,
        size: shape.size,
        window: if shape.kv.is_some() {
            1
        } else {
            shape.blocks.unwrap_or(1)
        },
        seed,
        blocks: 1,
        untouched: false,
        kv: shape.kv,
        cuda_alloc,
    }
}

async fn connect_async(opts: ConnectOptions, nixl: NixlOptions) -> Result<PairReport, NixlEngineError> {
    let mut start = SessionStart::resolve(&opts.server).await?;
    // NIXL's UCX reads its settings from the environment: a plan's UCX settings (a negative
    // control's `TLS=tcp`) go there before NIXL starts, over the user's own.
    let forced: Vec<(String, String)> = opts
        .ucx
        .config
        .iter()
        .map(|(k, v)| (format!("UCX_{k}"), v.clone()))
        .collect();
    nixl::set_env_before_start(&forced);
    let log = UcxLog::prepare()?;
    let name = agent_name("prefill");
    let nixl_opts = nixl.clone();
    let (mut thread, local) = UcxThread::spawn(move || NixlRuntime::start(&nixl_opts, &name))?;
    let cuda = cuda_info();

    // A caller without a token gets one that is never cancelled.
    let cancel = opts.cancel.clone().unwrap_or_default();
    let mut control = icb_engine::control::connect_client(&mut start, &opts, &cancel, &mut thread).await?;
    let mut opts = opts;
    let mut done = Session::default();
    let result = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(EngineError::Interrupted),
        r = run_session(&mut control, &thread, &local, &cuda, &log, &mut opts, &mut done) => r,
    };
    // An interrupted run still reports what it measured, once the server's hello is known.
    let interrupted =
        icb_engine::control::end_client_session(control, &mut thread, result, done.state.server.is_some()).await?;
    // Destroying the agent (its UCX worker) is what makes UCX print the `used` protocol tables.
    thread.shutdown(Duration::from_secs(10));
    let Session { mut state, log_marks } = done;
    attribute_cases(&mut state.cases, &log_marks, &log, &local, &mut state.warnings);
    let mine = local_hello(Role::Client, &local, &cuda, &opts.tool);
    let record = SessionRecord {
        start,
        mine,
        session: state,
        interrupted,
    };
    Ok(icb_engine::assemble_report(&opts, record)?)
}

/// Names each measured case's data path from UCX's protocol tables.
fn attribute_cases(
    cases: &mut [CaseResult],
    log_marks: &[usize],
    log: &UcxLog,
    local: &LocalNixl,
    warnings: &mut Vec<String>,
) {
    let (text, unreadable) = match log.read() {
        Ok(text) => (text, None),
        Err(why) => (String::new(), Some(why)),
    };
    let tables = evidence::parse(&text);
    if tables.is_empty() {
        let user = log
            .user_setting()
            .map(|v| format!(" in the user's UCX_LOG_FILE={v}"))
            .unwrap_or_default();
        warnings.push(match unreadable {
            Some(why) => format!("UCX's log could not be read ({why}): data paths unknown"),
            None => format!(
                "NIXL's UCX {} printed no protocol tables{user} (UCX_PROTO_INFO={}): data paths unknown",
                local.ucx_version, local.proto_info
            ),
        });
    }
    let keys: Vec<(usize, CaseKey)> = cases
        .iter()
        .enumerate()
        .filter(|(_, c)| c.status == CaseStatus::Measured)
        .filter_map(|(i, c)| {
            let key = CaseKey {
                direction: c.run_by.direction?,
                memory: c.memory,
                size: c.size,
                log_end: log_marks.get(i).copied(),
            };
            Some((i, key))
        })
        .collect();
    let found = attribute_per_case(&text, &keys.iter().map(|(_, k)| *k).collect::<Vec<_>>());
    for ((i, _), evidence) in keys.iter().zip(found) {
        let case = &mut cases[*i];
        case.transport = Some(evidence.unwrap_or_else(|| icb_core::classify::classify(None, &[], case.memory)));
    }
}

/// What a session got so far; it outlives the session's future, so an interrupted run keeps the
/// cases measured before the interruption.
#[derive(Default)]
struct Session {
    /// The server's hello and the measured cases, as the UCX engine keeps them.
    state: SessionState,
    /// The UCX log's length after each case (for per-case attribution), aligned with `cases`.
    log_marks: Vec<usize>,
}

async fn run_session(
    control: &mut Control,
    thread: &UcxThread<NixlRuntime>,
    local: &LocalNixl,
    cuda: &CudaInfo,
    log: &UcxLog,
    opts: &mut ConnectOptions,
    done: &mut Session,
) -> Result<(), EngineError> {
    let hello = local_hello(Role::Client, local, cuda, &opts.tool);
    let limit = opts.connect_timeout.min(HELLO_TIMEOUT);
    let server: Hello =
        icb_engine::admit::client_admit(control, hello, Some(ENGINE), opts.token.as_ref(), limit, &opts.server).await?;
    done.state.server = Some(server.clone());
    let md = server.worker_address.0.clone();
    thread
        .call(move |rt: &mut NixlRuntime| rt.load_peer(&md))
        .await?
        .map_err(|detail| nixl_failed("loading the server's NIXL metadata", detail))?;

    let s = opts.settings.clone();
    let mut seed = 0x41c1_0001u64;
    for (shape, memory) in s.case_list() {
        // `validate` let only READ (get) and WRITE (put) shapes through.
        let Some(direction) = Direction::of_test(shape.test) else {
            continue;
        };
        seed = seed.wrapping_add(0x9E37_79B9);
        let setup = case_setup(&shape, memory, seed, s.cuda_alloc);
        let case = run_case(control, thread, setup, direction, &s, cuda, &server).await?;
        if let Some(cb) = opts.on_case.as_mut() {
            cb(&case);
        }
        done.state.cases.push(case);
        done.log_marks.push(log.mark());
    }
    control.send(&Message::Bye, "the goodbye").await?;
    Ok(())
}

async fn run_case(
    control: &mut Control,
    thread: &UcxThread<NixlRuntime>,
    setup: CaseSetup,
    direction: Direction,
    s: &icb_core::RunSettings,
    cuda: &CudaInfo,
    server: &Hello,
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
        blocks: Some(descriptors(&setup)),
        run_by: CaseEngine {
            engine: EngineKind::Nixl,
            direction: Some(direction),
        },
        rail: None,
        cuda_alloc: None,
        nic_health: None,
    };
    let label = case_label(direction, &setup);
    let not_run = |mut r: CaseResult, status: CaseStatus, reason: String| {
        r.status = status;
        r.reason = Some(reason);
        Ok(r)
    };
    if setup.memory.initiator == MemoryType::Cuda && !cuda.available {
        return not_run(result, CaseStatus::Skipped, no_cuda_reason("prefill", cuda));
    }
    if setup.memory.target == MemoryType::Cuda && !server.cuda.available {
        return not_run(result, CaseStatus::Skipped, no_cuda_reason("decode", &server.cuda));
    }
    control.send(&Message::Setup(setup), &label).await?;
    let ready: CaseReady = match control.recv(&label, HELLO_TIMEOUT * 8).await? {
        Message::Ready(r) => r,
        Message::Skipped { reason } => return not_run(result, CaseStatus::Skipped, reason),
        // The server's bounds (`--max-buffer`, free GPU memory) are its setup, not the fabric:
        // not measured, with the refusal's one line as the reason.
        Message::CaseFailed {
            reason,
            refused: Some(_),
        } => {
            return not_run(
                result,
                CaseStatus::Skipped,
                format!("refused by the decode side: {reason}"),
            );
        }
        Message::CaseFailed { reason, .. } => {
            return not_run(result, CaseStatus::Failed, format!("decode side: {reason}"));
        }
        other => return Err(unexpected(&label, &other, "ready, skipped or case_failed")),
    };
    if let Some(why) = icb_engine::alloc::older_server_allocation(&setup, &ready) {
        finish(control, thread, &label).await?;
        return not_run(result, CaseStatus::Failed, why);
    }
    let server_alloc = ready.cuda_alloc;
    let server_before = ready.health.clone();
    let prepared = thread
        .call(move |rt: &mut NixlRuntime| rt.initiator_setup(setup, &ready))
        .await?;
    match prepared {
        Ok(initiator) => result.cuda_alloc = icb_engine::alloc::case_allocation(&setup, initiator, server_alloc),
        Err(reason) => {
            finish(control, thread, &label).await?;
            return not_run(result, CaseStatus::Failed, format!("prefill side: {reason}"));
        }
    }
    // Both sides read their NIC counters with both buffers registered and again once the case
    // is finished, as the UCX engine does: the deltas cover its phases (issue 40).
    let my_before = icb_engine::local::health_now();

    let warm_goal = PhaseGoal {
        min_iterations: s.warmup_iterations,
        min_time_s: 0.0,
        max_time_s: s.max_time_s,
    };
    let warm_limit = (s.max_time_s * 4.0).max(30.0) + PHASE_SLACK_S;
    let warm = phase(control, thread, &label, PhaseKind::Warmup, warm_goal, warm_limit).await?;
    let goal = PhaseGoal {
        min_iterations: s.min_iterations.max(1),
        min_time_s: s.min_time_s,
        max_time_s: s.max_time_s,
    };
    let out = phase(
        control,
        thread,
        &label,
        PhaseKind::Measure,
        goal,
        s.max_time_s * 2.0 + PHASE_SLACK_S,
    )
    .await?;
    let (verify_error, server_after) = finish(control, thread, &label).await?;
    result.nic_health = Some(Box::new(CaseHealth::read(
        (Some(&my_before), Some(&icb_engine::local::health_now())),
        (server_before.as_ref(), server_after.as_ref()),
    )));

    let per_request = setup.size.saturating_mul(u64::from(descriptors(&setup)));
    let bytes = out.iterations.saturating_mul(per_request);
    result.measurement = Some(Measurement {
        warmup_iterations: warm.iterations,
        warmup_bytes: Some(warm.iterations.saturating_mul(per_request)),
        iterations: out.iterations,
        elapsed_s: out.elapsed_s,
        bytes,
        bandwidth_bps: (out.elapsed_s > 0.0).then(|| bytes as f64 / out.elapsed_s),
        latency_us: icb_engine::stats::list_latency(&out.latency_ns),
        window: setup.window,
        verified: verify_error.is_none(),
        precision: None,
        list_latency_us: None,
        window_trials: Vec::new(),
        post_us: (out.iterations > 0).then(|| out.post_s * 1e6 / out.iterations as f64),
    });
    if let Some(e) = verify_error {
        result.status = CaseStatus::Failed;
        result.reason = Some(e);
    }
    Ok(result)
}

/// Descriptors per request: a KV case's geometry, else the batch.
fn descriptors(setup: &CaseSetup) -> u32 {
    match setup.kv {
        Some(kv) => u32::try_from(kv.count).unwrap_or(u32::MAX),
        None => setup.window,
    }
}

enum Event {
    Done(Result<Result<PhaseOutcome, RuntimeError>, EngineError>),
    Msg(Result<Message, EngineError>),
}

/// One phase: the server starts progressing, the client runs its requests (timed on the owner
/// thread) while watching the control connection, then both say done.
async fn phase(
    control: &mut Control,
    thread: &UcxThread<NixlRuntime>,
    label: &str,
    kind: PhaseKind,
    goal: PhaseGoal,
    timeout_s: f64,
) -> Result<PhaseOutcome, EngineError> {
    let during = match kind {
        PhaseKind::Warmup => format!("{label} (warmup)"),
        _ => label.to_string(),
    };
    let limit = Duration::from_secs_f64(timeout_s);
    control
        .send(
            &Message::Phase {
                kind,
                iterations: goal.min_iterations,
                timeout_s,
                window: None,
            },
            &during,
        )
        .await?;
    match control.recv(&during, limit).await? {
        Message::PhaseReady => {}
        other => return Err(unexpected(&during, &other, "phase_ready")),
    }
    let ctl = PhaseCtl::new(limit);
    let job_ctl = ctl.clone();
    let fut = thread.call(move |rt: &mut NixlRuntime| rt.initiator_phase(goal, &job_ctl));
    tokio::pin!(fut);
    let ev = tokio::select! {
        r = &mut fut => Event::Done(r),
        m = control.next(&during) => Event::Msg(m),
    };
    let outcome = match ev {
        Event::Done(r) => r?,
        Event::Msg(other) => {
            // The server spoke mid-phase (an error, or it died): stop the requests, report it.
            ctl.stop();
            let _ = (&mut fut).await;
            return match other {
                Ok(m) => Err(unexpected(&during, &m, "nothing during a phase")),
                Err(e) => Err(e),
            };
        }
    };
    let outcome = outcome.map_err(|detail| nixl_failed(&during, detail))?;
    control.send(&Message::PhaseEnd, &during).await?;
    match control.recv(&during, limit).await? {
        Message::PhaseDone => Ok(outcome),
        other => Err(unexpected(&during, &other, "phase_done")),
    }
}

/// Verifies on both sides and releases the case; returns the first verification error and the
/// server's NIC counters once it finished (absent from older servers: not read).
async fn finish(
    control: &mut Control,
    thread: &UcxThread<NixlRuntime>,
    label: &str,
) -> Result<(Option<String>, Option<HealthSnapshot>), EngineError> {
    let local = thread.call(|rt: &mut NixlRuntime| rt.finish(true)).await?;
    control.send(&Message::Finish, label).await?;
    let (remote, health) = match control.recv(label, HELLO_TIMEOUT * 8).await? {
        Message::Finished {
            verified: true, health, ..
        } => (None, health),
        Message::Finished { detail, health, .. } => (
            Some(format!(
                "decode side: {}",
                detail.unwrap_or_else(|| "payload not verified".into())
            )),
            health,
        ),
        other => return Err(unexpected(label, &other, "finished")),
    };
    Ok((local.err().map(|e| format!("prefill side: {e}")).or(remote), health))
}
