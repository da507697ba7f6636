//! SIGTERM and SIGINT to `ic-bench pair --local`, in every isolation mode: exit 130, the cases
//! measured so far written as a valid report marked partial, and nothing left (processes,
//! namespaces). Modes other than `none` need root (namespaces, veths).

mod pair_local_support;

use icb_isolate::privileged_tests_enabled;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pair_local_support::serial;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn interrupted_mid_run(isolation: &str, signal: Signal, name: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ic-bench"))
        .args(["pair", "--local", "--isolation", isolation, "-o", "json"])
        .args(["--tests", "tag_bw,put_bw", "--memory", "host-host"])
        .args(["--sizes", "8,64KiB,256KiB,1MiB", "--min-time", "1", "--max-time", "1"])
        .env_remove("UCX_TLS")
        .env_remove("UCX_NET_DEVICES")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ic-bench pair");
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    // Wait until the prefill side runs, then let it measure a few of the 8 one-second cases.
    let is_connect = |p: &u32| {
        std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"connect"))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid)
        .processes
        .iter()
        .any(is_connect)
    {
        assert!(Instant::now() < deadline, "{isolation}: the prefill side never started");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "{isolation}: ended early"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(3500));
    kill(Pid::from_raw(pid as i32), signal).expect("signal ic-bench");
    let stopped = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if stopped.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("{isolation}: ic-bench did not exit within 30 s of {name}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().expect("stdout reader");
    let stderr = err.join().expect("stderr reader");
    assert_eq!(status.code(), Some(130), "{isolation} {name}: {stderr}");
    let report: icb_core::PairReport = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{isolation} {name}: the partial report is not valid ({e}): {stdout:?}\n{stderr}"));
    let partial = report.partial.as_ref().expect("marked partial");
    assert_eq!(partial.reason, format!("interrupted by {name}"), "{isolation}");
    assert_eq!(partial.planned_cases, 8);
    assert!(report.cases.len() < 8, "{isolation}: {} cases", report.cases.len());
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!(
            "ic-bench: interrupted by {name}: wrote the {} of 8 cases measured before it (marked partial); cleaned up: both processes",
            report.cases.len()
        )),
        "{isolation}: {stderr}"
    );
    assert_eq!(
        icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid),
        icb_isolate::Leftovers::default(),
        "{isolation}: run {pid} leaked"
    );
}

#[test]
fn sigterm_and_sigint_write_a_partial_report_in_every_isolation_mode() {
    let _one = serial();
    interrupted_mid_run("none", Signal::SIGTERM, "SIGTERM");
    if !privileged_tests_enabled("sigterm_and_sigint_write_a_partial_report_in_every_isolation_mode") {
        return;
    }
    interrupted_mid_run("pod", Signal::SIGINT, "SIGINT (Ctrl-C)");
    interrupted_mid_run("host-ipc", Signal::SIGTERM, "SIGTERM");
    interrupted_mid_run("node", Signal::SIGINT, "SIGINT (Ctrl-C)");
}

/// Whether process `pid` catches SIGINT and SIGTERM yet (`SigCgt` in /proc/PID/status).
fn handles_term_and_int(pid: u32) -> bool {
    let caught = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .unwrap_or(0);
    caught & (1 << 1) != 0 && caught & (1 << 14) != 0
}

/// Whether run `pid` has a child process whose command line holds `word` (`serve`, `connect`).
fn runs(pid: u32, word: &[u8]) -> bool {
    icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid)
        .processes
        .iter()
        .any(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == word)))
}

/// SIGTERM or SIGINT at every step of a local pair — as soon as it handles signals, when the
/// decode side runs, when the prefill side runs, and at steps of its measurement — always ends in
/// exit 130, a report (when written) whose verdict is `interrupted`, and nothing left behind.
#[test]
fn a_signal_at_any_step_of_a_local_pair_is_never_a_verdict() {
    let _one = serial();
    type Ready = fn(u32) -> bool;
    let points: [(&str, Ready, u64); 6] = [
        ("handler installed", handles_term_and_int, 0),
        ("decode side started", |p| runs(p, b"serve"), 0),
        ("prefill side started", |p| runs(p, b"connect"), 0),
        ("prefill side +300 ms", |p| runs(p, b"connect"), 300),
        ("prefill side +900 ms", |p| runs(p, b"connect"), 900),
        ("prefill side +1700 ms", |p| runs(p, b"connect"), 1700),
    ];
    for (i, (what, ready, after_ms)) in points.into_iter().enumerate() {
        let (signal, name) = if i % 2 == 0 {
            (Signal::SIGTERM, "SIGTERM")
        } else {
            (Signal::SIGINT, "SIGINT")
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_ic-bench"))
            .args(["pair", "--local", "-o", "json", "--memory", "host-host"])
            .args(["--tests", "tag_bw,put_bw,get_bw", "--sizes", "64KiB,1MiB"])
            .args(["--min-time", "0.5", "--max-time", "0.5"])
            .env_remove("UCX_TLS")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ic-bench pair");
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready(pid) {
            assert!(Instant::now() < deadline, "{what}: never reached");
            assert!(child.try_wait().unwrap().is_none(), "{what}: ended before the signal");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(after_ms));
        kill(Pid::from_raw(pid as i32), signal).expect("signal ic-bench");
        let out = pair_local_support::wait_with_output(child, Duration::from_secs(60));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{what} ({name}): {stderr}");
        assert!(
            stderr
                .lines()
                .last()
                .unwrap_or("")
                .starts_with(&format!("ic-bench: interrupted by {name}")),
            "{what}: {stderr}"
        );
        if !stdout.trim().is_empty() {
            let report: icb_core::PairReport =
                serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{what}: {e}: {stdout}"));
            assert_eq!(report.verdict.status, icb_core::VerdictStatus::Interrupted, "{what}");
            assert!(report.partial.is_some(), "{what}");
        }
        assert_eq!(
            icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid),
            icb_isolate::Leftovers::default(),
            "{what}: run {pid} leaked"
        );
    }
}
