//! `ic-bench pair --local --isolation node --rails K` (root: namespaces, veths, a bridge per rail;
//! CI runs as root): real UCX over K emulated rail NICs per node, the NICs' own counters, tc for
//! a slow rail and a switch port down for a dead one. Each test names exactly the rail it broke.

mod pair_local_support;
mod rails_support;

use icb_core::rails::{Phase, RailFindingKind};
use icb_core::{CaseStatus, VerdictStatus};
use pair_local_support::{Ran, ic_bench, privileged, serial};
use rails_support::{
    HealthFaults, RAIL_CASE, TWO_TIMED_CASES, assert_counted_on_its_own_nic, assert_health_findings,
    assert_partial_rails_report, interrupt_once_every_rail_measured,
};

/// `pair --local --isolation node --rails K` with one bandwidth case per rail ([`RAIL_CASE`]).
fn rails_run(k: &str, extra: &[&str]) -> Ran {
    let mut args = vec!["pair", "--local", "--isolation", "node", "--rails", k];
    args.extend(RAIL_CASE);
    args.extend(extra);
    ic_bench(&args, &[])
}

/// Asserts the run exited with `code`; its report and the report's rails section.
fn rails_after(ran: &Ran, code: i32) -> (icb_core::PairReport, icb_core::rails::RailsOutcome) {
    let report = ran.report_after(code);
    let rails = *report.rails.clone().expect("a rails section");
    (report, rails)
}

#[test]
fn four_healthy_rails_pass_and_every_rail_is_counted_on_its_own_nic() {
    let Some(_one) = privileged("four_healthy_rails_pass_and_every_rail_is_counted_on_its_own_nic") else {
        return;
    };
    // A generous margin: four TCP streams on two cores share the CPUs unevenly.
    let ran = rails_run("4", &["--rail-margin", "60%"]);
    let (report, rails) = rails_after(&ran, 0);
    assert_eq!(rails.rails.len(), 4);
    for row in &rails.rails {
        assert_counted_on_its_own_nic(row);
        assert_eq!(row.prefill.ucx_net_devices, format!("rail{}", row.index));
        assert_eq!(row.prefill.nic.name, format!("mlx5_{}", row.index));
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
    let Some(_one) = privileged("a_slow_rail_is_named_alone_too_and_the_others_pass") else {
        return;
    };
    // Four rails, as the test names it: exactly rail 1 is slow.
    let ran = rails_run("4", &["--slow-rail", "node-b/1=200mbit", "--rail-margin", "50%"]);
    let (report, rails) = rails_after(&ran, 1);
    let slow = &rails.rails[1];
    assert_eq!(slow.status, VerdictStatus::Fail);
    assert!(slow.alone.is_some(), "the slow rail ran alone too");
    // A shaper alone moves no NIC counter: slow, but not explained by congestion or loss, and
    // never `ok` (issue 40: a slow rail's health is not a pass).
    assert_eq!(
        slow.health.as_ref().map(|h| h.cell()).as_deref(),
        Some("not explained"),
        "{:?}",
        slow.health
    );
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
    let verdict = report.verdict;
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
    let Some(_one) = privileged("a_dead_rail_fails_naming_it") else {
        return;
    };
    let ran = rails_run("3", &["--dead-rail", "node-a/2"]);
    let (report, rails) = rails_after(&ran, 1);
    assert_eq!(rails.rails[2].status, VerdictStatus::Fail);
    assert!(rails.rails[2].concurrent.error.is_some());
    assert_eq!(rails.findings[0].kind, RailFindingKind::Failed);
    assert!(
        report.verdict.reason.starts_with("rail 2: "),
        "{}",
        report.verdict.reason
    );
    assert_ne!(rails.rails[0].status, VerdictStatus::Fail);
    ran.assert_nothing_left();
}

#[test]
fn ucx_told_another_rails_device_is_caught_by_the_counters() {
    let Some(_one) = privileged("ucx_told_another_rails_device_is_caught_by_the_counters") else {
        return;
    };
    // Rail 1's ranks are told rail 2's device, as a recipe with a wrong per-rank
    // UCX_NET_DEVICES would.
    let ran = rails_run("3", &["--rail-devices", "rail0,rail2,rail2", "--rail-margin", "90%"]);
    let (_, rails) = rails_after(&ran, 1);
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

/// Ctrl-C once every rail measured its first case: exit 130, nothing left, and the partial
/// report (every rail's finished case, marked interrupted) in `--output-file`, as a plain pair
/// writes its own.
#[test]
fn ctrl_c_during_a_rails_run_reports_what_the_rails_measured_and_leaves_nothing() {
    let Some(_one) = privileged("ctrl_c_during_a_rails_run_reports_what_the_rails_measured_and_leaves_nothing") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.json");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ic-bench"));
    cmd.args([
        "pair",
        "--local",
        "--isolation",
        "node",
        "--rails",
        "3",
        "-o",
        "json",
        "--output-file",
    ])
    .arg(&file)
    .args(TWO_TIMED_CASES);
    let (pid, stderr) = interrupt_once_every_rail_measured(cmd, 3, dir.path(), |pid| pid);
    let report = assert_partial_rails_report(&file, 3);
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!(
            "wrote the {} of 6 cases measured before it (marked partial)",
            report.cases.len()
        )),
        "{stderr}"
    );
    assert_eq!(
        icb_isolate::leftovers_of(icb_isolate::DEFAULT_PREFIX, pid),
        icb_isolate::Leftovers::default(),
        "run {pid} leaked"
    );
}

