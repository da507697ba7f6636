//! One control connection: frames out through the write half, frames in through a reader task and
//! a channel, so waiting for the peer can be raced against a running UCX phase without ever
//! cancelling a half-read frame.

use crate::error::EngineError;
use crate::messages::Message;
use crate::options::ConnectOptions;
use crate::report::SessionStart;
use crate::ucx_thread::UcxThread;
use crate::wire::{self, WireError};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Deadline for writing one frame (the peer's kernel buffers take it unless it is wedged).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Control {
    writer: OwnedWriteHalf,
    inbox: mpsc::Receiver<Result<Message, WireError>>,
    reader: JoinHandle<()>,
    /// Set once the reader reported the end of the stream, so later waits fail at once.
    closed: Option<String>,
}

impl Drop for Control {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Control {
    pub fn new(stream: TcpStream) -> Self {
        let _ = stream.set_nodelay(true);
        let (mut read_half, writer) = stream.into_split();
        let (tx, inbox) = mpsc::channel(16);
        let reader = tokio::spawn(async move {
            loop {
                let frame = wire::read_frame_within(&mut read_half, wire::FRAME_TIMEOUT).await;
                let stop = frame.is_err();
                if tx.send(frame).await.is_err() || stop {
                    break;
                }
            }
        });
        Control {
            writer,
            inbox,
            reader,
            closed: None,
        }
    }

    pub async fn send(&mut self, msg: &Message, during: &str) -> Result<(), EngineError> {
        match tokio::time::timeout(WRITE_TIMEOUT, wire::write_frame(&mut self.writer, msg)).await {
            Ok(r) => r.map_err(|e| EngineError::control(during, e)),
            Err(_) => Err(EngineError::Timeout {
                during: during.to_string(),
                secs: WRITE_TIMEOUT.as_secs_f64(),
            }),
        }
    }

    /// Tells the peer why this side gives up on the session, unless the peer or the connection
    /// is what failed (then there is nobody to tell).
    pub async fn report_failure(&mut self, e: &EngineError) {
        // An admission failure was already answered with `denied`.
        if !matches!(
            e,
            EngineError::Peer(_) | EngineError::Control { .. } | EngineError::Admission(_)
        ) {
            self.send_error(&e.to_string()).await;
        }
    }

    /// Sends a fatal error to the peer, best effort, before the connection is dropped.
    pub async fn send_error(&mut self, message: &str) {
        let msg = Message::Error {
            message: message.chars().take(4000).collect(),
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), wire::write_frame(&mut self.writer, &msg)).await;
    }

    /// Waits for the next message; the peer's `error` message becomes [`EngineError::Peer`].
    pub async fn recv(&mut self, during: &str, timeout: Duration) -> Result<Message, EngineError> {
        match tokio::time::timeout(timeout, self.next(during)).await {
            Ok(r) => r,
            Err(_) => Err(EngineError::Timeout {
                during: during.to_string(),
                secs: timeout.as_secs_f64(),
            }),
        }
    }

    /// The next message with no deadline of its own (cancel-safe: use it inside `select!`).
    pub async fn next(&mut self, during: &str) -> Result<Message, EngineError> {
        if self.closed.is_some() {
            return Err(EngineError::control(during, WireError::Closed));
        }
        match self.inbox.recv().await {
            Some(Ok(Message::Error { message })) => {
                self.closed = Some(message.clone());
                Err(EngineError::Peer(message))
            }
            Some(Ok(msg)) => Ok(msg),
            Some(Err(e)) => {
                self.closed = Some(e.to_string());
                Err(EngineError::control(during, e))
            }
            None => {
                self.closed = Some("closed".into());
                Err(EngineError::control(during, WireError::Closed))
            }
        }
    }
}

/// The error for a message that is valid but not what the protocol step allows.
pub fn unexpected(during: &str, got: &Message, expected: &'static str) -> EngineError {
    EngineError::Unexpected {
        during: during.to_string(),
        got: got.name(),
        expected,
    }
}

/// The next connection to a server: waits at most `idle_timeout` (then
/// [`EngineError::IdleTimeout`]), and rides over transient accept errors (e.g. out of file
/// descriptors for a moment). Admission is `crate::admit`'s.
pub async fn accept_stream(
    listener: &tokio::net::TcpListener,
    idle_timeout: Option<Duration>,
) -> Result<(TcpStream, std::net::SocketAddr), EngineError> {
    loop {
        let accepted = match idle_timeout {
            Some(limit) => match tokio::time::timeout(limit, listener.accept()).await {
                Ok(r) => r,
                Err(_) => return Err(EngineError::IdleTimeout(format!("{:.0} s", limit.as_secs_f64()))),
            },
            None => listener.accept().await,
        };
        match accepted {
            Ok(pair) => return Ok(pair),
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The client's connection to a server's control port: `addr` within `timeout`, named in errors
/// as the user wrote it (`shown`). A cancelled `cancel` ends the wait with
/// [`EngineError::Interrupted`].
pub async fn connect_server(
    addr: std::net::SocketAddr,
    shown: &str,
    timeout: Duration,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<TcpStream, EngineError> {
    let connecting = tokio::time::timeout(timeout, TcpStream::connect(addr));
    let connected = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(EngineError::Interrupted),
        r = connecting => r,
    };
    let detail = match connected {
        Ok(Ok(stream)) => return Ok(stream),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {:.0} s", timeout.as_secs_f64()),
    };
    Err(EngineError::Connect {
        addr: shown.to_string(),
        detail,
    })
}

/// Connects a client's control connection to the session's server, noting this side's address
/// in `start`; when that fails the engine's UCX thread is stopped before the error is returned.
pub async fn connect_client<S: 'static>(
    start: &mut SessionStart,
    opts: &ConnectOptions,
    cancel: &tokio_util::sync::CancellationToken,
    thread: &mut UcxThread<S>,
) -> Result<Control, EngineError> {
    match connect_server(start.server_addr, &opts.server, opts.connect_timeout, cancel).await {
        Ok(stream) => {
            start.local_addr = stream.local_addr().ok();
            Ok(Control::new(stream))
        }
        Err(e) => {
            thread.shutdown(Duration::from_secs(5));
            Err(e)
        }
    }
}

/// Ends a client's session with the server: settles it ([`settle_client_session`]) and closes
/// the control connection; on an error the engine's UCX thread is stopped too, before the caller
/// returns it. Both engines' clients end here; what they do with the thread after a settled
/// session (and how long they give it) is their own.
pub async fn end_client_session<S: 'static>(
    mut control: Control,
    thread: &mut UcxThread<S>,
    result: Result<(), EngineError>,
    hello_known: bool,
) -> Result<bool, EngineError> {
    let settled = settle_client_session(&mut control, result, hello_known).await;
    drop(control);
    if settled.is_err() {
        thread.shutdown(Duration::from_secs(5));
    }
    settled
}

/// Settles a client's ended session with the server: `Ok(false)` finished, `Ok(true)` interrupted
/// once the server's hello had arrived (`hello_known`: a partial run; the server is told), `Err`
/// anything else (the server is told unless the failure was its own or the connection's). Both
/// engines' clients end their sessions here.
pub async fn settle_client_session(
    control: &mut Control,
    result: Result<(), EngineError>,
    hello_known: bool,
) -> Result<bool, EngineError> {
    match result {
        Ok(()) => Ok(false),
        Err(EngineError::Interrupted) if hello_known => {
            control.send_error("the client was interrupted").await;
            Ok(true)
        }
        Err(e) => {
            control.report_failure(&e).await;
            Err(e)
        }
    }
}
