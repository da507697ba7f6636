//! The client half of `scripts/soak-serve`: runs N sequential real clients (each one small
//! tag_bw case, its own UCX context and worker, the token from `IC_BENCH_TOKEN`) against a
//! running `serve`, and prints that server's resident memory, descriptors and shared-memory
//! mappings at the start, after the first client, and at the end, as one table.
//!
//! ```sh
//! soak_clients ADDR SERVE_PID N                  # exit 0: every client passed and the server stayed flat
//! soak_clients ADDR SERVE_PID N -- CMD ARG...    # each client is the process CMD (exit 0: passed)
//! ```
//!
//! The second form soaks a server whose clients cannot share one process, e.g. `serve --engine
//! nixl` with `ic-bench connect --engine nixl` clients (NIXL brings its own UCX, one per process).

use icb_core::{RunSettings, ToolInfo};
use icb_engine::{ConnectOptions, UcxOptions};
use std::time::{Duration, Instant};

/// Resident memory (KiB), open descriptors, shared-memory mappings of `pid`, and /dev/shm entries.
fn footprint(pid: u32) -> [u64; 4] {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let shm = maps
        .lines()
        .filter(|l| l.contains("SYSV") || l.contains("/dev/shm/"))
        .count() as u64;
    let dev_shm = std::fs::read_dir("/dev/shm").map_or(0, |d| d.count() as u64);
    [rss, fds, shm, dev_shm]
}

fn settings() -> RunSettings {
    // One small case, as few iterations as the engine allows: the server is what is soaked.
    serde_json::from_value(serde_json::json!({
        "tests": ["tag_bw"], "sizes": [4096], "memory": [{"initiator": "host", "target": "host"}],
        "warmup_iterations": 1, "min_iterations": 2, "min_time_s": 0.001, "max_time_s": 0.05,
        "window": 32, "unit": "GB/s", "require_cuda": false
    }))
    .expect("settings")
}

fn one_client(addr: &str, token: Option<icb_engine::auth::Token>) -> Result<(), String> {
    let report = icb_engine::connect(ConnectOptions {
        server: addr.to_string(),
        settings: settings(),
        connect_timeout: Duration::from_secs(10),
        locality: None,
        expect_flags: Default::default(),
        expect_config: None,
        expectation: None,
        ucx: UcxOptions::default(),
        tool: ToolInfo {
            name: "ic-bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            git_commit: "soak".into(),
            ucx_headers: String::new(),
        },
        placement_mode: "soak".into(),
        on_case: None,
        cancel: None,
        token,
    })
    .map_err(|e| e.to_string())?;
    let measured = report.cases.iter().filter(|c| c.measurement.is_some()).count();
    if measured == 0 {
        return Err(format!(
            "no case measured: {:?}",
            report.cases.first().map(|c| &c.status)
        ));
    }
    Ok(())
}

/// One client as its own process, bounded in time (a hung client fails, it does not hang the soak).
fn one_process(cmd: &[String]) -> Result<(), String> {
    let mut child = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", cmd[0]))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            if status.success() {
                return Ok(());
            }
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return Err(format!("{status}: {}", err.lines().last().unwrap_or("")));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the client ran past 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let (args, command) = match all.iter().position(|a| a == "--") {
        Some(i) => (all[..i].to_vec(), Some(all[i + 1..].to_vec()).filter(|c| !c.is_empty())),
        None => (all, None),
    };
    let (Some(addr), Some(pid), Some(n)) = (
        args.first(),
        args.get(1).and_then(|p| p.parse::<u32>().ok()),
        args.get(2).and_then(|n| n.parse::<u64>().ok()),
    ) else {
        eprintln!("soak_clients: usage: soak_clients ADDR SERVE_PID N [-- CLIENT_CMD ARG...]");
        std::process::exit(2);
    };
    let token = match icb_engine::auth::Token::resolve(None, std::env::var(icb_engine::auth::TOKEN_ENV).ok()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("soak_clients: {e}");
            std::process::exit(2);
        }
    };
    let start = footprint(pid);
    let started = Instant::now();
    let mut after_first = start;
    let mut failures = 0u64;
    for i in 0..n {
        let ran = match &command {
            Some(cmd) => one_process(cmd),
            None => one_client(addr, token.clone()),
        };
        if let Err(e) = ran {
            failures += 1;
            if failures <= 5 {
                eprintln!("soak_clients: client {i}: {e}");
            }
        }
        if i == 0 {
            after_first = footprint(pid);
        }
        if (i + 1) % if command.is_some() { 50 } else { 1000 } == 0 {
            eprintln!(
                "soak_clients: {} clients, {:.0} s",
                i + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Let the server finish the last session (worker renewal) before the last look.
    std::thread::sleep(Duration::from_millis(500));
    let end = footprint(pid);
    println!(
        "| serve soak: {n} sequential clients, {failures} failed, {elapsed:.0} s ({:.1} ms/client) | start | after client 1 | end |",
        elapsed * 1e3 / n.max(1) as f64
    );
    println!("|---|---|---|---|");
    for (k, name) in ["RSS (KiB)", "open fds", "shm mappings", "/dev/shm entries"]
        .iter()
        .enumerate()
    {
        println!("| {name} | {} | {} | {} |", start[k], after_first[k], end[k]);
    }
    // Flat: the server's descriptors and mappings as after the first client, memory within
    // 16 MiB of it. (/dev/shm is machine-wide: shown, not judged.)
    let flat = end[1] <= after_first[1] && end[2] <= after_first[2] && end[0] <= after_first[0] + 16 * 1024;
    if failures > 0 || !flat {
        eprintln!("soak_clients: {failures} clients failed; flat: {flat}");
        std::process::exit(1);
    }
}
