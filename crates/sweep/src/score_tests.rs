//! Scoring tests: scripted first and second passes, no cluster.
use super::*;
use crate::results::Outcome;
use crate::schedule::Schedule;
use icb_core::quality::QualityKind;

#[test]
fn an_intra_node_suspect_runs_its_own_pair_again() {
    let v = |node: &str, status| NodeVerdict {
        node: node.into(),
        status,
        median_bps: None,
        median_latency_us: None,
        pairs: 1,
        failed_pairs: 0,
        error_pairs: 0,
        data_paths: vec![],
        evidence: vec![],
        bad_rails: vec![],
    };
    let verdicts = [
        v("a", NodeStatus::Pass),
        v("b", NodeStatus::Suspect),
        v("c", NodeStatus::Suspect),
    ];
    assert_eq!(
        second_pass_plan(&verdicts, 0, true),
        vec![vec![Pair::new("b", "b"), Pair::new("c", "c")]]
    );
    assert_eq!(second_pass_plan(&verdicts, 1, true).len(), 2, "one at a time");
    // Across nodes, partners that passed instead.
    assert!(
        second_pass_plan(&verdicts, 0, false)
            .concat()
            .iter()
            .all(|p| p.involves("a"))
    );
}

fn measured(bw: f64, fail: bool) -> Outcome {
    Outcome::Measured {
        verdict: if fail {
            icb_core::VerdictStatus::Fail
        } else {
            icb_core::VerdictStatus::Pass
        },
        reason: String::new(),
        data_paths: vec![if fail { "tcp" } else { "rdma" }.into()],
        bandwidth_bps: Some(bw),
        latency_us: None,
        series: vec![],
        latency: vec![],
        warnings: vec![],
        rails: vec![],
        controls: vec![],
        nic: None,
    }
}

fn run(pairs: &[Pair], pass: u8, bad: &[&str], slow: &[&str]) -> Vec<PairResult> {
    pairs
        .iter()
        .map(|p| {
            let is_bad = bad.iter().any(|b| p.involves(b));
            let is_slow = slow.iter().any(|b| p.involves(b));
            pair_result(p, pass, measured(if is_slow { 2e9 } else { 20e9 }, is_bad))
        })
        .collect()
}

/// Each node with its status, in the verdicts' order.
fn statuses(verdicts: &[NodeVerdict]) -> Vec<(&str, NodeStatus)> {
    verdicts.iter().map(|v| (v.node.as_str(), v.status)).collect()
}

fn nodes(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("node-{i}")).collect()
}

#[test]
fn a_tcp_node_and_a_slow_node_are_named_and_their_partners_cleared() {
    let nodes = nodes(8);
    let plan: Vec<Pair> = Schedule::Ring.rounds(&nodes, 0).unwrap().concat();
    let mut results = run(&plan, 1, &["node-3"], &["node-6"]);
    let first = first_pass_verdicts(&nodes, &results);
    let suspects: Vec<&str> = first
        .iter()
        .filter(|v| v.status == NodeStatus::Suspect)
        .map(|v| v.node.as_str())
        .collect();
    assert!(
        suspects.contains(&"node-3") && suspects.contains(&"node-6"),
        "{first:#?}"
    );
    let second = second_pass_plan(&first, 0, false).concat();
    results.extend(run(&second, 2, &["node-3"], &["node-6"]));
    let fin = final_verdicts(&nodes, &results);
    let failed: Vec<&str> = fin
        .iter()
        .filter(|v| v.status == NodeStatus::Fail)
        .map(|v| v.node.as_str())
        .collect();
    assert_eq!(failed, vec!["node-3", "node-6"], "{fin:#?}");
    // The slow node's re-pairs pass the verdict but stay slow: named by its median.
    let six = fin.iter().find(|v| v.node == "node-6").unwrap();
    assert!(six.evidence[0].contains("failed or slow"), "{six:#?}");
    assert!(six.evidence.iter().any(|e| e.contains("slow: under 25%")), "{six:#?}");
    for v in &fin {
        if !["node-3", "node-6"].contains(&v.node.as_str()) {
            assert_eq!(v.status, NodeStatus::Pass, "{v:#?}");
        }
    }
}

