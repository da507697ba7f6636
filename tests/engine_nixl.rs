//! `--engine nixl` and `--ucx-profile nixl` through the CLI and the pair pipeline, with the real
//! NIXL wheel that scripts/setup unpacked (`IC_BENCH_NIXL_LIB` from .cargo/config.toml) and real
//! UCX: transfers verified, the data path named from NIXL's UCX's own protocol report, one verdict
//! per direction; the UCX engine with NIXL's profile predicts NIXL's data path in every isolation
//! mode; flags and broken installs give one line and exit 2; Ctrl-C leaves nothing behind.

mod pair_local_support;

use icb_core::{CaseStatus, Direction, EngineKind, EvidenceSource, MemoryType, PairReport, TestKind, TransportClass};
use icb_isolate::privileged_tests_enabled;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pair_local_support::{Ran, ic_bench, serial};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Short cases: the tests check paths and bytes, not bandwidth.
const QUICK: [&str; 6] = ["--min-time", "0.02", "--max-time", "0.3", "--warmup", "2"];

/// The UCX libraries bundled in the NIXL wheel (the UCX engine's loader accepts their renamed
/// files), so both engines run the same UCX release.
fn nixl_bundled_ucx() -> PathBuf {
    let nixl =
        std::env::var_os("IC_BENCH_NIXL_LIB").expect("IC_BENCH_NIXL_LIB (from .cargo/config.toml; run scripts/setup)");
    let site = PathBuf::from(nixl).parent().map(PathBuf::from).unwrap_or_default();
    std::fs::read_dir(&site)
        .expect("the wheel's site directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("nixl_cu") && n.ends_with(".libs"))
        })
        .expect("the wheel's bundled libraries (nixl_cu*.libs)")
}

fn one_line_exit_2(ran: &Ran, needle: &str) {
    assert_eq!(ran.code, 2, "stderr: {}", ran.stderr);
    let lines: Vec<&str> = ran.stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", ran.stderr);
    assert!(lines[0].starts_with("ic-bench: error: "), "{}", lines[0]);
    assert!(lines[0].contains(needle), "'{needle}' in {}", lines[0]);
    assert!(ran.stdout.trim().is_empty(), "nothing on stdout: {}", ran.stdout);
}

#[test]
fn nixl_engine_pair_reads_and_writes_descriptor_lists_verified_and_attributed() {
    let _one = serial();
    let ran = ic_bench(
        &[
            &["pair", "--local", "--engine", "nixl", "-o", "json"][..],
            &[
                "--memory",
                "host-host,cuda-cuda",
                "--cuda-optional",
                "--sizes",
                "4KiB,1MiB",
                "--batches",
                "1,16",
            ],
            // The verdict here is about the path; a loaded machine must not trip the floor.
            &["--min-host-bw", "0.001"],
            &QUICK[..],
        ]
        .concat(),
        &[],
    );
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    let report = ran.report();
    ran.assert_nothing_left();
    // 2 directions × 2 memory pairs × 2 sizes × 2 batches; the CUDA ones skip without a driver.
    assert_eq!(report.cases.len(), 16);
    let host: Vec<_> = report
        .cases
        .iter()
        .filter(|c| c.memory.initiator == MemoryType::Host)
        .collect();
    assert_eq!(host.len(), 8);
    let mut seen = BTreeMap::new();
    for c in &host {
        assert_eq!(c.status, CaseStatus::Measured, "{c:?}");
        assert_eq!(c.run_by.engine, EngineKind::Nixl);
        let direction = c.run_by.direction.expect("a NIXL case has a direction");
        assert_eq!(c.test, direction.test_kind(), "READ is judged as get, WRITE as put");
        let m = c.measurement.as_ref().expect("measured");
        assert!(m.verified, "bytes verified outside the timed region: {c:?}");
        assert!(m.bandwidth_bps.is_some_and(|b| b > 0.0) && m.latency_us.is_some());
        let t = c.transport.as_ref().expect("a data path");
        assert_eq!(t.data_path.source, EvidenceSource::ProtoInfo, "from UCX's own report");
        assert!(
            t.protocol.as_deref().is_some_and(|p| p.contains("ucp_")),
            "the raw protocol row is kept: {t:?}"
        );
        // Two plain processes on one host: NIXL's UCX moves both directions over cma here.
        assert_eq!(t.data_path.class, TransportClass::Cma, "{c:?}");
        *seen.entry((direction, c.size, c.blocks.unwrap_or(1))).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 8, "every direction × size × batch once: {seen:?}");
    for c in report.cases.iter().filter(|c| c.memory.initiator == MemoryType::Cuda) {
        assert_eq!(c.status, CaseStatus::Skipped);
        assert!(
            c.reason.as_deref().unwrap_or_default().contains("no CUDA driver"),
            "{c:?}"
        );
    }
    assert_eq!(report.settings.tests, vec![TestKind::GetBw, TestKind::PutBw]);
    assert_eq!(report.client.ucx_version, report.server.ucx_version);
    assert_eq!(
        report.verdict.status,
        icb_core::VerdictStatus::Pass,
        "{:?}",
        report.verdict
    );
}

