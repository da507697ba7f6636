//! The rails pipeline (`icb_rails::run_rails`) without root, UCX or a cluster: each row's
//! launcher is a scripted fake whose prefill side reports a chosen figure, and the seam's
//! counters move as the fake rows "send" their bytes through a chosen device, so attribution,
//! alone reruns, the relative rule and the roll-up are checked end to end.

use icb_core::model::{CaseStatus, Locality, PairReport, Placement, VerdictStatus};
use icb_core::protocol::{CaseProgress, ChildPlan, Listening, SIDE_SCHEMA, SideEvent, side_line};
use icb_core::rails::{CounterKind, CounterSnapshot, NicCounter, NicRef, RailEnd, RailFindingKind, RailPattern};
use icb_pair::{CancellationToken, ExpectationInput, LaunchError, Launcher, PairError, PairPlan, Side, SideRole};
use icb_rails::{AloneRuns, RailRow, RailSeam, RailsPlan, run_rails};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const REPORT: &str = include_str!("../../core/tests/fixtures/pair_report.json");

/// Cumulative bytes per device on each node.
type Counters = Arc<Mutex<BTreeMap<(SideRole, String), u64>>>;

/// What the fake row of rail `i` does.
#[derive(Clone)]
struct RowScript {
    gbps: f64,
    /// The device its bytes really leave through (else its own).
    via: Option<String>,
    /// The figure it reaches alone (else `gbps`).
    alone_gbps: Option<f64>,
    fails: bool,
}

fn report(gbps: f64) -> PairReport {
    let mut r: PairReport = serde_json::from_str(REPORT).unwrap();
    r.cases
        .retain(|c| c.status == CaseStatus::Measured && c.test == icb_core::TestKind::PutBw);
    let m = r.cases[0].measurement.as_mut().unwrap();
    m.bandwidth_bps = Some(gbps * 1e9);
    m.bytes = 1_000_000;
    m.iterations = 100;
    m.warmup_iterations = 0;
    r
}

struct FakeSide {
    lines: VecDeque<String>,
    /// Bytes to add to these counters when the report is printed.
    sends: Vec<((SideRole, String), u64)>,
    counters: Counters,
    cancel_at_report: Option<CancellationToken>,
    /// The decode side stays up after listening, as `serve` does.
    hang_after: bool,
}

impl Side for FakeSide {
    fn name(&self) -> String {
        "a fake side".into()
    }
    async fn next_line(&mut self) -> Option<String> {
        // Sleep before taking the line: the pipeline drops this future when the other side
        // speaks first, and a taken line would be lost.
        tokio::time::sleep(Duration::from_millis(5)).await;
        if self.lines.is_empty() && self.hang_after {
            std::future::pending::<()>().await;
        }
        let line = self.lines.pop_front()?;
        if line.contains("\"report\"") {
            let mut c = self.counters.lock().unwrap();
            for (k, n) in self.sends.drain(..) {
                *c.entry(k).or_default() += n;
            }
            if let Some(t) = &self.cancel_at_report {
                t.cancel();
            }
        }
        Some(line)
    }
    async fn exit_note(&mut self) -> Option<String> {
        None
    }
    fn last_words(&self) -> String {
        "quiet".into()
    }
    async fn stop(&mut self, _grace: Duration) {}
}

struct FakeLauncher {
    row: RailRow,
    script: RowScript,
    alone: bool,
    counters: Counters,
    cleanups: Arc<Mutex<usize>>,
    cancel_at_report: Option<CancellationToken>,
    hides_tcp: bool,
}