#[test]
fn unschedulable_is_not_a_fabric_verdict() {
    let nodes = nodes(4);
    let plan: Vec<Pair> = Schedule::AllPairs.rounds(&nodes, 0).unwrap().concat();
    let results: Vec<PairResult> = plan
        .iter()
        .map(|p| {
            let outcome = if p.involves("node-2") {
                Outcome::Unschedulable {
                    node: Some("node-2".into()),
                    reason: "0/4 nodes are available: Insufficient nvidia.com/gpu".into(),
                }
            } else {
                measured(20e9, false)
            };
            pair_result(p, 1, outcome)
        })
        .collect();
    let v = final_verdicts(&nodes, &results);
    assert_eq!(v[1].status, NodeStatus::Unschedulable);
    assert!(v[1].evidence[0].contains("Insufficient nvidia.com/gpu"));
    assert!(
        v.iter()
            .filter(|x| x.node != "node-2")
            .all(|x| x.status == NodeStatus::Pass)
    );
}

fn pair_result(p: &Pair, pass: u8, outcome: Outcome) -> PairResult {
    PairResult {
        pair: p.clone(),
        pass,
        run_id: "r".into(),
        duration_s: 1.0,
        finished_at: None,
        outcome,
    }
}

#[test]
fn a_node_that_measured_nothing_takes_the_blame_for_its_errors_not_its_partners() {
    // node-5 lost its link: every pair with it measured nothing. One pair between healthy
    // nodes is slow (a busy moment): with the errors counted against them too, node-1 and
    // node-2 would reach "2 of 4 bad" and be suspects.
    let nodes = nodes(5);
    let plan: Vec<Pair> = Schedule::AllPairs.rounds(&nodes, 0).unwrap().concat();
    let results: Vec<PairResult> = plan
        .iter()
        .map(|p| {
            let outcome = if p.involves("node-5") {
                Outcome::Error {
                    reason: "deadline passed".into(),
                }
            } else if p.involves("node-1") && p.involves("node-2") {
                measured(2e9, false)
            } else {
                measured(20e9, false)
            };
            pair_result(p, 1, outcome)
        })
        .collect();
    let first = first_pass_verdicts(&nodes, &results);
    assert_eq!(
        statuses(&first),
        [
            ("node-1", NodeStatus::Pass),
            ("node-2", NodeStatus::Pass),
            ("node-3", NodeStatus::Pass),
            ("node-4", NodeStatus::Pass),
            ("node-5", NodeStatus::Suspect)
        ],
        "{first:#?}"
    );
    let five = &first[4];
    assert_eq!((five.failed_pairs, five.error_pairs), (4, 4));
    assert_eq!(five.evidence[0], "4 of 4 pairs measured nothing (errors, not slowness)");
    assert!(
        first[0].evidence.iter().any(|e| e.starts_with("not counted: ")),
        "{:#?}",
        first[0]
    );
    assert_eq!(first[0].error_pairs, 0);
}

#[test]
fn a_skipped_second_pass_says_why() {
    let nodes = nodes(2);
    let results = vec![pair_result(
        &Pair::new("node-1", "node-2"),
        1,
        Outcome::Error {
            reason: "deadline passed".into(),
        },
    )];
    let first = first_pass_verdicts(&nodes, &results);
    assert!(first.iter().all(|v| v.status == NodeStatus::Suspect), "{first:#?}");
    assert!(second_pass_plan(&first, 0, false).is_empty());
    let why = second_pass_skipped(&first, false).unwrap();
    assert!(why.contains("no node passed"), "{why}");
    let fin = final_verdicts(&nodes, &results);
    assert!(fin.iter().all(|v| v.evidence.last() == Some(&why)), "{fin:#?}");
    assert_eq!(
        second_pass_skipped(&first, true),
        None,
        "intra-node re-runs the node itself"
    );
}