/// Issue 35, item 2: a user's own `UCX_LOG_FILE` (common in worker pods) no longer blinds the
/// NIXL engine's attribution: it reads the user's file, expanding UCX's template (`%p`, `%t`).
/// Where UCX logs to a stream ic-bench cannot read back, every path is unknown and the run is
/// inconclusive (exit 1), never a pass, with the warning saying why.
#[test]
fn a_users_ucx_log_file_is_read_and_an_unreadable_one_is_inconclusive() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let template = format!("{}/user-ucx.%p.%t.log", dir.path().display());
    let args = [
        &["pair", "--local", "--engine", "nixl", "-o", "json"][..],
        &["--memory", "host-host", "--sizes", "1MiB", "--batches", "1"],
        &["--min-host-bw", "0.001"],
        &QUICK[..],
    ]
    .concat();
    let ran = ic_bench(&args, &[("UCX_LOG_FILE", template.as_str())]);
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    let report = ran.report();
    for c in report.cases.iter().filter(|c| c.status == CaseStatus::Measured) {
        let t = c.transport.as_ref().expect("a data path");
        assert_eq!(t.data_path.class, TransportClass::Cma, "{c:?}");
        assert_eq!(t.data_path.source, EvidenceSource::ProtoInfo);
    }
    assert_eq!(
        report.verdict.status,
        icb_core::VerdictStatus::Pass,
        "{:?}",
        report.verdict
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().count() >= 2,
        "UCX wrote the user's files where they asked (one per side)"
    );

    let ran = ic_bench(&args, &[("UCX_LOG_FILE", "stderr")]);
    assert_eq!(ran.code, 1, "inconclusive is never exit 0: {}", ran.stderr);
    let report = ran.report();
    assert_eq!(
        report.verdict.status,
        icb_core::VerdictStatus::Inconclusive,
        "{:?}",
        report.verdict
    );
    assert!(
        report.warnings.iter().any(|w| w.contains("cannot read back")),
        "{:?}",
        report.warnings
    );
}

/// Data-path class per (direction, size) of the measured single-descriptor cases.
fn classes(report: &PairReport) -> BTreeMap<(Direction, u64), TransportClass> {
    report
        .cases
        .iter()
        .filter(|c| c.status == CaseStatus::Measured && c.blocks.unwrap_or(1) == 1)
        .filter_map(|c| {
            let direction = c.run_by.direction.or_else(|| Direction::of_test(c.test))?;
            Some(((direction, c.size), c.transport.as_ref()?.data_path.class))
        })
        .collect()
}

