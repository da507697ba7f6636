//! `scripts/gpu-check` where there is no GPU: its arguments are checked before anything runs, and
//! without a CUDA driver it writes a skip report and exits 0 (nothing to measure is not a failure).
//! The driver is hidden with `GPU_CHECK_LIBCUDA`, so these run the same on a GPU machine.

use std::path::Path;
use std::process::{Command, Output};

fn gpu_check(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-check"))
        .args(args)
        .env("GPU_CHECK_LIBCUDA", "libcuda-hidden-by-the-test.so.1")
        .output()
        .expect("python3 runs")
}

#[test]
fn without_a_driver_it_skips_cleanly_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.txt");
    let out = gpu_check(&["--no-build", "--out", report.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.starts_with("gpu-check: skipped: no CUDA driver\n"), "{text}");
    assert!(text.contains("unmeasured on this machine"), "{text}");
}

#[test]
fn bad_sizes_are_one_line_and_exit_2() {
    for bad in ["abc", "0", ","] {
        let out = gpu_check(&["--no-build", "--sizes", bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--sizes {bad}: {err}");
        assert_eq!(err.lines().count(), 1, "--sizes {bad}: {err}");
        assert!(err.starts_with("gpu-check: error: --sizes"), "--sizes {bad}: {err}");
    }
}

#[test]
fn an_unknown_flag_is_refused_with_exit_2() {
    let out = gpu_check(&["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unrecognized arguments: --no-such-flag"));
}

#[test]
fn an_unknown_part_to_skip_is_one_line_and_exit_2() {
    let out = gpu_check(&["--no-build", "--skip", "nixl,warp"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpu-check: error: --skip warp: name parts among"),
        "{err}"
    );
}
