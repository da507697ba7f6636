//! `ic-bench pair --local --isolation …` (root: namespaces and veths; CI runs as root). Each mode
//! reproduces a Kubernetes placement, and UCX's real choice of transport decides the verdict.

mod pair_local_support;

use icb_core::{CaseStatus, Locality, TransportClass, VerdictStatus};
use icb_isolate::{live_processes, privileged_tests_enabled};
use pair_local_support::{
    Ran, SMALL, finish, ic_bench, once_running, pair_json, pair_json_with, privileged, spawn_ic_bench,
};
use std::time::Duration;

/// Namespaces (as `ip netns` names) whose names say `owner` created them.
fn namespaces_of(owner: u32) -> Vec<String> {
    let prefix = format!("{}-{owner}-", icb_isolate::DEFAULT_PREFIX);
    std::fs::read_dir("/var/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn measured_classes(report: &icb_core::PairReport) -> Vec<(String, TransportClass)> {
    report
        .cases
        .iter()
        .filter(|c| c.status == CaseStatus::Measured)
        .map(|c| {
            let class = c
                .transport
                .as_ref()
                .map_or(TransportClass::Unknown, |t| t.data_path.class);
            (format!("{} {} {}", c.test, c.memory, c.size), class)
        })
        .collect()
}

#[test]
fn pods_on_one_node_fall_back_to_tcp_and_fail_with_the_namespace_hint() {
    let Some(_one) = privileged("pods_on_one_node_fall_back_to_tcp_and_fail_with_the_namespace_hint") else {
        return;
    };
    let ran = pair_json("pod", &[]);
    let report = ran.report_after(1);
    assert_eq!(report.placement.mode, "local (isolation=pod)");
    assert_eq!(report.placement.locality, Locality::SameHost);
    assert_eq!(report.placement.decode.pod.as_deref(), Some("decode"));
    assert_eq!(report.verdict.status, VerdictStatus::Fail);
    let classes = measured_classes(&report);
    assert!(classes.iter().any(|(_, c)| *c == TransportClass::Tcp), "{classes:?}");
    assert!(
        classes.iter().all(|(_, c)| *c != TransportClass::SharedMemory),
        "{classes:?}"
    );
    let hint = report.verdict.hint.clone().unwrap_or_default();
    assert!(hint.contains("IPC/PID namespaces"), "{:?}", report.verdict);
    ran.assert_nothing_left();
}

#[test]
fn host_ipc_pods_use_shared_memory_and_pass() {
    let Some(_one) = privileged("host_ipc_pods_use_shared_memory_and_pass") else {
        return;
    };
    // sysv's fragmented copy-in/copy-out needs both sides on a CPU at once: on a loaded 2-core
    // machine 1 MiB messages dipped to 0.08 GB/s. The floor is not what this test checks (the
    // transport is), so it is lowered; `default_pair_uses_shared_memory_and_passes` keeps defaults.
    let ran = pair_json_with("host-ipc", "tag_bw,tag_lat", &["--min-host-bw", "0.01"], &[]);
    let report = ran.report_after(0);
    assert_eq!(report.verdict.status, VerdictStatus::Pass, "{:?}", report.verdict);
    assert_eq!(
        report.verdict.data_paths,
        vec![TransportClass::SharedMemory],
        "{:?}",
        report.verdict
    );
    for case in report.cases.iter().filter(|c| c.status == CaseStatus::Measured) {
        let evidence = case.transport.as_ref().expect("transport evidence");
        assert!(
            evidence.data_path.transports.iter().all(|l| l.transport != "tcp"),
            "{case:?}"
        );
    }
    // UCX also wires a tcp lane here (separate PID namespaces); it must not count as the data path.
    let tcp_lane = report
        .cases
        .iter()
        .filter_map(|c| c.transport.as_ref())
        .any(|t| t.lanes.iter().any(|l| l.transport == "tcp"));
    assert!(tcp_lane, "expected UCX to list a tcp backup lane in the hostIPC layout");
    ran.assert_nothing_left();
}

#[test]
fn host_ipc_alone_does_not_carry_rma() {
    let Some(_one) = privileged("host_ipc_alone_does_not_carry_rma") else {
        return;
    };
    // Measured: sysv/posix cannot target user buffers, and cma needs one PID namespace, so
    // put (what NIXL uses) falls back to tcp even with hostIPC, while tag stays on shared memory.
    let ran = pair_json("host-ipc", &[]);
    let report = ran.report_after(1);
    for case in report.cases.iter().filter(|c| c.status == CaseStatus::Measured) {
        let class = case
            .transport
            .as_ref()
            .map_or(TransportClass::Unknown, |t| t.data_path.class);
        let expected = if case.test.is_rma() {
            TransportClass::Tcp
        } else {
            TransportClass::SharedMemory
        };
        assert_eq!(class, expected, "{} {} {}", case.test, case.memory, case.size);
    }
    assert_eq!(report.verdict.status, VerdictStatus::Fail);
    assert!(report.verdict.reason.contains("tcp"), "{:?}", report.verdict);
    let hint = report.verdict.hint.clone().unwrap_or_default();
    assert!(hint.contains("share IPC but not PID namespaces"), "{hint}");
    ran.assert_nothing_left();
}

#[test]
fn two_nodes_use_tcp_over_the_veth_and_fail_with_no_rdma() {
    let Some(_one) = privileged("two_nodes_use_tcp_over_the_veth_and_fail_with_no_rdma") else {
        return;
    };
    let ran = pair_json("node", &[]);
    let report = ran.report_after(1);
    assert_eq!(report.placement.locality, Locality::DifferentHosts);
    assert_ne!(report.placement.decode.host, report.placement.prefill.host);
    assert!(
        report
            .placement
            .decode
            .address
            .as_deref()
            .is_some_and(|a| a.starts_with("10.99.0."))
    );
    assert_eq!(report.verdict.status, VerdictStatus::Fail);
    assert!(
        report.verdict.reason.contains("no RDMA transport"),
        "{:?}",
        report.verdict
    );
    let classes = measured_classes(&report);
    assert!(
        !classes.is_empty()
            && classes
                .iter()
                .all(|(_, c)| *c == TransportClass::Tcp || *c == TransportClass::RmaEmulated),
        "{classes:?}"
    );
    let over_veth = report
        .cases
        .iter()
        .filter_map(|c| c.transport.as_ref())
        .flat_map(|t| &t.data_path.transports)
        .any(|l| l.transport == "tcp" && l.device == "eth0");
    assert!(over_veth, "the data should travel over the node's eth0 (the veth)");
    ran.assert_nothing_left();
}

#[test]
fn a_failing_server_in_namespaces_leaves_nothing_behind() {
    let Some(_one) = privileged("a_failing_server_in_namespaces_leaves_nothing_behind") else {
        return;
    };
    let mut args = vec![
        "pair",
        "--local",
        "--isolation",
        "node",
        "--ucx-lib",
        "/nonexistent/ucx/lib",
    ];
    args.extend(SMALL);
    let ran = ic_bench(&args, &[]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("the decode side (ic-bench serve) exited before listening"),
        "{}",
        ran.stderr
    );
    ran.assert_nothing_left();
}

/// Pids of the run's processes whose command line contains `word` (e.g. `serve`).
fn side_pids(tag: &str, word: &str) -> Vec<u32> {
    live_processes(tag)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == word.as_bytes()))
        })
        .collect()
}

