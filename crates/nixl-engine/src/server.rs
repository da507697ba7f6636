//! `serve --engine nixl`: the decode side. It owns the target buffers, registers them with its
//! NIXL agent, hands the client its metadata, and progresses the agent while the client reads
//! and writes.

use crate::error::NixlEngineError;
use crate::nixl_failed;
use crate::options::NixlOptions;
use crate::runtime::{LocalNixl, NixlRuntime, PhaseCtl, UcxLog, agent_name, direction_of};
use crate::session::{ENGINE, cuda_info, local_hello, no_cuda_reason, resolve};
use icb_core::{CudaInfo, MemoryType};
use icb_engine::admit::{server_admit, target_gpu};
use icb_engine::control::{Control, unexpected};
use icb_engine::messages::{CaseSetup, Message, PhaseKind, Role};
use icb_engine::serve_loop::Sessions;
use icb_engine::ucx_thread::UcxThread;
use icb_engine::{EngineError, ServeOptions};
use std::time::Duration;

/// Longest wait for the client's next message between phases.
const IDLE_IN_SESSION: Duration = Duration::from_secs(600);

/// Serves NIXL-engine clients until `opts.once` is satisfied or the idle timeout passes.
/// `opts.ucx` is ignored: NIXL brings its own UCX. The caller must leave the process through
/// [`crate::exit_process`] afterwards.
pub fn serve(opts: ServeOptions, nixl: NixlOptions) -> Result<(), NixlEngineError> {
    // Read beside UCX's start-up; the hello waits for it.
    icb_engine::local::prefetch_readiness();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| EngineError::Internal(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(serve_async(opts, nixl))
}

async fn serve_async(mut opts: ServeOptions, nixl: NixlOptions) -> Result<(), NixlEngineError> {
    let listen = resolve(&opts.listen).await?;
    let _log = UcxLog::prepare()?;
    let name = agent_name("decode");
    let (mut thread, local) = UcxThread::spawn(move || NixlRuntime::start(&nixl, &name))?;
    // After NIXL's own setup errors (they say what to fix first), before anything listens.
    if let Err(e) = opts.guard.check_listen(listen) {
        thread.shutdown(Duration::from_secs(5));
        return Err(e.into());
    }
    let listener = match icb_engine::serve_loop::listen(&mut opts, listen, &local.ucx_version).await {
        Ok(l) => l,
        Err(e) => {
            thread.shutdown(Duration::from_secs(5));
            return Err(e.into());
        }
    };
    tracing::info!(
        "listening on {} (NIXL {} from {}, UCX {})",
        listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        local.info.version,
        local.info.library,
        local.ucx_version
    );
    let cuda = cuda_info();
    let mut sessions = NixlSessions {
        thread: &thread,
        local: local.clone(),
        cuda: &cuda,
        opts: &opts,
    };
    let result = icb_engine::serve_loop::serve_clients(&listener, &opts, &mut sessions).await;
    thread.shutdown(Duration::from_secs(5));
    result.map_err(NixlEngineError::from)
}

/// The NIXL engine's sessions: one [`NixlRuntime`] on its thread, its agent renewed per client
/// (NIXL keeps every registration it sent to a peer until the agent dies; see
/// `NixlRuntime::renew_agent`).
struct NixlSessions<'a> {
    thread: &'a UcxThread<NixlRuntime>,
    local: LocalNixl,
    cuda: &'a CudaInfo,
    opts: &'a ServeOptions,
}

impl Sessions for NixlSessions<'_> {
    async fn session(&mut self, control: &mut Control, admitted: &mut bool) -> Result<(), EngineError> {
        session(control, self.thread, &self.local, self.cuda, self.opts, admitted).await
    }

    async fn renew(&mut self) -> Result<(), EngineError> {
        match self.thread.call(|rt: &mut NixlRuntime| rt.renew_agent()).await? {
            Ok(metadata) => {
                self.local.metadata = metadata;
                Ok(())
            }
            Err(detail) => Err(nixl_failed("renewing the NIXL agent for the next client", detail)),
        }
    }
}