impl Launcher for FakeLauncher {
    type Side = FakeSide;
    fn locality(&self) -> Locality {
        // The fixture's cases went over cma: what one host shows.
        Locality::SameHost
    }
    fn mode(&self) -> String {
        "fake".into()
    }
    async fn start_decode(&mut self) -> Result<FakeSide, LaunchError> {
        let line = side_line(&SideEvent::Listening(Listening::new("127.0.0.1:1", "1.22.0")));
        Ok(FakeSide {
            lines: VecDeque::from([line]),
            sends: vec![],
            counters: self.counters.clone(),
            cancel_at_report: None,
            hang_after: true,
        })
    }
    async fn start_prefill(&mut self, _: &Listening, plan: &ChildPlan) -> Result<FakeSide, LaunchError> {
        if self.script.fails {
            return Err(LaunchError::new("the rail's peer is unreachable"));
        }
        let gbps = match (self.alone, self.script.alone_gbps) {
            (true, Some(a)) => a,
            _ => self.script.gbps,
        };
        let mut r = report(gbps);
        // A forced TLS=tcp (the tcp control) is seen as tcp, unless this seam hides it.
        let forced_tcp = plan.ucx_config.iter().any(|(k, v)| k == "TLS" && v == "tcp");
        if forced_tcp && !self.hides_tcp {
            let t = r.cases[0].transport.as_mut().unwrap();
            t.data_path.class = icb_core::model::TransportClass::Tcp;
            t.data_path.transports[0].transport = "tcp".into();
            t.data_path.transports[0].device = self.row.prefill.ucx_net_devices.clone();
        }
        // The bytes leave through the device the rank was told (its UCX_NET_DEVICES), unless
        // the script says otherwise.
        let via = |end: &RailEnd| self.script.via.clone().unwrap_or_else(|| end.ucx_net_devices.clone());
        let bytes = 1_030_000; // payload plus protocol overhead
        let case = SideEvent::Case(Box::new(CaseProgress {
            schema: SIDE_SCHEMA.into(),
            index: 1,
            total: 1,
            case: r.cases[0].clone(),
        }));
        Ok(FakeSide {
            hang_after: false,
            lines: VecDeque::from([side_line(&case), side_line(&SideEvent::Report(Box::new(r)))]),
            sends: vec![
                ((SideRole::Prefill, via(&self.row.prefill)), bytes),
                ((SideRole::Decode, via(&self.row.decode)), bytes),
                ((SideRole::Prefill, "eth0".into()), 2_000),
            ],
            counters: self.counters.clone(),
            cancel_at_report: self.cancel_at_report.clone(),
        })
    }
    fn placement(&self, _: &Listening, report: &PairReport) -> Placement {
        report.placement.clone()
    }
    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        *self.cleanups.lock().unwrap() += 1;
        Ok(format!("rank {}", self.row.index))
    }
}

struct FakeSeam {
    scripts: Vec<RowScript>,
    counters: Counters,
    devices: Vec<String>,
    launched: Vec<usize>,
    cleanups: Arc<Mutex<usize>>,
    cancel_at_report: Option<CancellationToken>,
    /// Its transport evidence never says tcp (a detector that cannot see a TCP fallback).
    hides_tcp: bool,
    /// What it found about the nodes before the run (a DRA node's slices against its tree).
    node_findings: Vec<icb_core::rails::RailFinding>,
}

impl RailSeam for FakeSeam {
    type L = FakeLauncher;
    fn launcher(&mut self, row: &RailRow) -> Result<FakeLauncher, LaunchError> {
        let alone = self.launched.contains(&row.index);
        self.launched.push(row.index);
        Ok(FakeLauncher {
            row: row.clone(),
            script: self.scripts[row.index].clone(),
            alone,
            counters: self.counters.clone(),
            cleanups: self.cleanups.clone(),
            cancel_at_report: self.cancel_at_report.clone(),
            hides_tcp: self.hides_tcp,
        })
    }
    async fn counters(&mut self, side: SideRole) -> CounterSnapshot {
        let c = self.counters.lock().unwrap();
        CounterSnapshot {
            counters: self
                .devices
                .iter()
                .chain(std::iter::once(&"eth0".to_string()))
                .map(|d| NicCounter {
                    device: d.clone(),
                    pci: None,
                    kind: CounterKind::Netdev,
                    tx_bytes: c.get(&(side, d.clone())).copied().unwrap_or(0),
                    rx_bytes: 0,
                })
                .collect(),
            unreadable: vec![],
        }
    }
    fn node_findings(&self) -> Vec<icb_core::rails::RailFinding> {
        self.node_findings.clone()
    }
}