/// Issue 36 item 5: three nodes, one slow: every node is a suspect and no second pass can run,
/// but the output names the node in every bad pair.
#[test]
fn a_skipped_second_pass_names_the_node_common_to_every_bad_pair() {
    let nodes = nodes(3);
    let pair = |a: &str, b: &str, bw: f64| pair_result(&Pair::new(a, b), 1, measured(bw, false));
    let results = vec![
        pair("node-1", "node-2", 20e9),
        pair("node-1", "node-3", 1e9),
        pair("node-2", "node-3", 1e9),
    ];
    let fin = final_verdicts(&nodes, &results);
    assert!(fin.iter().all(|v| v.status != NodeStatus::Pass), "{fin:#?}");
    for v in &fin {
        let last = v.evidence.last().unwrap();
        assert!(
            last.contains("node-3 is in every bad first-pass pair (2 of 3)"),
            "{}: {last}",
            v.node
        );
    }
    // Every pair bad: no one node to name.
    let all_bad = vec![pair_result(&Pair::new("node-1", "node-2"), 1, measured(1e9, true))];
    assert_eq!(common_to_bad_pairs(&nodes, &all_bad), None);
}

fn with_latency(p50_us: f64, warnings: &[&str]) -> Outcome {
    flagged_latency(p50_us, warnings, &[])
}

/// [`with_latency`] whose 8 B case its pair's quality check flagged with `quality`.
fn flagged_latency(p50_us: f64, warnings: &[&str], quality: &[QualityKind]) -> Outcome {
    Outcome::Measured {
        verdict: icb_core::VerdictStatus::Pass,
        reason: String::new(),
        data_paths: vec!["shared_memory".into()],
        bandwidth_bps: None,
        latency_us: Some(p50_us),
        series: vec![],
        latency: vec![
            crate::results::LatencyPoint {
                test: icb_core::model::TestKind::TagLat,
                size: 8,
                memory: None,
                p50_us,
                p99_us: p50_us * 2.0,
                quality: quality.to_vec(),
            },
            // A large case is transfer time, not latency: never the one judged.
            crate::results::LatencyPoint {
                test: icb_core::model::TestKind::TagLat,
                size: 1 << 20,
                memory: None,
                p50_us: 1e6,
                p99_us: 1e6,
                quality: vec![],
            },
        ],
        warnings: warnings.iter().map(|w| w.to_string()).collect(),
        rails: vec![],
        controls: vec![],
        nic: None,
    }
}

#[test]
fn a_node_at_8_ms_among_sub_microsecond_peers_fails_on_latency() {
    let nodes = nodes(4);
    let lat = |p: &Pair| if p.involves("node-3") { 8000.0 } else { 0.65 };
    let mut results: Vec<PairResult> = Schedule::IntraNode
        .rounds(&nodes, 0)
        .unwrap()
        .concat()
        .iter()
        .map(|p| pair_result(p, 1, with_latency(lat(p), &["noisy: CV 40%"])))
        .collect();
    let first = first_pass_verdicts(&nodes, &results);
    let three = &first[2];
    assert_eq!(three.status, NodeStatus::Suspect, "{three:#?}");
    assert!(
        three.evidence[0].contains("median latency 8000 µs is a high outlier"),
        "{three:#?}"
    );
    assert_eq!(three.median_latency_us, Some(8000.0));
    assert!(
        three
            .evidence
            .iter()
            .any(|e| e == "quality node-3→node-3: noisy: CV 40%"),
        "pair quality warnings are carried: {three:#?}"
    );
    let again = second_pass_plan(&first, 0, true).concat();
    assert_eq!(again, [Pair::new("node-3", "node-3")]);
    results.extend(again.iter().map(|p| pair_result(p, 2, with_latency(lat(p), &[]))));
    let fin = final_verdicts(&nodes, &results);
    let status: Vec<NodeStatus> = fin.iter().map(|v| v.status).collect();
    use NodeStatus::{Fail, Pass};
    assert_eq!(status, [Pass, Pass, Fail, Pass], "{fin:#?}");
}

