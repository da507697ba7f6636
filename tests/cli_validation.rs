//! Everything that can be checked before the two sides start is checked first: a typo in a flag
//! or a file costs milliseconds and one line, never a benchmark run.

use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ic-bench");

/// Runs ic-bench and returns (exit code, stderr, elapsed).
fn run(args: &[&str]) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let out = Command::new(BIN).args(args).output().expect("run ic-bench");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

fn assert_quick_one_line_usage_error(args: &[&str], wanted: &str) {
    let (code, stderr, took) = run(args);
    assert_eq!(code, Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: not one line: {stderr}");
    assert!(stderr.starts_with("ic-bench: error: "), "{args:?}: {stderr}");
    assert!(stderr.contains(wanted), "{args:?}: {wanted:?} missing in {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Generous for a loaded CI machine; a started run takes tens of seconds.
    assert!(
        took < Duration::from_secs(5),
        "{args:?} took {took:?}: it started work before checking"
    );
}

#[test]
fn bad_files_and_values_fail_before_anything_starts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad_yaml = dir.path().join("expect.yaml");
    std::fs::write(&bad_yaml, "same_host: [unclosed\n").expect("write");
    let bad_yaml = bad_yaml.to_str().expect("utf-8 path");
    let cases: &[(&[&str], &str)] = &[
        (
            &["pair", "--local", "--output-file", "/nonexistent-dir/report.json"],
            "does not exist",
        ),
        (
            &["pair", "--local", "--expect-config", "/nonexistent-dir/x.yaml"],
            "cannot read --expect-config",
        ),
        (&["pair", "--local", "--expect-config", bad_yaml], "expect.yaml"),
        (&["pair", "--local", "--min-host-bw", "0"], "--min-host-bw"),
        (&["pair", "--local", "--sizes", "100GiB"], "16 GiB"),
        (
            &["pair", "--local", "-o", "bogus"],
            "invalid value 'bogus' for '--output <FORMAT>'; possible values:",
        ),
        (
            &["pair", "--local", "--cuda-alloc", "expandable"],
            "invalid value 'expandable' for '--cuda-alloc <MODE>'",
        ),
        (
            &["pair", "--local", "-o", "yaml"],
            "-o yaml prints the pods of --dry-run",
        ),
        (
            &[
                "pair",
                "--prefill",
                "node/a",
                "--decode",
                "node/b",
                "--dry-run",
                "-o",
                "svg",
            ],
            "-o svg with --dry-run: use -o yaml or -o json",
        ),
        (
            &["pair", "--local", "--profile", "quick"],
            "possible values: verdict, full",
        ),
        (
            &["connect", "127.0.0.1:1", "--plan", "{}", "-o", "json"],
            "'--plan <JSON>' cannot be used with '--output <FORMAT>'",
        ),
        (
            &["connect", "127.0.0.1:1", "--plan", "{}", "--connect-timeout", "5s"],
            "'--plan <JSON>' cannot be used with '--connect-timeout <DURATION>'",
        ),
        (&["pair", "--local", "--dry-run=client"], "--prefill/--decode"),
        (
            &["pair", "--local", "--link-rate", "30mbit"],
            "use it with --isolation node",
        ),
        (&["pair", "--local", "--link-rate", "fast"], "bad rate \"fast\""),
        // Issue 17: --dry-run=server passed the parser and was refused later; only what works parses.
        (
            &["pair", "--prefill", "node/a", "--decode", "node/b", "--dry-run=server"],
            "invalid value 'server' for '--dry-run",
        ),
        (
            &[
                "pair",
                "--prefill",
                "node/a",
                "--decode",
                "node/b",
                "--isolation",
                "pod",
            ],
            "--isolation applies to --local",
        ),
        (
            &["connect", "127.0.0.1:9", "--output-file", "/nonexistent-dir/x"],
            "does not exist",
        ),
    ];
    for (args, wanted) in cases {
        assert_quick_one_line_usage_error(args, wanted);
    }
}

#[test]
fn argument_errors_are_one_line_with_a_pointer_to_help() {
    assert_quick_one_line_usage_error(&["pair", "--bogus"], "unexpected argument '--bogus'");
    assert_quick_one_line_usage_error(
        &["pair", "--local", "--tests", "foo"],
        "use tag_bw, tag_lat, put_bw or get_bw",
    );
    let (code, stderr, _) = run(&["pair", "--bogus"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--help"), "{stderr}");
}

#[test]
fn an_empty_ucx_lib_variable_counts_as_unset() {
    let out = Command::new(BIN)
        .args(["pair", "--local", "--tests", "foo"])
        .env("IC_BENCH_UCX_LIB", "")
        .output()
        .expect("run ic-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !stderr.contains("--ucx-lib"),
        "an empty IC_BENCH_UCX_LIB must not read as a flag: {stderr}"
    );
    assert!(stderr.contains("unknown test 'foo'"), "{stderr}");
}

#[test]
fn a_ucx_tls_naming_no_transport_is_named_in_the_error() {
    let out = Command::new(BIN)
        .args([
            "pair",
            "--local",
            "--tests",
            "tag_bw",
            "--sizes",
            "8",
            "--memory",
            "host-host",
        ])
        .env("UCX_TLS", "bogus")
        .output()
        .expect("run ic-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(last.starts_with("ic-bench: error: "), "{stderr}");
    assert!(last.contains("UCX_TLS=bogus"), "the error names the variable: {last}");
}

/// Issue 10: a zero timeout gave two different errors depending on the flag, and `gc
/// --older-than bogus` must say what to write. Every duration flag answers a zero and a word
/// with the one duration parser's message.
#[test]
fn every_duration_flag_refuses_zero_and_words_with_one_message() {
    let flags: &[&[&str]] = &[
        &["connect", "127.0.0.1:1", "--connect-timeout"],
        &["serve", "--idle-timeout"],
        &["pair", "--local", "--startup-timeout"],
        &["pair", "--prefill", "node/a", "--decode", "node/b", "--timeout"],
        &["gc", "--older-than"],
        &["gc", "--request-timeout"],
        &["probe", "node", "--tool-timeout"],
    ];
    for flag in flags {
        for (value, wanted) in [
            ("0", "'0' is not a positive duration: use e.g. 10s, 2m, 500ms"),
            ("0s", "'0s' is not a positive duration: use e.g. 10s, 2m, 500ms"),
            ("bogus", "'bogus' is not a duration"),
        ] {
            let mut args = flag.to_vec();
            args.push(value);
            assert_quick_one_line_usage_error(&args, wanted);
        }
    }
}

#[test]
fn flags_that_would_be_ignored_or_misread_are_named() {
    // Kubernetes-only flags have no effect with --local: refused, not silently dropped.
    for (flag, value) in [
        ("--image", Some("x:1")),
        ("--host-ipc", None),
        ("--namespace", Some("ns")),
    ] {
        let mut args = vec!["pair", "--local", flag];
        args.extend(value);
        assert_quick_one_line_usage_error(&args, &format!("{flag} applies to Kubernetes runs"));
    }
    // A missing side is named.
    assert_quick_one_line_usage_error(
        &["pair", "--prefill", "node/a"],
        "required arguments were not provided: --decode <DECODE>",
    );
    // `--recipe` on Kubernetes is read for --kv-shape's connector only: without it, refused.
    assert_quick_one_line_usage_error(
        &[
            "pair",
            "--prefill",
            "node/a",
            "--decode",
            "node/b",
            "--recipe",
            "r.yaml",
        ],
        "--recipe applies to --local runs and --kv-shape: add --local, or --kv-shape MODEL",
    );
    // Bandwidth flags take units like the expectations file; a bad one says how to write it.
    assert_quick_one_line_usage_error(&["pair", "--local", "--min-host-bw", "10 parsecs"], "e.g. 10 GB/s");
}

/// Issue 17: `pair --help` described the full profile's defaults (every test, 8 B … 64 MiB) while
/// the default `--profile verdict` runs 4 MiB bandwidth cases and an 8 B latency case.
#[test]
fn pair_help_describes_what_the_default_profile_runs() {
    let out = Command::new(BIN)
        .args(["pair", "--help"])
        .output()
        .expect("run ic-bench");
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(out.status.success());
    assert!(
        help.contains("[default: --profile verdict runs tag_bw, put_bw and get_bw at 4 MiB, tag_lat at 8 B"),
        "--tests: {help}"
    );
    assert!(
        help.contains("[default: --profile verdict: 4 MiB (tag_lat 8 B)"),
        "--sizes: {help}"
    );
    assert!(
        !help.contains("tag_bw, tag_lat, put_bw, get_bw [default: all four]"),
        "{help}"
    );
}
