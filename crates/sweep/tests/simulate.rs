//! Scheduler-only simulation at N = 1000 with k bad nodes: the linear schedule (ring + 2 random
//! matchings) and the second pass name every bad node and blame no healthy one. A pair fails when
//! either node is bad; healthy links measure 20 GB/s with ±10 % noise. Prints docs/sweep.md's table
//! (`cargo test -p icb-sweep --test simulate -- --nocapture`).

use icb_sweep::results::{Outcome, PairResult};
use icb_sweep::schedule::{Pair, Schedule};
use icb_sweep::score::{NodeStatus, final_verdicts, first_pass_verdicts, second_pass_plan};
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

fn measure(p: &Pair, pass: u8, bad: &BTreeSet<String>, rng: &mut impl Rng) -> PairResult {
    let fails = bad.contains(&p.prefill) || bad.contains(&p.decode);
    PairResult {
        pair: p.clone(),
        pass,
        run_id: "sim".into(),
        duration_s: 1.0,
        finished_at: None,
        outcome: Outcome::Measured {
            verdict: if fails {
                icb_core::VerdictStatus::Fail
            } else {
                icb_core::VerdictStatus::Pass
            },
            reason: String::new(),
            data_paths: vec![if fails { "tcp" } else { "rdma" }.into()],
            bandwidth_bps: Some(if fails { 1e9 } else { 20e9 * rng.random_range(0.9..1.1) }),
            latency_us: None,
            series: vec![],
            latency: vec![],
            warnings: vec![],
            rails: vec![],
            controls: vec![],
            nic: None,
        },
    }
}

#[test]
fn every_bad_node_is_named_and_no_healthy_node_blamed_at_1000_nodes() {
    let n = 1000;
    let nodes: Vec<String> = (1..=n).map(|i| format!("node-{i:04}")).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    println!("| bad nodes (k) | first-pass rounds | pairs | suspects | second-pass rounds | named | healthy blamed |");
    println!("|---|---|---|---|---|---|---|");
    for k in [1usize, 5, 20] {
        let mut bad = BTreeSet::new();
        while bad.len() < k {
            bad.insert(nodes[rng.random_range(0..n)].clone());
        }
        let schedule = Schedule::Linear { matchings: 2, seed: 7 };
        let rounds = schedule.rounds(&nodes, 0).unwrap();
        let mut results: Vec<PairResult> = rounds.iter().flatten().map(|p| measure(p, 1, &bad, &mut rng)).collect();
        let first = first_pass_verdicts(&nodes, &results);
        let suspects = first.iter().filter(|v| v.status == NodeStatus::Suspect).count();
        let second = second_pass_plan(&first, 0, false);
        results.extend(second.iter().flatten().map(|p| measure(p, 2, &bad, &mut rng)));
        let fin = final_verdicts(&nodes, &results);
        let named: BTreeSet<String> = fin
            .iter()
            .filter(|v| v.status == NodeStatus::Fail)
            .map(|v| v.node.clone())
            .collect();
        let blamed = fin
            .iter()
            .filter(|v| v.status != NodeStatus::Pass && !bad.contains(&v.node))
            .count();
        println!(
            "| {k} | {} | {} | {suspects} | {} | {}/{k} | {blamed} |",
            rounds.len(),
            results.len(),
            second.len(),
            named.len()
        );
        assert_eq!(named, bad, "k={k}: every bad node named, nothing else");
        assert_eq!(blamed, 0, "k={k}: no healthy node blamed");
        assert!(
            rounds.len() <= 8,
            "k={k}: linear schedule in few rounds: {}",
            rounds.len()
        );
    }
}