#[test]
fn micros_keeps_three_significant_digits() {
    assert_eq!(micros(0.65), "0.650");
    assert_eq!(micros(12.34), "12.3");
    assert_eq!(micros(8000.0), "8000");
}

#[test]
fn only_small_cases_count_as_latency() {
    let at = |size: u64| Outcome::Measured {
        verdict: icb_core::VerdictStatus::Pass,
        reason: String::new(),
        data_paths: vec![],
        bandwidth_bps: None,
        latency_us: Some(9.0),
        series: vec![],
        latency: vec![crate::results::LatencyPoint {
            test: icb_core::model::TestKind::TagLat,
            size,
            memory: None,
            p50_us: 9.0,
            p99_us: 9.0,
            quality: vec![],
        }],
        warnings: vec![],
        rails: vec![],
        controls: vec![],
        nic: None,
    };
    assert_eq!(at(8).latency(), Some(9.0));
    assert_eq!(at(64 << 10).latency(), Some(9.0));
    assert_eq!(at(1 << 20).latency(), None, "a 1 MiB round trip is bandwidth");
}

#[test]
fn a_pod_killed_from_outside_counts_against_no_node() {
    // Two of node-1's three pairs lost a pod to a kill (an eviction, an OOM kill, someone
    // deleting it). Counted as errors, they made node-1 "2 of 3 pairs measured nothing" and a
    // suspect (the issue 22 soak's finding); as disruptions they say nothing about it.
    let nodes = nodes(4);
    let plan: Vec<Pair> = Schedule::AllPairs.rounds(&nodes, 0).unwrap().concat();
    let killed = |p: &Pair| p.involves("node-1") && !p.involves("node-2");
    let results: Vec<PairResult> = plan
        .iter()
        .map(|p| {
            let outcome = if killed(p) {
                Outcome::Disrupted {
                    reason: "the prefill side exited (137)".into(),
                }
            } else {
                measured(20e9, false)
            };
            pair_result(p, 1, outcome)
        })
        .collect();
    assert_eq!(plan.iter().filter(|p| killed(p)).count(), 2);
    for (label, verdicts) in [
        ("first pass", first_pass_verdicts(&nodes, &results)),
        ("final", final_verdicts(&nodes, &results)),
    ] {
        for v in &verdicts {
            assert_eq!(v.status, NodeStatus::Pass, "{label}: {v:#?}");
            assert_eq!((v.failed_pairs, v.error_pairs), (0, 0), "{label}: {v:#?}");
        }
    }
    let as_errors: Vec<PairResult> = results
        .iter()
        .map(|r| match &r.outcome {
            Outcome::Disrupted { reason } => pair_result(&r.pair, 1, Outcome::Error { reason: reason.clone() }),
            _ => r.clone(),
        })
        .collect();
    let node1 = &first_pass_verdicts(&nodes, &as_errors)[0];
    assert_eq!(
        node1.status,
        NodeStatus::Suspect,
        "the same pairs as errors blame node-1: {node1:#?}"
    );
}

