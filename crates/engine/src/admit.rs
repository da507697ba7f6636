//! What `serve` admits, for both engines: the token check of the hello exchange (both halves),
//! one session at a time (later clients are told "busy" at once), a connection rate, a deadline
//! for the whole admission and one for every session, and the largest buffer one case may ask.
//!
//! Each engine's accept loop runs [`next_client`], then its session raced against
//! [`refuse_while_busy`] and bounded by [`ServeGuard::max_session`]; its session begins with
//! [`server_admit`] and checks each setup with [`ServeGuard::check_case`]. The client's half is
//! [`client_admit`].

use crate::auth::{self, Token};
use crate::control::{Control, unexpected};
use crate::error::{Admission, EngineError};
use crate::messages::{CaseSetup, DenyCause, Hello, HelloAuth, HexBytes, Message, Role};
use crate::session::check_peer_hello;
/// The case refusal travels in `case_failed`, so the protocol crate defines it.
pub use icb_control::messages::CaseRefusal;
use icb_core::MemoryType;
use icb_memory::GpuMemory;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// The whole admission (challenge to the server's hello) must be over within this long.
pub const ADMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default `--max-session`.
pub const DEFAULT_MAX_SESSION: Duration = Duration::from_secs(3600);

/// The server's bounds on what one client may ask (see the module doc).
#[derive(Debug, Clone)]
pub struct ServeGuard {
    /// The shared secret clients must prove; `None`: anyone is admitted (loopback, or with
    /// `allow_no_token`).
    pub token: Option<Token>,
    /// `--insecure-no-token`: listen beyond loopback without a token.
    pub allow_no_token: bool,
    /// Largest target buffer of one case, bytes (`--max-buffer`; default [`default_max_buffer`]).
    pub max_buffer: u64,
    /// Longest one session may last (`--max-session`).
    pub max_session: Duration,
    /// Admission deadline (see [`ADMIT_TIMEOUT`]).
    pub admit_timeout: Duration,
    /// New connections admitted in a burst, and per second after it.
    pub rate_burst: u32,
    pub rate_per_s: f64,
}

impl Default for ServeGuard {
    fn default() -> Self {
        ServeGuard {
            token: None,
            allow_no_token: false,
            max_buffer: default_max_buffer(),
            max_session: DEFAULT_MAX_SESSION,
            admit_timeout: ADMIT_TIMEOUT,
            rate_burst: 20,
            rate_per_s: 10.0,
        }
    }
}

/// Half of the memory available now (`MemAvailable`), capped at the protocol's 16 GiB: a client
/// cannot make the server allocate its node into swap or the OOM killer. A CUDA case is bound by
/// its GPU's free memory as well, asked when the case comes ([`gpu_limit`]).
pub fn default_max_buffer() -> u64 {
    let cap = crate::messages::MAX_MESSAGE_SIZE;
    mem_available().map_or(cap, |bytes| (bytes / 2).min(cap))
}

fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

impl ServeGuard {
    /// Refuses a token-less server on a non-loopback address unless explicitly allowed; warns
    /// (one line) about a token-less one anywhere else.
    pub fn check_listen(&self, addr: SocketAddr) -> Result<(), EngineError> {
        if self.token.is_some() {
            return Ok(());
        }
        if !addr.ip().is_loopback() && !self.allow_no_token {
            return Err(EngineError::Settings(format!(
                "serve on {addr} without a token would admit anyone who can reach it: give --token-file FILE (or IC_BENCH_TOKEN), listen on 127.0.0.1, or pass --insecure-no-token"
            )));
        }
        tracing::warn!("serve runs without a token, so any client that can reach {addr} is admitted");
        Ok(())
    }

