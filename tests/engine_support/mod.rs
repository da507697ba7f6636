//! Shared helpers for the engine's end-to-end tests: start `ic-bench serve` and `connect` as real
//! processes, with deadlines, and always reap them.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Flags that keep one end-to-end run to a couple of seconds. A case stops at +/-2 % or at
/// `--max-time`; on 2 shared cores it rarely gets to +/-2 %, so with 2 s every one of a run's 12
/// cases took 2 s. These tests judge transports and verified payloads, not precision: 0.5 s.
pub const FAST: &[&str] = &[
    "--min-time",
    "0.05",
    "--max-time",
    "0.5",
    "--sizes",
    "8,64KiB,1MiB",
    "--warmup",
    "2",
    "--min-iterations",
    "4",
];

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ic-bench")
}

/// A command for the binary with a clean transport environment plus `env`.
pub fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args);
    for var in ["UCX_TLS", "UCX_NET_DEVICES", "IC_BENCH_LOG"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// A running `ic-bench serve --once`; killed and reaped on drop.
pub struct Server {
    pub child: Child,
    pub addr: String,
    stderr: mpsc::Receiver<String>,
}

impl Server {
    /// `serve --once`: one client, then it exits.
    pub fn start(env: &[(&str, &str)]) -> Server {
        Server::start_with(&["--once", "--idle-timeout", "60s"], env)
    }

    /// A server that stays up for client after client (until signalled or idle for 120 s).
    pub fn start_long() -> Server {
        Server::start_with(&["--idle-timeout", "120s"], &[])
    }

    /// `serve --listen 127.0.0.1:0` with `flags`, once it printed its listening line.
    pub fn start_with(flags: &[&str], env: &[(&str, &str)]) -> Server {
        let args: Vec<&str> = ["serve", "--listen", "127.0.0.1:0"]
            .iter()
            .chain(flags)
            .copied()
            .collect();
        let mut cmd = command(&args, env);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn ic-bench serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let stderr = drain(child.stderr.take().expect("piped stderr"));
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                panic!("serve did not print its listening line within 30 s");
            }
        };
        let v: serde_json::Value =
            serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("listening line is not JSON ({e}): {line:?}"));
        assert_eq!(v["event"], "listening", "{line}");
        assert_eq!(v["schema"], "ic-bench.serve/v1", "{line}");
        assert!(v["ucx"].as_str().is_some_and(|s| s.starts_with("1.")), "{line}");
        let addr = v["address"].as_str().expect("address").to_string();
        Server { child, addr, stderr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid() as i32), sig).expect("signal serve");
    }

    /// Waits for the server to exit; returns its exit code and stderr.
    pub fn wait(mut self, limit: Duration) -> (i32, String) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                let err = self.stderr.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
                return (status.code().unwrap_or(-1), err);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("serve did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `r` to its end on a thread; the text arrives on the channel.
pub fn drain<R: Read + Send + 'static>(mut r: R) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        let _ = tx.send(s);
    });
    rx
}

pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn report(&self) -> serde_json::Value {
        let line = self
            .stdout
            .lines()
            .next()
            .unwrap_or_else(|| panic!("no stdout; stderr: {}", self.stderr));
        serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout is not one JSON line ({e}): {}", self.stdout))
    }

    /// The error line: exactly one `ic-bench: error:` line, and never a panic.
    pub fn error_line(&self) -> String {
        assert!(!self.stderr.contains("panicked"), "panic in stderr: {}", self.stderr);
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("ic-bench: error:"))
            .collect();
        assert_eq!(lines.len(), 1, "expected one error line, stderr: {}", self.stderr);
        lines[0].to_string()
    }
}

/// Runs a process to completion under `limit` (killed and failed past it).
pub fn run(mut cmd: Command, limit: Duration) -> Outcome {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn ic-bench");
    let out = drain(child.stdout.take().expect("piped stdout"));
    let err = drain(child.stderr.take().expect("piped stderr"));
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let elapsed = start.elapsed();
            return Outcome {
                code: status.code().unwrap_or(-1),
                stdout: out.recv_timeout(Duration::from_secs(5)).unwrap_or_default(),
                stderr: err.recv_timeout(Duration::from_secs(5)).unwrap_or_default(),
                elapsed,
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = err.recv_timeout(Duration::from_secs(2)).unwrap_or_default();
            panic!("ic-bench did not finish within {limit:?}; stderr: {stderr}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `ic-bench connect ADDR --json-line` plus `args`, under a 60 s limit.
pub fn connect(addr: &str, args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let mut all = vec!["connect", addr, "--json-line"];
    all.extend_from_slice(args);
    run(command(&all, env), Duration::from_secs(60))
}

/// The report's cases as (test, size, case) triples.
pub fn cases(report: &serde_json::Value) -> Vec<serde_json::Value> {
    report["cases"].as_array().expect("cases array").clone()
}

pub fn find_case<'a>(cases: &'a [serde_json::Value], test: &str, size: u64) -> &'a serde_json::Value {
    cases
        .iter()
        .find(|c| {
            c["test"] == test
                && c["size"] == size
                && c["memory"]["initiator"] == "host"
                && c["memory"]["target"] == "host"
        })
        .unwrap_or_else(|| panic!("no {test} {size} host→host case"))
}
