//! `run_sweep` over whole-node pairs (`sweep --rails`) with a scripted pair runner: every pair
//! reports four aligned rails, and the script says which rail rows are bad. A rail bad with
//! every partner is blamed by name while its node's other rails and every other node pass; a
//! rail bad with one partner only sends both ends to the second pass, which clears or blames.
//! Old results files without rails still load.

use icb_core::model::VerdictStatus;
use icb_core::rails::RailFindingKind;
use icb_sweep::run::{PairEnd, PairRunner, Pass, Silent, SweepEnd, SweepRun, run_sweep};
use icb_sweep::{
    NodeStatus, Outcome, Pair, RailNic, RailSummary, Schedule, SweepResults, bad_rails_annotation, rails::node_rails,
};
use tokio_util::sync::CancellationToken;

const RAILS: usize = 4;
const GOOD: f64 = 45e9;
const SLOW: f64 = 11.8e9;

fn nic(node: &str, rail: usize) -> RailNic {
    let n: usize = node[1..].parse().unwrap();
    RailNic {
        rail,
        nic: format!("mlx5_{rail}"),
        pci: Some(format!("0000:{:02x}:{rail:02x}.0", 0x10 * n)),
    }
}

/// A whole-node pair whose rails in `slow` were slow alone too, as `pair --rails` judges it.
fn measured(pair: &Pair, slow: &[usize]) -> Outcome {
    let rails: Vec<RailSummary> = (0..RAILS)
        .map(|i| {
            let bad = slow.contains(&i);
            RailSummary {
                index: i,
                prefill: nic(&pair.prefill, i),
                decode: nic(&pair.decode, i),
                bandwidth_bps: Some(if bad { SLOW } else { GOOD }),
                alone_bps: bad.then_some(SLOW),
                status: if bad { VerdictStatus::Fail } else { VerdictStatus::Pass },
                findings: if bad {
                    vec![RailFindingKind::BelowMedian]
                } else {
                    vec![]
                },
                health: None,
                counters: None,
            }
        })
        .collect();
    Outcome::Measured {
        verdict: if slow.is_empty() {
            icb_core::VerdictStatus::Pass
        } else {
            icb_core::VerdictStatus::Fail
        },
        reason: String::new(),
        data_paths: vec!["rdma".into()],
        bandwidth_bps: Some(GOOD),
        latency_us: None,
        series: vec![],
        latency: vec![],
        warnings: vec![],
        rails,
        controls: vec![],
        nic: None,
    }
}

/// Each pair's slow rails by `rule(pair, pass)`.
struct Script<F>(F);

impl<F: Fn(&Pair, u8) -> Vec<usize>> PairRunner for Script<F> {
    async fn run(&self, pair: &Pair, pass: Pass, _run_id: &str, _stop: &CancellationToken) -> PairEnd {
        PairEnd::Recorded(measured(pair, &(self.0)(pair, pass.number())))
    }
}

async fn sweep(n: usize, rule: impl Fn(&Pair, u8) -> Vec<usize>) -> SweepResults {
    let nodes: Vec<String> = (1..=n).map(|i| format!("n{i}")).collect();
    let rounds = Schedule::AllPairs.rounds(&nodes, 0).unwrap();
    let mut r = SweepResults::new("swrails".into(), Schedule::AllPairs, nodes, 60.0, rounds);
    let cancel = CancellationToken::new();
    let mut save = |_: &SweepResults| -> Result<(), String> { Ok(()) };
    let run = SweepRun {
        runner: &Script(rule),
        max_concurrent: 0,
        observer: &mut Silent,
        save: &mut save,
        cancel: &cancel,
    };
    assert_eq!(run_sweep(&mut r, run).await.unwrap(), SweepEnd::Done);
    // What was saved reads back.
    assert_eq!(serde_json::from_str::<SweepResults>(&r.to_json()).unwrap(), r);
    r
}

fn verdict<'a>(r: &'a SweepResults, node: &str) -> &'a icb_sweep::NodeVerdict {
    r.node_verdicts.iter().find(|v| v.node == node).unwrap()
}

