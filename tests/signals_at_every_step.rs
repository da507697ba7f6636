//! A signalled command never passes (issue 17, blocker 1). `gate` and `pair` on the emulated
//! cluster get SIGTERM or SIGINT at many points of their run — at once, when the bench pods are
//! posted, when the prefill side runs, after its first case, and at steps in between — and every
//! time: exit 130, one stderr line, a report (when one is written) that says `interrupted` and
//! never `pass`, and no bench pod left. The points are events seen in the cluster, not guesses at
//! how long a step takes; the delays in between only spread the signals over the run.
//!
//! Runs on the emulated cluster's host-process mode: no root needed.

use crate::pair_kube_support as support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate");

/// When the signal is sent.
#[derive(Debug, Clone, Copy)]
enum When {
    /// As soon as the process handles SIGINT and SIGTERM (its handler is installed first thing
    /// in `main`; before that the kernel's default applies, as for any program).
    AtOnce,
    /// Once the first bench pod was posted, plus a delay.
    PodsPosted(Duration),
    /// Once the client pod logged its first finished case.
    FirstCase,
}

struct Ended {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Whether process `pid` catches SIGINT (2) and SIGTERM (15) (`SigCgt` in /proc/PID/status).
fn handles_term_and_int(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let caught = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let bit = |signal: u32| 1u64 << (signal - 1);
    caught & bit(2) != 0 && caught & bit(15) != 0
}

/// Runs `cmd`, sends `signal` at `when`, waits for the end (bounded).
fn signalled(cluster: &icb_testcluster::TestCluster, mut cmd: Command, when: When, signal: &str) -> Ended {
    cluster.clear_requests();
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let wait_for = |what: &str, done: &dyn Fn() -> bool, child: &mut std::process::Child| {
        while !done() {
            assert!(Instant::now() < deadline, "{what} never happened");
            assert!(child.try_wait().unwrap().is_none(), "ended before {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let pid = child.id();
    match when {
        When::AtOnce => wait_for("the signal handler", &|| handles_term_and_int(pid), &mut child),
        When::PodsPosted(after) => {
            wait_for("a bench pod post", &|| !created_pods(cluster).is_empty(), &mut child);
            std::thread::sleep(after);
        }
        When::FirstCase => wait_for("the first case", &|| client_logged_a_case(cluster), &mut child),
    }
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline + Duration::from_secs(60),
            "did not end after {signal}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    Ended {
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// What every signalled run must show, whatever the point.
fn assert_interrupted(cluster: &icb_testcluster::TestCluster, e: &Ended, what: &str) {
    assert_eq!(
        e.code, 130,
        "{what}: exit code\nstdout: {}\nstderr: {}",
        e.stdout, e.stderr
    );
    let lines: Vec<&str> = e.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: one stderr line: {}", e.stderr);
    assert!(
        lines[0].starts_with("ic-bench: interrupted by SIG"),
        "{what}: {}",
        lines[0]
    );
    assert!(!e.stdout.contains("PASS"), "{what}: {}", e.stdout);
    if !e.stdout.trim().is_empty() {
        let r: serde_json::Value =
            serde_json::from_str(&e.stdout).unwrap_or_else(|err| panic!("{what}: {err}: {}", e.stdout));
        let verdict = r["verdict"].get("status").unwrap_or(&r["verdict"]);
        assert_eq!(verdict, "interrupted", "{what}: {}", r["verdict"]);
        if let Some(pair) = r.get("pair") {
            assert_eq!(pair["verdict"]["status"], "interrupted", "{what}: {}", pair["verdict"]);
        }
    }
    assert!(leftover_via_api(cluster).is_empty(), "{what}: bench pods left");
}

fn gate_command(cluster: &icb_testcluster::TestCluster, output: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("gate")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--recipe", &format!("{FIXTURES}/good.yaml")])
        .args(["--prefill", "node/gpu-1", "--decode", "node/gpu-2", "--budget", "120s"])
        .args(["--allow-tcp", "--min-host-bw", "0.001", "-o", output])
        .args(["--tests", "put_bw,get_bw,tag_lat", "--sizes", "64KiB,1MiB,4MiB"])
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off");
    cmd
}

#[test]
fn a_signalled_gate_never_passes_at_any_point() {
    let cluster = host_cluster();
    let points = [
        When::AtOnce,
        When::PodsPosted(Duration::ZERO),
        When::PodsPosted(Duration::from_millis(300)),
        When::PodsPosted(Duration::from_millis(800)),
        When::PodsPosted(Duration::from_millis(1500)),
        When::FirstCase,
    ];
    for (i, when) in points.into_iter().enumerate() {
        let signal = if i % 2 == 0 { "TERM" } else { "INT" };
        let e = signalled(&cluster, gate_command(&cluster, "json"), when, signal);
        assert_interrupted(&cluster, &e, &format!("gate, SIG{signal} at {when:?}"));
    }
    // JUnit says it too: an error testcase typed `interrupted`, never a clean suite; and the
    // export file a CI job reads is written on this path as well.
    let dir = tempfile::tempdir().unwrap();
    let exported = dir.path().join("gate.json");
    let mut cmd = gate_command(&cluster, "junit");
    cmd.arg("--export-json").arg(&exported);
    let e = signalled(&cluster, cmd, When::FirstCase, "TERM");
    assert_eq!(e.code, 130, "{}", e.stderr);
    assert!(e.stdout.contains(r#"type="interrupted""#), "{}", e.stdout);
    assert!(!e.stdout.contains(r#"errors="0""#), "{}", e.stdout);
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&exported).unwrap()).unwrap();
    assert_eq!(file["verdict"], "interrupted");
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn a_signalled_kubernetes_pair_never_passes_at_any_point() {
    let cluster = host_cluster();
    let points = [
        When::AtOnce,
        When::PodsPosted(Duration::ZERO),
        When::PodsPosted(Duration::from_millis(500)),
        When::FirstCase,
    ];
    for (i, when) in points.into_iter().enumerate() {
        let signal = if i % 2 == 0 { "INT" } else { "TERM" };
        let mut cmd = pair_command(
            &cluster,
            &[
                "--prefill",
                "node/gpu-1",
                "--decode",
                "node/gpu-2",
                "-o",
                "json",
                "--allow-tcp",
            ],
        );
        cmd.args(["--min-host-bw", "0.001"]);
        cmd.args([
            "--tests",
            "tag_bw,put_bw,get_bw",
            "--sizes",
            "64KiB,1MiB,4MiB",
            "--memory",
            "host-host",
        ]);
        let e = signalled(&cluster, cmd, when, signal);
        assert_interrupted(&cluster, &e, &format!("pair, SIG{signal} at {when:?}"));
    }
}
