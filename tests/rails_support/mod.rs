//! Shared by the rails test binaries (`pair_rails`, `serve_connect_rails`, `pair_rails_kube`;
//! `mod rails_support;`): the flags of the one rail-sized case they run, and what a healthy
//! rail's row must show. A directory without a main.rs is not a test target of its own.
#![allow(dead_code)]

use icb_core::rails::{AttributionStatus, RailFinding, RailFindingKind, RailResult, RailsOutcome};
use icb_core::{PairReport, VerdictStatus};

/// One 4 MiB `put_bw` case of host memory on every rail, as JSON, over TCP on the emulated rails
/// (the floor is set for TCP on a 2-core machine: what is judged is the rails, not TCP).
pub const RAIL_CASE: [&str; 11] = [
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

/// A rail that did not fail, whose counters are its own NIC's (`railN`), and whose bytes both
/// sides counted there: payload plus TCP/IP headers and ACKs, within a few percent of the
/// application's bytes.
pub fn assert_counted_on_its_own_nic(row: &RailResult) {
    assert_ne!(row.status, VerdictStatus::Fail, "{row:?}");
    assert_eq!(row.prefill.counter_device, format!("rail{}", row.index));
    let a = row.attribution.as_ref().expect("attributed");
    for side in [&a.prefill, &a.decode] {
        assert_eq!(side.status, AttributionStatus::Counted, "{side:?}");
        let own = side
            .devices
            .iter()
            .find(|d| d.device == row.prefill.counter_device)
            .unwrap();
        assert!((0.98..1.15).contains(&own.share), "rail {}: {own:?}", row.index);
    }
}

/// A rails run of two cases of exactly 4 s each (1 MiB, then 4 MiB): a Ctrl-C as soon as every
/// rail printed its first case lands in the second, with one case per rail to report. Add
/// `-o json --output-file FILE`.
pub const TWO_TIMED_CASES: [&str; 10] = [
    "--tests",
    "put_bw",
    "--sizes",
    "1MiB,4MiB",
    "--memory",
    "host-host",
    "--min-time",
    "4",
    "--max-time",
    "4",
];

/// Starts `cmd` (a rails run of `rails` rows, with [`TWO_TIMED_CASES`]) with its stderr in a
/// file of `dir`; once every rail printed its first case (`rail K:` progress lines), sends
/// SIGINT to `ic_bench(pid)` (the ic-bench process of the started one: itself, or the one under
/// a namespace wrapper). Asserts exit 130 within 60 s of the signal; returns its pid and stderr.
pub fn interrupt_once_every_rail_measured(
    mut cmd: std::process::Command,
    rails: usize,
    dir: &std::path::Path,
    ic_bench: impl Fn(u32) -> u32,
) -> (u32, String) {
    use std::time::{Duration, Instant};
    let err_path = dir.join("stderr.txt");
    let err = std::fs::File::create(&err_path).unwrap();
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(err);
    let mut child = cmd.spawn().expect("ic-bench starts");
    let stderr = || std::fs::read_to_string(&err_path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(120);
    let measured = |text: &str| (0..rails).all(|k| text.lines().any(|l| l.starts_with(&format!("rail {k}: "))));
    while !measured(&stderr()) {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("not every rail measured its first case within 120 s:\n{}", stderr());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = nix::unistd::Pid::from_raw(ic_bench(child.id()) as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ic-bench did not exit within 60 s of SIGINT:\n{}", stderr());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = stderr();
    assert_eq!(status.code(), Some(130), "{text}");
    (child.id(), text)
}

/// The partial report an interrupted rails run of `rails` rows (two cases each) wrote to `file`:
/// every rail's first case and only that, tagged with its rail, marked partial and interrupted.
pub fn assert_partial_rails_report(file: &std::path::Path, rails: usize) -> icb_core::PairReport {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("no report at {}: {e}", file.display()));
    let report: icb_core::PairReport = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(
        report.verdict.status,
        VerdictStatus::Interrupted,
        "{:?}",
        report.verdict
    );
    let partial = report.partial.as_ref().expect("marked partial");
    assert!(partial.reason.starts_with("interrupted by SIGINT"), "{partial:?}");
    assert_eq!(partial.planned_cases, 2 * rails, "{partial:?}");
    let shown = || report.cases.iter().map(|c| (c.rail, c.size)).collect::<Vec<_>>();
    for k in 0..rails {
        let sizes: Vec<u64> = report
            .cases
            .iter()
            .filter(|c| c.rail == Some(k))
            .map(|c| c.size)
            .collect();
        assert_eq!(sizes, [1 << 20], "rail {k}'s finished case is reported: {:?}", shown());
    }
    report
}

/// The rails a health test broke: the congested one (and the side whose NIC counted it), the
/// lossy one, and those left healthy.
pub struct HealthFaults<'a> {
    pub congested: (usize, &'a str),
    pub lossy: usize,
    pub healthy: &'a [usize],
}

/// Asserts a rails run with one congested and one lossy rail named each by its counters with its
/// fix (the congested one the verdict's reason), and that every healthy rail's counters were
/// read on both ends and found nothing.
pub fn assert_health_findings(report: &PairReport, rails: &RailsOutcome, faults: &HealthFaults) {
    let of = |rail: usize, kind: RailFindingKind| -> Vec<&RailFinding> {
        let f = rails.findings.iter();
        f.filter(|f| f.rail == Some(rail) && f.kind == kind).collect()
    };
    let (rail, side) = faults.congested;
    let congested = of(rail, RailFindingKind::Congested);
    assert_eq!(congested.len(), 1, "{:?}", rails.findings);
    let text = &congested[0].text;
    let port = format!("mlx5_{rail}:1");
    assert!(
        text.contains(&format!("{side} congested")) && text.contains(&port),
        "{text}"
    );
    let counters = ["np_cnp_sent +", "rp_cnp_handled +", "np_ecn_marked_roce_packets +"];
    assert!(counters.iter().any(|c| text.contains(c)), "names the counters: {text}");
    let fix = congested[0].fix.as_deref().unwrap_or_default();
    assert!(fix.contains("PFC"), "{fix}");
    assert_eq!(congested[0].status, icb_core::Status::Fail);
    let reason = &report.verdict.reason;
    assert!(
        reason.contains("congested"),
        "the congested rail's counters are the verdict's reason: {reason}"
    );

    let lossy = of(faults.lossy, RailFindingKind::LossyLink);
    assert_eq!(lossy.len(), 1, "{:?}", rails.findings);
    let (text, port) = (&lossy[0].text, format!("mlx5_{}:1", faults.lossy));
    let counted = text.contains("packet_seq_err +") || text.contains("out_of_sequence +");
    assert!(text.contains(&format!("lossy link on {port}: ")) && counted, "{text}");
    let fix = lossy[0].fix.as_deref().unwrap_or_default();
    assert!(fix.contains(&format!("{port}'s cable")), "{fix}");

    for &healthy in faults.healthy {
        let health = rails.rails[healthy]
            .health
            .as_ref()
            .expect("every rail's health was read");
        assert!(
            health.prefill.deltas.is_some() && health.decode.deltas.is_some(),
            "{health:?}"
        );
        assert_eq!(health.cell(), "ok", "rail {healthy}: {health:?}");
        let named = |f: &&RailFinding| matches!(f.kind, RailFindingKind::Congested | RailFindingKind::LossyLink);
        let wrong: Vec<_> = rails
            .findings
            .iter()
            .filter(|f| f.rail == Some(healthy))
            .filter(named)
            .collect();
        assert!(wrong.is_empty(), "rail {healthy} is healthy: {wrong:?}");
    }
    // The congested rail's loss counters and the lossy rail's congestion counters stayed put.
    assert!(of(rail, RailFindingKind::LossyLink).is_empty(), "{:?}", rails.findings);
    assert!(
        of(faults.lossy, RailFindingKind::Congested).is_empty(),
        "{:?}",
        rails.findings
    );
}
