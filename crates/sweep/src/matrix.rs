//! The node-pair matrix for schedulers (`ic-bench.fabric-matrix/v1`, issue 41 item 4): what a
//! topology-aware router or scheduler needs from a sweep, per ordered node pair (prefill on one,
//! decode on the other), without the sweep's plan, plots and evidence: the measured bandwidth and
//! latency, the transport that carried the bytes, the pair's verdict and when it was measured.
//! `sweep --matrix-configmap` writes it into a ConfigMap (`icb-sweep-kube`); the format is
//! documented field by field in docs/sweep.md.
//!
//! A pair that was not measured (unschedulable, an error, killed from outside) is in the matrix
//! with its status and no figures: a reader must see "not known" rather than infer a good link
//! from a missing row. A pair the schedule never ran is absent: the sweep's `nodes` says which
//! nodes the matrix covers, and `complete` whether every planned pair ran.

use crate::results::{Outcome, PairResult, SweepResults};
use crate::score::NodeStatus;
use icb_core::VerdictStatus;
use icb_core::quality::QualityKind;
use serde::{Deserialize, Serialize};

pub const MATRIX_SCHEMA: &str = "ic-bench.fabric-matrix/v1";

/// The matrix of one sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricMatrix {
    pub schema: String,
    pub sweep_id: String,
    /// When the sweep's results were last written (RFC 3339, UTC).
    pub generated_at: String,
    /// Every planned pair ran (a stopped sweep's matrix is partial).
    pub complete: bool,
    /// Each node of the sweep with its verdict (`pass`, `fail`, `suspect`, `unschedulable`,
    /// `unknown`, `unjudged`): only `pass` is a node known to be good.
    pub nodes: Vec<MatrixNode>,
    /// One entry per ordered pair that ran, its latest run (a second-pass re-run of the same
    /// ordered pair replaces the first), in the sweep's order.
    pub pairs: Vec<MatrixPair>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixNode {
    pub node: String,
    pub status: NodeStatus,
}

/// Whether a pair was measured at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairState {
    Measured,
    Unschedulable,
    Error,
    Disrupted,
}

/// One ordered node pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixPair {
    pub prefill_node: String,
    pub decode_node: String,
    pub state: PairState,
    /// The pair's verdict (`pass`, `warn`, `fail`, `inconclusive`), when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<VerdictStatus>,
    /// Bandwidth at the largest size measured, the worst of the bandwidth tests, bytes/s
    /// (10^9 bytes/s = 1 GB/s); absent when not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth_bps: Option<f64>,
    /// One-way p50 latency of the smallest latency case up to 64 KiB, µs; absent when not
    /// measured or when the pair's own quality check distrusts it (`latency_distrusted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p50_us: Option<f64>,
    /// Why the measured latency is left out (`implausible_latency`: the pair's timing, not its
    /// data path, was wrong).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_distrusted: Option<QualityKind>,
    /// The data paths that carried the bytes (`rdma`, `cuda_ipc`, `tcp` …), most important
    /// first; empty when not measured.
    pub transports: Vec<String>,
    /// When the pair's run ended (RFC 3339); absent for results written before it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_at: Option<String>,
    /// 1: the sweep's schedule; 2: its second pass.
    pub pass: u8,
    pub run_id: String,
}

impl FabricMatrix {
    pub fn from_results(r: &SweepResults) -> FabricMatrix {
        let mut pairs: Vec<MatrixPair> = Vec::new();
        for p in &r.pairs {
            let entry = MatrixPair::from_result(p);
            let same = |e: &MatrixPair| e.prefill_node == entry.prefill_node && e.decode_node == entry.decode_node;
            match pairs.iter_mut().find(|e| same(e)) {
                Some(e) if e.pass <= entry.pass => *e = entry,
                Some(_) => {}
                None => pairs.push(entry),
            }
        }
        let nodes = r
            .nodes
            .iter()
            .map(|node| MatrixNode {
                node: node.clone(),
                status: r
                    .node_verdicts
                    .iter()
                    .find(|v| &v.node == node)
                    .map_or(NodeStatus::Unknown, |v| v.status),
            })
            .collect();
        FabricMatrix {
            schema: MATRIX_SCHEMA.to_string(),
            sweep_id: r.sweep_id.clone(),
            generated_at: r.updated_at.clone(),
            complete: r.complete,
            nodes,
            pairs,
        }
    }

    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }
}

