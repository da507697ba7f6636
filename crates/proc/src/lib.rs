//! icb-proc: the one way ic-bench runs a short external command (`ip`, `ibstat`, `ucx_info`, …)
//! and waits for it: under a deadline, with stdout and stderr read *while* it runs (a command that
//! writes more than a pipe holds, 64 KiB on Linux, would otherwise block forever), with each
//! stream capped in memory but always drained, and with the command killed and reaped when the
//! deadline passes. Blocking and dependency-free (std threads), so light crates such as the probe
//! can use it without pulling in tokio, UCX or Kubernetes.
//!
//! ```no_run
//! use std::time::Duration;
//! let mut cmd = std::process::Command::new("ip");
//! cmd.args(["-o", "link"]);
//! let out = icb_proc::run(&mut cmd, Duration::from_secs(10))?;
//! if out.status.success() { print!("{}", out.stdout_text()); }
//! # Ok::<(), icb_proc::RunError>(())
//! ```
#![forbid(unsafe_code)]

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub mod stale;

/// Bytes kept of each stream by [`run`]; more is read and dropped (see [`Output::truncated`]).
pub const DEFAULT_CAP: usize = 8 << 20;

/// After the command exits, how long its output may still take to reach EOF. A grandchild that
/// inherited the pipes can keep them open forever; its output is then cut off here.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What a finished command gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// True when a stream wrote more than the cap and the rest was dropped.
    pub truncated: bool,
}

impl Output {
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// The exit code; `None` when a signal ended the command.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// stderr's non-empty lines joined with "; " (one line for an error message), or the exit
    /// status when stderr is empty.
    pub fn stderr_line(&self) -> String {
        let text = self.stderr_text();
        let joined = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        if joined.is_empty() {
            self.status.to_string()
        } else {
            joined
        }
    }
}

/// Why a command gave no [`Output`]. Every message is one line naming the command.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` did not finish within {} and was killed", seconds(*.limit))]
    TimedOut { command: String, limit: Duration },
    #[error("waiting for `{command}`: {source}")]
    Wait {
        command: String,
        #[source]
        source: std::io::Error,
    },
}

impl RunError {
    /// True when the program does not exist (not installed, not on PATH).
    pub fn is_not_found(&self) -> bool {
        matches!(self, RunError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// Runs `cmd` to completion under `limit` with stdin closed, stdout and stderr captured (up to
/// [`DEFAULT_CAP`] each). See [`run_capped`].
pub fn run(cmd: &mut Command, limit: Duration) -> Result<Output, RunError> {
    run_capped(cmd, limit, DEFAULT_CAP)
}

/// Runs `cmd` to completion under `limit`, keeping at most `cap` bytes of each stream. Both
/// streams are read on their own threads while the command runs. Past the deadline the command is
/// SIGKILLed and reaped and [`RunError::TimedOut`] returned. The exit status is passed on as is.
pub fn run_capped(cmd: &mut Command, limit: Duration, cap: usize) -> Result<Output, RunError> {
    let command = describe(cmd);
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| RunError::Spawn {
            command: command.clone(),
            source,
        })?;
    let stdout = child.stdout.take().map(|s| Capture::start(s, cap));
    let stderr = child.stderr.take().map(|s| Capture::start(s, cap));
    let mut pause = Duration::from_micros(200);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                // The readers are not joined: a grandchild may hold the pipes. They end with them.
                return Err(RunError::TimedOut { command, limit });
            }
            Ok(None) => {
                std::thread::sleep(pause.min(limit.saturating_sub(started.elapsed())));
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(source) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Wait { command, source });
            }
        }
    };
    let drain_until = Instant::now() + DRAIN_GRACE;
    let (stdout, out_cut) = stdout.map(|c| c.finish(drain_until)).unwrap_or_default();
    let (stderr, err_cut) = stderr.map(|c| c.finish(drain_until)).unwrap_or_default();
    Ok(Output {
        status,
        stdout,
        stderr,
        truncated: out_cut || err_cut,
    })
}

