//! `ic-bench pair --local --isolation node --rails K` (root: namespaces, veths, a bridge per rail;
//! CI runs as root): real UCX over K emulated rail NICs per node, the NICs' own counters, tc for
//! a slow rail and a switch port down for a dead one. Each test names exactly the rail it broke.

mod pair_local_support;

use icb_core::rails::{AttributionStatus, Phase, RailFindingKind};
use icb_core::{CaseStatus, VerdictStatus};
use icb_isolate::privileged_tests_enabled;
use pair_local_support::{Ran, ic_bench, serial};
use std::time::{Duration, Instant};

/// One bandwidth case per rail, host memory, over TCP on the emulated rails (the floor is set
/// for TCP on a 2-core machine: what is judged here is the rails, not TCP).
fn rails_run(k: &str, extra: &[&str]) -> Ran {
    let mut args = vec![
        "pair",
        "--local",
        "--isolation",
        "node",
        "--rails",
        k,
        "-o",
        "json",
        "--tests",
        "put_bw",
        "--sizes",
        "4MiB",
        "--memory",
        "host-host",
        "--allow-tcp",
        "--min-host-bw",
        "0.001",
    ];
    args.extend(extra);
    ic_bench(&args, &[])
}

fn rails_of(ran: &Ran) -> icb_core::rails::RailsOutcome {
    *ran.report().rails.expect("a rails section")
}

#[test]
fn four_healthy_rails_pass_and_every_rail_is_counted_on_its_own_nic() {
    if !privileged_tests_enabled("four_healthy_rails_pass_and_every_rail_is_counted_on_its_own_nic") {
        return;
    }
    let _one = serial();
    // A generous margin: four TCP streams on two cores share the CPUs unevenly.
    let ran = rails_run("4", &["--rail-margin", "60%"]);
    assert_eq!(ran.code, 0, "stderr:\n{}\nstdout:\n{}", ran.stderr, ran.stdout);
    let report = ran.report();
    let rails = rails_of(&ran);
    assert_eq!(rails.rails.len(), 4);
    for row in &rails.rails {
        assert_ne!(row.status, VerdictStatus::Fail, "{row:?}");
        assert_eq!(row.prefill.counter_device, format!("rail{}", row.index));
        assert_eq!(row.prefill.ucx_net_devices, format!("rail{}", row.index));
        assert_eq!(row.prefill.nic.name, format!("mlx5_{}", row.index));
        let a = row.attribution.as_ref().expect("attributed");
        for side in [&a.prefill, &a.decode] {
            assert_eq!(side.status, AttributionStatus::Counted, "{side:?}");
            let own = side
                .devices
                .iter()
                .find(|d| d.device == row.prefill.counter_device)
                .unwrap();
            // Payload plus TCP/IP headers and ACKs: within a few percent of the application's bytes.
            assert!((0.98..1.15).contains(&own.share), "rail {}: {own:?}", row.index);
        }
        assert_eq!(
            row.concurrent.data_path.as_deref(),
            Some(format!("tcp/rail{}", row.index).as_str())
        );
    }
    assert_eq!(
        report.cases.iter().filter(|c| c.status == CaseStatus::Measured).count(),
        4
    );
    assert!(report.cases.iter().all(|c| c.rail.is_some()));
    assert!(report.placement.mode.ends_with("4 rails"), "{}", report.placement.mode);
    ran.assert_nothing_left();
}

