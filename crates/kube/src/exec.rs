//! Running a command in an existing pod (what `kubectl exec` does), under a deadline.
//!
//! `probe node --pod` uses this to read a node's view from inside a workload pod; in-place pair
//! runs (`icb_pair::inplace`) start a command, stream a file into it over stdin (what `kubectl cp`
//! does, without tar: [`ExecSession::send`]) and follow its output line by line while holding its
//! stdin open ([`Cluster::exec_session`]): the command's wrapper treats the end of stdin as "the
//! client is gone".

use crate::access::Cluster;
use crate::error::{KubeError, humanize, one_line};
use kube::api::AttachParams;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt};

/// What a command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

impl ExecOutput {
    pub fn stdout_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

impl Cluster {
    /// Runs `command` in `pod` (in this cluster's namespace; `container` None = the pod's only or
    /// default container). The whole exchange, upgrade included, must finish within `deadline`.
    /// A non-zero exit is an `Ok` with that code; failing to run at all is an error.
    pub async fn exec(
        &self,
        pod: &str,
        container: Option<&str>,
        command: &[String],
        deadline: Duration,
    ) -> Result<ExecOutput, KubeError> {
        let what = format!("exec in pod {}/{pod}", self.namespace());
        if command.is_empty() {
            return Err(KubeError::Target(format!("{what}: no command given")));
        }
        let api = self.pods();
        let params = attach_params(container, false);
        let run = async {
            let mut proc = api
                .exec(pod, command.iter().map(String::as_str), &params)
                .await
                .map_err(|e| open_error(&what, e))?;
            let (Some(mut out), Some(mut err)) = (proc.stdout(), proc.stderr()) else {
                return Err(KubeError::Transport {
                    what: what.clone(),
                    detail: "no stdout/stderr streams were opened".into(),
                });
            };
            let status = proc.take_status();
            // Both pipes are small: drain them together or the remote side stalls.
            let mut stdout = Vec::new();
            let mut stderr = Vec::new();
            let (r1, r2) = tokio::join!(out.read_to_end(&mut stdout), err.read_to_end(&mut stderr));
            r1.and(r2).map_err(|e| KubeError::Transport {
                what: what.clone(),
                detail: format!("reading output: {e}"),
            })?;
            let status = match status {
                Some(s) => s.await,
                None => None,
            };
            let exit_code = exit_code_of(status.as_ref()).map_err(|e| KubeError::Transport {
                what: what.clone(),
                detail: e.to_string(),
            })?;
            let _ = proc.join().await;
            Ok(ExecOutput {
                stdout,
                stderr,
                exit_code,
            })
        };
        match tokio::time::timeout(deadline, run).await {
            Ok(r) => r,
            Err(_) => Err(KubeError::Timeout {
                what: format!("{what} (command did not finish within {})", humanize(deadline)),
                timeout: deadline,
            }),
        }
    }
}

/// How many of a session's last stderr lines are kept for messages.
const STDERR_TAIL: usize = 40;

/// A kube-rs exec error as a [`KubeError`]: a refused websocket upgrade (403 without the
/// `create pods/exec` permission, 404 for a vanished pod) keeps its HTTP status, so callers can
/// name the missing RBAC verb.
fn open_error(what: &str, err: kube::Error) -> KubeError {
    if let kube::Error::UpgradeConnection(kube::client::UpgradeConnectionError::ProtocolSwitch(code)) = &err {
        return KubeError::Api {
            what: what.to_string(),
            code: code.as_u16(),
            reason: code.canonical_reason().unwrap_or("refused").to_string(),
            message: "the API server refused to open the exec stream".into(),
        };
    }
    KubeError::from_kube(what.to_string(), err)
}

fn attach_params(container: Option<&str>, stdin: bool) -> AttachParams {
    let params = AttachParams::default().stdin(stdin).stdout(true).stderr(true);
    match container {
        Some(c) => params.container(c),
        None => params,
    }
}

impl Cluster {
    /// Starts `command` in `pod` and returns at once (the stream is open within `open_deadline`):
    /// its stdout comes line by line, its stderr is kept (the last lines), its stdin stays open
    /// until [`ExecSession::close_stdin`] or drop.
    pub async fn exec_session(
        &self,
        pod: &str,
        container: Option<&str>,
        command: &[String],
        open_deadline: Duration,
    ) -> Result<ExecSession, KubeError> {
        let what = format!("exec in pod {}/{pod}", self.namespace());
        if command.is_empty() {
            return Err(KubeError::Target(format!("{what}: no command given")));
        }
        let api = self.pods();
        let params = attach_params(container, true);
        let open = api.exec(pod, command.iter().map(String::as_str), &params);
        let mut proc = match tokio::time::timeout(open_deadline, open).await {
            Ok(r) => r.map_err(|e| open_error(&what, e))?,
            Err(_) => {
                return Err(KubeError::Timeout {
                    what: format!("{what} (the exec stream did not open)"),
                    timeout: open_deadline,
                });
            }
        };
        let (Some(stdin), Some(out), Some(err)) = (proc.stdin(), proc.stdout(), proc.stderr()) else {
            return Err(KubeError::Transport {
                what,
                detail: "no stdin/stdout/stderr streams were opened".into(),
            });
        };
        let status = proc.take_status();
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        let stdout_task = tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(out).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let keep = tail.clone();
        let stderr_task = tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(err).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tracing::debug!("[exec stderr] {line}");
                let mut t = keep.lock().unwrap_or_else(|p| p.into_inner());
                if t.len() == STDERR_TAIL {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
        let status: Option<StatusFuture> = status.map(|s| Box::pin(s) as StatusFuture);
        Ok(ExecSession {
            what,
            proc: Some(proc),
            stdin: Some(Box::new(stdin)),
            lines,
            stderr: tail,
            status,
            exit: None,
            tasks: vec![stdout_task, stderr_task],
        })
    }
}

/// Why an [`ExecSession`] has no exit code, or could not take its stdin. The callers word it
/// into their own errors; the in-place launcher decides on the exit code it carries instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// The status channel ended with no status (the connection broke).
    #[error("the connection closed without an exit status")]
    ClosedWithoutStatus,
    /// The API server said the command did not run (its message, on one line).
    #[error("command failed to run: {0}")]
    FailedToRun(String),
    #[error("no exit status within {}", humanize(*.0))]
    NoStatusWithin(Duration),
    /// [`ExecSession::exit_code`] was already called and its status taken.
    #[error("the exit status was already read")]
    StatusAlreadyRead,
    #[error("stdin is already closed")]
    StdinClosed,
    /// The command's output or status ended while its stdin was still being written.
    #[error("the connection ended")]
    ConnectionEnded,
    /// Writing stdin failed (the I/O error's kind and its message).
    #[error("{1}")]
    Stdin(std::io::ErrorKind, String),
}

impl ExecError {
    fn stdin(e: std::io::Error) -> Self {
        Self::Stdin(e.kind(), e.to_string())
    }
}

type StatusFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>> + Send>,
>;

/// A command running in a pod (see [`Cluster::exec_session`]).
pub struct ExecSession {
    what: String,
    proc: Option<kube::api::AttachedProcess>,
    stdin: Option<Box<dyn tokio::io::AsyncWrite + Unpin + Send>>,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    status: Option<StatusFuture>,
    exit: Option<Result<i32, ExecError>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ExecSession {
    /// The next stdout line; `None` once stdout ended. kube-rs does not end stdout when the
    /// connection breaks, so the exit status (which arrives, or fails, then) ends it too: after
    /// it, only lines already on their way are read.
    pub async fn next_line(&mut self) -> Option<String> {
        if let Some(fut) = self.status.as_mut() {
            tokio::select! {
                biased;
                line = self.lines.recv() => return line,
                status = fut => {
                    self.exit = Some(exit_code_of(status.as_ref()));
                    self.status = None;
                }
            }
        }
        tokio::time::timeout(Duration::from_millis(500), self.lines.recv())
            .await
            .ok()
            .flatten()
    }

    /// The last stderr lines so far, oldest first.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// After stdout ended: the exit code (`Err` says why there is none: the connection closed
    /// without a status, the command could not start …), waiting at most `within`.
    pub async fn exit_code(&mut self, within: Duration) -> Result<i32, ExecError> {
        if let Some(done) = &self.exit {
            return done.clone();
        }
        let result = match self.status.take() {
            Some(fut) => match tokio::time::timeout(within, fut).await {
                Ok(status) => exit_code_of(status.as_ref()),
                Err(_) => Err(ExecError::NoStatusWithin(within)),
            },
            None => Err(ExecError::StatusAlreadyRead),
        };
        self.exit = Some(result.clone());
        result
    }

    /// The exit code [`ExecSession::exit_code`] read, if it did (`None` before, or without one).
    pub fn exit_seen(&self) -> Option<i32> {
        self.exit.as_ref().and_then(|r| r.as_ref().ok().copied())
    }

    /// Streams `input` into the command's stdin, which stays open afterwards. Fails when the
    /// connection breaks (or the command's output ends) before all of it was sent.
    pub async fn send(&mut self, mut input: impl AsyncRead + Unpin) -> Result<u64, ExecError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(ExecError::StdinClosed);
        };
        let sent = async {
            let n = tokio::io::copy(&mut input, stdin).await.map_err(ExecError::stdin)?;
            stdin.flush().await.map_err(ExecError::stdin)?;
            Ok(n)
        };
        // The command's stdout ending means the connection (or the command) is gone: a write
        // into a dead stream must not wait for the caller's deadline.
        let lines = &mut self.lines;
        let mut early: Vec<String> = Vec::new();
        let ended = async {
            while let Some(l) = lines.recv().await {
                early.push(l);
            }
        };
        let status = &mut self.status;
        let finished = async {
            match status.as_mut() {
                Some(f) => f.await,
                None => std::future::pending().await,
            }
        };
        let mut ended_with = None;
        let result = tokio::select! {
            r = sent => r,
            _ = ended => Err(ExecError::ConnectionEnded),
            st = finished => {
                ended_with = Some(exit_code_of(st.as_ref()));
                Err(ExecError::ConnectionEnded)
            }
        };
        if let Some(exit) = ended_with {
            self.status = None;
            self.exit = Some(exit);
        }
        // Lines read while sending are not lost: they go back in front.
        if !early.is_empty() {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            for l in early {
                let _ = tx.send(l);
            }
            let old = std::mem::replace(&mut self.lines, rx);
            tokio::spawn(forward(old, tx));
        }
        result
    }

