//! `ic-bench pair --prefill node/A --decode node/B --kv-shape MODEL …` on the emulated cluster
//! (root: namespaces; CI runs as root): one pair of bench pods per rank-to-rank read, all at
//! once, the descriptors of the geometry moved over NIXL (TCP over the emulated nodes' veths)
//! and every block verified at its destination on every peer; no pod is left.

#[path = "pair_kube_support/mod.rs"]
mod support;

use icb_core::{EngineKind, KvOutcome, PairReport, VerdictStatus};
use std::time::Duration;
use support::*;

/// Llama-3.1-8B, 32 tokens (2 blocks), TP2 → TP1 (a > b): the one decode rank gathers prefill
/// ranks 0 and 1, each 32 × 2 × 2 = 128 descriptors of 4 heads × 4096 B = 16 KiB, the second
/// landing 16 KiB into every 32 KiB decode block; 4 MiB in all, the request's whole KV.
#[test]
fn a_gather_across_two_nodes_moves_and_verifies_every_block() {
    let Some(cluster) = cluster("a_gather_across_two_nodes_moves_and_verifies_every_block") else {
        return;
    };
    let args = [
        "--prefill",
        "node/gpu-1",
        "--decode",
        "node/gpu-2",
        "-o",
        "json",
        "--kv-shape",
        "llama-3.1-8b",
        "--isl",
        "32",
        "--prefill-tp",
        "2",
        "--decode-tp",
        "1",
        "--allow-tcp",
        "--min-host-bw",
        "0.001",
        "--min-time",
        "0.1",
        "--max-time",
        "0.5",
        "--warmup",
        "2",
    ];
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    assert_eq!(run.code, 0, "{run:#?}");
    let report: PairReport = serde_json::from_str(&run.stdout).expect("a JSON report");
    let kv: KvOutcome = *report.kv.clone().expect("a kv section");
    assert_eq!(kv.kv_bytes_per_request, 4 << 20);
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    let pairs: Vec<(u32, u32, u64, u64)> = kv
        .peers
        .iter()
        .map(|p| (p.decode_rank, p.prefill_rank, p.descriptors, p.descriptor_bytes))
        .collect();
    assert_eq!(pairs, [(0, 0, 128, 16_384), (0, 1, 128, 16_384)]);
    for p in &kv.peers {
        assert!(p.verified && p.failure.is_none(), "{p:?}");
        assert!(p.request_ms_p50.is_some() && p.repetitions >= 1, "{p:?}");
        // Two nodes joined by veths: the bytes went over TCP.
        assert!(p.data_path.as_deref().is_some_and(|d| d.contains("tcp")), "{p:?}");
    }
    assert!(report.cases.iter().all(|c| c.run_by.engine == EngineKind::Nixl));
    assert_ne!(report.verdict.status, VerdictStatus::Fail, "{:?}", report.verdict);
    // Two pairs of bench pods (one per read), READ: the initiator (client) on the decode node.
    let pods = run.created_pods();
    assert_eq!(
        pods.len(),
        4,
        "{:?}",
        pods.iter().map(|p| p.metadata.name.clone()).collect::<Vec<_>>()
    );
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        // Pinned by a node-affinity term on the node's metadata.name.
        let affinity = serde_json::to_string(&pod.spec.as_ref().and_then(|s| s.affinity.clone())).unwrap();
        let want = if name.ends_with("-client") {
            "\"gpu-2\""
        } else {
            "\"gpu-1\""
        };
        assert!(affinity.contains(want), "{name}: {affinity}");
    }
    assert!(leftover_bench_pods(&cluster).is_empty());
}

/// `gate --kv-shape` with no model on the command line: the recipe's vLLM arguments name
/// Llama-3.1-8B-Instruct, prefill TP 2, decode TP 1, block 16, so the gate's pair step is that
/// gather (2 reads of 128 descriptors of 16 KiB at 32 tokens), and `--max-kv-ms` judges it.
#[test]
fn gate_kv_shape_measures_the_recipes_own_transfer() {
    let Some(cluster) = cluster("gate_kv_shape_measures_the_recipes_own_transfer") else {
        return;
    };
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate/kv.yaml");
    let gate = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.arg("gate")
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig_path())
            .args(["--recipe", fixture, "--prefill", "node/gpu-1", "--decode", "node/gpu-2"])
            .args([
                "--allow-tcp",
                "--min-host-bw",
                "0.001",
                "--no-node-probe",
                "--budget",
                "120s",
            ])
            .args(["-o", "json", "--kv-shape", "--isl", "32"])
            .args(extra)
            .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        wait_output(cmd.spawn().unwrap(), Duration::from_secs(200))
    };
    let out = gate(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let kv = &report["pair"]["kv"];
    assert_eq!(kv["model"], "llama-3.1-8b", "{report}");
    assert_eq!(
        (kv["prefill_tp"].as_u64(), kv["decode_tp"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(kv["kv_bytes_per_request"], 4 << 20);
    for p in kv["peers"].as_array().unwrap() {
        assert_eq!(p["verified"], true, "{p}");
        assert_eq!(p["descriptors"], 128, "{p}");
    }
    // A budget no request meets fails the gate (exit 1), in TTFT terms.
    let out = gate(&["--max-kv-ms", "0.000001"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("over --max-kv-ms"), "{stdout}");
    assert!(leftover_bench_pods(&cluster).is_empty());
}