/// Starts a long `pair --local --isolation node` and returns it with its run tag once both
/// sides are running.
fn start_long_node_pair() -> (std::process::Child, String) {
    let mut child = spawn_ic_bench(&[
        "pair",
        "--local",
        "--isolation",
        "node",
        "--tests",
        "tag_bw",
        "--sizes",
        "8,1MiB",
        "--memory",
        "host-host",
        "--min-time",
        "5",
        "--max-time",
        "10",
    ]);
    let tag = once_running(
        &mut child,
        Duration::from_secs(60),
        "both sides of the pair running",
        |child| {
            let node = namespaces_of(child.id()).into_iter().find(|n| n.ends_with("-node-a"))?;
            let tag = node.trim_end_matches("-node-a").to_string();
            (!side_pids(&tag, "connect").is_empty()).then_some(tag)
        },
    );
    // Let the first case start measuring.
    std::thread::sleep(Duration::from_millis(500));
    (child, tag)
}

#[test]
fn a_side_dying_mid_run_is_a_one_line_error_and_leaves_nothing() {
    let Some(_one) = privileged("a_side_dying_mid_run_is_a_one_line_error_and_leaves_nothing") else {
        return;
    };
    let (child, tag) = start_long_node_pair();
    let servers = side_pids(&tag, "serve");
    assert!(!servers.is_empty());
    for server in servers {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &server.to_string()])
            .status();
    }
    let ran = finish(child, Duration::from_secs(60));
    let stderr = &ran.stderr;
    assert_eq!(ran.code, 2, "{stderr}");
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(last.starts_with("ic-bench: error: "), "{stderr}");
    assert!(last.contains("prefill side (ic-bench connect)"), "{stderr}");
    assert!(
        last.contains("the decode side (ic-bench serve) exited first (signal: 9"),
        "the dead side is named: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    ran.assert_nothing_left();
}

#[test]
fn ctrl_c_stops_both_sides_and_removes_the_namespaces() {
    let Some(_one) = privileged("ctrl_c_stops_both_sides_and_removes_the_namespaces") else {
        return;
    };
    let (child, tag) = start_long_node_pair();
    let pid = child.id();
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let ran = finish(child, Duration::from_secs(20));
    let stderr = &ran.stderr;
    assert_eq!(ran.code, icb_core::exit::INTERRUPTED, "{stderr}");
    // The prefill side may have reported what it measured first ("wrote the N of M cases …; ").
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("ic-bench: interrupted by SIGINT (Ctrl-C): "),
        "{stderr}"
    );
    assert!(
        last.contains("cleaned up: both processes and the namespaces of --isolation"),
        "{stderr}"
    );
    assert_eq!(namespaces_of(pid), Vec::<String>::new());
    assert_eq!(live_processes(&tag), Vec::<u32>::new());
    ran.assert_nothing_left();
}