fn end(rail: usize, node: &str) -> RailEnd {
    let dev = format!("rail{rail}");
    RailEnd {
        rail,
        node: node.into(),
        gpu: None,
        nic: NicRef {
            name: format!("mlx5_{rail}"),
            pci: Some(format!("0000:{:02x}:00.0", 0x18 + rail)),
            port: 1,
            state: "ACTIVE/LinkUp".into(),
            rate_gbps: Some(100.0),
            link_layer: Some("Ethernet".into()),
            netdevs: vec![dev.clone()],
            numa_node: Some(0),
        },
        relation: None,
        ucx_net_devices: dev.clone(),
        counter_device: dev,
    }
}

fn plan(k: usize, alone: AloneRuns) -> RailsPlan {
    let settings = icb_core::model::RunSettings::qualification(
        vec![icb_core::TestKind::PutBw],
        vec![4 << 20],
        vec![icb_core::MemoryPair::HOST_HOST],
        1.0,
    );
    RailsPlan {
        pair: PairPlan::new(settings, ExpectationInput::default()),
        rows: (0..k)
            .map(|i| RailRow {
                index: i,
                round: 0,
                prefill: end(i, "node-a"),
                decode: end(i, "node-b"),
                mismatches: Vec::new(),
            })
            .collect(),
        pattern: RailPattern::Aligned,
        margin: 0.2,
        alone,
    }
}

fn seam(scripts: Vec<RowScript>) -> FakeSeam {
    FakeSeam {
        devices: (0..scripts.len()).map(|i| format!("rail{i}")).collect(),
        scripts,
        counters: Arc::default(),
        launched: vec![],
        cleanups: Arc::default(),
        cancel_at_report: None,
        hides_tcp: false,
        node_findings: vec![],
    }
}

fn ok(gbps: f64) -> RowScript {
    RowScript {
        gbps,
        via: None,
        alone_gbps: None,
        fails: false,
    }
}

async fn run(plan: &RailsPlan, seam: &mut FakeSeam) -> Result<icb_pair::PairOutcome, PairError> {
    let mut seen = Vec::new();
    let r = run_rails(plan, seam, &CancellationToken::new(), &mut |row, p| {
        seen.push((row.index, p.index))
    })
    .await;
    let measured = seam.launched.iter().filter(|i| !seam.scripts[**i].fails).count();
    assert_eq!(seen.len(), measured, "one progress line per measured row run: {seen:?}");
    r
}

/// A node finding made before the run (slices against the PCI tree) is in the findings, and
/// turns rails that all passed into a warning naming it: the nodes' DRA claims are misplaced even
/// though the measured rails are fine.
#[tokio::test]
async fn a_node_finding_from_before_the_run_warns_on_passing_rails() {
    let mut s = seam(vec![ok(10.0), ok(10.1)]);
    s.node_findings = vec![icb_core::rails::RailFinding {
        kind: RailFindingKind::PcieRootMismatch,
        status: icb_core::Status::Warn,
        rail: None,
        text: "node node-b: GPU 1 and NIC mlx5_1: the slices and the tree disagree".into(),
        fix: Some("fix the pcieRoot".into()),
    }];
    let out = run(&plan(2, AloneRuns::Suspects), &mut s).await.unwrap();
    let r = &out.report;
    assert_eq!(r.verdict.status, VerdictStatus::Warn, "{}", r.verdict.reason);
    assert!(
        r.verdict.reason.starts_with("node node-b: GPU 1 and NIC mlx5_1"),
        "{}",
        r.verdict.reason
    );
    assert_eq!(r.verdict.hint.as_deref(), Some("fix the pcieRoot"));
    let rails = r.rails.as_ref().unwrap();
    assert!(rails.rails.iter().all(|row| row.status == VerdictStatus::Pass));
    assert_eq!(
        rails.findings.last().map(|f| f.kind),
        Some(RailFindingKind::PcieRootMismatch)
    );
}

