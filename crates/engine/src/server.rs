//! `serve`: the decode side. It owns the target buffers and answers one client at a time.

use crate::admit::server_admit;
use crate::control::{Control, unexpected};
use crate::error::EngineError;
use crate::messages::{CaseReady, CaseSetup, Message, PhaseKind, Role};
use crate::options::ServeOptions;
use crate::run_error::RunError;
use crate::runtime::{LocalUcx, PhaseCtl, Runtime};
use crate::serve_loop::Sessions;
use crate::session::{AbortOnDrop, case_label, local_hello, phase_during};
use crate::ucx_thread::UcxThread;
use icb_core::{CudaInfo, MemoryType};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Longest a client may stay silent between two steps (it verifies up to a few GiB in between).
const BETWEEN_STEPS: Duration = Duration::from_secs(120);
/// Upper bound on the phase deadline a client may ask for (the session's own bound,
/// `--max-session`, applies as well).
const MAX_PHASE: Duration = Duration::from_secs(3600);

/// Runs the server until `--once` finished one client, the idle timeout passed, or an error.
pub fn serve(opts: ServeOptions) -> Result<(), EngineError> {
    // Read beside UCX's start-up; the hello waits for it.
    crate::local::prefetch_readiness();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| EngineError::Internal(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(serve_async(opts))
}

async fn serve_async(mut opts: ServeOptions) -> Result<(), EngineError> {
    let listen: SocketAddr = crate::session::resolve(&opts.listen).await?;
    let ucx_opts = opts.ucx.clone();
    let (mut thread, local) = UcxThread::spawn(move || Runtime::start(&ucx_opts))?;
    // After UCX's own setup errors (they say what to fix first), before anything listens.
    if let Err(e) = opts.guard.check_listen(listen) {
        thread.shutdown(Duration::from_secs(5));
        return Err(e);
    }
    let listener = match crate::serve_loop::listen(&mut opts, listen, &local.version).await {
        Ok(l) => l,
        Err(e) => {
            thread.shutdown(Duration::from_secs(5));
            return Err(e);
        }
    };
    tracing::info!(
        "listening on {} (UCX {} from {})",
        listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        local.version,
        local.library
    );
    let cuda = crate::local::cuda_info();
    let mut sessions = UcxSessions {
        thread: &thread,
        local: local.clone(),
        cuda: &cuda,
        opts: &opts,
    };
    let result = crate::serve_loop::serve_clients(&listener, &opts, &mut sessions).await;
    thread.shutdown(Duration::from_secs(5));
    result
}

/// The UCX engine's sessions: one [`Runtime`] on its UCX thread, its worker renewed per client.
struct UcxSessions<'a> {
    thread: &'a UcxThread<Runtime>,
    local: LocalUcx,
    cuda: &'a CudaInfo,
    opts: &'a ServeOptions,
}

impl Sessions for UcxSessions<'_> {
    async fn session(&mut self, control: &mut Control, admitted: &mut bool) -> Result<(), EngineError> {
        session(control, self.thread, &self.local, self.cuda, self.opts, admitted).await
    }

    async fn renew(&mut self) -> Result<(), EngineError> {
        match self.thread.call(|rt: &mut Runtime| rt.renew_worker()).await? {
            Ok(address) => {
                self.local.address = address;
                Ok(())
            }
            Err(e) => Err(EngineError::ucx("renewing the UCX worker for the next client", e)),
        }
    }
}

