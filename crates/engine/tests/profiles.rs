//! The measurement profiles end to end, in one process (two UCX workers, real transfers): the
//! verdict profile's adaptive stop, the KV-shaped case, window auto-tuning and the benchmark-only
//! untouched-buffer mode.

use icb_core::{
    CaseResult, CaseShape, CaseStatus, MemoryPair, PairReport, RunSettings, StopReason, TestKind, ToolInfo,
    VerdictStatus,
};
use icb_engine::{ConnectOptions, ServeOptions, UcxOptions};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn tool() -> ToolInfo {
    ToolInfo {
        name: "ic-bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_commit: "test".into(),
        ucx_headers: "test".into(),
    }
}

/// Serves one client on a thread and runs `connect` against it with `settings`.
fn run(settings: RunSettings) -> PairReport {
    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        icb_engine::serve(ServeOptions {
            cancel: None,
            guard: Default::default(),
            listen: "127.0.0.1:0".into(),
            once: true,
            idle_timeout: Some(Duration::from_secs(60)),
            ucx: UcxOptions::default(),
            tool: tool(),
            on_listening: Some(Box::new(move |l| {
                let _ = tx.send(l.address);
            })),
        })
    });
    let addr = rx.recv_timeout(Duration::from_secs(60)).expect("the server listens");
    let report = icb_engine::connect(ConnectOptions {
        cancel: None,
        token: None,
        server: addr.to_string(),
        settings,
        connect_timeout: Duration::from_secs(10),
        locality: None,
        expect_flags: Default::default(),
        expect_config: None,
        expectation: None,
        ucx: UcxOptions::default(),
        tool: tool(),
        placement_mode: "manual".into(),
        on_case: None,
    })
    .expect("connect succeeds");
    server.join().expect("server thread").expect("server succeeds");
    report
}

fn host_only(mut s: RunSettings) -> RunSettings {
    s.memory = vec![MemoryPair::HOST_HOST];
    s
}

fn measured(report: &PairReport) -> Vec<&CaseResult> {
    report
        .cases
        .iter()
        .filter(|c| c.status == CaseStatus::Measured)
        .collect()
}

#[test]
fn verdict_profile_stops_adaptively_and_records_its_precision() {
    let started = Instant::now();
    let report = run(host_only(RunSettings::verdict_profile()));
    let took = started.elapsed();
    assert_eq!(report.cases.len(), 5, "{:?}", report.cases);
    for c in measured(&report) {
        let m = c.measurement.as_ref().unwrap();
        assert!(m.verified, "{c:?}");
        let p = m.precision.as_ref().expect("precision recorded");
        assert!(p.rounds >= 1, "{p:?}");
        match p.stopped_by {
            StopReason::Precision => {
                assert!(p.rounds >= 5 && p.rel_half_width.unwrap() <= 0.02, "{p:?}");
            }
            // At max_time, or cut short just before it by the soft deadline.
            StopReason::MaxTime => assert!(m.elapsed_s >= 0.9 && m.elapsed_s < 1.5, "{c:?}"),
            StopReason::MinTime => panic!("the verdict profile stops adaptively: {p:?}"),
        }
    }
    assert_eq!(measured(&report).len(), 5, "{:?}", report.cases);
    // Each case is bounded by 1 s of measurement plus warmup and setup.
    assert!(took < Duration::from_secs(30), "{took:?}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["settings"]["stop"]["min_rounds"], 5);
    assert!(json["cases"][0]["measurement"]["precision"]["stopped_by"].is_string());
}

#[test]
fn kv_shaped_case_moves_verified_blocks_and_reports_list_latency() {
    let mut s = host_only(RunSettings::verdict_profile());
    s.plan = vec![
        CaseShape::blocks(TestKind::PutBw, 16 << 10, 64),
        CaseShape::blocks(TestKind::GetBw, 4000, 7),
    ];
    let report = run(s);
    assert_eq!(report.cases.len(), 2);
    for c in &report.cases {
        assert_eq!(c.status, CaseStatus::Measured, "{c:?}");
        let m = c.measurement.as_ref().unwrap();
        let blocks = u64::from(c.blocks.expect("blocks recorded"));
        assert!(m.verified, "blocks and the gaps between them checked: {c:?}");
        assert_eq!(m.bytes, m.iterations * blocks * c.size, "{c:?}");
        let l = m.list_latency_us.as_ref().expect("per-list latency");
        assert!(l.min > 0.0 && l.p50 <= l.p99 && l.p99 <= l.max, "{l:?}");
        assert!(m.bandwidth_bps.unwrap() > 0.0);
        assert_eq!(m.window, 1, "one list in flight at a time");
    }
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["cases"][0]["blocks"], 64);
}

#[test]
fn window_tuning_and_untouched_buffers_are_recorded_honestly() {
    let mut s = host_only(RunSettings::verdict_profile());
    s.plan = vec![
        CaseShape::new(TestKind::TagBw, 1 << 20),
        CaseShape::new(TestKind::PutBw, 1 << 20),
    ];
    s.window_candidates = vec![1, 8, 32];
    s.untouched_buffers = true;
    let report = run(s);
    for c in &report.cases {
        assert_eq!(c.status, CaseStatus::Measured, "{c:?}");
        let m = c.measurement.as_ref().unwrap();
        assert_eq!(m.window_trials.len(), 3, "{c:?}");
        let best = m
            .window_trials
            .iter()
            .max_by(|a, b| a.bandwidth_bps.total_cmp(&b.bandwidth_bps))
            .unwrap();
        assert_eq!(m.window, best.window, "measured with the fastest window");
        assert!(!m.verified, "untouched buffers are never reported as verified");
    }
    // Unverified payloads cannot pass silently: the verdict warns at best.
    assert_ne!(report.verdict.status, VerdictStatus::Pass, "{:?}", report.verdict);
}

#[test]
fn max_time_holds_when_a_round_runs_long() {
    // Rounds planned for 2 s each, but at most 0.1 s per case: the ping-pong and the block
    // lists end the round early and cleanly, and the next case runs normally.
    let mut s = host_only(RunSettings::verdict_profile());
    s.min_time_s = 0.01;
    s.max_time_s = 0.1;
    // More rounds than 0.1 s can hold (a ping-pong round is at least 10,000 round trips), so
    // precision can never be declared first: the only way out is the cut at max_time. (With the
    // default 5 rounds a fast machine sometimes converged inside 0.1 s, and the test failed.)
    s.stop = Some(icb_core::StopRule {
        round_s: 2.0,
        min_rounds: 10_000,
        ..icb_core::StopRule::DEFAULT
    });
    s.plan = vec![
        CaseShape::new(TestKind::TagLat, 8),
        CaseShape::blocks(TestKind::PutBw, 4096, 16),
        CaseShape::new(TestKind::TagLat, 8),
    ];
    let started = Instant::now();
    let report = run(s);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    for c in &report.cases {
        assert_eq!(c.status, CaseStatus::Measured, "{c:?}");
        let m = c.measurement.as_ref().unwrap();
        assert!(m.verified, "{c:?}");
        assert!(m.elapsed_s < 0.5, "max_time 0.1 s overran: {c:?}");
        assert!(m.iterations >= 1, "{c:?}");
        assert_eq!(m.precision.as_ref().unwrap().stopped_by, StopReason::MaxTime, "{c:?}");
    }
}