#[tokio::test]
async fn healthy_rails_pass_with_every_byte_attributed() {
    let mut s = seam(vec![ok(10.0), ok(10.2), ok(9.9), ok(10.1)]);
    let out = run(&plan(4, AloneRuns::Suspects), &mut s).await.unwrap();
    let r = &out.report;
    let first = &r.rails.as_ref().unwrap().rails[0].concurrent;
    assert_eq!(
        r.verdict.status,
        VerdictStatus::Pass,
        "{} / {first:?}",
        r.verdict.reason
    );
    assert!(
        r.verdict.reason.starts_with("4 rails, aggregate 40.20 GB/s"),
        "{}",
        r.verdict.reason
    );
    let rails = r.rails.as_ref().unwrap();
    assert_eq!(s.launched, vec![0, 1, 2, 3], "nobody ran alone");
    assert_eq!(*s.cleanups.lock().unwrap(), 4);
    for row in &rails.rails {
        let a = row.attribution.as_ref().unwrap();
        assert_eq!(a.app_bytes, 1_000_000);
        assert_eq!(a.prefill.devices[0].device, format!("rail{}", row.index));
        assert!((a.prefill.devices[0].share - 1.03).abs() < 1e-9);
        assert_eq!(
            row.line_rate_share.map(|s| (s * 1000.0).round()),
            Some((row.concurrent.bandwidth_bps.unwrap() * 8.0 / 1e8).round())
        );
    }
    assert_eq!(r.cases.len(), 4);
    assert_eq!(
        r.cases.iter().map(|c| c.rail).collect::<Vec<_>>(),
        vec![Some(0), Some(1), Some(2), Some(3)]
    );
    assert!(out.cleanup.contains("rail 3: rank 3"), "{}", out.cleanup);
}

#[tokio::test]
async fn one_slow_rail_runs_alone_and_is_named() {
    let mut s = seam(vec![ok(10.0), ok(10.0), ok(3.0), ok(10.0)]);
    let out = run(&plan(4, AloneRuns::Suspects), &mut s).await.unwrap();
    assert_eq!(s.launched, vec![0, 1, 2, 3, 2], "rail 2 reran alone");
    let v = &out.report.verdict;
    assert_eq!(v.status, VerdictStatus::Fail);
    assert!(
        v.reason
            .starts_with("rail 2: node-a:mlx5_2 (0000:1a:00.0) ↔ node-b:mlx5_2"),
        "{}",
        v.reason
    );
    assert!(
        v.reason
            .contains("3.00 GB/s, 24 % of 100 Gb/s, others 10.00 GB/s; alone 3.00 GB/s"),
        "{}",
        v.reason
    );
    assert!(v.hint.as_deref().unwrap().contains("--node node-a"));
    let rails = out.report.rails.unwrap();
    assert!(
        rails
            .rails
            .iter()
            .filter(|r| r.index != 2)
            .all(|r| r.status == VerdictStatus::Pass)
    );
}

#[tokio::test]
async fn slow_only_together_is_contention_not_a_failure() {
    let mut slow = ok(3.0);
    slow.alone_gbps = Some(10.0);
    let mut s = seam(vec![ok(10.0), slow, ok(10.0)]);
    let out = run(&plan(3, AloneRuns::Suspects), &mut s).await.unwrap();
    assert_eq!(
        out.report.verdict.status,
        VerdictStatus::Warn,
        "{}",
        out.report.verdict.reason
    );
    let rails = out.report.rails.unwrap();
    assert_eq!(rails.findings[0].kind, RailFindingKind::Contention);
}