#[test]
fn the_nixl_profile_predicts_the_nixl_engine_in_every_isolation_mode() {
    let mut modes = vec!["none"];
    if privileged_tests_enabled("the_nixl_profile_predicts_the_nixl_engine_in_every_isolation_mode") {
        modes.extend(["pod", "host-ipc", "node"]);
    }
    let _one = serial();
    let ucx = nixl_bundled_ucx();
    let ucx = ucx.to_str().expect("a UTF-8 path");
    // Bandwidth floors are not what this test compares (a loaded CI machine can fall under
    // them on one engine and not the other): the data path decides the verdict.
    let common = [
        "--memory",
        "host-host",
        "--sizes",
        "16KiB,1MiB",
        "-o",
        "json",
        "--min-host-bw",
        "0.001",
    ];
    for mode in modes {
        let local = ["pair", "--local", "--isolation", mode];
        let nixl = ic_bench(
            &[&local[..], &common, &["--engine", "nixl", "--batches", "1"], &QUICK].concat(),
            &[],
        );
        let predicted = ic_bench(
            &[
                &local[..],
                &common,
                &["--ucx-profile", "nixl", "--ucx-lib", ucx, "--tests", "put_bw,get_bw"],
                &QUICK,
            ]
            .concat(),
            &[],
        );
        for ran in [&nixl, &predicted] {
            assert!(matches!(ran.code, 0 | 1), "{mode}: exit {}: {}", ran.code, ran.stderr);
            ran.assert_nothing_left();
        }
        let (nixl, predicted) = (nixl.report(), predicted.report());
        assert_eq!(
            nixl.client.ucx_version, predicted.client.ucx_version,
            "{mode}: same UCX"
        );
        let (actual, expected) = (classes(&nixl), classes(&predicted));
        assert_eq!(actual.len(), 4, "{mode}: {actual:?}");
        println!("{mode}: NIXL engine {actual:?}");
        assert_eq!(
            actual, expected,
            "{mode}: the UCX engine with --ucx-profile nixl predicts NIXL"
        );
        assert_eq!(
            nixl.verdict.status, predicted.verdict.status,
            "{mode}: same verdict: {:?} vs {:?}",
            nixl.verdict, predicted.verdict
        );
    }
}

#[test]
fn engine_flags_that_would_be_ignored_or_cannot_work_are_refused_in_one_line() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["pair", "--local", "--engine", "nixl", "--ucx-profile", "nixl"],
            "drop it or use --engine ucx",
        ),
        (
            &["pair", "--local", "--batches", "4"],
            "--batches applies to --engine nixl",
        ),
        (
            &["pair", "--local", "--nixl-lib", "/tmp"],
            "--nixl-lib applies to --engine nixl",
        ),
        (
            &["pair", "--local", "--engine", "nixl", "--tests", "tag_lat"],
            "use --tests get_bw (READ), put_bw (WRITE)",
        ),
        (&["pair", "--local", "--engine", "nixl", "--blocks", "4"], "--batches"),
        (&["pair", "--local", "--engine", "nccl"], "use ucx"),
    ];
    for (args, needle) in cases {
        one_line_exit_2(&ic_bench(args, &[]), needle);
    }
}

#[test]
fn a_missing_or_foreign_nixl_is_one_line_and_exit_2_on_every_side() {
    let _one = serial();
    let empty = tempfile::tempdir().expect("temp dir");
    let dir = empty.path().to_str().expect("UTF-8");
    // Checked before any side starts, so the message is the loader's own.
    let ran = ic_bench(&["pair", "--local", "--engine", "nixl", "--nixl-lib", dir], &[]);
    one_line_exit_2(&ran, "NIXL not found");
    ran.assert_nothing_left();
    one_line_exit_2(
        &ic_bench(&["serve", "--once", "--engine", "nixl", "--nixl-lib", dir], &[]),
        "--nixl-lib DIR",
    );
    one_line_exit_2(
        &ic_bench(&["connect", "127.0.0.1:9", "--engine", "nixl", "--nixl-lib", dir], &[]),
        "NIXL not found",
    );
    // A library by that name that is not NIXL, built with the system C compiler.
    let c = empty.path().join("fake.c");
    std::fs::write(&c, "int not_nixl_at_all(void) { return 0; }\n").expect("write fake.c");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(empty.path().join("libnixl_capi.so"))
        .arg(&c)
        .status()
        .expect("a C compiler (cc) to build the fake library");
    assert!(built.success());
    one_line_exit_2(
        &ic_bench(&["pair", "--local", "--engine", "nixl", "--nixl-lib", dir], &[]),
        "is not NIXL",
    );
    // A UCX other than NIXL's own already in the process (here preloaded): two UCX copies in one
    // process crash, so the engine refuses before NIXL starts its backend.
    let ours = PathBuf::from(std::env::var_os("IC_BENCH_UCX_LIB").expect("IC_BENCH_UCX_LIB")).join("libucp.so.0");
    one_line_exit_2(
        &ic_bench(
            &["serve", "--once", "--listen", "127.0.0.1:0", "--engine", "nixl"],
            &[("LD_PRELOAD", ours.to_str().expect("UTF-8"))],
        ),
        "different UCX is already loaded",
    );
}

