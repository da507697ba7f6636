//! `--metrics FILE` and `--trtllm-csv`: every figure against the one computed by hand from the
//! fixture; the comparison against a history of `pair --kv-shape` runs; bad input.

use crate::common::*;
use icb_core::checks::ProbeReport;
use icb_core::model::Status;
use icb_core::serving::EngineFigures;
use icb_serving::{KvSpec, Options, ServingError, Source, probe_serving};
use std::time::Duration;

fn opts(sources: Vec<Source>, tp: u32) -> Options {
    Options {
        sources,
        window: "5m".into(),
        history: None,
        prefill: None,
        decode: None,
        tp,
        op: None,
        line_rate_gbit: None,
        kv: None,
        deadline: Duration::from_secs(5),
    }
}

fn file(name: &str) -> Source {
    Source::MetricsFile(fixture(name))
}

fn engines(r: &ProbeReport) -> &[EngineFigures] {
    &r.serving.as_ref().unwrap().engines
}

fn checks<'a>(r: &'a ProbeReport, id: &str) -> Vec<&'a icb_core::checks::Check> {
    r.checks.iter().filter(|c| c.id == id).collect()
}

#[test]
fn vllm_tp1_figures_match_the_hand_computed_ones() {
    let r = probe_serving(&opts(vec![file("vllm_tp1.prom")], 1)).unwrap();
    let [f] = engines(&r) else { panic!("{:?}", engines(&r)) };
    assert_eq!(
        (f.engine.as_str(), f.op.as_str(), f.transfers, f.ranks_pooled),
        ("vllm-nixl", "read", 10.0, 1)
    );
    // 1 342 177 280 B over 10 transfers taking 0.5 s, posting 0.02 s, 40 960 descriptors.
    close(f.bytes_per_transfer, 134_217_728.0);
    close(f.bytes_per_request, 134_217_728.0);
    close(f.descriptors_per_transfer, 4096.0);
    close(f.transfer_ms, 50.0);
    close(f.post_ms, 2.0);
    close(f.rank_gbps, 1_342_177_280.0 / 0.5 / 1e9);
    close(f.pair_gbps, 2.684_354_56);
    assert_eq!(f.failures, 1.0);
    assert_eq!(checks(&r, "serving.failures")[0].status, Status::Warn);
    assert!(checks(&r, "serving.baseline")[0].detail.contains("not compared"));
    assert!(
        r.verdict
            .starts_with("the engines' KV-transfer figures were read; none was compared"),
        "{}",
        r.verdict
    );
    assert!(r.serving.as_ref().unwrap().basis.contains("GB/s = 10^9"));
}

#[test]
fn vllm_tp2_is_one_ranks_average_and_the_pair_carries_both() {
    let r = probe_serving(&opts(vec![file("vllm_tp2.prom")], 2)).unwrap();
    let [f] = engines(&r) else { panic!() };
    assert_eq!((f.transfers, f.ranks_pooled), (20.0, 2));
    close(f.bytes_per_transfer, 67_108_864.0);
    close(f.bytes_per_request, 134_217_728.0);
    close(f.descriptors_per_transfer, 4096.0);
    close(f.transfer_ms, 20.0);
    close(f.post_ms, 1.0);
    close(f.rank_gbps, 3.355_443_2);
    close(f.pair_gbps, 6.710_886_4);
    assert!(
        f.defects.iter().any(|d| d.contains("pools its 2 TP ranks")),
        "{:?}",
        f.defects
    );
}

#[test]
fn sglang_mib_and_gib_are_turned_into_bytes_and_gb() {
    let r = probe_serving(&opts(vec![file("sglang.prom")], 2)).unwrap();
    let [r0, r1] = engines(&r) else {
        panic!("{:?}", engines(&r))
    };
    assert!(r0.series.contains("tp_rank=0") && r1.series.contains("tp_rank=1"));
    assert_eq!((r0.engine.as_str(), r0.op.as_str()), ("sglang", "write"));
    close(r0.bytes_per_transfer, 64.0 * 1_048_576.0);
    close(r0.bytes_per_request, 128.0 * 1_048_576.0);
    close(r0.transfer_ms, 40.0);
    // SGLang says 1.5625 "GB/s" (GiB/s); in GB/s it is 67 108 864 B / 0.04 s.
    close(r0.rank_gbps, 1.677_721_6);
    close(r0.pair_gbps, 3.355_443_2);
    close(r1.rank_gbps, 1.342_177_28);
    assert!(r0.defects.iter().any(|d| d.contains("GiB/s")) && r0.defects.iter().any(|d| d.contains("Mooncake")));
}

