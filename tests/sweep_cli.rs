//! `ic-bench sweep` output flags that are checked before anything connects: a format that
//! cannot show a sweep costs one line and milliseconds, not a sweep.

use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ic-bench");

fn run(args: &[&str]) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let out = Command::new(BIN).args(args).output().expect("run ic-bench");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn svg_is_refused_before_connecting_with_what_to_use_instead() {
    // The kubeconfig does not exist: had it tried to connect, the error would name the file.
    let (code, stderr, took) = run(&["sweep", "-o", "svg", "--kubeconfig", "/nonexistent/kc"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "not one line: {stderr}");
    assert!(
        stderr.starts_with("ic-bench: error: -o svg cannot show a sweep"),
        "{stderr}"
    );
    assert!(stderr.contains("--export-html"), "{stderr}");
    assert!(!stderr.contains("/nonexistent/kc"), "it connected first: {stderr}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn unknown_output_format_lists_the_formats() {
    let (code, stderr, _) = run(&["sweep", "-o", "yaml", "--kubeconfig", "/nonexistent/kc"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "invalid value 'yaml' for '--output <FORMAT>'; possible values: table, wide, json, junit, prometheus, svg"
        ),
        "{stderr}"
    );
}

fn run_out(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).args(args).output().expect("run ic-bench");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn dry_run_with_explicit_nodes_plans_without_a_cluster() {
    let (code, out, err) = run_out(&[
        "sweep",
        "--dry-run",
        "--nodes",
        "c,a,b,d",
        "--kubeconfig",
        "/nonexistent/kc",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("schedule all-pairs, 4 nodes, 6 pairs in 3 rounds"),
        "{out}"
    );
    assert!(err.contains("not checked against a cluster"), "{err}");
    // With a selector the nodes come from the cluster: the error says how to plan without one.
    let (code, _, err) = run_out(&["sweep", "--dry-run", "--kubeconfig", "/nonexistent/kc"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("give --nodes A,B,C to plan without one"), "{err}");
}

/// A results file as a first run leaves it, stopped after its first pair, with its criteria.
fn stopped_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("sweep.json");
    let text = serde_json::json!({
        "schema": "ic-bench.sweep/v1",
        "tool_version": "0",
        "sweep_id": "swtest",
        "started_at": "t",
        "updated_at": "t",
        "complete": false,
        "schedule": {"kind": "ring"},
        "nodes": ["a", "b", "c"],
        "pair_budget_s": 60.0,
        "rounds": [[{"prefill": "a", "decode": "b"}], [{"prefill": "b", "decode": "c"}], [{"prefill": "c", "decode": "a"}]],
        "pairs": [],
        "criteria": {
            "tests": ["put_bw"], "sizes": [1048576], "memory": ["host-host"], "max_time_s": 0.3,
            "min_host_bw_bps": 1000000.0, "allow_tcp": true, "engine": "ucx", "profile": "sweep", "host_ipc": false
        },
        "attempt": 1,
        "stopped": {"reason": "interrupted", "detail": "interrupted by SIGTERM", "at": "t"}
    });
    std::fs::write(&path, text.to_string()).unwrap();
    path
}

#[test]
fn resume_refuses_a_flag_that_differs_from_the_file_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = stopped_file(dir.path());
    let file = path.to_str().unwrap();
    let (code, _, err) = run_out(&[
        "sweep",
        "--resume",
        file,
        "--sizes",
        "64KiB",
        "--kubeconfig",
        "/nonexistent/kc",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--sizes differs from the sweep being resumed"), "{err}");
    assert!(!err.contains("/nonexistent/kc"), "refused before connecting: {err}");
    // Without the flag the file's criteria are used: its plan prints with no cluster at all.
    let (code, out, err) = run_out(&[
        "sweep",
        "--resume",
        file,
        "--dry-run",
        "--kubeconfig",
        "/nonexistent/kc",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("schedule ring, 3 nodes, 3 pairs"), "{out}");
    // The same value as the file's is no difference.
    let (code, _, err) = run_out(&["sweep", "--resume", file, "--dry-run", "--allow-tcp", "--sizes", "1MiB"]);
    assert_eq!(code, Some(0), "{err}");
}