#[test]
fn ctrl_c_during_a_nixl_pair_writes_a_partial_report_and_leaves_nothing() {
    let _one = serial();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ic-bench"))
        .args([
            "pair",
            "--local",
            "--engine",
            "nixl",
            "-o",
            "json",
            "--memory",
            "host-host",
        ])
        .args([
            "--sizes",
            "64KiB,256KiB,1MiB",
            "--batches",
            "1,8",
            "--min-time",
            "1",
            "--max-time",
            "1",
        ])
        // At info the prefill side logs each finished case: the test signals after the first.
        .env("IC_BENCH_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ic-bench pair");
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let (first_case, first_case_seen) = std::sync::mpsc::channel();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("[prefill]") && line.contains("host→host: ") {
                let _ = first_case.send(());
            }
            s.push_str(&line);
            s.push('\n');
        }
        s
    });
    // 12 one-second cases: once the first finished (not after a fixed sleep, which a loaded
    // machine can outlast while NIXL starts), Ctrl-C.
    first_case_seen
        .recv_timeout(Duration::from_secs(90))
        .expect("the prefill side logged no finished case within 90 s");
    assert!(child.try_wait().expect("try_wait").is_none(), "ended before the signal");
    kill(Pid::from_raw(pid as i32), Signal::SIGINT).expect("signal ic-bench");
    let stopped = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(30),
            "no exit within 30 s of SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (out.join().expect("stdout"), err.join().expect("stderr"));
    assert_eq!(status.code(), Some(130), "{stderr}");
    let report: PairReport =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("partial report ({e}): {stdout:?}\n{stderr}"));
    let partial = report.partial.as_ref().expect("marked partial");
    assert_eq!(partial.planned_cases, 12);
    assert!(
        !report.cases.is_empty() && report.cases.len() < 12,
        "{} cases",
        report.cases.len()
    );
    assert!(report.cases.iter().all(|c| c.run_by.engine == EngineKind::Nixl));
    assert!(
        !stderr.contains("core dumped") && !stderr.contains("Segmentation"),
        "{stderr}"
    );
    assert_eq!(
        icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid),
        icb_isolate::Leftovers::default(),
        "run {pid} leaked"
    );
}

/// Issue 17 item 8: under `--ucx-profile nixl` a healthy same-host pair failed because tag
/// messages lose shared memory in peer-failure mode, while NIXL (put/get) passes. The profile now
/// judges the RMA cases, names peer-failure mode on the tag rows and records itself.
#[test]
fn the_nixl_profile_judges_put_and_get_and_names_peer_failure_mode_on_tag_rows() {
    let _one = serial();
    let args = [
        &["pair", "--local", "--ucx-profile", "nixl", "--memory", "host-host"][..],
        &["--min-host-bw", "0.001", "-o", "json"],
        &QUICK,
    ]
    .concat();
    let ran = ic_bench(&args, &[]);
    assert_eq!(ran.code, 0, "stderr: {}\nstdout: {}", ran.stderr, ran.stdout);
    let report = ran.report();
    assert_eq!(report.ucx_profile, Some(icb_core::UcxProfile::Nixl));
    assert_eq!(
        report.verdict.status,
        icb_core::VerdictStatus::Pass,
        "{:?}",
        report.verdict
    );
    let measured = |rma: bool| {
        report
            .cases
            .iter()
            .filter(move |c| c.status == CaseStatus::Measured && c.test.is_rma() == rma)
    };
    assert!(measured(true).count() >= 2, "put and get measured: {:?}", report.cases);
    for tag in measured(false) {
        let v = tag.verdict.clone().unwrap();
        assert!(v.reason.starts_with("not judged under --ucx-profile nixl"), "{v:?}");
        let class = tag.transport.as_ref().map(|t| t.data_path.class);
        if class == Some(TransportClass::Tcp) {
            assert!(v.reason.contains("peer-failure mode"), "{v:?}");
        }
    }
    assert!(
        !report.verdict.data_paths.contains(&TransportClass::Tcp),
        "{:?}",
        report.verdict
    );
    ran.assert_nothing_left();
}