async fn session(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    local: &LocalUcx,
    cuda: &CudaInfo,
    opts: &ServeOptions,
    admitted: &mut bool,
) -> Result<(), EngineError> {
    let hello = local_hello(Role::Server, local, cuda, &opts.tool, false);
    let peer = server_admit(control, hello, None, &opts.guard).await?;
    *admitted = true;
    tracing::info!("client is {} (UCX {})", peer.hostname, peer.ucx_version);
    crate::session::check_worker_address(&peer.worker_address.0)?;
    let address = peer.worker_address.0.clone();
    let peer_errors = peer.peer_errors;
    thread
        .call(move |rt: &mut Runtime| rt.connect_peer(&address, peer_errors))
        .await?
        .map_err(|e| EngineError::ucx("connecting to the client's UCX worker", e))?;

    let mut current: Option<CaseSetup> = None;
    loop {
        let during = current
            .map(|c| case_label(&c))
            .unwrap_or_else(|| "waiting for the next case".into());
        let msg = control.recv(&during, BETWEEN_STEPS).await?;
        match msg {
            Message::Setup(setup) => {
                current = None;
                let label = case_label(&setup);
                let gpu = crate::admit::target_gpu(thread, &setup, opts.ucx.cuda_device).await?;
                if let Err(refusal) = opts.guard.check_case(&setup, gpu) {
                    tracing::info!("case {label} refused: {refusal}");
                    control.send(&Message::case_refused(refusal), &label).await?;
                    continue;
                }
                if setup.memory.target == MemoryType::Cuda && !cuda.available {
                    let reason = crate::local::no_cuda_reason("decode", cuda);
                    control.send(&Message::Skipped { reason }, &label).await?;
                    continue;
                }
                let prepared: Result<CaseReady, RunError> =
                    thread.call(move |rt: &mut Runtime| rt.target_setup(setup)).await?;
                match prepared {
                    Ok(mut ready) => {
                        current = Some(setup);
                        // The "before" reading of the case's NIC counters on this side.
                        ready.health = Some(crate::local::health_now());
                        control.send(&Message::Ready(ready), &label).await?;
                    }
                    // A GPU that cannot give the asked-for kind of memory (fabric handles,
                    // say) is this side's setup, not a failure: the case is skipped, named.
                    Err(e @ RunError::Memory(icb_memory::MemoryError::AllocModeUnsupported { .. })) => {
                        let reason = format!("decode side: {e}");
                        control.send(&Message::Skipped { reason }, &label).await?
                    }
                    Err(e) => {
                        let reason = e.to_string();
                        control.send(&Message::case_failed(reason), &label).await?
                    }
                }
            }
            Message::Phase {
                kind,
                iterations,
                timeout_s,
                window,
            } => {
                let Some(setup) = current else {
                    return Err(unexpected(
                        &during,
                        &Message::Phase {
                            kind,
                            iterations,
                            timeout_s,
                            window,
                        },
                        "setup",
                    ));
                };
                let limit = Duration::from_secs_f64(timeout_s).min(MAX_PHASE);
                let window = window.unwrap_or(setup.window);
                run_phase(control, thread, setup, kind, iterations, window, limit).await?;
            }
            Message::Finish => {
                let (verified, detail, receive) = match current.take() {
                    Some(_) => {
                        thread
                            .call(|rt: &mut Runtime| {
                                let receive = rt.receive_view();
                                let (verified, detail) = rt.target_finish();
                                (verified, detail, receive)
                            })
                            .await?
                    }
                    None => (false, Some("no case was prepared".to_string()), None),
                };
                let finished = Message::Finished {
                    verified,
                    detail,
                    receive,
                    health: Some(crate::local::health_now()),
                };
                control.send(&finished, &during).await?;
            }
            Message::Bye => return Ok(()),
            other => return Err(unexpected(&during, &other, "setup, phase, finish or bye")),
        }
    }
}

enum Event {
    Done(Result<Result<(), RunError>, EngineError>),
    Msg(Result<Message, EngineError>),
}

/// The server's part of one phase: post receives (or just progress, for one-sided tests), say
/// ready, and finish while watching the control connection for the client's end or its death.
async fn run_phase(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: CaseSetup,
    kind: PhaseKind,
    iterations: u64,
    window: u32,
    limit: Duration,
) -> Result<(), EngineError> {
    let during = phase_during(&setup, kind);
    let ctl = PhaseCtl::new(Instant::now() + limit);
    let flags = ctl.clone();
    // Dropped mid-phase (the server was interrupted): the UCX thread gives up at its next check.
    let _abort = AbortOnDrop(ctl.clone());
    let (ready_tx, ready_rx) = oneshot::channel::<()>();
    let fut = thread.call(move |rt: &mut Runtime| rt.target_phase(kind, iterations, window, ready_tx, &flags));
    tokio::pin!(fut);
    let started = tokio::select! {
        r = ready_rx => r.is_ok(),
        r = &mut fut => {
            // The phase ended before it was ready: only an error does that.
            let source = match r? { Err(e) => e, Ok(()) => RunError::Internal("the phase ended before it started") };
            return Err(EngineError::ucx(during, source));
        }
    };
    if !started {
        ctl.abort();
        let _ = fut.await;
        return Err(EngineError::Internal("the UCX thread dropped a phase".into()));
    }
    if let Err(e) = control.send(&Message::PhaseReady, &during).await {
        ctl.abort();
        let _ = fut.await;
        return Err(e);
    }
    loop {
        let ev = tokio::select! {
            r = &mut fut => Event::Done(r),
            m = control.next(&during) => Event::Msg(m),
        };
        match ev {
            Event::Done(r) => {
                r?.map_err(|e| EngineError::ucx(during.clone(), e))?;
                break;
            }
            Event::Msg(Ok(Message::PhaseEnd)) => ctl.stop(),
            Event::Msg(other) => {
                ctl.abort();
                let _ = (&mut fut).await;
                return match other {
                    Ok(m) => Err(unexpected(&during, &m, "phase_end")),
                    Err(e) => Err(e),
                };
            }
        }
    }
    control.send(&Message::PhaseDone, &during).await
}
