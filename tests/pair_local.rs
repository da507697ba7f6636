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
    let mut measured = 0;
    for case in &report.cases {
        if case.memory.uses_cuda() {
            // No GPU here: skipped with a reason, and the run still passes.
            assert_eq!(case.status, CaseStatus::Skipped, "{case:?}");
            assert!(
                case.reason
                    .as_deref()
                    .is_some_and(|r| r.to_lowercase().contains("cuda")),
                "{case:?}"
            );
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
    let ran = ic_bench(&args, &[]);
    assert_eq!(ran.code, 0, "stderr:\n{}", ran.stderr);
    assert!(ran.stdout.to_lowercase().contains("pass"), "{}", ran.stdout);
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
