//! Issue 40: the sweep's fleet view, with a scripted pair runner whose sides "read" their node's
//! RDMA readiness as a real pair side does (and a node whose pairs read none). Every pair of the
//! sweep passes; the fleet still names the node whose firmware and the one whose MTU differ from
//! the majority's, survives a save and a read back, and a node never read is said, not counted.
//! No cluster, no root.

use icb_core::readiness::{PairReadiness, PortReadiness, Readiness, ReadinessField};
use icb_sweep::run::{PairEnd, PairRunner, Pass, SweepRun, run_sweep};
use icb_sweep::{Outcome, Pair, Schedule, SweepResults};
use tokio_util::sync::CancellationToken;

/// What node `name` reads of itself: n2 runs older firmware, n3's port at MTU 1500, n5 reads none.
fn node_reads(name: &str) -> Option<Readiness> {
    let (fw, mtu) = match name {
        "n2" => ("28.38.1000", 9000),
        "n3" => ("28.39.1002", 1500),
        "n5" => return None,
        _ => ("28.39.1002", 9000),
    };
    Some(Readiness {
        ports: vec![PortReadiness {
            port: "mlx5_0:1".into(),
            link_layer: Some("Ethernet".into()),
            netdev_mtu: Some(mtu),
            firmware: Some(fw.into()),
            ..Default::default()
        }],
        gdr_mode: None,
        pcie_links: vec![],
    })
}

/// Every pair passes; each run id's pair is kept so that its readiness can be asked for after.
struct Script {
    cancel: CancellationToken,
    pairs: std::cell::RefCell<Vec<(String, Pair)>>,
}

impl PairRunner for Script {
    async fn run(&self, pair: &Pair, _pass: Pass, run_id: &str, _stop: &CancellationToken) -> PairEnd {
        self.pairs.borrow_mut().push((run_id.to_string(), pair.clone()));
        PairEnd::Recorded(Outcome::Measured {
            verdict: icb_core::VerdictStatus::Pass,
            reason: String::new(),
            data_paths: vec!["rdma".into()],
            bandwidth_bps: Some(100e9),
            latency_us: None,
            series: vec![],
            latency: vec![],
            warnings: vec![],
            rails: vec![],
            controls: vec![],
            nic: None,
        })
    }

    fn readiness(&self, run_id: &str) -> Option<PairReadiness> {
        let pairs = self.pairs.borrow();
        let (_, pair) = pairs.iter().find(|(id, _)| id == run_id)?;
        Some(PairReadiness::of(node_reads(&pair.prefill), node_reads(&pair.decode)))
    }
}

#[tokio::test]
async fn the_fleet_names_the_node_whose_firmware_and_the_one_whose_mtu_differ() {
    let nodes: Vec<String> = (1..=5).map(|i| format!("n{i}")).collect();
    let rounds = Schedule::AllPairs.rounds(&nodes, 0).unwrap();
    let mut results = SweepResults::new("swfleet".into(), Schedule::AllPairs, nodes, 60.0, rounds);
    let script = Script {
        cancel: CancellationToken::new(),
        pairs: Default::default(),
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
    assert!(results.complete);
    // The file `--resume` reads back holds the same fleet.
    let back: SweepResults = serde_json::from_str(&saved).unwrap();
    assert_eq!(back.fleet, results.fleet);
    let fleet = results.fleet.expect("a fleet view");
    assert_eq!(fleet.not_read, ["n5"]);
    let row = |field| fleet.values.iter().find(|v| v.field == field).unwrap();
    let fw = row(ReadinessField::Firmware);
    assert_eq!(fw.majority.as_deref(), Some("28.39.1002"));
    assert_eq!(fw.odd_ones_out, [("n2".to_string(), "28.38.1000".to_string())]);
    let mtu = row(ReadinessField::NetdevMtu);
    assert_eq!((mtu.port.as_str(), mtu.majority.as_deref()), ("mlx5_0:1", Some("9000")));
    assert_eq!(mtu.odd_ones_out, [("n3".to_string(), "1500".to_string())]);
    assert_eq!(mtu.read(), 4);
    // No node read an active MTU: no row claims one.
    assert!(
        fleet.values.iter().all(|v| v.field != ReadinessField::ActiveMtu),
        "{fleet:?}"
    );
}