#[test]
fn a_slow_rail_is_named_alone_too_and_the_others_pass() {
    if !privileged_tests_enabled("a_slow_rail_is_named_alone_too_and_the_others_pass") {
        return;
    }
    let _one = serial();
    // Four rails, as the test names it: exactly rail 1 is slow.
    let ran = rails_run("4", &["--slow-rail", "node-b/1=200mbit", "--rail-margin", "50%"]);
    assert_eq!(ran.code, 1, "stderr:\n{}", ran.stderr);
    let rails = rails_of(&ran);
    let slow = &rails.rails[1];
    assert_eq!(slow.status, VerdictStatus::Fail);
    assert!(slow.alone.is_some(), "the slow rail ran alone too");
    assert_eq!(slow.attribution.as_ref().unwrap().phase, Phase::Alone);
    for i in [0, 2, 3] {
        assert_ne!(rails.rails[i].status, VerdictStatus::Fail, "{:?}", rails.rails[i]);
    }
    assert!(
        rails
            .findings
            .iter()
            .all(|f| f.rail.is_none_or(|r| r == 1) || f.status != icb_core::Status::Fail),
        "only rail 1 fails: {:?}",
        rails.findings
    );
    let first = &rails.findings[0];
    assert_eq!(
        (first.kind, first.rail),
        (RailFindingKind::BelowMedian, Some(1)),
        "{:?}",
        rails.findings
    );
    let verdict = ran.report().verdict;
    assert!(
        verdict.reason.starts_with("rail 1: node-b:mlx5_1 (0000:12:00.0)"),
        "{}",
        verdict.reason
    );
    assert!(verdict.hint.unwrap().contains("probe node --node node-b"));
    ran.assert_nothing_left();
}

#[test]
fn a_dead_rail_fails_naming_it() {
    if !privileged_tests_enabled("a_dead_rail_fails_naming_it") {
        return;
    }
    let _one = serial();
    let ran = rails_run("3", &["--dead-rail", "node-a/2"]);
    assert_eq!(ran.code, 1, "stderr:\n{}", ran.stderr);
    let rails = rails_of(&ran);
    assert_eq!(rails.rails[2].status, VerdictStatus::Fail);
    assert!(rails.rails[2].concurrent.error.is_some());
    assert_eq!(rails.findings[0].kind, RailFindingKind::Failed);
    assert!(
        ran.report().verdict.reason.starts_with("rail 2: "),
        "{}",
        ran.report().verdict.reason
    );
    assert_ne!(rails.rails[0].status, VerdictStatus::Fail);
    ran.assert_nothing_left();
}

#[test]
fn ucx_told_another_rails_device_is_caught_by_the_counters() {
    if !privileged_tests_enabled("ucx_told_another_rails_device_is_caught_by_the_counters") {
        return;
    }
    let _one = serial();
    // Rail 1's ranks are told rail 2's device, as a recipe with a wrong per-rank
    // UCX_NET_DEVICES would.
    let ran = rails_run("3", &["--rail-devices", "rail0,rail2,rail2", "--rail-margin", "90%"]);
    assert_eq!(ran.code, 1, "stderr:\n{}", ran.stderr);
    let rails = rails_of(&ran);
    let wrong = &rails.rails[1];
    assert_eq!(wrong.prefill.ucx_net_devices, "rail2");
    assert_eq!(wrong.prefill.counter_device, "rail1");
    let a = wrong.attribution.as_ref().unwrap();
    assert_eq!(a.phase, Phase::Alone, "misattributed together: ran alone");
    assert_eq!(a.prefill.devices[0].device, "rail2");
    assert_eq!(a.prefill.devices[0].rail, Some(2));
    let f = &rails.findings[0];
    assert_eq!(
        (f.kind, f.rail),
        (RailFindingKind::WrongNic, Some(1)),
        "{:?}",
        rails.findings
    );
    assert!(f.fix.as_deref().unwrap().contains("(rail1)"), "{f:?}");
    assert_ne!(rails.rails[0].status, VerdictStatus::Fail);
    ran.assert_nothing_left();
}

