//! `ic-bench probe serving` through the binary: `--metrics FILE --history FILE` end to end with the
//! recorded vLLM, SGLang and TensorRT-LLM metrics, the figures as computed by hand, the exact
//! command for a missing baseline, the exports, and exit 2 where nothing could be read.

use assert_cmd::Command;
use icb_core::model::{CaseKey, EnvKey, Metric};
use icb_history::record::Row;
use icb_history::{History, RunKind, RunRecord, RunVerdict};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/serving")
        .join(name)
}

/// node-a → node-b: `pair --kv-shape llama-3.1-8b --isl 1024` (TP 1: 4096 descriptors of
/// 32 KiB) measured at 20, 20 and 19.5 GB/s.
fn history(dir: &Path) -> PathBuf {
    let path = dir.join("h.db");
    let mut h = History::open(&path, Duration::from_secs(10)).unwrap();
    for (i, v) in [20e9, 20e9, 19.5e9].into_iter().enumerate() {
        let case = CaseKey {
            prefill: "node-a".into(),
            decode: "node-b".into(),
            rail: None,
            test: "get_bw".into(),
            memory: "cuda-cuda".into(),
            size: 32768,
            blocks: Some(4096),
            direction: None,
            engine: "nixl".into(),
        };
        let run = RunRecord {
            run_id: format!("pair-{i}"),
            kind: RunKind::Pair,
            started_at: format!("2026-11-2{i}T00:00:00Z"),
            tool_version: "test".into(),
            verdict: RunVerdict::Pass,
            rows: vec![Row {
                case,
                env: EnvKey::default(),
                metric: Metric::BandwidthBps,
                value: v,
                status: "ok".into(),
            }],
            nodes: vec![],
        };
        h.record(&run, None).unwrap();
    }
    path
}

fn serving(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "serving"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn near(v: &serde_json::Value, want: f64) -> bool {
    v.as_f64()
        .is_some_and(|x| (x - want).abs() <= 1e-9 * want.abs().max(1.0))
}

#[test]
fn vllm_metrics_against_the_history_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let h = history(dir.path());
    let metrics = fixture("vllm_tp1.prom");
    let (code, out, err) = serving(&[
        "--metrics",
        metrics.to_str().unwrap(),
        "--history",
        h.to_str().unwrap(),
        "--prefill",
        "node-a",
        "--decode",
        "node-b",
        "--kv-shape",
        "llama-3.1-8b",
        "--isl",
        "1024",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["schema"].as_str(), v["kind"].as_str()),
        (Some("ic-bench.probe/v1"), Some("serving"))
    );
    let f = &v["serving"]["engines"][0];
    assert_eq!(f["engine"], "vllm-nixl");
    assert!(near(&f["bytes_per_transfer"], 134_217_728.0) && near(&f["descriptors_per_transfer"], 4096.0));
    assert!(near(&f["transfer_ms"], 50.0) && near(&f["post_ms"], 2.0));
    assert!(near(&f["rank_gbps"], 2.684_354_56), "{f}");
    assert_eq!(f["fabric"]["case"], "get_bw cuda-cuda 4096 × 32 KiB (nixl)");
    assert!(near(&f["fabric"]["engine_ratio"], 2.684_354_56 / 19.5));
    let engine = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "serving.engine")
        .unwrap();
    assert!(
        engine["detail"]
            .as_str()
            .unwrap()
            .starts_with("engine reaches 14 % of what the fabric delivers")
    );
}

#[test]
fn sglang_without_a_baseline_names_the_exact_command_and_trtllm_csv_reads() {
    let dir = tempfile::tempdir().unwrap();
    let h = history(dir.path());
    let (code, out, err) = serving(&[
        "--metrics",
        fixture("sglang.prom").to_str().unwrap(),
        "--trtllm-csv",
        fixture("trtllm").to_str().unwrap(),
        "--history",
        h.to_str().unwrap(),
        "--prefill",
        "node-a",
        "--decode",
        "node-b",
        "--kv-shape",
        "llama-3.1-8b",
        "--isl",
        "1024",
        "--prefill-tp",
        "2",
        "--decode-tp",
        "2",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let want = format!(
        "ic-bench pair --prefill node/node-a --decode node/node-b --kv-shape llama-3.1-8b --isl 1024 --page-size 16 --kv-dtype bf16 --prefill-tp 2 --decode-tp 2 --kv-op write --engine nixl --history {}",
        h.display()
    );
    assert_eq!(v["next_steps"], serde_json::json!([want]));
    let engines = v["serving"]["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 4, "two SGLang TP ranks, two TensorRT-LLM rank files");
    assert!(near(&engines[0]["rank_gbps"], 1.677_721_6) && near(&engines[0]["pair_gbps"], 3.355_443_2));
    assert!(near(&engines[2]["rank_gbps"], 1.5) && near(&engines[2]["pair_gbps"], 1.2e8 / 0.052 / 1e9));
}

#[test]
fn the_exports_carry_the_figures() {
    let metrics = fixture("vllm_tp2.prom");
    let (code, out, _) = serving(&["--metrics", metrics.to_str().unwrap(), "--tp", "2", "-o", "prometheus"]);
    assert_eq!(code, 0);
    assert!(out.contains("icbench_probe_serving_gbps{engine=\"vllm-nixl\""), "{out}");
    assert!(out.contains("scope=\"pair\"} 6.7108864"), "{out}");
    let (_, table, _) = serving(&["--metrics", metrics.to_str().unwrap(), "--tp", "2"]);
    assert!(table.contains("engine figures (per rank and per node pair"), "{table}");
    let (_, junit, _) = serving(&["--metrics", metrics.to_str().unwrap(), "-o", "junit"]);
    assert!(junit.contains("serving.baseline"), "{junit}");
}

#[test]
fn nothing_readable_exits_2_with_one_line_per_source() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{closed}/metrics");
    let (code, out, err) = serving(&[
        "--endpoint",
        &endpoint,
        "--metrics",
        fixture("vllm_other_names.prom").to_str().unwrap(),
        "--timeout",
        "5s",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(&format!("--endpoint {endpoint}: unreachable")), "{err}");
    assert!(err.contains("no KV-transfer metric"), "{err}");
    assert!(!err.contains("panicked"));
}
