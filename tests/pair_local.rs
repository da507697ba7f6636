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

/// Issue 35 item 4: `--control tcp` repeats the run's largest host case with UCX forced to TCP;
/// the detector must see it (caught, seen as tcp) and the main path must beat it. With the user's
/// own `UCX_TLS=tcp` the run still fails as a TCP fallback. A control made undetectable on
/// purpose (the test hook forces shared memory instead) leaves the run inconclusive, exit 1.
#[test]
fn a_tcp_control_is_caught_and_an_undetectable_one_makes_the_run_inconclusive() {
    use pair_local_support::pair_json_with;
    let _one = serial();
    let ran = pair_json_with("none", "tag_bw,put_bw", &["--control", "tcp"], &[]);
    assert_eq!(ran.code, 0, "stderr:\n{}", ran.stderr);
    let report = ran.report();
    assert_eq!(report.controls.len(), 1, "{:?}", report.controls);
    let c = &report.controls[0];
    assert!(c.caught, "{c:?}");
    assert!(
        c.seen_as
            .iter()
            .all(|s| matches!(s, TransportClass::Tcp | TransportClass::RmaEmulated)),
        "{c:?}"
    );
    let (main, tcp) = (c.main_bandwidth_bps.unwrap(), c.bandwidth_bps.unwrap());
    assert!(main > tcp, "the shared-memory path beats forced TCP: {main} vs {tcp}");
    assert!(
        matches!(report.verdict.status, VerdictStatus::Pass | VerdictStatus::Warn),
        "{:?}",
        report.verdict
    );
    ran.assert_nothing_left();

    let ran = pair_json_with("none", "tag_bw,put_bw", &["--control", "tcp"], &[("UCX_TLS", "tcp")]);
    assert_eq!(ran.code, 1, "stderr:\n{}", ran.stderr);
    let report = ran.report();
    assert_eq!(report.verdict.status, VerdictStatus::Fail, "{:?}", report.verdict);
    assert!(report.controls[0].caught, "{:?}", report.controls);

    let ran = pair_json_with(
        "none",
        "tag_bw,put_bw",
        &["--control", "tcp"],
        &[("IC_BENCH_TEST_CONTROL_TLS", "posix,sysv,cma,self")],
    );
    assert_eq!(ran.code, 1, "inconclusive is never exit 0: {}", ran.stderr);
    let report = ran.report();
    assert_eq!(
        report.verdict.status,
        VerdictStatus::Inconclusive,
        "{:?}",
        report.verdict
    );
    assert!(!report.controls[0].caught);
    assert!(
        report.verdict.reason.contains("could not see a forced TCP fallback"),
        "{}",
        report.verdict.reason
    );
    ran.assert_nothing_left();
}

const KNOBS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/knobs");

/// Issue 35 item 4: `--control knobs-off` runs the main run's largest host case again without the
/// recipe's UCX_*/NIXL_* variables. A recipe forcing TCP on one host is far slower than UCX's
/// defaults (shared memory): the run warns naming UCX_TLS. A recipe whose only knob is UCX's own
/// default changed nothing, and the control says so. Without a recipe: one line naming --recipe.
#[test]
fn knobs_off_names_a_recipe_variable_slower_than_the_defaults_and_one_that_changed_nothing() {
    use icb_core::model::{ControlKind, KnobsEffect};
    use pair_local_support::pair_json_with;
    let _one = serial();
    let tcp = format!("{KNOBS}/tcp.yaml");
    // TCP over loopback is below the host floor: only the knobs-off warning should remain.
    let args = [
        "--control",
        "knobs-off",
        "--recipe",
        &tcp,
        "--allow-tcp",
        "--min-host-bw",
        "0.01",
    ];
    let ran = pair_json_with("none", "put_bw", &args, &[]);
    let report = ran.report_after(0);
    assert!(
        report.verdict.data_paths.contains(&TransportClass::Tcp),
        "the recipe's UCX_TLS=tcp reached both sides: {:?}",
        report.verdict
    );
    assert_eq!(report.controls.len(), 1, "{:?}", report.controls);
    let c = &report.controls[0];
    assert_eq!(
        (c.kind, c.effect),
        (ControlKind::KnobsOff, Some(KnobsEffect::Slower)),
        "{c:?}"
    );
    assert_eq!(c.removed, ["UCX_TLS"], "NIXL_/UCX_ only, not HF_TOKEN");
    assert!(
        c.seen_as.iter().all(|s| !matches!(s, TransportClass::Tcp)),
        "without the recipe's UCX_TLS UCX picks shared memory: {c:?}"
    );
    // The TCP fallback (allowed) warns already; the recipe's variable is named in the reason too.
    assert_eq!(report.verdict.status, VerdictStatus::Warn, "{:?}", report.verdict);
    assert!(
        report
            .verdict
            .reason
            .contains("; and the recipe's UCX_TLS made put_bw 1 MiB"),
        "{}",
        report.verdict.reason
    );
    ran.assert_nothing_left();

    let harmless = format!("{KNOBS}/harmless.yaml");
    let args = ["--control", "knobs-off", "--recipe", &harmless];
    let report = pair_json_with("none", "put_bw", &args, &[]).report_after(0);
    let c = &report.controls[0];
    assert_eq!(c.effect, Some(KnobsEffect::Unchanged), "{c:?}");
    assert_eq!(c.removed, ["UCX_RNDV_THRESH"]);
    assert!(
        c.detail
            .starts_with("the recipe's UCX_RNDV_THRESH changed nothing here"),
        "{}",
        c.detail
    );
    assert_eq!(report.verdict.status, VerdictStatus::Pass, "{:?}", report.verdict);

    let ran = ic_bench(&["pair", "--local", "--control", "knobs-off"], &[]);
    let line = ran.error_line("knobs-off without a recipe");
    assert!(line.contains("pass --local --recipe FILE"), "{line}");
}

