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
