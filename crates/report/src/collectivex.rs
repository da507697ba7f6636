//! `-o collectivex` / `--export-collectivex FILE` (issue 42): a `pair --kv-shape` report as rows
//! shaped like SemiAnalysis CollectiveX's `kv-transfer` suite (`collectivex/bench/run_kv.py`:
//! one row per kind, operation and burst size), so ic-bench's figures can be laid beside the
//! public per-GPU ones; each row keeps what ic-bench alone has (the data path UCX reported).
//! Field by field: docs/collectivex.md. Only a report with a `kv` section has rows.

use crate::format::{ExportError, Exporter};
use icb_core::checks::ProbeReport;
use icb_core::model::{GateReport, PairReport};
use icb_core::{KvOutcome, KvPeer, KvRowCheck, KvRowTimes, KvSpread};
use icb_sweep::SweepResults;
use serde::Serialize;

/// The format's name, as `-o` spells it.
const NAME: &str = "collectivex";

pub struct CollectivexExporter;

/// The document: CollectiveX's case envelope reduced to what ic-bench knows.
#[derive(Debug, Serialize)]
struct Doc {
    suite: &'static str,
    /// Who wrote it (CollectiveX's rows come from its own harness).
    generator: String,
    implementation: Implementation,
    measurement: Measurement,
}

#[derive(Debug, Serialize)]
struct Implementation {
    /// `nixl` or `ucx` (ic-bench's UCX engine).
    name: String,
}

#[derive(Debug, Serialize)]
struct Measurement {
    payload_unit: &'static str,
    rows: Vec<Row>,
}

/// One CollectiveX `kv-transfer` row.
#[derive(Debug, Serialize)]
struct Row {
    kind: &'static str,
    preset: String,
    isl: u64,
    page_tokens: Option<u32>,
    page_bytes: Option<u64>,
    /// The model's layers (absent from reports written before ic-bench recorded them).
    layers: Option<u32>,
    descs: u64,
    req_bytes: u64,
    batch: u32,
    op: &'static str,
    prep_ms: Option<f64>,
    latency_ms: Pcts,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_ms: Option<Pcts>,
    gbps_p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gbps_p50_incl_prep: Option<f64>,
    verify: Verify,
    /// ic-bench's own: the data paths the row's initiators reported.
    data_paths: Vec<String>,
}

/// CollectiveX's percentile object (`p50`, `p95`, `min`, `max`, `n`), with ic-bench's `p99`
/// besides where it has one; a figure not measured is left out.
#[derive(Debug, Default, Serialize)]
struct Pcts {
    #[serde(skip_serializing_if = "Option::is_none")]
    p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    p95: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    p99: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n: Option<u64>,
}

impl Pcts {
    /// A request's end to end over `n` repetitions: its p50 and p99, and the rest of its spread.
    fn request(p50: Option<f64>, p99: Option<f64>, spread: &KvSpread, n: Option<u64>) -> Pcts {
        Pcts {
            p50,
            p95: spread.p95,
            p99,
            min: spread.min,
            max: spread.max,
            n,
        }
    }
}

#[derive(Debug, Serialize)]
struct Verify {
    passed: bool,
    detail: String,
}

/// `pull` for READ (the decode side pulls), `push` for WRITE.
fn op(kv_op: &str) -> &'static str {
    if kv_op == "write" { "push" } else { "pull" }
}

/// GB/s (10^9 bytes) of `bytes` in `ms`.
fn gbps(bytes: f64, ms: Option<f64>) -> Option<f64> {
    ms.filter(|ms| *ms > 0.0).map(|ms| bytes / ms / 1e6)
}

fn verify(verified: bool, failure: Option<&str>) -> Verify {
    Verify {
        passed: verified && failure.is_none(),
        detail: match (verified, failure) {
            (_, Some(why)) => why.to_string(),
            (false, None) => "not verified".into(),
            (true, None) => String::new(),
        },
    }
}

fn data_paths(peers: &[KvPeer]) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for p in peers.iter().filter_map(|p| p.data_path.clone()) {
        if !paths.contains(&p) {
            paths.push(p);
        }
    }
    paths
}

/// The paged request of the main run: batch 1, its cold path's preparation as `prep_ms`.
fn paged_row(kv: &KvOutcome) -> Row {
    let prep_ms = kv.cold.as_ref().map(|c| c.prepare_ms);
    let bytes = kv.bytes_moved_per_request as f64;
    let failure = kv.peers.iter().find_map(|p| p.failure.as_deref());
    Row {
        kind: "paged",
        preset: kv.model.clone(),
        isl: kv.isl,
        page_tokens: Some(kv.page_size),
        page_bytes: kv.peers.first().map(|p| p.descriptor_bytes),
        layers: kv.layers,
        descs: kv.descriptors_per_request,
        req_bytes: kv.bytes_moved_per_request,
        batch: 1,
        op: op(&kv.op),
        prep_ms,
        latency_ms: Pcts::request(kv.request_ms_p50, kv.request_ms_p99, &kv.spread, kv.repetitions),
        request_ms: None,
        gbps_p50: gbps(bytes, kv.request_ms_p50),
        gbps_p50_incl_prep: prep_ms.and_then(|prep| gbps(bytes, kv.request_ms_p50.map(|ms| ms + prep))),
        verify: verify(!kv.peers.is_empty() && kv.peers.iter().all(|p| p.verified), failure),
        data_paths: data_paths(&kv.peers),
    }
}

