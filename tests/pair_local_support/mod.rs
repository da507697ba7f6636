//! Shared by the `pair --local` test binaries (`mod pair_local_support;`). A directory without a
//! main.rs is not a test target of its own.
#![allow(dead_code)]

use icb_core::PairReport;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Small runs: 3 tests × 2 sizes × 2 memory pairs, the CUDA pair skipped without a driver.
pub const SMALL: [&str; 13] = [
    "--tests",
    "tag_bw,tag_lat,put_bw",
    "--sizes",
    "8,1MiB",
    "--min-time",
    "0.05",
    "--warmup",
    "2",
    "--min-iterations",
    "4",
    "--memory",
    "host-host,cuda-cuda",
    // GPU memory where there is a GPU, skipped (not failed) where there is none.
    "--cuda-optional",
];

/// One run at a time: measurements on a 2-core machine must not compete with each other.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The root gate and the one-run-at-a-time lock together, for a test that makes namespaces:
/// `None` where it is skipped (not root and not CI; under CI a missing root panics instead).
pub fn privileged(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    icb_isolate::privileged_tests_enabled(test).then(serial)
}

pub struct Ran {
    /// Pid of the `ic-bench` process: every namespace and pod it made carries it in its name.
    pub pid: u32,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn report(&self) -> PairReport {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not an ic-bench.pair/v1 report ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts the run exited with `code` (showing its stderr and stdout if not) and returns its
    /// report.
    pub fn report_after(&self, code: i32) -> PairReport {
        assert_eq!(self.code, code, "stderr:\n{}\nstdout:\n{}", self.stderr, self.stdout);
        self.report()
    }

    /// Asserts the run ended as an error should (exit 2, nothing on stdout, one line on stderr)
    /// and returns that line; `what` names the run in a failure.
    pub fn error_line(&self, what: &str) -> &str {
        assert_eq!(self.code, 2, "{what}: {}", self.stderr);
        assert!(self.stdout.is_empty(), "{what}: {}", self.stdout);
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{what}: {}", self.stderr);
        lines[0]
    }

    /// Asserts the run left no namespace and no process behind.
    pub fn assert_nothing_left(&self) {
        let left = icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, self.pid);
        assert_eq!(left, icb_isolate::Leftovers::default(), "run {} leaked", self.pid);
    }
}

/// Runs `ic-bench ARGS` with extra environment, bounded by a deadline.
pub fn ic_bench(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let child = Command::new(env!("CARGO_BIN_EXE_ic-bench"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ic-bench could not be started");
    finish(child, Duration::from_secs(180))
}

/// Starts `ic-bench ARGS` (stdout and stderr piped) for a test that acts on it while it runs.
pub fn spawn_ic_bench(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_ic-bench"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ic-bench could not be started")
}

/// Polls `ready` every 50 ms until it gives a value, while `child` still runs; a test failure
/// (naming `what`) if the child ends first or `limit` passes.
pub fn once_running<T>(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
    mut ready: impl FnMut(&std::process::Child) -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        assert!(child.try_wait().unwrap().is_none(), "ic-bench ended early");
        if let Some(found) = ready(child) {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (bounded by `limit`) for a child from [`spawn_ic_bench`] to end, as a [`Ran`].
pub fn finish(child: std::process::Child, limit: Duration) -> Ran {
    let pid = child.id();
    let out = wait_with_output(child, limit);
    Ran {
        pid,
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `pair --local --isolation MODE` with the small settings and `-o json`.
pub fn pair_json(isolation: &str, env: &[(&str, &str)]) -> Ran {
    pair_json_with(isolation, SMALL[1], &[], env)
}

/// Like [`pair_json`] with another `--tests` list and extra flags.
pub fn pair_json_with(isolation: &str, tests: &str, extra: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut args = vec!["pair", "--local", "--isolation", isolation, "-o", "json"];
    let tests_at = args.len() + 1;
    args.extend(SMALL);
    args[tests_at] = tests;
    args.extend(extra);
    ic_bench(&args, env)
}

/// Waits for `child` (its stdout and stderr piped) within `limit`, draining both pipes on threads
/// so it never blocks on output; killed and a test failure past the limit.
pub fn wait_with_output(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for ic-bench") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ic-bench did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    std::process::Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}