    /// Whether the server may prepare `setup`: its buffer within `--max-buffer` and, for a CUDA
    /// target, within what `gpu` (that GPU's memory, asked just now; `None` when there is no GPU
    /// or its driver cannot say) can give ([`bound_gpu`]).
    pub fn check_case(&self, setup: &CaseSetup, gpu: Option<GpuMemory>) -> Result<(), CaseRefusal> {
        let needs = match setup.target_bytes() {
            Some(b) if b <= self.max_buffer => b,
            b => {
                return Err(CaseRefusal::AboveMaxBuffer {
                    needs: b,
                    limit: self.max_buffer,
                });
            }
        };
        match gpu {
            Some(gpu) if setup.memory.target == MemoryType::Cuda => bound_gpu(needs, gpu.free, self.max_buffer)
                .map_err(|limit| CaseRefusal::AboveGpuFree {
                    needs,
                    device: gpu.device,
                    free: gpu.free,
                    limit,
                }),
            _ => Ok(()),
        }
    }

    /// Bounds one session by `max_session`.
    pub async fn bounded<F: std::future::Future<Output = Result<(), EngineError>>>(
        &self,
        session: F,
    ) -> Result<(), EngineError> {
        match tokio::time::timeout(self.max_session, session).await {
            Ok(r) => r,
            Err(_) => Err(EngineError::SessionLimit(format!(
                "{:.0} s",
                self.max_session.as_secs_f64()
            ))),
        }
    }
}

/// The largest CUDA buffer a server gives one case on a GPU with `free` bytes free: half of it
/// (as for host memory: other processes and the CUDA context itself need the rest), never above
/// `max_buffer`.
pub fn gpu_limit(free: u64, max_buffer: u64) -> u64 {
    (free / 2).min(max_buffer)
}

/// The decision for a CUDA case: `Ok` when `requested` bytes fit [`gpu_limit`], else that limit.
pub fn bound_gpu(requested: u64, free: u64, max_buffer: u64) -> Result<(), u64> {
    let limit = gpu_limit(free, max_buffer);
    if requested <= limit { Ok(()) } else { Err(limit) }
}

/// What a CUDA-target case may get on this server's GPU `device`, asked on `thread` (which owns
/// the process's CUDA context) right before the case is prepared. `None` for a host target,
/// without a driver, or when the driver cannot say: then the allocation's own error decides.
pub async fn target_gpu<S: 'static>(
    thread: &crate::ucx_thread::UcxThread<S>,
    setup: &CaseSetup,
    device: usize,
) -> Result<Option<GpuMemory>, EngineError> {
    if setup.memory.target != MemoryType::Cuda {
        return Ok(None);
    }
    match thread.call(move |_: &mut S| icb_memory::gpu_memory(device)).await? {
        Ok(m) => Ok(Some(m)),
        Err(e) => {
            tracing::debug!("GPU {device}'s free memory is unknown ({e}): only --max-buffer bounds the case");
            Ok(None)
        }
    }
}

/// A token bucket over new connections (a reconnect loop cannot make the server renew UCX
/// workers or answer challenges without bound). A connection that proved the token gets its
/// allowance back ([`RateLimit::refund`]): only unadmitted connections are limited, so a fast
/// loop of real clients is never refused for its rate.
#[derive(Debug)]
pub struct RateLimit {
    tokens: f64,
    burst: f64,
    per_s: f64,
    last: Instant,
}

impl RateLimit {
    pub fn new(guard: &ServeGuard) -> Self {
        RateLimit {
            tokens: f64::from(guard.rate_burst),
            burst: f64::from(guard.rate_burst),
            per_s: guard.rate_per_s,
            last: Instant::now(),
        }
    }

    /// Returns an admitted connection's allowance.
    pub fn refund(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.burst);
    }

    /// Takes one connection's allowance; `false`: over the rate.
    pub fn allow(&mut self) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.per_s).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Tells a connection why it is not served, best effort within a second, off the serving path.
fn deny_detached(mut stream: tokio::net::TcpStream, cause: DenyCause) {
    tokio::spawn(async move {
        let msg = Message::Denied {
            cause,
            message: Admission::Denied(cause).to_string(),
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            crate::wire::write_frame(&mut stream, &msg).await?;
            stream.shutdown().await.map_err(crate::wire::WireError::from)
        })
        .await;
    });
}