#[test]
fn a_node_cut_mid_sweep_is_a_suspect_on_its_first_error_and_fails_its_second_pass() {
    // node-3's cable is pulled after its pairs with node-1 and node-2 measured: it measures
    // nothing with node-4 and node-5 only, 2 of its 4 pairs, not most. Counting errors by the
    // half rule alone passed it (the soak's seed 14263338287540731321 did): an error is never
    // a pass until a second pass clears the node.
    let nodes = nodes(5);
    let plan: Vec<Pair> = Schedule::AllPairs.rounds(&nodes, 0).unwrap().concat();
    let cut = |p: &Pair| p.involves("node-3") && (p.involves("node-4") || p.involves("node-5"));
    let error = || Outcome::Error {
        reason: "deadline passed".into(),
    };
    let mut results: Vec<PairResult> = plan
        .iter()
        .map(|p| pair_result(p, 1, if cut(p) { error() } else { measured(20e9, false) }))
        .collect();
    let first = first_pass_verdicts(&nodes, &results);
    assert_eq!(
        statuses(&first),
        [
            ("node-1", NodeStatus::Pass),
            ("node-2", NodeStatus::Pass),
            ("node-3", NodeStatus::Suspect),
            ("node-4", NodeStatus::Suspect),
            ("node-5", NodeStatus::Suspect)
        ],
        "{first:#?}"
    );
    assert_eq!(
        first[2].evidence[0],
        "2 of 4 pairs measured nothing (errors, not slowness)"
    );
    assert_eq!(
        first[3].evidence[0],
        "1 of 4 pairs measured nothing (errors, not slowness)"
    );
    // The second pass re-pairs each suspect with the nodes that passed: node-3, still cut,
    // measures nothing again; node-4 and node-5 measure.
    let second = second_pass_plan(&first, 0, false).concat();
    assert!(!second.is_empty());
    for p in &second {
        let outcome = if p.involves("node-3") {
            error()
        } else {
            measured(20e9, false)
        };
        results.push(pair_result(p, 2, outcome));
    }
    let last = final_verdicts(&nodes, &results);
    assert_eq!(
        statuses(&last),
        [
            ("node-1", NodeStatus::Pass),
            ("node-2", NodeStatus::Pass),
            ("node-3", NodeStatus::Fail),
            ("node-4", NodeStatus::Pass),
            ("node-5", NodeStatus::Pass)
        ],
        "{last:#?}"
    );
}

/// What `pair`'s quality check says of a shared-memory p50 of 8 ms (quality.rs's wording).
const IMPLAUSIBLE: &str = "latency far above what the data path gives in 1 case: tag_lat 8 B host→host (p50 8000.0 µs over shared memory, expected < 100 µs): the CPU is oversubscribed or a side was descheduled; the data path is right, its timing is not: rerun on a quiet machine";

/// Intra-node first-pass results of 4 nodes, node-3's own pair at `node3` (µs) flagged `quality`.
fn intra_node_latencies(node3: f64, quality: &[QualityKind]) -> (Vec<String>, Vec<PairResult>) {
    let nodes = nodes(4);
    let results = Schedule::IntraNode
        .rounds(&nodes, 0)
        .unwrap()
        .concat()
        .iter()
        .map(|p| {
            let outcome = if p.involves("node-3") {
                flagged_latency(node3, &[IMPLAUSIBLE], quality)
            } else {
                with_latency(0.65, &[])
            };
            pair_result(p, 1, outcome)
        })
        .collect();
    (nodes, results)
}

/// Issue 35 (stress soak): node-2 was failed as a latency outlier on a latency its own pair had
/// called untrustworthy. Such a latency judges no node; with nothing else measured the node is
/// unjudged, with the quality finding as its reason, never a pass on nothing.
#[test]
fn a_latency_its_own_pair_called_implausible_fails_no_node() {
    let (nodes, results) = intra_node_latencies(8000.0, &[QualityKind::ImplausibleLatency]);
    let first = first_pass_verdicts(&nodes, &results);
    use NodeStatus::{Pass, Unjudged};
    let expected = [
        ("node-1", Pass),
        ("node-2", Pass),
        ("node-3", Unjudged),
        ("node-4", Pass),
    ];
    assert_eq!(statuses(&first), expected, "{first:#?}");
    let three = &first[2];
    assert_eq!(three.median_latency_us, None, "left out of its median");
    assert_eq!(
        three.evidence[0],
        "not judged: no bandwidth measured and no latency to judge it by: node-3→node-3: latency \
         8000 µs (tag_lat 8 B) not used: its own quality check says latency far above what the data \
         path gives"
    );
    assert!(
        three
            .evidence
            .iter()
            .any(|e| e == &format!("quality node-3→node-3: {IMPLAUSIBLE}")),
        "{three:#?}"
    );
    assert!(second_pass_plan(&first, 0, true).is_empty(), "no suspect to re-run");
    let fin = final_verdicts(&nodes, &results);
    assert_eq!(statuses(&fin), expected, "{fin:#?}");
}

