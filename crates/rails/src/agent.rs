//! The rails agent: how `ic-bench connect --rails` on the prefill host learns the decode host's
//! rails and reads its NIC counters, when the decode host is a bare-metal machine running
//! `ic-bench serve --rails` (no Kubernetes API to exec through).
//!
//! The protocol is one JSON line per request and one per response over TCP, one request per
//! connection:
//!
//! ```text
//! → {"schema":"ic-bench.rails-agent/v1","get":"rails"}
//! ← {"schema":"ic-bench.rails-agent/v1","rails":{"info":NodeRailInfo,"ranks":[RankAddress…]}}
//! → {"schema":"ic-bench.rails-agent/v1","get":"counters"}
//! ← {"schema":"ic-bench.rails-agent/v1","counters":CounterSnapshot,"health":HealthSnapshot}
//!   (`health`, the RDMA ports' error and congestion counters read at the same time, added
//!   within v1: an older agent sends none, and the decode side's health is then "not read")
//! ← {"schema":"ic-bench.rails-agent/v1","error":{"kind":"unknown_request","message":"…"}}
//! ```
//!
//! The peer is untrusted: a request line is at most [`MAX_REQUEST`] bytes, it must arrive within
//! [`REQUEST_DEADLINE`] of the connection, anything else is refused with a typed [`AgentError`]
//! and the connection closed. At most [`MAX_CLIENTS`] connections are served at once; more are
//! closed at once. Nothing a peer sends can panic the agent.

use super::plan::NodeRailInfo;
use icb_core::protocol::Listening;
use icb_core::rails::CounterSnapshot;
use icb_core::rails::nic_health::HealthSnapshot;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The protocol's name and version, on every line.
pub const AGENT_SCHEMA: &str = "ic-bench.rails-agent/v1";
/// The longest request line the agent reads (requests are tens of bytes).
pub const MAX_REQUEST: usize = 4096;
/// The longest response line the client reads (a node's rails and counters: kilobytes).
pub const MAX_RESPONSE: usize = 4 << 20;
/// How long a client may take to send its request.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Connections served at once.
pub const MAX_CLIENTS: usize = 8;

/// What a client asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ask {
    Rails,
    Counters,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub schema: String,
    pub get: Ask,
}

/// One serve rank of the decode host: its rail (rank index) and where it listens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankAddress {
    pub rail: usize,
    /// What the rank was told in `UCX_NET_DEVICES` (empty: nothing).
    pub ucx_net_devices: String,
    pub listening: Listening,
}

/// The answer to [`Ask::Rails`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRails {
    pub info: NodeRailInfo,
    pub ranks: Vec<RankAddress>,
}

/// Why the agent refused a request, typed: callers match on `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct AgentError {
    pub kind: AgentErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentErrorKind {
    /// Not a JSON request line of this protocol.
    BadRequest,
    /// A request line longer than [`MAX_REQUEST`].
    TooLong,
    /// No request line within [`REQUEST_DEADLINE`].
    Deadline,
    /// A JSON line asking for something this agent does not answer (another schema, version).
    UnknownRequest,
    /// A serve rank of this host is gone; the agent cannot vouch for the rails any more.
    RankExited,
    /// Too many connections at once.
    Busy,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub schema: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rails: Option<AgentRails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<CounterSnapshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthSnapshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<AgentError>,
}

impl Response {
    fn empty() -> Response {
        Response {
            schema: AGENT_SCHEMA.into(),
            rails: None,
            counters: None,
            health: None,
            error: None,
        }
    }

    fn refused(kind: AgentErrorKind, message: impl Into<String>) -> Response {
        Response {
            error: Some(AgentError {
                kind,
                message: message.into(),
            }),
            ..Response::empty()
        }
    }
}

/// What the agent answers with: this host's rails and a way to read its counters now.
#[allow(async_fn_in_trait)]
pub trait AgentHost: Send + Sync + 'static {
    /// This host's rails and its ranks' addresses, or why they cannot be vouched for.
    fn rails(&self) -> Result<AgentRails, AgentError>;
    /// Every readable NIC counter of this host, now (blocking sysfs reads: run off the async
    /// threads by the agent).
    fn counters(&self) -> CounterSnapshot;
    /// Every RDMA port's health counters of this host, now (blocking, like `counters`).
    fn health(&self) -> HealthSnapshot {
        HealthSnapshot::unread("this agent does not read the NICs' health counters")
    }
}