/// The next client within the idle timeout, connections over the rate turned away.
pub async fn next_client(
    listener: &TcpListener,
    idle_timeout: Option<Duration>,
    rate: &mut RateLimit,
) -> Result<(Control, SocketAddr), EngineError> {
    loop {
        let (stream, peer) = crate::control::accept_stream(listener, idle_timeout).await?;
        if rate.allow() {
            return Ok((Control::new(stream), peer));
        }
        tracing::debug!("client {peer}: over the connection rate, refused");
        deny_detached(stream, DenyCause::RateLimited);
    }
}

/// While a session runs: every other connection is told "busy" at once (never completes).
pub async fn refuse_while_busy(listener: &TcpListener, rate: &mut RateLimit) -> std::convert::Infallible {
    loop {
        let Ok((stream, peer)) = crate::control::accept_stream(listener, None).await else {
            continue;
        };
        let cause = if rate.allow() {
            DenyCause::Busy
        } else {
            DenyCause::RateLimited
        };
        tracing::info!(
            "client {peer}: refused, {}",
            if cause == DenyCause::Busy {
                "busy"
            } else {
                "over the rate"
            }
        );
        deny_detached(stream, cause);
    }
}

/// The server's half of the admission, for both engines: challenge, the client's hello and its
/// proof, then this side's hello (with its proof). All within the guard's admission deadline.
pub async fn server_admit(
    control: &mut Control,
    mut mine: Hello,
    engine: Option<&str>,
    guard: &ServeGuard,
) -> Result<Hello, EngineError> {
    let during = "the hello exchange";
    let admit = async {
        let nonce = auth::random_bytes();
        let challenge = Message::Challenge {
            nonce: HexBytes(nonce.to_vec()),
            token_required: guard.token.is_some(),
        };
        control.send(&challenge, during).await?;
        let peer = match control.next(during).await? {
            Message::Hello(h) => *h,
            other => return Err(unexpected(during, &other, "hello")),
        };
        if let Some(token) = &guard.token {
            let Some(a) = &peer.auth else {
                return Err(deny(control, Admission::NoClientToken).await);
            };
            let client_id = auth::identity(&peer);
            if !auth::verify_client(token, &nonce, &a.nonce.0, &client_id, &a.proof.0) {
                return Err(deny(control, Admission::WrongClientToken).await);
            }
            check_peer_hello(&peer, Role::Client, engine)?;
            mine.auth = Some(HelloAuth {
                nonce: HexBytes(nonce.to_vec()),
                proof: auth::server_proof(token, &nonce, &a.nonce.0, &client_id, &auth::identity(&mine)),
            });
        } else {
            check_peer_hello(&peer, Role::Client, engine)?;
        }
        control.send(&Message::Hello(Box::new(mine)), during).await?;
        Ok(peer)
    };
    match tokio::time::timeout(guard.admit_timeout, admit).await {
        Ok(r) => r,
        Err(_) => Err(EngineError::Timeout {
            during: during.into(),
            secs: guard.admit_timeout.as_secs_f64(),
        }),
    }
}

async fn deny(control: &mut Control, why: Admission) -> EngineError {
    let msg = Message::Denied {
        cause: DenyCause::Unauthorized,
        message: Admission::Denied(DenyCause::Unauthorized).to_string(),
    };
    let _ = control.send(&msg, "the hello exchange").await;
    EngineError::Admission(why)
}