/// Issue 40 item 2: a NIXL case carries both sides' NIC counters like a UCX one. Both local
/// sides read the recorded tree in `IC_BENCH_RAIL_TREE` (as an emulated node's pods do), one
/// mlx5 port whose `out_of_sequence` counter this test keeps moving while the pair runs (a lossy
/// link): every measured case names it on both sides, and the passing run warns with it.
#[test]
fn a_nixl_pair_reads_both_sides_nic_counters_around_each_case() {
    use icb_core::rails::nic_health::rules::HealthKind;
    let _one = serial();
    let tree = tempfile::tempdir().unwrap();
    let port = tree.path().join("sys/class/infiniband/mlx5_0/ports/1");
    std::fs::create_dir_all(port.join("hw_counters")).unwrap();
    std::fs::create_dir_all(port.join("counters")).unwrap();
    for (dir, name) in [
        ("hw_counters", "rp_cnp_handled"),
        ("hw_counters", "rx_read_requests"),
        ("hw_counters", "rx_write_requests"),
        ("counters", "symbol_error"),
    ] {
        std::fs::write(port.join(dir).join(name), "0\n").unwrap();
    }
    let lossy = port.join("hw_counters/out_of_sequence");
    std::fs::write(&lossy, "0\n").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let driver = {
        let (stop, lossy) = (stop.clone(), lossy.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 3;
                // Renamed into place: a side never reads a half-written count.
                let next = lossy.with_extension("next");
                std::fs::write(&next, format!("{n}\n")).unwrap();
                std::fs::rename(&next, &lossy).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let tree_arg = tree.path().display().to_string();
    let ran = ic_bench(
        &[
            &["pair", "--local", "--engine", "nixl", "-o", "json"][..],
            &["--memory", "host-host", "--sizes", "64KiB", "--batches", "1"],
            &["--min-host-bw", "0.001"],
            &QUICK[..],
        ]
        .concat(),
        &[("IC_BENCH_RAIL_TREE", tree_arg.as_str())],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    driver.join().unwrap();
    let report = ran.report();
    ran.assert_nothing_left();
    let measured: Vec<_> = report
        .cases
        .iter()
        .filter(|c| c.status == CaseStatus::Measured)
        .collect();
    assert_eq!(measured.len(), 2, "READ and WRITE: {:?}", report.cases);
    for c in measured {
        let h = c
            .nic_health
            .as_deref()
            .unwrap_or_else(|| panic!("no nic_health: {c:?}"));
        for (side, s) in [("prefill", &h.prefill), ("decode", &h.decode)] {
            let ports: Vec<&str> = s.ports.iter().map(|p| p.device.as_str()).collect();
            assert_eq!(ports, ["mlx5_0:1"], "{side}: {h:?}");
        }
        let lossy: Vec<&str> = h
            .findings()
            .filter(|(_, f)| f.kind == HealthKind::LossyLink)
            .filter(|(_, f)| f.counters.iter().any(|(n, d)| n == "out_of_sequence" && *d > 0))
            .map(|(side, _)| side)
            .collect();
        assert_eq!(lossy, ["prefill", "decode"], "{h:?}");
    }
    assert_eq!(
        report.verdict.status,
        icb_core::VerdictStatus::Warn,
        "a lossy link on a passing run warns: {:?}",
        report.verdict
    );
}