#[tokio::test]
async fn bytes_through_another_rails_nic_are_caught_by_the_counters() {
    let mut wrong = ok(10.0);
    wrong.via = Some("rail2".into());
    let mut s = seam(vec![ok(10.0), wrong, ok(10.0), ok(10.0)]);
    let out = run(&plan(4, AloneRuns::Suspects), &mut s).await.unwrap();
    assert_eq!(
        s.launched,
        vec![0, 1, 2, 3, 1],
        "rail 1's own NIC was idle: it reran alone"
    );
    let rails = out.report.rails.as_ref().unwrap();
    let f = &rails.findings[0];
    assert_eq!((f.kind, f.rail), (RailFindingKind::WrongNic, Some(1)), "{rails:?}");
    assert!(
        f.text
            .contains("bytes went through rail2 (rail 2's NIC, 103 %), not rail1"),
        "{}",
        f.text
    );
    assert_eq!(out.report.verdict.status, VerdictStatus::Fail);
}

#[tokio::test]
async fn a_dead_rail_fails_by_name_and_all_alone_gives_the_scaling() {
    let mut dead = ok(0.0);
    dead.fails = true;
    let mut s = seam(vec![ok(10.0), dead, ok(10.0)]);
    let out = run(&plan(3, AloneRuns::Suspects), &mut s).await.unwrap();
    let v = &out.report.verdict;
    assert_eq!(v.status, VerdictStatus::Fail);
    assert!(
        v.reason.starts_with("rail 1: ") && v.reason.contains("unreachable"),
        "{}",
        v.reason
    );

    let mut s = seam(vec![ok(10.0), ok(10.0)]);
    let out = run(&plan(2, AloneRuns::All), &mut s).await.unwrap();
    let rails = out.report.rails.unwrap();
    assert_eq!(rails.scaling(), Some(1.0));
    assert_eq!(s.launched, vec![0, 1, 0, 1]);
}

#[tokio::test]
async fn every_rail_failing_is_a_setup_error() {
    let mut dead = ok(0.0);
    dead.fails = true;
    let mut s = seam(vec![dead.clone(), dead]);
    let err = run(&plan(2, AloneRuns::Suspects), &mut s).await.unwrap_err();
    assert!(matches!(err, PairError::Setup(_)));
    assert!(
        err.to_string().starts_with("no rail measured anything: rail 0: "),
        "{err}"
    );
}

#[tokio::test]
async fn a_signal_interrupts_and_every_row_cleans_up() {
    let mut s = seam(vec![ok(10.0), ok(10.0), ok(10.0)]);
    let cancel = CancellationToken::new();
    s.cancel_at_report = Some(cancel.clone());
    let err = run_rails(&plan(3, AloneRuns::All), &mut s, &cancel, &mut |_, _| {})
        .await
        .unwrap_err();
    assert!(matches!(err, PairError::Interrupted(_)), "{err}");
    assert_eq!(*s.cleanups.lock().unwrap(), 3, "every started row cleaned up");
    assert_eq!(s.launched.len(), 3, "nothing ran alone after the signal");
}

async fn with_controls(
    kinds: &[icb_core::model::ControlKind],
    plan: &RailsPlan,
    seam: &mut FakeSeam,
) -> icb_pair::PairOutcome {
    let cancel = CancellationToken::new();
    icb_rails::run_rails_with_controls(kinds, plan, seam, &cancel, &mut |_, _| {})
        .await
        .unwrap()
}

#[tokio::test]
async fn the_tcp_control_runs_on_one_rail_pair_and_must_be_seen_as_tcp() {
    use icb_core::model::{ControlKind, TransportClass};
    let mut s = seam(vec![ok(10.0), ok(10.1), ok(9.9)]);
    let out = with_controls(&[ControlKind::Tcp], &plan(3, AloneRuns::Suspects), &mut s).await;
    assert_eq!(s.launched, vec![0, 1, 2, 0], "one more run, of rail 0");
    let c = &out.report.controls[0];
    assert!(c.caught, "{c:?}");
    assert_eq!(c.seen_as, vec![TransportClass::Tcp]);
    assert!(c.detail.starts_with("rail 0: a forced TCP fallback"), "{}", c.detail);
    assert_ne!(
        out.report.verdict.status,
        VerdictStatus::Inconclusive,
        "{}",
        out.report.verdict.reason
    );
    // A detector that cannot see TCP: the same rails, inconclusive.
    let mut s = seam(vec![ok(10.0), ok(10.1), ok(9.9)]);
    s.hides_tcp = true;
    let out = with_controls(&[ControlKind::Tcp], &plan(3, AloneRuns::Suspects), &mut s).await;
    assert!(!out.report.controls[0].caught);
    assert_eq!(out.report.verdict.status, VerdictStatus::Inconclusive);
    assert!(
        out.report
            .verdict
            .reason
            .starts_with("inconclusive: rail 0: transport detection could not see"),
        "{}",
        out.report.verdict.reason
    );
}