/// Every row of a KV section: the paged request, its bursts of 2 and more (the burst of 1 is the
/// paged row), the other operation, the bulk row.
fn rows(kv: &KvOutcome) -> Vec<Row> {
    let paged = paged_row(kv);
    let like = |kind, batch, op| Row {
        kind,
        batch,
        op,
        prep_ms: None,
        gbps_p50_incl_prep: None,
        request_ms: None,
        page_tokens: paged.page_tokens,
        page_bytes: paged.page_bytes,
        preset: paged.preset.clone(),
        latency_ms: Pcts::default(),
        gbps_p50: None,
        verify: verify(false, None),
        data_paths: Vec::new(),
        ..paged_row(kv)
    };
    let bytes = kv.bytes_moved_per_request as f64;
    let mut rows = Vec::new();
    if let Some(b) = kv.bursts.as_ref().filter(|b| b.failure.is_none()) {
        for s in b.sizes.iter().filter(|s| s.requests > 1) {
            rows.push(Row {
                latency_ms: Pcts {
                    p50: Some(s.burst_ms_p50),
                    p95: Some(s.burst_ms_p95),
                    min: s.burst_ms_min,
                    max: s.burst_ms_max,
                    n: Some(s.repetitions),
                    ..Pcts::default()
                },
                request_ms: Some(Pcts {
                    p50: Some(s.request_ms_p50),
                    p95: Some(s.request_ms_p95),
                    min: s.request_ms_min,
                    max: s.request_ms_max,
                    n: Some(s.repetitions * u64::from(s.requests)),
                    ..Pcts::default()
                }),
                gbps_p50: Some(s.aggregate_bps / 1e9),
                verify: verify(b.verified, None),
                data_paths: b.data_paths.clone(),
                ..like("paged", s.requests, paged.op)
            });
        }
    }
    if let Some(o) = kv.directions.as_ref().map(|d| &d.other) {
        rows.push(fresh_ranks_row(&o.times, &o.check, bytes, like("paged", 1, op(&o.op))));
    }
    if let Some(b) = &kv.bulk {
        rows.push(Row {
            page_tokens: None,
            page_bytes: None,
            descs: b.descriptors_per_request,
            ..fresh_ranks_row(&b.times, &b.check, bytes, like("bulk", 1, paged.op))
        });
    }
    rows.insert(0, paged);
    rows
}

/// A row run on fresh ranks (the other operation, the bulk row): its request's times and rate
/// over `bytes`, and how it ended, over `base`.
fn fresh_ranks_row(times: &KvRowTimes, check: &KvRowCheck, bytes: f64, base: Row) -> Row {
    let (p50, p99) = (times.request_ms_p50, times.request_ms_p99);
    Row {
        latency_ms: Pcts::request(p50, p99, &times.spread, times.repetitions),
        gbps_p50: gbps(bytes, p50),
        verify: verify(check.verified, check.failure.as_deref()),
        data_paths: check.data_paths.clone(),
        ..base
    }
}

fn unsupported(what: &'static str) -> ExportError {
    ExportError::Unsupported {
        format: NAME,
        what,
        instead: match what {
            WITHOUT_KV => "table, json, junit, prometheus or svg (run pair --kv-shape for KV rows)",
            _ => "table, json or junit",
        },
    }
}

/// What a pair report with no KV section is, in the refusal.
const WITHOUT_KV: &str = "a pair report without --kv-shape";

impl Exporter for CollectivexExporter {
    fn pair(&self, r: &PairReport) -> Result<String, ExportError> {
        let kv = r.kv.as_deref().ok_or_else(|| unsupported(WITHOUT_KV))?;
        let doc = Doc {
            suite: "kv-transfer",
            generator: format!("{} {}", r.tool.name, r.tool.version),
            implementation: Implementation {
                name: r
                    .cases
                    .first()
                    .map_or_else(|| "unknown".to_string(), |c| c.run_by.engine.to_string()),
            },
            measurement: Measurement {
                payload_unit: "request-kv-bytes",
                rows: rows(kv),
            },
        };
        serde_json::to_string_pretty(&doc)
            .map(|mut s| {
                s.push('\n');
                s
            })
            .map_err(|e| ExportError::Serialize {
                format: NAME,
                detail: e.to_string(),
            })
    }

    fn probe(&self, _: &ProbeReport) -> Result<String, ExportError> {
        Err(unsupported("a probe report"))
    }

    fn sweep(&self, _: &SweepResults) -> Result<String, ExportError> {
        Err(unsupported("a sweep"))
    }

    fn gate(&self, _: &GateReport) -> Result<String, ExportError> {
        Err(unsupported("a gate report"))
    }
}
