//! `ic-bench pair --local` with plain processes: real UCX between two real processes.

mod pair_local_support;

use icb_core::{CaseStatus, Locality, PAIR_SCHEMA, TransportClass, VerdictStatus};
use pair_local_support::{SMALL, ic_bench, pair_json, serial};

#[test]
fn default_pair_uses_shared_memory_and_passes() {
    let _one = serial();
    let ran = pair_json("none", &[]);
    assert_eq!(ran.code, 0, "stderr:\n{}", ran.stderr);
    let report = ran.report();
    assert_eq!(report.schema, PAIR_SCHEMA);
    assert_eq!(report.placement.mode, "local (isolation=none)");
    assert_eq!(report.placement.locality, Locality::SameHost);
    assert!(
        report
            .placement
            .decode
            .address
            .as_deref()
            .is_some_and(|a| a.starts_with("127.0.0.1:"))
    );
    assert_eq!(report.verdict.status, VerdictStatus::Pass, "{:?}", report.verdict);
    assert!(
        !report.verdict.data_paths.contains(&TransportClass::Tcp),
        "{:?}",
        report.verdict
    );
    let cuda = report.client.cuda.available && report.server.cuda.available;
    let mut measured = 0;
    for case in &report.cases {
        if case.memory.uses_cuda() {
            if cuda {
                assert_eq!(case.status, CaseStatus::Measured, "{case:?}");
            } else {
                // No GPU: skipped with a reason, and the run still passes.
                assert_eq!(case.status, CaseStatus::Skipped, "{case:?}");
                assert!(
                    case.reason
                        .as_deref()
                        .is_some_and(|r| r.to_lowercase().contains("cuda")),
                    "{case:?}"
                );
            }
            continue;
        }
        assert_eq!(case.status, CaseStatus::Measured, "{case:?}");
        let path = &case
            .transport
            .as_ref()
            .expect("measured case without transport evidence")
            .data_path;
        assert!(
            matches!(path.class, TransportClass::SharedMemory | TransportClass::Cma),
            "{} {} {}: {path:?}",
            case.test,
            case.memory,
            case.size
        );
        assert!(path.transports.iter().all(|l| l.transport != "tcp"), "{path:?}");
        measured += 1;
    }
    assert_eq!(measured, 6, "3 tests × 2 sizes host→host");
    ran.assert_nothing_left();
}

#[test]
fn tcp_forced_by_ucx_tls_fails_naming_the_fallback() {
    let _one = serial();
    let ran = pair_json("none", &[("UCX_TLS", "tcp")]);
    assert_eq!(ran.code, 1, "stderr:\n{}", ran.stderr);
    let report = ran.report();
    assert_eq!(report.verdict.status, VerdictStatus::Fail);
    assert!(
        report.verdict.data_paths.contains(&TransportClass::Tcp),
        "{:?}",
        report.verdict
    );
    assert!(
        report.verdict.reason.to_lowercase().contains("tcp"),
        "{}",
        report.verdict.reason
    );
    assert_eq!(
        report.client.env.get("UCX_TLS").map(String::as_str),
        Some("tcp"),
        "UCX_* reaches the sides"
    );
}

#[test]
fn table_output_prints_a_verdict() {
    let _one = serial();
    let mut args = vec!["pair", "--local"];
    args.extend(SMALL);
    // Bandwidth floors are checked by the JSON test; here only the rendering matters.
    args.extend(["--min-host-bw", "0.01"]);
    let ran = ic_bench(&args, &[]);
    assert_eq!(ran.code, 0, "stderr:\n{}", ran.stderr);
    assert!(ran.stdout.contains("verdict: PASS"), "{}", ran.stdout);
    assert!(ran.stdout.contains("local (isolation=none)"), "{}", ran.stdout);
}

#[test]
fn a_server_that_cannot_start_is_a_one_line_error() {
    let _one = serial();
    let mut args = vec!["pair", "--local", "--ucx-lib", "/nonexistent/ucx/lib"];
    args.extend(SMALL);
    let ran = ic_bench(&args, &[]);
    assert_eq!(ran.code, 2, "stdout:\n{}\nstderr:\n{}", ran.stdout, ran.stderr);
    let last = ran.stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("ic-bench: error: the decode side (ic-bench serve) exited before listening"),
        "{}",
        ran.stderr
    );
    assert!(
        last.contains("/nonexistent/ucx/lib"),
        "the summary carries the side's own error: {last}"
    );
    assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
    assert!(
        ran.stdout.trim().is_empty(),
        "no report on a setup error: {}",
        ran.stdout
    );
}

#[test]
fn a_server_slower_than_the_startup_timeout_is_a_one_line_error() {
    let _one = serial();
    let mut args = vec!["pair", "--local", "--startup-timeout", "1ms"];
    args.extend(SMALL);
    let ran = ic_bench(&args, &[]);
    assert_eq!(ran.code, 2, "stderr:\n{}", ran.stderr);
    let last = ran.stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains("did not start listening within 1ms (raise --startup-timeout)"),
        "{}",
        ran.stderr
    );
}

#[test]
fn bad_local_flags_are_usage_errors() {
    let ran = ic_bench(&["pair", "--local", "--isolation", "pods"], &[]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("pods"), "{}", ran.stderr);
    let ran = ic_bench(&["pair", "--local", "--startup-timeout", "soon"], &[]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("is not a duration"), "{}", ran.stderr);
    let ran = ic_bench(
        &[
            "pair",
            "--isolation",
            "pod",
            "--prefill",
            "node/a",
            "--decode",
            "node/b",
        ],
        &[],
    );
    assert_eq!(ran.code, 2, "--isolation belongs to --local: {}", ran.stderr);
}

#[test]
fn sigterm_stops_plain_processes_too() {
    let _one = serial();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ic-bench"))
        .args([
            "pair",
            "--local",
            "--tests",
            "tag_bw",
            "--sizes",
            "8,1MiB",
            "--memory",
            "host-host",
        ])
        .args(["--min-time", "5", "--max-time", "10"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let is_connect = |p: &u32| {
        std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"connect"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid)
        .processes
        .iter()
        .any(is_connect)
    {
        assert!(std::time::Instant::now() < deadline, "the prefill side never started");
        assert!(child.try_wait().unwrap().is_none(), "ic-bench ended early");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let stopped = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if stopped.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("ic-bench did not exit within 20 s of SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(icb_core::exit::INTERRUPTED), "{stderr}");
    assert!(
        stderr
            .trim()
            .ends_with("ic-bench: interrupted by SIGTERM: cleaned up: both processes"),
        "{stderr}"
    );
    assert_eq!(
        icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid),
        icb_isolate::Leftovers::default()
    );
}

#[test]
fn ucx_logging_on_the_sides_stdout_is_tolerated() {
    let _one = serial();
    // UCX logs to stdout through a buffered stream: half a log line lands before our JSON lines,
    // and a side whose stdout is no longer read would stall on a full pipe.
    let ran = pair_json("none", &[("UCX_LOG_LEVEL", "debug")]);
    assert!(ran.code == 0 || ran.code == 1, "stderr:\n{}", ran.stderr);
    let report = ran.report();
    assert_eq!(
        report.cases.iter().filter(|c| c.status == CaseStatus::Measured).count(),
        6
    );
    ran.assert_nothing_left();
}