impl MatrixPair {
    fn from_result(p: &PairResult) -> MatrixPair {
        let state = match &p.outcome {
            Outcome::Measured { .. } => PairState::Measured,
            Outcome::Unschedulable { .. } => PairState::Unschedulable,
            Outcome::Error { .. } => PairState::Error,
            Outcome::Disrupted { .. } => PairState::Disrupted,
        };
        let (verdict, transports) = match &p.outcome {
            Outcome::Measured {
                verdict, data_paths, ..
            } => (Some(*verdict), data_paths.clone()),
            _ => (None, Vec::new()),
        };
        MatrixPair {
            prefill_node: p.pair.prefill.clone(),
            decode_node: p.pair.decode.clone(),
            state,
            verdict,
            bandwidth_bps: p.outcome.bandwidth(),
            latency_p50_us: p.outcome.latency(),
            latency_distrusted: p.outcome.distrusted_latency().map(|(_, kind)| kind),
            transports,
            measured_at: p.finished_at.clone(),
            pass: p.pass,
            run_id: p.run_id.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::LatencyPoint;
    use crate::schedule::{Pair, Schedule};
    use crate::score::final_verdicts;

    fn measured(bw: f64, latency_us: f64, quality: Vec<QualityKind>) -> Outcome {
        Outcome::Measured {
            verdict: VerdictStatus::Pass,
            reason: "ok".into(),
            data_paths: vec!["rdma".into()],
            bandwidth_bps: Some(bw),
            latency_us: Some(latency_us),
            series: Vec::new(),
            latency: vec![LatencyPoint {
                test: icb_core::model::TestKind::TagLat,
                size: 8,
                memory: None,
                p50_us: latency_us,
                p99_us: latency_us * 2.0,
                quality,
            }],
            warnings: Vec::new(),
            rails: Vec::new(),
            controls: Vec::new(),
            nic: None,
        }
    }

    fn result(prefill: &str, decode: &str, pass: u8, outcome: Outcome) -> PairResult {
        PairResult {
            pair: Pair::new(prefill, decode),
            pass,
            run_id: format!("r-{prefill}-{decode}-{pass}"),
            duration_s: 3.0,
            finished_at: Some(format!("2026-11-29T02:0{pass}:00Z")),
            outcome,
        }
    }

    fn results(pairs: Vec<PairResult>) -> SweepResults {
        let nodes: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let mut r = SweepResults::new("s1".into(), Schedule::AllPairs, nodes.clone(), 60.0, Vec::new());
        r.pairs = pairs;
        r.node_verdicts = final_verdicts(&nodes, &r.pairs);
        r.complete = true;
        r
    }

    #[test]
    fn every_pair_that_ran_has_its_figures_transport_and_time() {
        let r = results(vec![
            result("a", "b", 1, measured(20e9, 3.0, Vec::new())),
            result("b", "c", 1, measured(21e9, 3.1, Vec::new())),
            result("c", "a", 1, measured(19e9, 2.9, Vec::new())),
        ]);
        let m = FabricMatrix::from_results(&r);
        assert_eq!(m.schema, MATRIX_SCHEMA);
        assert_eq!(m.pairs.len(), 3);
        let ab = &m.pairs[0];
        assert_eq!((ab.prefill_node.as_str(), ab.decode_node.as_str()), ("a", "b"));
        assert_eq!(ab.state, PairState::Measured);
        assert_eq!(ab.verdict, Some(VerdictStatus::Pass));
        assert_eq!(ab.bandwidth_bps, Some(20e9));
        assert_eq!(ab.latency_p50_us, Some(3.0));
        assert_eq!(ab.transports, ["rdma"]);
        assert_eq!(ab.measured_at.as_deref(), Some("2026-11-29T02:01:00Z"));
        assert!(m.nodes.iter().all(|n| n.status == NodeStatus::Pass), "{:?}", m.nodes);
    }

    #[test]
    fn a_pair_not_measured_is_in_the_matrix_without_figures() {
        let r = results(vec![
            result("a", "b", 1, measured(20e9, 3.0, Vec::new())),
            result(
                "b",
                "c",
                1,
                Outcome::Unschedulable {
                    node: Some("c".into()),
                    reason: "no GPU free".into(),
                },
            ),
            result(
                "c",
                "a",
                1,
                Outcome::Error {
                    reason: "crashed".into(),
                },
            ),
        ]);
        let m = FabricMatrix::from_results(&r);
        let bc = m.pairs.iter().find(|p| p.prefill_node == "b").unwrap();
        assert_eq!(bc.state, PairState::Unschedulable);
        assert_eq!((bc.verdict, bc.bandwidth_bps, bc.latency_p50_us), (None, None, None));
        assert!(bc.transports.is_empty());
        let ca = m.pairs.iter().find(|p| p.prefill_node == "c").unwrap();
        assert_eq!(ca.state, PairState::Error);
        let json: serde_json::Value = serde_json::from_str(&m.to_json().unwrap()).unwrap();
        let row = &json["pairs"][1];
        assert_eq!(row["state"], "unschedulable");
        assert!(row.get("bandwidth_bps").is_none(), "no figure, not a zero: {row}");
    }

    #[test]
    fn a_distrusted_latency_is_left_out_and_says_why() {
        let r = results(vec![result(
            "a",
            "b",
            1,
            measured(20e9, 8000.0, vec![QualityKind::ImplausibleLatency]),
        )]);
        let m = FabricMatrix::from_results(&r);
        assert_eq!(m.pairs[0].latency_p50_us, None);
        assert_eq!(m.pairs[0].latency_distrusted, Some(QualityKind::ImplausibleLatency));
        let json = m.to_json().unwrap();
        assert!(
            json.contains("\"latency_distrusted\": \"implausible_latency\""),
            "{json}"
        );
    }

    #[test]
    fn a_second_pass_run_of_the_same_ordered_pair_replaces_the_first() {
        let r = results(vec![
            result(
                "a",
                "b",
                1,
                Outcome::Error {
                    reason: "crashed".into(),
                },
            ),
            result("b", "a", 1, measured(20e9, 3.0, Vec::new())),
            result("a", "b", 2, measured(18e9, 3.2, Vec::new())),
        ]);
        let m = FabricMatrix::from_results(&r);
        assert_eq!(m.pairs.len(), 2, "ordered pairs, each once: {:?}", m.pairs);
        let ab = &m.pairs[0];
        assert_eq!(
            (ab.pass, ab.state, ab.bandwidth_bps),
            (2, PairState::Measured, Some(18e9))
        );
        assert_eq!(m.pairs[1].prefill_node, "b", "b→a is its own entry");
    }

    #[test]
    fn the_matrix_round_trips_and_a_node_without_a_verdict_is_unknown() {
        let mut r = results(vec![result("a", "b", 1, measured(20e9, 3.0, Vec::new()))]);
        r.node_verdicts.retain(|v| v.node != "c");
        r.complete = false;
        let m = FabricMatrix::from_results(&r);
        let back: FabricMatrix = serde_json::from_str(&m.to_json().unwrap()).unwrap();
        assert_eq!(back, m);
        assert!(!back.complete);
        let c = back.nodes.iter().find(|n| n.node == "c").unwrap();
        assert_eq!(c.status, NodeStatus::Unknown);
    }
}
