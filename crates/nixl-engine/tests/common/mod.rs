//! Runs NIXL-engine sides in child processes of the test binary (re-executed with a role in the
//! environment), because a process that used NIXL must leave through `exit_process` and must
//! hold no other UCX. The harness process itself never loads NIXL.

#![allow(dead_code)]

use icb_core::{BandwidthUnit, MemoryPair, PairReport, RunSettings, TestKind, ToolInfo};
use icb_engine::{ConnectOptions, ServeOptions};
use icb_nixl_engine::NixlOptions;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ROLE: &str = "ICB_NIXL_TEST_ROLE";

pub fn tool() -> ToolInfo {
    ToolInfo {
        name: "ic-bench".into(),
        version: "test".into(),
        git_commit: String::new(),
        ucx_headers: String::new(),
    }
}

pub fn settings(sizes: &[u64], memory: &[MemoryPair]) -> RunSettings {
    RunSettings {
        tests: vec![TestKind::GetBw, TestKind::PutBw],
        sizes: sizes.to_vec(),
        memory: memory.to_vec(),
        warmup_iterations: 3,
        min_iterations: 5,
        min_time_s: 0.05,
        max_time_s: 0.5,
        window: 1,
        unit: BandwidthUnit::GBps,
        require_cuda: false,
        stop: None,
        plan: Vec::new(),
        blocks: None,
        window_candidates: Vec::new(),
        untouched_buffers: false,
        cuda_alloc: Default::default(),
    }
}

fn nixl_from_env() -> NixlOptions {
    let mut n = NixlOptions::default();
    if let Ok(b) = std::env::var("ICB_NIXL_TEST_BATCHES") {
        n.batches = b.split(',').filter_map(|x| x.parse().ok()).collect();
    }
    if let Ok(d) = std::env::var("ICB_NIXL_TEST_LIB") {
        n.library_dir = Some(PathBuf::from(d));
    }
    n
}

/// The body of the child: `serve` prints `LISTENING <addr>`, `connect` prints `REPORT <json>`,
/// errors print `ERROR <message>`; then the process leaves through `exit_process`.
pub fn child_main() {
    let role = std::env::var(ROLE).expect("child_entry runs only as a child of its test (ignored otherwise)");
    let code = match role.as_str() {
        "serve" => {
            let opts = ServeOptions {
                cancel: None,
                guard: Default::default(),
                listen: "127.0.0.1:0".into(),
                once: true,
                idle_timeout: Some(Duration::from_secs(60)),
                ucx: Default::default(),
                tool: tool(),
                on_listening: Some(Box::new(|l| println!("LISTENING {}", l.address))),
            };
            match icb_nixl_engine::serve(opts, nixl_from_env()) {
                Ok(()) => 0,
                Err(e) => {
                    println!("ERROR {e}");
                    e.exit_code()
                }
            }
        }
        "connect" => {
            let sizes: Vec<u64> = std::env::var("ICB_NIXL_TEST_SIZES")
                .unwrap_or_default()
                .split(',')
                .filter_map(|x| x.parse().ok())
                .collect();
            let memory: Vec<MemoryPair> = std::env::var("ICB_NIXL_TEST_MEMORY")
                .unwrap_or_else(|_| "host-host".into())
                .split(',')
                .filter_map(|x| x.parse().ok())
                .collect();
            let opts = ConnectOptions {
                cancel: None,
                token: None,
                server: std::env::var("ICB_NIXL_TEST_SERVER").unwrap_or_default(),
                settings: settings(&sizes, &memory),
                connect_timeout: Duration::from_secs(20),
                locality: None,
                expect_flags: Default::default(),
                expect_config: None,
                expectation: None,
                ucx: Default::default(),
                tool: tool(),
                placement_mode: "manual".into(),
                on_case: None,
            };
            match icb_nixl_engine::connect(opts, nixl_from_env()) {
                Ok(r) => {
                    println!("REPORT {}", serde_json::to_string(&r).unwrap_or_default());
                    0
                }
                Err(e) => {
                    println!("ERROR {e}");
                    e.exit_code()
                }
            }
        }
        "foreign-ucx" => {
            // Another UCX first (ic-bench's own, from scripts/setup), then NIXL must refuse.
            let dir = std::env::var_os("IC_BENCH_UCX_LIB").map(PathBuf::from);
            if let Err(e) = ucx_sys::load(dir.as_deref()) {
                println!("ERROR setup: {e}");
                icb_nixl_engine::exit_process(3);
            }
            let opts = ServeOptions {
                cancel: None,
                guard: Default::default(),
                listen: "127.0.0.1:0".into(),
                once: true,
                idle_timeout: Some(Duration::from_secs(5)),
                ucx: Default::default(),
                tool: tool(),
                on_listening: None,
            };
            match icb_nixl_engine::serve(opts, nixl_from_env()) {
                Ok(()) => 0,
                Err(e) => {
                    println!("ERROR {e}");
                    e.exit_code()
                }
            }
        }
        "probe-load" => {
            let dir = std::env::var_os("ICB_NIXL_TEST_LIB").map(PathBuf::from);
            match icb_nixl_engine::probe_load(dir.as_deref()) {
                Ok(what) => {
                    println!("LOADABLE {what}");
                    0
                }
                Err(e) => {
                    println!("ERROR {e}");
                    2
                }
            }
        }
        _ => 99,
    };
    icb_nixl_engine::exit_process(code);
}