/// Parses one request line (without its newline).
pub fn parse_request(line: &[u8]) -> Result<Ask, AgentError> {
    let value: serde_json::Value = serde_json::from_slice(line).map_err(|_| AgentError {
        kind: AgentErrorKind::BadRequest,
        message: format!("not a JSON request line of {AGENT_SCHEMA}"),
    })?;
    let unknown = || AgentError {
        kind: AgentErrorKind::UnknownRequest,
        message: format!("unknown request: send {{\"schema\":\"{AGENT_SCHEMA}\",\"get\":\"rails\"|\"counters\"}}"),
    };
    let request: Request = serde_json::from_value(value).map_err(|_| unknown())?;
    if request.schema != AGENT_SCHEMA {
        return Err(unknown());
    }
    Ok(request.get)
}

/// Serves `listener` until `cancel`: each connection one request, at most [`MAX_CLIENTS`] at once.
pub async fn serve_agent<H: AgentHost>(listener: TcpListener, host: Arc<H>, cancel: CancellationToken) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CLIENTS));
    loop {
        let (mut stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!("rails agent: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = cancel.cancelled() => return,
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            let busy = Response::refused(AgentErrorKind::Busy, "too many connections at once: retry");
            let _ = tokio::time::timeout(Duration::from_secs(1), write_response(&mut stream, &busy)).await;
            continue;
        };
        let host = Arc::clone(&host);
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = answer(stream, host) => {}
                _ = cancel.cancelled() => {}
            }
            tracing::debug!("rails agent: done with {peer}");
            drop(slot);
        });
    }
}

/// One connection: read one bounded line within the deadline, answer it, close.
async fn answer<H: AgentHost>(stream: TcpStream, host: Arc<H>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read).take(MAX_REQUEST as u64 + 1);
    let mut line = Vec::new();
    let response = match tokio::time::timeout(REQUEST_DEADLINE, reader.read_until(b'\n', &mut line)).await {
        Err(_) => Response::refused(
            AgentErrorKind::Deadline,
            format!("no request within {} s", REQUEST_DEADLINE.as_secs()),
        ),
        Ok(Err(e)) => Response::refused(AgentErrorKind::BadRequest, format!("reading the request: {e}")),
        Ok(Ok(_)) if line.len() > MAX_REQUEST => Response::refused(
            AgentErrorKind::TooLong,
            format!("a request line is at most {MAX_REQUEST} bytes"),
        ),
        Ok(Ok(_)) => match parse_request(line.trim_ascii()) {
            Err(e) => Response {
                error: Some(e),
                ..Response::empty()
            },
            Ok(Ask::Rails) => match host.rails() {
                Ok(rails) => Response {
                    rails: Some(rails),
                    ..Response::empty()
                },
                Err(e) => Response {
                    error: Some(e),
                    ..Response::empty()
                },
            },
            Ok(Ask::Counters) => {
                let host = Arc::clone(&host);
                let read = tokio::task::spawn_blocking(move || (host.counters(), host.health())).await;
                let (counters, health) = match read {
                    Ok(both) => both,
                    Err(e) => {
                        let why = format!("reading the counters failed: {e}");
                        let counters = CounterSnapshot {
                            counters: Vec::new(),
                            unreadable: vec![icb_core::rails::Unreadable::all(why.clone())],
                        };
                        (counters, HealthSnapshot::unread(why))
                    }
                };
                Response {
                    counters: Some(counters),
                    health: Some(health),
                    ..Response::empty()
                }
            }
        },
    };
    if let Some(e) = &response.error {
        tracing::info!("rails agent: refused a request ({:?}): {e}", e.kind);
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), write_response(&mut write, &response)).await;
    let _ = write.shutdown().await;
}

async fn write_response<W: AsyncWriteExt + Unpin>(out: &mut W, response: &Response) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(response).map_err(std::io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line).await?;
    out.flush().await
}

/// Why a client's request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentCallError {
    /// The agent answered with a refusal.
    #[error("the rails agent at {agent} refused: {error}")]
    Refused { agent: String, error: AgentError },
    /// No connection, no answer within the deadline, or an answer that is not this protocol.
    #[error("the rails agent at {agent}: {message}")]
    Unreachable { agent: String, message: String },
}