/// `program arg…` as shown in messages.
fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// One stream being read on its own thread into a shared buffer.
struct Capture {
    kept: Arc<Mutex<(Vec<u8>, bool)>>,
    thread: JoinHandle<()>,
}

impl Capture {
    fn start(mut stream: impl Read + Send + 'static, cap: usize) -> Capture {
        let kept = Arc::new(Mutex::new((Vec::new(), false)));
        let sink = kept.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            loop {
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let Ok(mut kept) = sink.lock() else { break };
                        let room = cap.saturating_sub(kept.0.len());
                        kept.0.extend_from_slice(&buf[..n.min(room)]);
                        kept.1 |= n > room;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
        });
        Capture { kept, thread }
    }

    /// What was read, once the stream ended or `until` passed (then marked truncated).
    fn finish(self, until: Instant) -> (Vec<u8>, bool) {
        while !self.thread.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        let ended = self.thread.is_finished();
        if ended {
            let _ = self.thread.join();
        }
        let mut kept = match self.kept.lock() {
            Ok(k) => k,
            Err(poisoned) => poisoned.into_inner(),
        };
        (std::mem::take(&mut kept.0), kept.1 || !ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        cmd
    }

    #[test]
    fn large_output_on_both_streams_does_not_deadlock() {
        // 4 MiB on stdout and 2 MiB on stderr: far more than a pipe holds.
        let script = "head -c 4194304 /dev/zero; head -c 2097152 /dev/zero >&2; exit 0";
        let started = Instant::now();
        let out = run(&mut sh(script), Duration::from_secs(20)).unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout.len(), 4 << 20);
        assert_eq!(out.stderr.len(), 2 << 20);
        assert!(!out.truncated);
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }

    #[test]
    fn output_over_the_cap_is_drained_and_marked() {
        let out = run_capped(&mut sh("head -c 3000000 /dev/zero"), Duration::from_secs(20), 1000).unwrap();
        assert!(out.status.success(), "the command was not blocked by a full pipe");
        assert_eq!(out.stdout.len(), 1000);
        assert!(out.truncated);
    }

    #[test]
    fn a_sleeping_command_is_killed_at_the_deadline() {
        let started = Instant::now();
        let err = run(&mut sh("exec sleep 30"), Duration::from_millis(300)).unwrap_err();
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
            "{waited:?}"
        );
        assert!(matches!(err, RunError::TimedOut { .. }), "{err:?}");
        let text = err.to_string();
        assert_eq!(text, "`sh -c exec sleep 30` did not finish within 0.3 s and was killed");
        assert!(!text.contains('\n'));
    }

    #[test]
    fn a_grandchild_holding_the_pipe_does_not_hold_the_caller() {
        let started = Instant::now();
        let out = run(&mut sh("echo hi; sleep 30 & exit 0"), Duration::from_secs(10)).unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout_text(), "hi\n");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }

    #[test]
    fn exit_codes_and_streams_are_kept() {
        let out = run(&mut sh("echo out; echo err >&2; exit 3"), Duration::from_secs(10)).unwrap();
        assert_eq!(out.code(), Some(3));
        assert_eq!(out.stdout_text(), "out\n");
        assert_eq!(out.stderr_line(), "err");
        let out = run(&mut sh("kill -9 $$"), Duration::from_secs(10)).unwrap();
        assert_eq!(out.code(), None);
        assert!(out.stderr_line().contains("signal"), "{}", out.stderr_line());
    }

    #[test]
    fn a_missing_program_is_not_found() {
        let err = run(&mut Command::new("/nonexistent/icb-nope"), Duration::from_secs(1)).unwrap_err();
        assert!(err.is_not_found());
        assert!(
            err.to_string().starts_with("cannot start `/nonexistent/icb-nope`"),
            "{err}"
        );
    }
}