#[test]
fn table_output_prints_a_verdict() {
    let _one = serial();
    let mut args = vec!["pair", "--local"];
    args.extend(SMALL);
    // Bandwidth floors are checked by the JSON test; here only the rendering matters (so the
    // cases are short too: both sides busy-poll for all of a case's --max-time, 1 s by default).
    args.extend(["--min-host-bw", "0.01", "--max-time", "0.25"]);
    let ran = ic_bench(&args, &[]);
    assert_eq!(ran.code, 0, "stderr:\n{}", ran.stderr);
    // The verdict is a diagnostic: its status, `[verdict]` and the two sides (issue 38).
    assert!(ran.stdout.contains("\npass[verdict]: prefill "), "{}", ran.stdout);
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

/// Issue 7: the prefill side used to judge with default floors (the expectation flags were not
/// forwarded) while the parent judged with the user's. Now the child gets the resolved expectation
/// in its plan: its own report and the final verdict agree, by flag and by expectations file.
#[test]
fn the_childs_report_and_the_final_verdict_agree_on_the_users_floor() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("expect.yaml");
    std::fs::write(&config, "same_host:\n  host: 1000 GB/s\n").unwrap();
    let config = config.display().to_string();
    let cases = ["--tests", "put_bw", "--sizes", "1MiB", "--memory", "host-host"];
    for floor in [
        &["--min-host-bw", "1000"][..],
        &["--expect-config", config.as_str()][..],
    ] {
        let mut args = vec!["pair", "--local", "-o", "json"];
        args.extend(cases);
        args.extend(floor);
        let ran = ic_bench(&args, &[]);
        assert_eq!(ran.code, 1, "{floor:?}: {}", ran.stderr);
        let report = ran.report();
        assert_eq!(
            report.verdict.status,
            VerdictStatus::Fail,
            "{floor:?}: {:?}",
            report.verdict
        );
        assert_eq!(report.expectation.min_host_bandwidth_bps, 1000e9, "{floor:?}");

        // The same plan handed to the child by hand: its own report fails on the same floor.
        let plan = icb_pair::PairPlan::new(
            report.settings.clone(),
            icb_pair::ExpectationInput {
                config: None,
                flags: icb_core::verdict::ExpectationOverrides::from_flags(Some(1000.0), None, None, false).unwrap(),
            },
        )
        .child_plan(Locality::SameHost, "test")
        .unwrap();
        let child = child_report(&plan.to_json());
        assert_eq!(
            child.verdict.status,
            VerdictStatus::Fail,
            "{floor:?}: {:?}",
            child.verdict
        );
        assert_eq!(
            child.expectation.min_host_bandwidth_bps,
            report.expectation.min_host_bandwidth_bps
        );
        assert_eq!(child.verdict.status, report.verdict.status);
    }
}

/// Runs `serve --once` and `connect --plan PLAN` against it; returns the child's report line.
fn child_report(plan: &str) -> icb_core::PairReport {
    use std::io::BufRead;
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_ic-bench"))
        .args(["serve", "--listen", "127.0.0.1:0", "--once", "--idle-timeout", "60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(serve.stdout.take().unwrap()).lines();
    let address = loop {
        let line = lines.next().expect("serve printed its listening line").unwrap();
        if let Some(icb_core::protocol::SideEvent::Listening(l)) = icb_core::protocol::parse_side_line(&line).unwrap() {
            break l.address;
        }
    };
    let ran = ic_bench(&["connect", &address, "--plan", plan], &[]);
    let _ = serve.wait();
    ran.stdout
        .lines()
        .find_map(|l| match icb_core::protocol::parse_side_line(l) {
            Ok(Some(icb_core::protocol::SideEvent::Report(r))) => Some(*r),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no report line from connect --plan: {}", ran.stderr))
}

/// `pair --export-json/--export-prometheus FILE` beside `-o` (issue 18: pair gets the exports the
/// sweep had): every file written, the table still on stdout.
#[test]
fn pair_exports_write_json_and_prometheus_files() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pair.json");
    let prom = dir.path().join("pair.prom");
    let (json_arg, prom_arg) = (json.display().to_string(), prom.display().to_string());
    let ran = ic_bench(
        &[
            "pair",
            "--local",
            "--tests",
            "tag_lat",
            "--sizes",
            "8",
            "--memory",
            "host-host",
            "--export-json",
            &json_arg,
            "--export-prometheus",
            &prom_arg,
        ],
        &[],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let report: icb_core::PairReport = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report.cases.len(), 1);
    assert!(
        std::fs::read_to_string(&prom)
            .unwrap()
            .contains("icbench_verdict_status")
    );
    assert!(!ran.stdout.trim_start().starts_with('{'), "stdout keeps the table");
}
