//! Issue 40 item 1: a plain sweep's node evidence carries its pairs' per-case NIC counter
//! findings. A scripted runner returns real pair reports whose cases carry both sides'
//! counter readings, as a pair side sends them: n2's port counts CNPs in every case, n1's reads
//! the same counters and nothing moves, n3 has no RDMA port. n2's evidence names the congestion
//! with its counters, side and fix; n1's has no finding; n3's says its counters were not read,
//! never that they were fine. The results file keeps the findings. No cluster, no root.

use icb_core::rails::nic_health::case::CaseHealth;
use icb_core::rails::nic_health::{Driver, HealthSnapshot, PortHealth};
use icb_sweep::run::{PairEnd, PairRunner, Pass, SweepRun, run_sweep};
use icb_sweep::{Outcome, Pair, Schedule, SweepResults};
use tokio_util::sync::CancellationToken;

/// What `node`'s side reads of its NICs: before a case (`after` false) and after it.
fn reading(node: &str, after: bool) -> HealthSnapshot {
    if node == "n3" {
        return HealthSnapshot {
            ports: vec![],
            unreadable: None,
        };
    }
    let cnps = if node == "n2" && after { 40 } else { 0 };
    let values = [
        ("rp_cnp_handled", cnps),
        ("out_of_sequence", 0),
        ("rx_read_requests", 0),
    ];
    HealthSnapshot {
        ports: vec![PortHealth {
            device: "mlx5_1:1".into(),
            drivers: vec![Driver::IbCore, Driver::Mlx5],
            values: values.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            unreadable: Default::default(),
        }],
        unreadable: None,
    }
}

/// A failed pair report (so the congestion rule judges its cases slow) whose every measured
/// case carries both sides' readings, judged as the pair judges them.
fn report(pair: &Pair) -> icb_core::PairReport {
    let mut report: icb_core::PairReport =
        serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
    report.verdict.status = icb_core::VerdictStatus::Fail;
    for case in report.cases.iter_mut() {
        let (p0, p1) = (reading(&pair.prefill, false), reading(&pair.prefill, true));
        let (d0, d1) = (reading(&pair.decode, false), reading(&pair.decode, true));
        let mut health = CaseHealth::read((Some(&p0), Some(&p1)), (Some(&d0), Some(&d1)));
        health.judge(true, None);
        case.nic_health = Some(Box::new(health));
    }
    report
}

struct Script {
    cancel: CancellationToken,
}

impl PairRunner for Script {
    async fn run(&self, pair: &Pair, _pass: Pass, _run_id: &str, _stop: &CancellationToken) -> PairEnd {
        PairEnd::Recorded(Outcome::from_report(&report(pair)))
    }
}

#[tokio::test]
async fn a_congested_nodes_evidence_names_its_counters_and_a_node_without_rdma_reads_not_read() {
    let nodes: Vec<String> = (1..=3).map(|i| format!("n{i}")).collect();
    let rounds = Schedule::AllPairs.rounds(&nodes, 0).unwrap();
    let mut results = SweepResults::new("swnic".into(), Schedule::AllPairs, nodes, 60.0, rounds);
    let script = Script {
        cancel: CancellationToken::new(),
    };
    let mut saved = String::new();
    let mut save = |r: &SweepResults| -> Result<(), String> {
        saved = r.to_json();
        Ok(())
    };
    let mut observer = icb_sweep::run::Silent;
    let run = SweepRun {
        runner: &script,
        max_concurrent: 0,
        observer: &mut observer,
        save: &mut save,
        cancel: &script.cancel,
    };
    run_sweep(&mut results, run).await.unwrap();
    let measured = results.pairs.iter().filter(|p| p.pass == 1).count();
    assert_eq!(measured, 3, "{:#?}", results.pairs);
    let evidence = |node: &str| -> Vec<String> {
        let v = results.node_verdicts.iter().find(|v| v.node == node).unwrap();
        v.evidence.iter().filter(|e| e.starts_with("nic")).cloned().collect()
    };

    let two = evidence("n2");
    let congested: Vec<&String> = two.iter().filter(|e| e.contains("congested")).collect();
    assert_eq!(congested.len(), 2, "one line per pair of n2: {two:#?}");
    let side = |partner: &str| {
        let pair = results
            .pairs
            .iter()
            .find(|p| p.pass == 1 && p.pair.involves("n2") && p.pair.involves(partner))
            .unwrap();
        (
            pair.pair.clone(),
            if pair.pair.prefill == "n2" { "prefill" } else { "decode" },
        )
    };
    for partner in ["n1", "n3"] {
        let (pair, side) = side(partner);
        let head = format!("nic {pair}: n2 ({side}) mlx5_1:1 congested in ");
        let line = congested
            .iter()
            .find(|e| e.starts_with(&head))
            .unwrap_or_else(|| panic!("{head}: {two:#?}"));
        assert!(line.contains("case(s): rp_cnp_handled +"), "{line}");
        assert!(line.contains("; fix: "), "{line}");
    }
    assert!(
        two.iter().all(|e| !e.contains("not read")),
        "n2 read its port: {two:#?}"
    );

    // n1 read the same counters and nothing moved: no finding, nothing said to be unread.
    assert_eq!(evidence("n1"), Vec::<String>::new());

    // n3 has no RDMA port: "not read", with the reason, once per reason, never a pass.
    let three = evidence("n3");
    assert!(!three.is_empty(), "{three:#?}");
    let unread: Vec<&String> = three
        .iter()
        .filter(|e| e.starts_with("nic: NIC counters not read on n3 in ") && e.contains("no RDMA port on the "))
        .collect();
    assert_eq!(unread.len(), three.len(), "{three:#?}");
    let pairs: usize = unread
        .iter()
        .filter_map(|e| e.split(" in ").nth(1)?.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(pairs, 2, "both of n3's pairs: {three:#?}");

    // The results file keeps each pair's findings; `--resume` reads the same back.
    let back: SweepResults = serde_json::from_str(&saved).unwrap();
    assert_eq!(back.pairs, results.pairs);
    let kept = back
        .pairs
        .iter()
        .filter(|p| matches!(&p.outcome, Outcome::Measured { nic: Some(n), .. } if !n.findings.is_empty()))
        .count();
    assert_eq!(kept, 2, "n2's two pairs keep their findings: {saved}");
}