#[test]
fn bad_rail_flags_are_one_line_and_exit_2() {
    // No root needed: every one is refused before anything starts.
    for (args, want) in [
        (vec!["--rails", "2"], "use it with --local --isolation node"),
        (vec!["--rails", "gpu0=mlx5_0,gpu0=mlx5_1"], "a GPU is named twice"),
        (vec!["--rails", "mlx5_0"], "write `auto` or `gpu0=mlx5_0"),
        (
            vec!["--rail-pattern", "cross"],
            "--rail-pattern needs --rails or --rail-devices",
        ),
        (
            vec!["--rails", "2", "--isolation", "node", "--slow-rail", "node-c/1=1mbit"],
            "write NODE/I",
        ),
        (
            vec!["--rails", "2", "--isolation", "node", "--dead-rail", "node-a/2"],
            "I a rail 0-1",
        ),
        (
            vec!["--rails", "2", "--isolation", "node", "--rail-margin", "150%"],
            "bad margin",
        ),
    ] {
        let mut all = vec!["pair", "--local"];
        all.extend(&args);
        let ran = ic_bench(&all, &[]);
        assert_eq!(ran.code, 2, "{args:?}: {}", ran.stderr);
        let lines: Vec<&str> = ran.stderr.trim().lines().collect();
        assert!(lines.len() <= 3, "{args:?}: {}", ran.stderr);
        assert!(ran.stderr.contains(want), "{args:?}: {}", ran.stderr);
    }
}

#[test]
fn a_gpu_or_nic_the_node_lacks_is_refused_naming_what_it_has() {
    let _one = serial();
    // This machine has no GPU and no RDMA NIC: an explicit rail cannot be placed, and nothing
    // starts. (Emulated nodes need --rails K, which is said too.)
    let ran = ic_bench(&["pair", "--local", "--rails", "gpu0=mlx5_0", "-o", "json"], &[]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("has no GPU gpu0 (it has none)"), "{}", ran.stderr);
    let ran = ic_bench(&["pair", "--local", "--isolation", "node", "--rails", "auto"], &[]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("isolation node has no rail NICs unless asked"),
        "{}",
        ran.stderr
    );
}

#[test]
fn ctrl_c_during_a_rails_run_leaves_nothing() {
    if !privileged_tests_enabled("ctrl_c_during_a_rails_run_leaves_nothing") {
        return;
    }
    let _one = serial();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ic-bench"))
        .args([
            "pair",
            "--local",
            "--isolation",
            "node",
            "--rails",
            "3",
            "--tests",
            "put_bw",
        ])
        .args([
            "--sizes",
            "4MiB",
            "--memory",
            "host-host",
            "--min-time",
            "20",
            "--max-time",
            "30",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until every rank runs (3 connect processes carry this run's tag).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the ranks never all started");
        assert!(child.try_wait().unwrap().is_none(), "ic-bench ended early");
        let left = icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid);
        if left.processes.len() >= 6 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let out = pair_local_support::wait_with_output(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let left = icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid);
    assert_eq!(left, icb_isolate::Leftovers::default(), "run {pid} leaked");
}

#[test]
fn the_nixl_engine_runs_per_rail_and_its_bytes_are_counted() {
    if !privileged_tests_enabled("the_nixl_engine_runs_per_rail_and_its_bytes_are_counted") {
        return;
    }
    let _one = serial();
    let ran = rails_run("2", &["--engine", "nixl", "--batches", "1,8", "--rail-margin", "90%"]);
    assert_eq!(ran.code, 0, "stderr:\n{}\nstdout:\n{}", ran.stderr, ran.stdout);
    let report = ran.report();
    assert!(
        report
            .cases
            .iter()
            .all(|c| c.run_by.engine == icb_core::EngineKind::Nixl),
        "every case is NIXL's"
    );
    for row in &rails_of(&ran).rails {
        let a = row.attribution.as_ref().expect("attributed");
        for side in [&a.prefill, &a.decode] {
            let own = side.devices.iter().find(|d| d.device == row.prefill.counter_device);
            // The engine reports its warm-up's bytes: the counters match what really moved.
            assert!(
                own.is_some_and(|d| (0.98..1.15).contains(&d.share)),
                "rail {}: {side:?}",
                row.index
            );
        }
    }
    ran.assert_nothing_left();
}