#[test]
fn trtllm_csv_bits_are_bytes_and_ranks_merge_by_min_start_max_end() {
    let dir = fixture("trtllm");
    let r = probe_serving(&opts(vec![Source::TrtllmCsv(vec![dir])], 2)).unwrap();
    let [r0, r1] = engines(&r) else {
        panic!("{:?}", engines(&r))
    };
    assert_eq!(
        (r0.series.as_str(), r0.op.as_str(), r0.transfers),
        ("rank_0_send.csv", "write", 2.0)
    );
    // rank 0: requests of 2e7 and 4e7 B (8 Gb/s × 10 ms = 1e7 B), windows 20 and 20 ms.
    close(r0.bytes_per_transfer, 3e7);
    close(r0.transfer_ms, 20.0);
    close(r0.rank_gbps, 1.5);
    close(r1.transfer_ms, 25.0);
    close(r1.rank_gbps, 1.2);
    // merged: request 1 is 0..22 ms with 4e7 B, request 2 is 0..30 ms with 8e7 B.
    close(r0.bytes_per_request, 6e7);
    close(r0.pair_gbps, 1.2e8 / 0.052 / 1e9);
    assert!(r0.defects.iter().any(|d| d.contains("bits")));
}

#[test]
fn nixl_telemetry_counters_are_per_request_and_say_they_lack_a_transport() {
    let r = probe_serving(&opts(vec![file("nixl_telemetry.prom")], 1)).unwrap();
    let [f] = engines(&r) else { panic!("{:?}", engines(&r)) };
    assert_eq!(
        (f.engine.as_str(), f.op.as_str(), f.transfers),
        ("nixl-telemetry", "read", 10.0)
    );
    // 2e9 B received in 10 requests over 1 000 000 µs, posting 50 000 µs.
    close(f.bytes_per_transfer, 2e8);
    close(f.transfer_ms, 100.0);
    close(f.post_ms, 5.0);
    close(f.rank_gbps, 2.0);
    assert!(f.defects.iter().any(|d| d.contains("no transport label")));
}

/// node-a → node-b: the TP 1 shape (32 KiB × 4096) holding its baseline, the TP 2 shape
/// (16 KiB × 4096) fallen to 75 % of it.
fn history(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("history.db");
    write_history(
        &path,
        &[
            (
                kv_case("node-a", "node-b", "get_bw", 32768, 4096),
                vec![20e9, 20e9, 19.5e9],
            ),
            (kv_case("node-a", "node-b", "get_bw", 16384, 4096), vec![4e9, 4e9, 3e9]),
        ],
    );
    path
}

fn compared(source: &str, tp: u32, kv: Option<KvSpec>, history: &std::path::Path) -> ProbeReport {
    let mut o = opts(vec![file(source)], tp);
    o.history = Some(history.to_path_buf());
    o.prefill = Some("node-a".into());
    o.decode = Some("node-b".into());
    o.kv = kv;
    probe_serving(&o).unwrap()
}

fn spec(reads: Vec<(u64, u64)>) -> KvSpec {
    KvSpec {
        flags: "--kv-shape llama-3.1-8b --isl 1024 --page-size 16 --kv-dtype bf16 --prefill-tp 1 --decode-tp 1".into(),
        reads,
    }
}

#[test]
fn the_engine_is_judged_against_the_fabric_for_the_same_shape() {
    let dir = tempfile::tempdir().unwrap();
    let h = history(dir.path());
    for kv in [Some(spec(vec![(32768, 4096)])), None] {
        let r = compared("vllm_tp1.prom", 1, kv, &h);
        let b = engines(&r)[0].fabric.clone().expect("a baseline");
        assert_eq!(b.case, "get_bw cuda-cuda 4096 × 32 KiB (nixl)");
        assert_eq!((b.latest_gbps, b.baseline_gbps, b.runs), (19.5, Some(20.0), 3));
        close(Some(b.engine_ratio), 2.684_354_56 / 19.5);
        assert_eq!(checks(&r, "serving.fabric")[0].status, Status::Ok);
        let engine = checks(&r, "serving.engine")[0];
        assert_eq!(engine.status, Status::Warn);
        assert!(
            engine
                .detail
                .starts_with("engine reaches 14 % of what the fabric delivers for this shape")
                && engine
                    .detail
                    .contains("post time (2.000 ms of 50.000 ms per transfer) / descriptors (4096 per transfer)"),
            "{}",
            engine.detail
        );
        assert_eq!(r.exit_code(), 0);
    }
}