#[test]
fn the_nixl_engine_runs_per_rail_and_its_bytes_are_counted() {
    let Some(_one) = privileged("the_nixl_engine_runs_per_rail_and_its_bytes_are_counted") else {
        return;
    };
    let ran = rails_run("2", &["--engine", "nixl", "--batches", "1,8", "--rail-margin", "90%"]);
    let (report, rails) = rails_after(&ran, 0);
    assert!(
        report
            .cases
            .iter()
            .all(|c| c.run_by.engine == icb_core::EngineKind::Nixl),
        "every case is NIXL's"
    );
    for row in &rails.rails {
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

/// `--control tcp,wrong-nic` on emulated rails: one short forced-TCP run of rail 0, seen as tcp,
/// and rail 0's ranks pinned to rail 1's devices, which the NICs' own counters show as
/// `wrong_nic`: both caught, the run passes on them.
#[test]
fn the_rails_controls_are_caught_by_the_transport_and_the_counters() {
    let Some(_one) = privileged("the_rails_controls_are_caught_by_the_transport_and_the_counters") else {
        return;
    };
    let ran = rails_run("2", &["--rail-margin", "90%", "--control", "tcp,wrong-nic"]);
    let (report, rails) = rails_after(&ran, 0);
    let kinds: Vec<_> = report.controls.iter().map(|c| (c.kind, c.caught)).collect();
    use icb_core::model::ControlKind;
    assert_eq!(
        kinds,
        vec![(ControlKind::Tcp, true), (ControlKind::WrongNic, true)],
        "{:?}",
        report.controls
    );
    let wrong = &report.controls[1];
    assert_eq!(wrong.case, "rail 0 pinned to rail1 and rail1");
    assert!(wrong.detail.contains("went through rail1"), "{}", wrong.detail);
    // The main run's rows are untouched by the controls: each counted on its own NIC.
    for row in &rails.rails {
        assert_counted_on_its_own_nic(row);
    }
    ran.assert_nothing_left();
}

/// A TCP control the detector cannot see (the test hook forces shared memory instead, which
/// cannot cross emulated nodes): the rails run is inconclusive, exit 1, saying why.
#[test]
fn a_rails_tcp_control_not_caught_makes_the_run_inconclusive() {
    let Some(_one) = privileged("a_rails_tcp_control_not_caught_makes_the_run_inconclusive") else {
        return;
    };
    let mut args = vec![
        "pair",
        "--local",
        "--isolation",
        "node",
        "--rails",
        "2",
        "--control",
        "tcp",
    ];
    args.extend(RAIL_CASE);
    args.extend(["--rail-margin", "90%"]);
    let ran = ic_bench(&args, &[("IC_BENCH_TEST_CONTROL_TLS", "sm,self")]);
    let report = ran.report_after(1);
    assert_eq!(
        report.verdict.status,
        VerdictStatus::Inconclusive,
        "{}",
        report.verdict.reason
    );
    assert!(
        report.verdict.reason.starts_with("inconclusive: rail 0: "),
        "{}",
        report.verdict.reason
    );
    assert!(!report.controls[0].caught);
    ran.assert_nothing_left();
}

#[test]
fn a_wrong_nic_control_without_rails_is_refused_in_one_line() {
    let ran = ic_bench(&["pair", "--local", "--control", "wrong-nic"], &[]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("--control wrong-nic pins a rail's ranks"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.trim().lines().count() <= 3, "{}", ran.stderr);
}

#[test]
fn a_congested_and_a_lossy_rail_are_named_by_their_nic_counters_and_the_healthy_ones_are_not() {
    let Some(_one) =
        privileged("a_congested_and_a_lossy_rail_are_named_by_their_nic_counters_and_the_healthy_ones_are_not")
    else {
        return;
    };
    // Rail 1 of node-b congested (a real shaper; the emulated mlx5_1 port's CNP/ECN counters
    // count the packets it held), rail 2 lossy (1 % of its packets really dropped each way; the
    // emulated port's sequence-error counters count them); rails 0 and 3 healthy.
    let faults = ["--congested-rail", "node-b/1=200mbit", "--lossy-rail", "node-b/2=1%"];
    let ran = rails_run("4", &[&faults[..], &["--rail-margin", "50%"]].concat());
    let (report, rails) = rails_after(&ran, 1);
    let expected = HealthFaults {
        congested: (1, "prefill"),
        lossy: 2,
        healthy: &[0, 3],
    };
    assert_health_findings(&report, &rails, &expected);
    ran.assert_nothing_left();
}

#[test]
fn a_lossy_rail_slower_than_a_congested_one_leaves_the_congested_one_named_not_ok() {
    let Some(_one) = privileged("a_lossy_rail_slower_than_a_congested_one_leaves_the_congested_one_named_not_ok")
    else {
        return;
    };
    // Issue 40's run: three rails, node-a's rail 1 dropping 5 % of its packets, node-b's rail 2
    // shaped to 200 Mbit/s. Whenever the lossy rail came out slower than the shaped one, the
    // median was the shaped rail's own figure: it was never "slow", its CNP/ECN counters were
    // not judged, and its health read `ok`.
    let faults = ["--congested-rail", "node-b/2=200mbit", "--lossy-rail", "node-a/1=5%"];
    let ran = rails_run("3", &faults);
    let (report, rails) = rails_after(&ran, 1);
    let expected = HealthFaults {
        congested: (2, "prefill"),
        lossy: 1,
        healthy: &[0],
    };
    assert_health_findings(&report, &rails, &expected);
    for row in &rails.rails {
        let health = row.health.as_ref().expect("every rail's health was read");
        if health.slow {
            assert_ne!(health.cell(), "ok", "rail {} is slow: {health:?}", row.index);
        }
    }
    assert!(rails.rails[2].health.as_ref().is_some_and(|h| h.slow), "{rails:?}");
    ran.assert_nothing_left();
}
