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
        stderr.contains("unknown output format 'yaml': use table, wide, json, junit, prometheus or svg"),
        "{stderr}"
    );
}
