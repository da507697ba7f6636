//! What every `serve` engine shares once its runtime is up: the listener (bound, announced) and
//! the accept loop — one admitted client at a time while the others are told "busy", fresh
//! engine state between clients, `--once`, the idle timeout and cancellation (Ctrl-C). Each
//! engine (ic-bench's UCX engine, the NIXL engine) brings only its [`Sessions`].

use crate::admit::{RateLimit, next_client, refuse_while_busy};
use crate::control::Control;
use crate::error::EngineError;
use crate::options::{Listening, ServeOptions};
use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;

/// An engine's part of serving: one client's session, and a fresh start for the next.
pub trait Sessions {
    /// Runs one client's session; sets `admitted` as soon as the client proved itself (its
    /// hello and token), so that a failure before that does not count as `--once`'s client.
    fn session(&mut self, control: &mut Control, admitted: &mut bool) -> impl Future<Output = Result<(), EngineError>>;

    /// Drops everything the last admitted client left in the engine (cases, endpoints, what
    /// UCX or NIXL kept for it), so memory and shared-memory segments stay flat across clients.
    /// Not called after `--once`'s client: the server returns instead.
    fn renew(&mut self) -> impl Future<Output = Result<(), EngineError>>;
}

/// Binds `addr` and tells `opts.on_listening` (the `serve` command prints it) where, once.
pub async fn listen(opts: &mut ServeOptions, addr: SocketAddr, ucx_version: &str) -> Result<TcpListener, EngineError> {
    let bind_error = |source| EngineError::Bind {
        addr: opts.listen.clone(),
        source,
    };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    if let Some(cb) = opts.on_listening.take() {
        cb(&Listening {
            address: bound,
            ucx_version: ucx_version.to_string(),
        });
    }
    Ok(listener)
}

/// Serves clients until `--once`'s client finished, the idle timeout passed, the caller's cancel
/// token fired (Ctrl-C), or an error that ends the server.
pub async fn serve_clients(
    listener: &TcpListener,
    opts: &ServeOptions,
    engine: &mut impl Sessions,
) -> Result<(), EngineError> {
    // A caller without a token gets one that is never cancelled.
    let cancel = opts.cancel.clone().unwrap_or_default();
    // Dropping the loop mid-session drops the client's connection and aborts its phase.
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(EngineError::Interrupted),
        r = accept_loop(listener, opts, engine) => r,
    }
}

async fn accept_loop(
    listener: &TcpListener,
    opts: &ServeOptions,
    engine: &mut impl Sessions,
) -> Result<(), EngineError> {
    let mut rate = RateLimit::new(&opts.guard);
    loop {
        let (mut control, peer) = next_client(listener, opts.idle_timeout, &mut rate).await?;
        tracing::debug!("client {peer} connected");
        let mut admitted = false;
        let result = {
            let run = opts.guard.bounded(engine.session(&mut control, &mut admitted));
            // Meanwhile every other client is told "busy" at once instead of waiting in the queue.
            tokio::select! {
                r = run => r,
                never = refuse_while_busy(listener, &mut rate) => match never {},
            }
        };
        if admitted {
            rate.refund();
            if !opts.once {
                engine.renew().await?;
            }
        }
        match result {
            Ok(()) => tracing::info!("client {peer} finished"),
            Err(ref e) => {
                control.report_failure(e).await;
                if !admitted {
                    // Not admitted (wrong token, garbage, silence): one line, and on to the next
                    // client; such a connection does not count as `--once`'s client.
                    tracing::warn!("client {peer} not admitted: {e}");
                    continue;
                }
                if opts.once {
                    return result;
                }
                tracing::warn!("client {peer}: {e}");
            }
        }
        if opts.once {
            return Ok(());
        }
    }
}
