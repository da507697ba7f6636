//! `ic-bench gate --kv-shape` on the emulated cluster (root: namespaces; CI runs as root): the
//! gate's pair step is the deployment's own KV transfer (the recipe's model, TP sizes and block
//! size) on `pair`'s per-rank model, on node targets and on worker pods; `--max-kv-ms` judges it;
//! nothing is left.

use crate::pair_kube_support as support;

use support::kv::*;
use support::*;

/// `gate --kv-shape` with no model on the command line: the recipe's vLLM arguments name
/// Llama-3.1-8B-Instruct, prefill TP 2, decode TP 1, block 16, so the gate's pair step is that
/// gather (2 reads of 128 descriptors of 16 KiB at 32 tokens) on the per-rank model: 2 prefill
/// ranks in gpu-1's whole-node pod, 1 decode rank in gpu-2's, all at once, every block verified;
/// its default TCP control (issue 35) is the same transfer forced to TCP, caught; and
/// `--max-kv-ms` judges it. No pod and no rank process is left.
#[test]
fn gate_kv_shape_measures_the_recipes_own_transfer() {
    let Some(cluster) = cluster("gate_kv_shape_measures_the_recipes_own_transfer") else {
        return;
    };
    let gate = |extra: &[&str], code| gate_kv(&cluster, ("node/gpu-1", "node/gpu-2"), extra, code);
    let stdout = gate(&[], 0);
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
    // The per-rank model, not one process pair per read: the same checks as `pair`'s.
    let (pair, outcome, engine) = gate_pair(&report);
    assert_ranks_on_two_nodes(&pair, &outcome, (2, 1), engine);
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("one process per TP rank in two whole-node bench pods"),
        "{notes}"
    );
    // The gate's default TCP control ran on the KV transfer itself (every rank forced to TCP)
    // and was caught; its rate is the estimate's.
    assert_eq!(pair.controls.len(), 1, "{:?}", pair.controls);
    assert_eq!(pair.controls[0].kind, icb_core::model::ControlKind::Tcp);
    assert!(pair.controls[0].caught, "{:?}", pair.controls);
    assert!(
        outcome.summary.ends_with("GB/s measured by the TCP control)"),
        "{}",
        outcome.summary
    );
    // A budget no request meets fails the gate (exit 1), in TTFT terms.
    let stdout = gate(&["--max-kv-ms", "0.000001"], 1);
    assert!(stdout.contains("over --max-kv-ms"), "{stdout}");
    assert_nothing_left(&cluster);
}

/// `gate --kv-shape` on worker pods (`pod/prefill-0`, `pod/decode-0`, running): the recipe's
/// shape (TP2 → TP1) moved per rank in bench pods modelled on the running workers, every block
/// verified, the report naming the workers; nothing left but them.
#[test]
fn gate_kv_shape_on_worker_pods_runs_per_rank_in_pods_modelled_on_them() {
    let Some(cluster) = cluster("gate_kv_shape_on_worker_pods_runs_per_rank_in_pods_modelled_on_them") else {
        return;
    };
    create_reference_pod(&cluster, worker_pod("prefill-0", "gpu-1"));
    create_reference_pod(&cluster, worker_pod("decode-0", "gpu-2"));
    let stdout = gate_kv(&cluster, ("pod/prefill-0", "pod/decode-0"), &[], 0);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let (pair, kv, engine) = gate_pair(&report);
    assert_eq!((kv.prefill_tp, kv.decode_tp), (2, 1));
    assert_ranks_on_two_nodes(&pair, &kv, (2, 1), engine);
    assert_eq!(pair.placement.prefill.modelled_on.as_deref(), Some("pod/prefill-0"));
    assert_eq!(pair.placement.decode.modelled_on.as_deref(), Some("pod/decode-0"));
    let notes = report["notes"].to_string();
    assert!(notes.contains("modelled on the workers"), "{notes}");
    assert_nothing_left(&cluster);
}

/// Issue 35: the gate's KV step runs the KV transfer's own TCP control; knobs-off does not run
/// with `--kv-shape`, and asking for it is one line, exit 2, before any cluster is reached.
#[test]
fn knobs_off_with_kv_shape_is_a_one_line_error() {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args([
        "gate",
        "--prefill",
        "node/a",
        "--decode",
        "node/b",
        "--kv-shape",
        "llama-3.1-8b",
    ])
    .args(["--control", "knobs-off", "--kubeconfig", "/nonexistent/kubeconfig"])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let out = wait_output(cmd.spawn().unwrap(), std::time::Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim(),
        "ic-bench: error: --control knobs-off does not run with --kv-shape (its control is tcp, run by default): drop knobs-off"
    );
}