#[tokio::test]
async fn a_rail_slow_with_every_partner_is_blamed_and_nothing_else() {
    let r = sweep(6, |p, _| if p.involves("n3") { vec![2] } else { vec![] }).await;
    let n3 = verdict(&r, "n3");
    assert_eq!(n3.status, NodeStatus::Fail);
    assert_eq!(n3.bad_rails.len(), 1, "only rail 2: {:?}", n3.bad_rails);
    let rail = &n3.bad_rails[0];
    assert_eq!((rail.status, &rail.nic), (NodeStatus::Fail, &nic("n3", 2)));
    assert_eq!(rail.partners, ["n1", "n2", "n4", "n5", "n6"]);
    assert_eq!(
        n3.evidence[0],
        "n3 rail 2 (mlx5_2 0000:30:02.0): bad with n1, n2, n4, n5 and n6"
    );
    assert_eq!(bad_rails_annotation(n3).as_deref(), Some("2:0000:30:02.0"));
    for v in r.node_verdicts.iter().filter(|v| v.node != "n3") {
        assert_eq!(v.status, NodeStatus::Pass, "{}: {:?}", v.node, v.evidence);
        assert!(v.bad_rails.is_empty() && bad_rails_annotation(v).is_none(), "{v:?}");
        assert_eq!(v.failed_pairs, 0, "its pair with n3 is n3's rail's: {:?}", v.evidence);
        assert!(
            v.evidence
                .iter()
                .any(|e| e.starts_with("not counted:") && e.ends_with("(n3 rail 2 is bad with other partners too)")),
            "{:?}",
            v.evidence
        );
    }
    assert!(r.pairs.iter().all(|p| p.pass == 1), "nothing to re-pair");
    assert_eq!(r.exit_code(), 1);
    // The node × rail view: n3's rail 2 failed, each of its other rails and every other passed.
    let cells = node_rails(&r.pairs, &r.node_verdicts);
    assert_eq!(cells.len(), 6 * RAILS);
    for c in &cells {
        let blamed = c.node == "n3" && c.nic.rail == 2;
        let want = if blamed { NodeStatus::Fail } else { NodeStatus::Pass };
        assert_eq!(c.status, want, "{} rail {}", c.node, c.nic.rail);
        assert_eq!(c.partners.len(), 5);
    }
    let n1_rail2 = cells.iter().find(|c| c.node == "n1" && c.nic.rail == 2).unwrap();
    assert_eq!((n1_rail2.median_bps, n1_rail2.worst_bps), (Some(GOOD), Some(SLOW)));
}

/// n2's rail 1 and n4's rail 1 were bad together in the first pass; in the second pass `again`
/// says whether n4's rail 1 is bad once more.
fn one_partner(again: bool) -> impl Fn(&Pair, u8) -> Vec<usize> {
    move |p, pass| match pass {
        1 if p.involves("n2") && p.involves("n4") => vec![1],
        2 if again && p.involves("n4") => vec![1],
        _ => vec![],
    }
}

#[tokio::test]
async fn a_rail_bad_with_one_partner_goes_to_the_second_pass_and_is_cleared_there() {
    let r = sweep(6, one_partner(false)).await;
    let second: Vec<&Pair> = r.pairs.iter().filter(|p| p.pass == 2).map(|p| &p.pair).collect();
    assert_eq!(second.len(), 4, "n2 and n4 each with two nodes that passed: {second:?}");
    assert!(second.iter().all(|p| p.involves("n2") || p.involves("n4")));
    assert!(!second.iter().any(|p| p.involves("n2") && p.involves("n4")));
    for v in &r.node_verdicts {
        assert_eq!(v.status, NodeStatus::Pass, "{}: {:?}", v.node, v.evidence);
        assert!(v.bad_rails.is_empty(), "{v:?}");
    }
    let n4 = verdict(&r, "n4");
    assert!(
        n4.evidence
            .iter()
            .any(|e| e.starts_with("n4 rail 1 (mlx5_1 0000:40:01.0): bad with n2 only")),
        "{:?}",
        n4.evidence
    );
}

#[tokio::test]
async fn a_suspect_rail_bad_again_in_the_second_pass_is_blamed() {
    let r = sweep(6, one_partner(true)).await;
    let n4 = verdict(&r, "n4");
    assert_eq!(n4.status, NodeStatus::Fail, "{:?}", n4.evidence);
    assert_eq!(n4.bad_rails.len(), 1);
    assert_eq!(n4.bad_rails[0].nic, nic("n4", 1));
    assert_eq!(n4.bad_rails[0].partners.len(), 3, "n2 and both re-pairs");
    assert!(n4.evidence[0].starts_with("n4 rail 1 (mlx5_1 0000:40:01.0): bad with n"));
    let n2 = verdict(&r, "n2");
    assert_eq!(n2.status, NodeStatus::Pass, "{:?}", n2.evidence);
    assert!(n2.bad_rails.is_empty());
}

#[test]
fn a_results_file_written_before_rails_still_loads() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sweep_before_rails.json");
    let r = SweepResults::load(std::path::Path::new(path)).unwrap();
    assert_eq!(r.pairs.len(), 3);
    assert!(r.pairs.iter().all(|p| p.outcome.rails().is_empty()));
    assert!(r.node_verdicts.iter().all(|v| v.bad_rails.is_empty()));
    assert!(node_rails(&r.pairs, &r.node_verdicts).is_empty());
    // Rescored, it judges the nodes as it did.
    let again = icb_sweep::score::final_verdicts(&r.nodes, &r.pairs);
    assert_eq!(again, r.node_verdicts);
    // Written back, it has no rail fields either.
    assert!(!r.to_json().contains("rails"));
}