#[test]
fn isolation_without_root_says_how_to_fix_it() {
    if !privileged_tests_enabled("isolation_without_root_says_how_to_fix_it") {
        return;
    }
    // Drop to nobody for the run: a copy of the binary in a world-readable place, run via setpriv.
    let dir = tempfile::Builder::new().prefix("icb-nonroot").tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.path().join("ic-bench");
    std::fs::copy(env!("CARGO_BIN_EXE_ic-bench"), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&exe)
        .args(["pair", "--local", "--isolation", "pod"])
        .args(SMALL)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "ic-bench: error: --isolation pod needs root (namespaces): run as root or use --isolation none"
    );
}

/// `pair --local --isolation node` of host memory, default profile, over veths rate-limited to
/// `rate` (tc).
fn over_a_link_of(rate: &str) -> Ran {
    let args = [
        "pair",
        "--local",
        "--isolation",
        "node",
        "--link-rate",
        rate,
        "--memory",
        "host-host",
        "-o",
        "json",
    ];
    ic_bench(&args, &[])
}

/// Issue 17 item 3: on a degraded link (30 Mbit/s: one 4 MiB message takes about 1.1 s) the
/// default profile's warmup and window of 32 could not finish before the phase deadline, and the
/// run ended in a deadline error (exit 2). Fitted to the budget, it measures the slow figure and
/// fails the verdict with it.
#[test]
fn a_rate_limited_link_is_a_measured_slow_verdict_not_a_deadline_error() {
    let Some(_one) = privileged("a_rate_limited_link_is_a_measured_slow_verdict_not_a_deadline_error") else {
        return;
    };
    let ran = over_a_link_of("30mbit");
    let report = ran.report_after(1);
    assert_eq!(report.verdict.status, VerdictStatus::Fail, "{:?}", report.verdict);
    let big: Vec<_> = report
        .cases
        .iter()
        .filter(|c| c.test.is_bandwidth() && c.size == 4 << 20)
        .collect();
    assert_eq!(big.len(), 3, "tag, put and get at 4 MiB: {:?}", report.cases);
    // The first always runs; the others run unless the rate measured so far says they cannot
    // finish in their budget (on a loaded machine 30 Mbit/s can measure near that line).
    assert_eq!(big[0].status, CaseStatus::Measured, "{:?}", big[0]);
    for case in big {
        if case.status == CaseStatus::Skipped {
            let why = case.reason.clone().unwrap_or_default();
            assert!(why.starts_with("not run: at the "), "{case:?}");
            continue;
        }
        assert_eq!(case.status, CaseStatus::Measured, "{case:?}");
        let bps = case.measurement.as_ref().and_then(|m| m.bandwidth_bps).unwrap_or(0.0);
        // 30 Mbit/s is 3.75 MB/s on the wire: what was measured is that link, not the loopback.
        assert!(bps > 1e6 && bps < 4e6, "{} {}: {bps} B/s", case.test, case.memory);
    }
    assert!(
        report.verdict.reason.contains("GB/s measured"),
        "the verdict names the figure: {:?}",
        report.verdict
    );
    ran.assert_nothing_left();
}

/// Issue 17 item 3, far below: at 10 Mbit/s one 4 MiB operation takes ~3.4 s. The first
/// bandwidth case is measured; the ones its rate says cannot finish in their budget are not run
/// (named, with the rate), so the run ends with its measured figure well before the deadline.
#[test]
fn a_very_slow_link_measures_what_fits_and_names_what_it_did_not_run() {
    let Some(_one) = privileged("a_very_slow_link_measures_what_fits_and_names_what_it_did_not_run") else {
        return;
    };
    let ran = over_a_link_of("10mbit");
    let report = ran.report_after(1);
    let first = &report.cases[0];
    assert_eq!(
        (first.test.as_str(), first.status),
        ("tag_bw", CaseStatus::Measured),
        "{first:?}"
    );
    let bps = first.measurement.as_ref().and_then(|m| m.bandwidth_bps).unwrap_or(0.0);
    assert!(bps > 0.3e6 && bps < 1.3e6, "10 Mbit/s is 1.25 MB/s: {bps} B/s");
    let not_run: Vec<_> = report
        .cases
        .iter()
        .filter(|c| c.reason.as_deref().is_some_and(|r| r.starts_with("not run: at the ")))
        .collect();
    assert!(!not_run.is_empty(), "{:?}", report.cases);
    assert!(report.verdict.reason.contains("GB/s measured"), "{:?}", report.verdict);
    ran.assert_nothing_left();
}