/// The client's half: waits (at most `limit`) for the challenge, answers with `mine` and its
/// proof, and checks the server's hello and proof. `addr` names the server in errors.
pub async fn client_admit(
    control: &mut Control,
    mut mine: Hello,
    engine: Option<&str>,
    token: Option<&Token>,
    limit: Duration,
    addr: &str,
) -> Result<Hello, EngineError> {
    let during = "the hello exchange";
    let no_hello = |e: EngineError| match e {
        EngineError::Timeout { secs, .. } => EngineError::NoHello {
            addr: addr.to_string(),
            secs,
        },
        e => e,
    };
    let (server_nonce, required) = match control.recv(during, limit).await.map_err(no_hello)? {
        Message::Challenge { nonce, token_required } => (nonce.0, token_required),
        Message::Denied { cause, .. } => return Err(EngineError::Admission(Admission::Denied(cause))),
        other => return Err(unexpected(during, &other, "challenge")),
    };
    let token = match (token, required) {
        (None, true) => return Err(EngineError::Admission(Admission::TokenRequired)),
        (Some(_), false) => return Err(EngineError::Admission(Admission::ServerWithoutToken)),
        (t, _) => t,
    };
    let client_nonce = auth::random_bytes();
    let client_id = auth::identity(&mine);
    if let Some(t) = token {
        mine.auth = Some(HelloAuth {
            nonce: HexBytes(client_nonce.to_vec()),
            proof: auth::client_proof(t, &server_nonce, &client_nonce, &client_id),
        });
    }
    control.send(&Message::Hello(Box::new(mine)), during).await?;
    let server = match control.recv(during, limit).await.map_err(no_hello)? {
        Message::Hello(h) => *h,
        Message::Denied { cause, .. } => return Err(EngineError::Admission(Admission::Denied(cause))),
        other => return Err(unexpected(during, &other, "hello")),
    };
    check_peer_hello(&server, Role::Server, engine)?;
    if let Some(t) = token {
        let proof = server.auth.as_ref().map(|a| a.proof.0.as_slice()).unwrap_or_default();
        if !auth::verify_server(
            t,
            &server_nonce,
            &client_nonce,
            &client_id,
            &auth::identity(&server),
            proof,
        ) {
            return Err(EngineError::Admission(Admission::BadServerProof));
        }
    }
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::{MemoryPair, TestKind};

    #[test]
    fn the_rate_limit_admits_a_burst_then_refills() {
        let guard = ServeGuard {
            rate_burst: 3,
            rate_per_s: 50.0,
            ..ServeGuard::default()
        };
        let mut r = RateLimit::new(&guard);
        assert!(r.allow() && r.allow() && r.allow());
        assert!(!r.allow(), "the burst is spent");
        r.refund();
        assert!(r.allow(), "an admitted connection's allowance came back");
        assert!(!r.allow());
        std::thread::sleep(Duration::from_millis(60));
        assert!(r.allow(), "refilled at 50/s");
    }

    #[test]
    fn cases_above_max_buffer_are_refused_before_allocating() {
        let guard = ServeGuard {
            max_buffer: 1 << 20,
            ..ServeGuard::default()
        };
        let setup = |size| CaseSetup {
            test: TestKind::PutBw,
            memory: MemoryPair::HOST_HOST,
            size,
            window: 1,
            seed: 1,
            blocks: 1,
            untouched: false,
            kv: None,
            cuda_alloc: Default::default(),
        };
        assert_eq!(guard.check_case(&setup(1 << 20), None), Ok(()));
        let refused = guard.check_case(&setup((1 << 20) + 1), None).unwrap_err();
        assert_eq!(
            refused,
            CaseRefusal::AboveMaxBuffer {
                needs: Some((1 << 20) + 1),
                limit: 1 << 20
            }
        );
        assert!(refused.to_string().contains("--max-buffer of 1 MiB"), "{refused}");
        assert!(default_max_buffer() > 0 && default_max_buffer() <= crate::messages::MAX_MESSAGE_SIZE);
    }

    #[test]
    fn the_gpu_bound_is_half_the_free_memory_within_max_buffer() {
        const GIB: u64 = 1 << 30;
        // Half of what is free, the rest left to other processes and the context.
        assert_eq!(gpu_limit(10 * GIB, 16 * GIB), 5 * GIB);
        assert_eq!(bound_gpu(5 * GIB, 10 * GIB, 16 * GIB), Ok(()));
        assert_eq!(bound_gpu(5 * GIB + 1, 10 * GIB, 16 * GIB), Err(5 * GIB));
        // An idle 80 GB GPU: --max-buffer is the tighter bound.
        assert_eq!(bound_gpu(16 * GIB + 1, 80 * GIB, 16 * GIB), Err(16 * GIB));
        // A full GPU gives nothing; an odd byte rounds down.
        assert_eq!(bound_gpu(1, 0, 16 * GIB), Err(0));
        assert_eq!(bound_gpu(1, 1, 16 * GIB), Err(0));
        assert_eq!(bound_gpu(1, 3, 16 * GIB), Ok(()));
    }

    fn case(target: icb_core::MemoryType, size: u64) -> CaseSetup {
        CaseSetup {
            test: TestKind::PutBw,
            memory: MemoryPair {
                initiator: icb_core::MemoryType::Host,
                target,
            },
            size,
            window: 1,
            seed: 1,
            blocks: 1,
            untouched: false,
            kv: None,
            cuda_alloc: Default::default(),
        }
    }

    #[test]
    fn a_cuda_case_above_what_the_gpu_has_free_is_refused_naming_the_gpu() {
        let guard = ServeGuard {
            max_buffer: 16 << 30,
            ..ServeGuard::default()
        };
        let gpu = GpuMemory {
            device: 3,
            free: 2 << 30,
            total: 80 << 30,
        };
        let cuda = |size| case(icb_core::MemoryType::Cuda, size);
        assert_eq!(guard.check_case(&cuda(1 << 30), Some(gpu)), Ok(()));
        let refused = guard.check_case(&cuda((1 << 30) + 4096), Some(gpu)).unwrap_err();
        assert_eq!(
            refused,
            CaseRefusal::AboveGpuFree {
                needs: (1 << 30) + 4096,
                device: 3,
                free: 2 << 30,
                limit: 1 << 30
            }
        );
        let line = refused.to_string();
        assert!(
            !line.contains('\n')
                && line.contains("GPU 3")
                && line.contains("above the 1 GiB")
                && line.contains("2 GiB free"),
            "{line}"
        );
        // The GPU bounds CUDA targets only; a host target is bound by --max-buffer alone.
        let host = case(icb_core::MemoryType::Host, (1 << 30) + 4096);
        assert_eq!(guard.check_case(&host, Some(gpu)), Ok(()));
        // Without a GPU figure (no driver) --max-buffer alone decides, and it goes first.
        assert_eq!(guard.check_case(&cuda((1 << 30) + 4096), None), Ok(()));
        assert!(matches!(
            guard.check_case(&cuda((16 << 30) + 1), Some(gpu)),
            Err(CaseRefusal::AboveMaxBuffer { .. })
        ));
    }

    #[test]
    fn a_refusal_travels_typed_and_older_case_failed_still_parses() {
        let refusal = CaseRefusal::AboveGpuFree {
            needs: 3 << 30,
            device: 1,
            free: 4 << 30,
            limit: 2 << 30,
        };
        let json = serde_json::to_string(&Message::case_refused(refusal)).unwrap();
        match serde_json::from_str::<Message>(&json).unwrap() {
            Message::CaseFailed { reason, refused } => {
                assert_eq!(refused, Some(refusal));
                assert_eq!(reason, refusal.to_string());
            }
            other => panic!("{other:?}"),
        }
        let old: Message = serde_json::from_str(r#"{"type":"case_failed","reason":"cuMemAlloc failed"}"#).unwrap();
        assert_eq!(old, Message::case_failed("cuMemAlloc failed".into()));
    }

    #[test]
    fn only_loopback_runs_without_a_token_unless_allowed() {
        let open = ServeGuard::default();
        assert!(open.check_listen("127.0.0.1:1".parse().unwrap()).is_ok());
        let e = open.check_listen("0.0.0.0:1".parse().unwrap()).unwrap_err().to_string();
        assert!(e.contains("--token-file") && e.contains("--insecure-no-token"), "{e}");
        let allowed = ServeGuard {
            allow_no_token: true,
            ..ServeGuard::default()
        };
        assert!(allowed.check_listen("0.0.0.0:1".parse().unwrap()).is_ok());
        let tokened = ServeGuard {
            token: Some(Token::generate()),
            ..ServeGuard::default()
        };
        assert!(tokened.check_listen("0.0.0.0:1".parse().unwrap()).is_ok());
    }
}