#[test]
fn a_fabric_below_its_baseline_fails_on_the_fabric_side() {
    let dir = tempfile::tempdir().unwrap();
    let r = compared(
        "vllm_tp2.prom",
        2,
        Some(spec(vec![(16384, 4096), (16384, 4096)])),
        &history(dir.path()),
    );
    let fabric = checks(&r, "serving.fabric")[0];
    assert_eq!(fabric.status, Status::Fail);
    assert!(fabric.detail.starts_with("fabric below its baseline: get_bw cuda-cuda 4096 × 16 KiB (nixl) measured 3.00 GB/s, its baseline 4.00 GB/s (75 %)"), "{}", fabric.detail);
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn a_missing_baseline_gives_the_exact_command() {
    let dir = tempfile::tempdir().unwrap();
    let h = history(dir.path());
    let r = compared("sglang.prom", 2, Some(spec(vec![(16384, 4096)])), &h);
    let want = format!(
        "ic-bench pair --prefill node/node-a --decode node/node-b --kv-shape llama-3.1-8b --isl 1024 --page-size 16 --kv-dtype bf16 --prefill-tp 1 --decode-tp 1 --kv-op write --engine nixl --history {}",
        h.display()
    );
    let missing = checks(&r, "serving.baseline");
    assert_eq!(missing.len(), 2);
    assert_eq!(missing[0].status, Status::Skipped);
    assert_eq!(missing[0].detail, format!("no baseline for this pair: run `{want}`"));
    assert_eq!(r.next_steps, vec![want]);
    assert!(engines(&r).iter().all(|f| f.fabric.is_none()));
}

#[test]
fn a_series_without_a_rate_asks_for_no_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let r = compared("vllm_no_bytes.prom", 1, None, &history(dir.path()));
    let engine = checks(&r, "serving.engine")[0];
    assert_eq!(engine.status, Status::Skipped);
    assert!(
        engine.detail.starts_with("no transfer rate in the window (4 transfers"),
        "{}",
        engine.detail
    );
    assert!(checks(&r, "serving.baseline").is_empty() && r.next_steps.is_empty());
}

#[test]
fn a_figure_above_the_line_rate_is_a_metric_bug() {
    let mut o = opts(vec![file("vllm_tp1.prom")], 1);
    o.line_rate_gbit = Some(16.0);
    let r = probe_serving(&o).unwrap();
    let bug = checks(&r, "serving.metric_defect")[0];
    assert_eq!(bug.status, Status::Fail);
    assert!(
        bug.detail
            .contains("above the NIC's line rate of 2.00 GB/s (16 Gb/s): a metric bug, not a fast fabric"),
        "{}",
        bug.detail
    );
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn other_names_and_missing_metrics_are_one_line_each() {
    let r = probe_serving(&opts(
        vec![file("vllm_other_names.prom"), file("vllm_no_bytes.prom")],
        1,
    ))
    .unwrap();
    let names = checks(&r, "serving.metric_names");
    assert_eq!(names.len(), 1);
    assert!(
        names[0].detail.contains("vllm:nixl_transfer_duration_seconds_count"),
        "{}",
        names[0].detail
    );
    let missing = checks(&r, "serving.metric_missing");
    assert_eq!(missing.len(), 1);
    assert!(
        missing[0]
            .detail
            .contains("vllm:nixl_bytes_transferred_sum is not in it")
    );
    let [f] = engines(&r) else { panic!() };
    assert_eq!((f.bytes_per_transfer, f.rank_gbps), (None, None));
    close(f.transfer_ms, 50.0);
    assert!(r.checks.iter().all(|c| !c.detail.contains('\n')));
}

#[test]
fn nothing_readable_is_an_error_with_one_line_per_source() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = Source::Endpoint(format!("http://127.0.0.1:{closed}/metrics"));
    let e = probe_serving(&opts(
        vec![down.clone(), file("vllm_other_names.prom"), file("nope.prom")],
        1,
    ))
    .unwrap_err();
    let ServingError::NothingRead(lines) = &e else {
        panic!("{e}")
    };
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].starts_with("--endpoint http://127.0.0.1:") && lines[0].contains("unreachable"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("no KV-transfer metric"));
    assert!(lines[2].starts_with("--metrics ") && lines[2].contains("nope.prom"));
    // One source down beside a readable one: a warning, and the rest judged.
    let r = probe_serving(&opts(vec![down, file("vllm_tp1.prom")], 1)).unwrap();
    assert_eq!(checks(&r, "serving.source")[0].status, Status::Warn);
    assert_eq!(engines(&r).len(), 1);
}

#[test]
fn a_history_that_is_not_there_is_named() {
    let mut o = opts(vec![file("vllm_tp1.prom")], 1);
    o.history = Some("/nonexistent/history.db".into());
    o.prefill = Some("a".into());
    o.decode = Some("b".into());
    let e = probe_serving(&o).unwrap_err();
    assert_eq!(e.to_string(), "--history /nonexistent/history.db: no such file");
}