/// This test binary again, running only the ignored test `test_path` (its `module_path!()` and
/// name: `main::pair::child_entry`) as `role`. libtest names a test by its path without the crate
/// (the binary's) name, so that part goes.
pub fn child(test_path: &str, role: &str, env: &[(&str, String)]) -> Command {
    let test_name = test_path.split_once("::").map_or(test_path, |(_, name)| name);
    let mut c = Command::new(std::env::current_exe().unwrap_or_default());
    c.args(["--exact", test_name, "--ignored", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Kills the child on drop (a failed assertion must not leave a server behind).
pub struct Reaper(pub Child);

impl Reaper {
    /// Waits up to `limit` for the child to leave by itself (a served-once server removes its
    /// UCX log directory on the way out), then kills it.
    pub fn finish(mut self, limit: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(status)) = self.0.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a server child and returns it with its address.
pub fn start_server(test_path: &str, env: &[(&str, String)]) -> (Reaper, String) {
    let mut child = Reaper(child(test_path, "serve", env).spawn().expect("spawn server child"));
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some((_, rest)) = line.split_once("LISTENING ") {
                let _ = tx.send(Ok(rest.trim().to_string()));
            } else if let Some((_, rest)) = line.split_once("ERROR ") {
                let _ = tx.send(Err(rest.to_string()));
            }
        }
    });
    let addr = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => panic!("server failed: {e}"),
        Err(_) => panic!("server did not listen within 60 s"),
    };
    (child, addr)
}

/// Runs a child to completion within `limit`: (exit code, stdout, stderr).
pub fn run_child(mut cmd: Command, limit: Duration) -> (Option<i32>, String, String) {
    let mut child = Reaper(cmd.spawn().expect("spawn child"));
    let start = Instant::now();
    loop {
        match child.0.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > limit => panic!("child ran past {limit:?}"),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let mut out = String::new();
    let mut err = String::new();
    use std::io::Read;
    if let Some(mut s) = child.0.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.0.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let code = child.0.try_wait().ok().flatten().and_then(|s| s.code());
    (code, out, err)
}

pub fn report_of(stdout: &str) -> Option<PairReport> {
    stdout
        .lines()
        .find_map(|l| l.split_once("REPORT ").map(|(_, r)| r.to_string()))
        .and_then(|j| serde_json::from_str(&j).ok())
}

pub fn error_of(stdout: &str) -> Option<String> {
    stdout
        .lines()
        .find_map(|l| l.split_once("ERROR ").map(|(_, r)| r.to_string()))
}