async fn session(
    control: &mut Control,
    thread: &UcxThread<NixlRuntime>,
    local: &LocalNixl,
    cuda: &CudaInfo,
    opts: &ServeOptions,
    admitted: &mut bool,
) -> Result<(), EngineError> {
    let hello = local_hello(Role::Server, local, cuda, &opts.tool);
    let peer = server_admit(control, hello, Some(ENGINE), &opts.guard).await?;
    *admitted = true;
    let md = peer.worker_address.0.clone();
    thread
        .call(move |rt: &mut NixlRuntime| rt.load_peer(&md))
        .await?
        .map_err(|detail| nixl_failed("loading the client's NIXL metadata", detail))?;

    let mut current: Option<CaseSetup> = None;
    loop {
        let during = "waiting for the client's next step";
        match control.recv(during, IDLE_IN_SESSION).await? {
            Message::Setup(setup) => {
                current = None;
                if direction_of(&setup).is_none() {
                    let reason = "the NIXL engine runs get_bw (READ) and put_bw (WRITE) only".to_string();
                    control.send(&Message::case_failed(reason), during).await?;
                    continue;
                }
                // NIXL cases allocate on GPU 0 (`NixlRuntime`), so that is the GPU asked.
                let gpu = target_gpu(thread, &setup, 0).await?;
                if let Err(refusal) = opts.guard.check_case(&setup, gpu) {
                    tracing::info!("case refused: {refusal}");
                    control.send(&Message::case_refused(refusal), during).await?;
                    continue;
                }
                if setup.memory.target == MemoryType::Cuda && !cuda.available {
                    let reason = no_cuda_reason("decode", cuda);
                    control.send(&Message::Skipped { reason }, during).await?;
                    continue;
                }
                let reply = match thread.call(move |rt: &mut NixlRuntime| rt.target_setup(setup)).await? {
                    Ok(mut ready) => {
                        current = Some(setup);
                        // The "before" reading of the case's NIC counters on this side (issue
                        // 40), the same reader as the UCX engine's.
                        ready.health = Some(icb_engine::local::health_now());
                        Message::Ready(ready)
                    }
                    Err(reason) => Message::case_failed(reason.to_string()),
                };
                control.send(&reply, during).await?;
            }
            Message::Phase { kind, timeout_s, .. } if current.is_some() && kind != PhaseKind::Wireup => {
                run_phase(control, thread, timeout_s).await?;
            }
            Message::Finish => {
                let r = thread.call(|rt: &mut NixlRuntime| rt.finish(false)).await?;
                current = None;
                let reply = Message::Finished {
                    verified: r.is_ok(),
                    detail: r.err().map(|e| e.to_string()),
                    receive: None,
                    health: Some(icb_engine::local::health_now()),
                };
                control.send(&reply, during).await?;
            }
            Message::Bye => return Ok(()),
            other => return Err(unexpected(during, &other, "setup, phase, finish or bye")),
        }
    }
}

/// Progresses the agent until the client says the phase ended (its requests completed).
async fn run_phase(control: &mut Control, thread: &UcxThread<NixlRuntime>, timeout_s: f64) -> Result<(), EngineError> {
    let during = "a NIXL phase";
    let limit = Duration::from_secs_f64(timeout_s.clamp(1.0, 7200.0));
    let ctl = PhaseCtl::new(limit);
    let job_ctl = ctl.clone();
    let job = thread.call(move |rt: &mut NixlRuntime| rt.target_progress(&job_ctl));
    control.send(&Message::PhaseReady, during).await?;
    tokio::pin!(job);
    let msg = tokio::select! {
        r = &mut job => {
            // Progress ended before the client said so: an error or the deadline.
            let detail = match r? {
                Ok(()) => "progress ended early".to_string(),
                Err(e) => e.to_string(),
            };
            return Err(nixl_failed(during, detail));
        }
        m = control.recv(during, limit) => m,
    };
    ctl.stop();
    let progressed = job.await?;
    match msg? {
        Message::PhaseEnd => {}
        other => return Err(unexpected(during, &other, "phase_end")),
    }
    progressed.map_err(|detail| nixl_failed(during, detail))?;
    control.send(&Message::PhaseDone, during).await
}