/// Asks the agent at `agent` (HOST:PORT) one thing, all of it within `deadline`.
pub async fn ask(agent: &str, what: Ask, deadline: Duration) -> Result<Response, AgentCallError> {
    let unreachable = |message: String| AgentCallError::Unreachable {
        agent: agent.to_string(),
        message,
    };
    let call = async {
        let stream = TcpStream::connect(agent)
            .await
            .map_err(|e| format!("cannot connect ({e}): is `ic-bench serve --rails` running there?"))?;
        let (read, mut write) = stream.into_split();
        let request = Request {
            schema: AGENT_SCHEMA.into(),
            get: what,
        };
        let mut line = serde_json::to_vec(&request).map_err(|e| e.to_string())?;
        line.push(b'\n');
        write.write_all(&line).await.map_err(|e| format!("sending: {e}"))?;
        let mut reader = BufReader::new(read).take(MAX_RESPONSE as u64);
        let mut answer = Vec::new();
        reader
            .read_until(b'\n', &mut answer)
            .await
            .map_err(|e| format!("reading: {e}"))?;
        serde_json::from_slice::<Response>(answer.trim_ascii())
            .map_err(|_| "it did not answer as an ic-bench rails agent (another program on that port?)".to_string())
    };
    let response = match tokio::time::timeout(deadline, call).await {
        Err(_) => return Err(unreachable(format!("no answer within {} s", deadline.as_secs()))),
        Ok(Err(m)) => return Err(unreachable(m)),
        Ok(Ok(r)) => r,
    };
    match response.error {
        Some(error) => Err(AgentCallError::Refused {
            agent: agent.to_string(),
            error,
        }),
        None => Ok(response),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_typed_and_anything_else_is_refused_by_kind() {
        assert_eq!(
            parse_request(br#"{"schema":"ic-bench.rails-agent/v1","get":"rails"}"#),
            Ok(Ask::Rails)
        );
        assert_eq!(
            parse_request(br#"{"schema":"ic-bench.rails-agent/v1","get":"counters"}"#),
            Ok(Ask::Counters)
        );
        let kind = |line: &[u8]| parse_request(line).unwrap_err().kind;
        assert_eq!(kind(b"\xff\xfe garbage"), AgentErrorKind::BadRequest);
        assert_eq!(kind(b""), AgentErrorKind::BadRequest);
        assert_eq!(
            kind(br#"{"schema":"ic-bench.rails-agent/v1","get":"shell"}"#),
            AgentErrorKind::UnknownRequest
        );
        assert_eq!(
            kind(br#"{"schema":"ic-bench.rails-agent/v9","get":"rails"}"#),
            AgentErrorKind::UnknownRequest
        );
        assert_eq!(kind(b"[1,2,3]"), AgentErrorKind::UnknownRequest);
    }

    struct Fake;

    impl AgentHost for Fake {
        fn rails(&self) -> Result<AgentRails, AgentError> {
            Err(AgentError {
                kind: AgentErrorKind::RankExited,
                message: "rank 0 exited".into(),
            })
        }
        fn counters(&self) -> CounterSnapshot {
            CounterSnapshot {
                counters: Vec::new(),
                unreadable: vec![icb_core::rails::Unreadable::all("x")],
            }
        }
    }

    #[tokio::test]
    async fn the_agent_answers_refuses_hostile_clients_and_keeps_serving() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let cancel = CancellationToken::new();
        let server = tokio::spawn(serve_agent(listener, Arc::new(Fake), cancel.clone()));
        // A silent connection and an over-long line do not block the next client.
        let _silent = TcpStream::connect(&addr).await.unwrap();
        let mut long = TcpStream::connect(&addr).await.unwrap();
        long.write_all(&vec![b'x'; MAX_REQUEST * 4]).await.unwrap();
        let mut back = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(3), long.read_to_end(&mut back)).await;
        let r: Response = serde_json::from_slice(back.trim_ascii()).unwrap();
        assert_eq!(r.error.unwrap().kind, AgentErrorKind::TooLong);
        let counters = ask(&addr, Ask::Counters, Duration::from_secs(3)).await.unwrap();
        assert_eq!(
            counters.counters.unwrap().unreadable,
            vec![icb_core::rails::Unreadable::all("x")]
        );
        // Health comes with the byte counters; a host that cannot read it says so.
        let health = counters
            .health
            .expect("the health counters ride with the byte counters");
        assert_eq!(
            health.unreadable.as_deref(),
            Some("this agent does not read the NICs' health counters")
        );
        // An older agent's answer (no `health`) still parses: then "not read".
        let old: Response =
            serde_json::from_str(r#"{"schema":"ic-bench.rails-agent/v1","counters":{"counters":[]}}"#).unwrap();
        assert!(old.health.is_none());
        match ask(&addr, Ask::Rails, Duration::from_secs(3)).await {
            Err(AgentCallError::Refused { error, .. }) => assert_eq!(error.kind, AgentErrorKind::RankExited),
            other => panic!("{other:?}"),
        }
        cancel.cancel();
        server.await.unwrap();
    }
}