#[tokio::test]
async fn the_wrong_nic_control_pins_rail_0_to_rail_1_and_the_counters_must_say_wrong_nic() {
    use icb_core::model::ControlKind;
    use icb_core::rails::AttributionStatus;
    let mut s = seam(vec![ok(10.0), ok(10.1), ok(9.9)]);
    let out = with_controls(&[ControlKind::WrongNic], &plan(3, AloneRuns::Suspects), &mut s).await;
    assert_eq!(s.launched, vec![0, 1, 2, 0]);
    let c = &out.report.controls[0];
    assert!(c.caught, "{c:?}");
    assert_eq!(c.case, "rail 0 pinned to rail1 and rail1");
    assert!(
        c.detail.contains("wrong_nic") && c.detail.contains("rail1"),
        "{}",
        c.detail
    );
    let rails = out.report.rails.as_ref().unwrap();
    assert_ne!(
        out.report.verdict.status,
        VerdictStatus::Inconclusive,
        "{}",
        out.report.verdict.reason
    );
    assert!(
        rails
            .rails
            .iter()
            .all(|r| r.attribution.as_ref().unwrap().prefill.status == AttributionStatus::Counted)
    );
    assert!(
        rails.findings.iter().all(|f| f.kind != RailFindingKind::NotAttributed),
        "{:?}",
        rails.findings
    );
}

#[tokio::test]
async fn a_wrong_nic_control_the_counters_miss_leaves_no_attribution_trusted_and_the_run_inconclusive() {
    use icb_core::model::ControlKind;
    use icb_core::rails::AttributionStatus;
    // Rail 0's bytes always show on rail0's counter, wherever its ranks are pinned (a counter
    // that counts by something other than the NIC that sent them).
    let mut stuck = ok(10.0);
    stuck.via = Some("rail0".into());
    let mut s = seam(vec![stuck, ok(10.1), ok(9.9)]);
    let out = with_controls(&[ControlKind::WrongNic], &plan(3, AloneRuns::Suspects), &mut s).await;
    let c = &out.report.controls[0];
    assert!(!c.caught, "{c:?}");
    let v = &out.report.verdict;
    assert_eq!(v.status, VerdictStatus::Inconclusive);
    assert!(
        v.reason
            .starts_with("inconclusive: counter attribution: not attributed:"),
        "{}",
        v.reason
    );
    let rails = out.report.rails.as_ref().unwrap();
    for row in &rails.rails {
        let a = row.attribution.as_ref().unwrap();
        for side in [&a.prefill, &a.decode] {
            assert_eq!(side.status, AttributionStatus::NotAttributed, "rail {}", row.index);
            assert!(
                side.note
                    .as_deref()
                    .unwrap()
                    .starts_with("counter attribution not trusted")
            );
        }
    }
    let f = rails
        .findings
        .iter()
        .find(|f| f.kind == RailFindingKind::NotAttributed)
        .unwrap();
    assert_eq!(f.rail, None, "about the whole node pair");
    // One rail: no other NIC to pin it to; the control did not run, and says why.
    let mut s = seam(vec![ok(10.0)]);
    let out = with_controls(&[ControlKind::WrongNic], &plan(1, AloneRuns::Suspects), &mut s).await;
    assert!(
        out.report.controls[0].detail.contains("one rail"),
        "{:?}",
        out.report.controls
    );
    assert_eq!(out.report.verdict.status, VerdictStatus::Inconclusive);
}