/// Only `implausible_latency` disqualifies a latency: a high one that its pair flagged noisy,
/// short or not at all still fails its node.
#[test]
fn a_high_latency_not_flagged_implausible_still_fails_its_node() {
    for quality in [&[][..], &[QualityKind::HighVariance], &[QualityKind::FewRoundTrips]] {
        let (nodes, mut results) = intra_node_latencies(8000.0, quality);
        let first = first_pass_verdicts(&nodes, &results);
        assert_eq!(first[2].status, NodeStatus::Suspect, "{quality:?}: {:#?}", first[2]);
        let again = second_pass_plan(&first, 0, true).concat();
        results.extend(
            again
                .iter()
                .map(|p| pair_result(p, 2, flagged_latency(8000.0, &[], quality))),
        );
        let fin = final_verdicts(&nodes, &results);
        assert_eq!(fin[2].status, NodeStatus::Fail, "{quality:?}: {fin:#?}");
    }
}

/// A re-pair whose only figure is a latency its pair distrusts neither fails nor clears the
/// suspect: unjudged, with the reason first.
#[test]
fn a_re_pair_with_only_a_distrusted_latency_neither_fails_nor_clears() {
    let (nodes, mut results) = intra_node_latencies(8000.0, &[]);
    let first = first_pass_verdicts(&nodes, &results);
    assert_eq!(first[2].status, NodeStatus::Suspect, "{:#?}", first[2]);
    let again = second_pass_plan(&first, 0, true).concat();
    let flagged = flagged_latency(8000.0, &[IMPLAUSIBLE], &[QualityKind::ImplausibleLatency]);
    results.extend(again.iter().map(|p| pair_result(p, 2, flagged.clone())));
    let fin = final_verdicts(&nodes, &results);
    let three = &fin[2];
    assert_eq!(three.status, NodeStatus::Unjudged, "{three:#?}");
    assert!(
        three.evidence[0].starts_with("not judged: second pass node-3→node-3: latency 8000 µs"),
        "{three:#?}"
    );
}

/// With bandwidth measured, the bandwidth judges the node: a pass, and the evidence says which
/// latency was not used.
#[test]
fn a_node_with_good_bandwidth_passes_without_its_distrusted_latency() {
    let nodes = nodes(4);
    let plan: Vec<Pair> = Schedule::AllPairs.rounds(&nodes, 0).unwrap().concat();
    let results: Vec<PairResult> = plan
        .iter()
        .map(|p| {
            let (lat, quality) = if p.involves("node-2") {
                (8000.0, &[QualityKind::ImplausibleLatency][..])
            } else {
                (0.65, &[][..])
            };
            let mut outcome = flagged_latency(lat, &[], quality);
            if let Outcome::Measured { bandwidth_bps, .. } = &mut outcome {
                *bandwidth_bps = Some(20e9);
            }
            pair_result(p, 1, outcome)
        })
        .collect();
    let fin = final_verdicts(&nodes, &results);
    assert!(fin.iter().all(|v| v.status == NodeStatus::Pass), "{fin:#?}");
    assert_eq!(fin[1].median_latency_us, None);
    assert_eq!(fin[0].median_latency_us, Some(0.65), "its trusted pairs only");
    assert!(
        fin[1]
            .evidence
            .iter()
            .any(|e| e.ends_with("not used: its own quality check says latency far above what the data path gives")),
        "{:#?}",
        fin[1]
    );
}
