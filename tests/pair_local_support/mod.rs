//! Shared by the `pair --local` test binaries (`mod pair_local_support;`). A directory without a
//! main.rs is not a test target of its own.
#![allow(dead_code)]

use icb_core::PairReport;
use std::sync::Mutex;
use std::time::Duration;

/// Small runs: 3 tests × 2 sizes × 2 memory pairs, the CUDA pair skipped without a driver.
pub const SMALL: [&str; 12] = [
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
];

/// One run at a time: measurements on a 2-core machine must not compete with each other.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub struct Ran {
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
}

/// Runs `ic-bench ARGS` with extra environment, bounded by a deadline.
pub fn ic_bench(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_ic-bench"));
    cmd.args(args).timeout(Duration::from_secs(180));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("ic-bench could not be started");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `pair --local --isolation MODE` with the small settings and `-o json`.
pub fn pair_json(isolation: &str, env: &[(&str, &str)]) -> Ran {
    pair_json_tests(isolation, SMALL[1], env)
}

/// Like [`pair_json`] with another `--tests` list.
pub fn pair_json_tests(isolation: &str, tests: &str, env: &[(&str, &str)]) -> Ran {
    let mut args = vec!["pair", "--local", "--isolation", isolation, "-o", "json"];
    args.extend(SMALL);
    args[7] = tests;
    ic_bench(&args, env)
}