    /// Ends the command's stdin: the in-place wrappers take that as "stop".
    pub async fn close_stdin(&mut self) {
        if let Some(mut w) = self.stdin.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), w.shutdown()).await;
        }
    }

    /// Closes the connection (the command's stdin ends with it).
    pub fn abort(&mut self) {
        self.stdin = None;
        if let Some(p) = self.proc.take() {
            p.abort();
        }
        for t in &self.tasks {
            t.abort();
        }
    }

    /// `exec in pod NS/NAME`, for messages.
    pub fn what(&self) -> &str {
        &self.what
    }
}

async fn forward(
    mut from: tokio::sync::mpsc::UnboundedReceiver<String>,
    to: tokio::sync::mpsc::UnboundedSender<String>,
) {
    while let Some(l) = from.recv().await {
        if to.send(l).is_err() {
            break;
        }
    }
}

impl Drop for ExecSession {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Exit code from the exec status channel: Success → 0; NonZeroExitCode carries it in a cause.
fn exit_code_of(status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>) -> Result<i32, ExecError> {
    let Some(status) = status else {
        return Err(ExecError::ClosedWithoutStatus);
    };
    if status.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    let code = status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.reason.as_deref() == Some("ExitCode"))
        .and_then(|c| c.message.as_deref())
        .and_then(|m| m.trim().parse::<i32>().ok());
    code.ok_or_else(|| {
        ExecError::FailedToRun(one_line(
            status.message.as_deref().unwrap_or("no message from the API server"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

    #[test]
    fn exit_codes_from_status() {
        let ok = Status {
            status: Some("Success".into()),
            ..Default::default()
        };
        assert_eq!(exit_code_of(Some(&ok)), Ok(0));
        let three = Status {
            status: Some("Failure".into()),
            reason: Some("NonZeroExitCode".into()),
            details: Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".into()),
                    message: Some("3".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(exit_code_of(Some(&three)), Ok(3));
        let broken = Status {
            status: Some("Failure".into()),
            message: Some("exec: \"nope\": executable file not found".into()),
            ..Default::default()
        };
        assert_eq!(
            exit_code_of(Some(&broken)),
            Err(ExecError::FailedToRun(
                "exec: \"nope\": executable file not found".into()
            ))
        );
        assert_eq!(exit_code_of(None), Err(ExecError::ClosedWithoutStatus));
        assert_eq!(
            ExecError::NoStatusWithin(Duration::from_secs(5)).to_string(),
            format!("no exit status within {}", humanize(Duration::from_secs(5)))
        );
    }
}
