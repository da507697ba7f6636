//! The engines' KV-transfer metrics, read from their own definitions, translated to the one
//! basis of [`icb_core::serving::SERVING_BASIS`]:
//!
//! - vLLM's NIXL connector (vLLM main, `nixl/stats.py`: `NixlKVConnectorStats`,
//!   `NixlPromMetrics`): histograms `vllm:nixl_xfer_time_seconds`, `vllm:nixl_post_time_seconds`
//!   (seconds), `vllm:nixl_bytes_transferred` (bytes), `vllm:nixl_num_descriptors`, one
//!   observation per rank-level transfer, with every TP rank's observations pooled into the one
//!   engine's series; counters `vllm:nixl_num_failed_transfers`, `…_failed_notifications`.
//! - SGLang (`srt/metrics/collector.py`): `sglang:kv_transfer_latency_ms`,
//!   `sglang:kv_transfer_total_mb` (MiB: bytes / 2^20), `sglang:kv_transfer_speed_gb_s`
//!   (MiB / 1024 / s: GiB/s), per `tp_rank`, on the prefill side; gauges of the most recent
//!   request in 2025 releases, histograms in later ones (both read).
//! - NIXL's Prometheus telemetry exporter (`src/plugins/telemetry/prometheus`): counters
//!   `agent_tx_bytes_total`, `agent_rx_bytes_total`, `agent_{tx,rx}_requests_num_total`,
//!   `agent_xfer_time_total`, `agent_xfer_post_time_total` (microseconds), labelled by hostname
//!   and agent name only.

use crate::expo::Sample;
use icb_core::serving::EngineFigures;
use std::collections::{BTreeMap, BTreeSet};

/// What the caller knows of the deployment.
#[derive(Debug, Clone)]
pub struct Context {
    /// Ranks on the initiating side of the pair (vLLM: the decode worker's TP; SGLang: the
    /// prefill worker's).
    pub tp: u32,
    /// `read` or `write`, when given; otherwise each engine's own way.
    pub op: Option<String>,
}

/// A metric an engine family should carry but this source lacks, or names of another version.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    Missing { engine: &'static str, metric: String },
    OtherNames { engine: &'static str, seen: Vec<String> },
}

/// Values by (name, series).
struct Index<'a> {
    values: BTreeMap<(&'a str, String), f64>,
}

impl<'a> Index<'a> {
    fn new(samples: &'a [Sample]) -> Index<'a> {
        let mut values = BTreeMap::new();
        for s in samples {
            if s.labels.contains_key("le") || !s.value.is_finite() {
                continue;
            }
            *values.entry((s.name.as_str(), s.series())).or_insert(0.0) += s.value;
        }
        Index { values }
    }

    fn get(&self, name: &str, series: &str) -> Option<f64> {
        self.values.get(&(name, series.to_string())).copied()
    }

    /// The first of `names` this series carries (engine releases rename counters: with and
    /// without `_total`).
    fn any(&self, names: &[&str], series: &str) -> Option<f64> {
        names.iter().find_map(|n| self.get(n, series))
    }

    fn series_of(&self, name: &str) -> Vec<String> {
        self.values
            .keys()
            .filter(|(n, _)| *n == name)
            .map(|(_, s)| s.clone())
            .collect()
    }

    fn names(&self) -> BTreeSet<&'a str> {
        self.values.keys().map(|(n, _)| *n).collect()
    }
}

const VLLM_XFER: &str = "vllm:nixl_xfer_time_seconds";
const VLLM_POST: &str = "vllm:nixl_post_time_seconds";
const VLLM_BYTES: &str = "vllm:nixl_bytes_transferred";
const VLLM_DESCS: &str = "vllm:nixl_num_descriptors";
const VLLM_FAILED: [&str; 2] = [
    "vllm:nixl_num_failed_transfers_total",
    "vllm:nixl_num_failed_notifications_total",
];
const SGLANG_LATENCY: &str = "sglang:kv_transfer_latency_ms";
const SGLANG_MB: &str = "sglang:kv_transfer_total_mb";
const SGLANG_SPEED: &str = "sglang:kv_transfer_speed_gb_s";
const SGLANG_FAILED: &str = "sglang:num_transfer_failed_reqs_total";

/// Every metric name `probe serving` reads, and whether Prometheus should take its increase over
/// the window (counters, histogram parts) or its last value (gauges).
pub fn wanted_names() -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for h in [VLLM_XFER, VLLM_POST, VLLM_BYTES, VLLM_DESCS] {
        out.push((format!("{h}_sum"), true));
        out.push((format!("{h}_count"), true));
    }
    out.extend(VLLM_FAILED.iter().map(|n| (n.to_string(), true)));
    for g in [SGLANG_LATENCY, SGLANG_MB, SGLANG_SPEED] {
        out.push((g.to_string(), false));
        out.push((format!("{g}_sum"), true));
        out.push((format!("{g}_count"), true));
    }
    out.push((SGLANG_FAILED.to_string(), true));
    for c in NIXL_COUNTERS {
        out.push((c.to_string(), true));
    }
    out
}

const NIXL_COUNTERS: [&str; 8] = [
    "agent_tx_bytes_total",
    "agent_rx_bytes_total",
    "agent_tx_requests_num_total",
    "agent_rx_requests_num_total",
    "agent_xfer_time_total",
    "agent_xfer_post_time_total",
    "agent_errors_total",
    "agent_xfer_time_us_count",
];

/// Every engine's figures in `samples`, and what is missing or named otherwise.
pub fn read(samples: &[Sample], ctx: &Context) -> (Vec<EngineFigures>, Vec<Finding>) {
    let idx = Index::new(samples);
    let mut figures = Vec::new();
    let mut findings = Vec::new();
    vllm(&idx, ctx, &mut figures, &mut findings);
    sglang(&idx, ctx, &mut figures, &mut findings);
    nixl_telemetry(&idx, ctx, &mut figures);
    (figures, findings)
}

fn blank(engine: &str, metrics: &str, series: String, op: String, transfers: f64) -> EngineFigures {
    EngineFigures {
        engine: engine.into(),
        metrics: metrics.into(),
        series,
        op,
        transfers,
        ranks_pooled: 1,
        bytes_per_transfer: None,
        bytes_per_request: None,
        descriptors_per_transfer: None,
        transfer_ms: None,
        post_ms: None,
        rank_gbps: None,
        pair_gbps: None,
        failures: 0.0,
        defects: Vec::new(),
        fabric: None,
    }
}

/// The names of `prefix` this source carries that look like KV transfer metrics, when none of
/// the known ones is there: another engine version's names.
fn other_names(idx: &Index<'_>, prefix: &str, known: &[&str]) -> Option<Vec<String>> {
    let names = idx.names();
    let ours = names.iter().any(|n| known.iter().any(|k| n.starts_with(k)));
    let kv: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with(prefix) && (n.contains("kv_transfer") || n.contains("nixl") || n.contains("kv_xfer")))
        .map(|n| n.to_string())
        .collect();
    (!ours && !kv.is_empty()).then_some(kv)
}

fn vllm(idx: &Index<'_>, ctx: &Context, out: &mut Vec<EngineFigures>, findings: &mut Vec<Finding>) {
    if let Some(seen) = other_names(idx, "vllm:", &[VLLM_XFER, VLLM_BYTES]) {
        findings.push(Finding::OtherNames {
            engine: "vllm-nixl",
            seen,
        });
        return;
    }
    let count = format!("{VLLM_XFER}_count");
    if idx.series_of(&count).is_empty() && idx.names().iter().any(|n| n.starts_with("vllm:nixl_")) {
        findings.push(Finding::Missing {
            engine: "vllm-nixl",
            metric: count.clone(),
        });
    }
    for series in idx.series_of(&count) {
        let n = idx.get(&count, &series).unwrap_or(0.0);
        let op = ctx.op.clone().unwrap_or_else(|| "read".into());
        let mut f = blank(
            "vllm-nixl",
            "vLLM NIXL connector histograms (vllm:nixl_*)",
            series.clone(),
            op,
            n,
        );
        f.ranks_pooled = ctx.tp.max(1);
        f.failures = VLLM_FAILED.iter().filter_map(|m| idx.get(m, &series)).sum();
        if n > 0.0 {
            let per = |m: &str| idx.get(&format!("{m}_sum"), &series).map(|v| v / n);
            let xfer_s = per(VLLM_XFER);
            let bytes = per(VLLM_BYTES);
            f.transfer_ms = xfer_s.map(|s| s * 1e3);
            f.post_ms = per(VLLM_POST).map(|s| s * 1e3);
            f.bytes_per_transfer = bytes;
            f.descriptors_per_transfer = per(VLLM_DESCS);
            f.bytes_per_request = bytes.map(|b| b * f64::from(f.ranks_pooled));
            // vLLM's own "throughput" is the pooled sum of bytes over the pooled sum of
            // durations: one rank's average rate, which this is too.
            f.rank_gbps = rate(bytes, xfer_s);
            f.pair_gbps = f.rank_gbps.map(|r| r * f64::from(ctx.tp.max(1)));
            for (m, present) in [
                (format!("{VLLM_BYTES}_sum"), bytes.is_some()),
                (format!("{VLLM_POST}_sum"), f.post_ms.is_some()),
                (format!("{VLLM_DESCS}_sum"), f.descriptors_per_transfer.is_some()),
            ] {
                if !present {
                    findings.push(Finding::Missing {
                        engine: "vllm-nixl",
                        metric: m,
                    });
                }
            }
        }
        if f.ranks_pooled > 1 {
            f.defects.push(format!(
                "vLLM pools its {} TP ranks' transfers in one series: its throughput (sum of bytes / sum of durations) is one rank's average, the pair carries up to {}× that",
                f.ranks_pooled, f.ranks_pooled
            ));
        }
        out.push(f);
    }
}

fn sglang(idx: &Index<'_>, ctx: &Context, out: &mut Vec<EngineFigures>, findings: &mut Vec<Finding>) {
    if let Some(seen) = other_names(idx, "sglang:", &[SGLANG_LATENCY, SGLANG_MB]) {
        findings.push(Finding::OtherNames { engine: "sglang", seen });
        return;
    }
    let hist = format!("{SGLANG_LATENCY}_count");
    let (series, histogram) = match idx.series_of(&hist) {
        s if !s.is_empty() => (s, true),
        _ => (idx.series_of(SGLANG_LATENCY), false),
    };
    if series.is_empty() && idx.names().iter().any(|n| n.starts_with("sglang:kv_transfer_")) {
        findings.push(Finding::Missing {
            engine: "sglang",
            metric: SGLANG_LATENCY.to_string(),
        });
    }
    for series in series {
        // A gauge holds the most recent request only; a histogram's sum/count is the mean.
        let (n, latency_ms, mib) = if histogram {
            let n = idx.get(&hist, &series).unwrap_or(0.0);
            let mean = |m: &str| idx.get(&format!("{m}_sum"), &series).filter(|_| n > 0.0).map(|v| v / n);
            (n, mean(SGLANG_LATENCY), mean(SGLANG_MB))
        } else {
            (1.0, idx.get(SGLANG_LATENCY, &series), idx.get(SGLANG_MB, &series))
        };
        let op = ctx.op.clone().unwrap_or_else(|| "write".into());
        let kind = if histogram {
            "histograms"
        } else {
            "gauges (the most recent request)"
        };
        let mut f = blank("sglang", &format!("SGLang kv_transfer_* {kind}"), series.clone(), op, n);
        f.failures = idx.get(SGLANG_FAILED, &series).unwrap_or(0.0);
        let bytes = mib.map(|m| m * 1048576.0);
        if bytes.is_none() {
            findings.push(Finding::Missing {
                engine: "sglang",
                metric: SGLANG_MB.to_string(),
            });
        }
        f.transfer_ms = latency_ms;
        f.bytes_per_transfer = bytes;
        f.bytes_per_request = bytes.map(|b| b * f64::from(ctx.tp.max(1)));
        f.rank_gbps = rate(bytes, latency_ms.map(|ms| ms / 1e3));
        f.pair_gbps = f.rank_gbps.map(|r| r * f64::from(ctx.tp.max(1)));
        f.defects.push(
            "SGLang's kv_transfer_speed_gb_s is MiB / 1024 per second (GiB/s, ×1.074 in GB/s) and its total_mb is MiB: recomputed here from bytes and latency".into(),
        );
        f.defects.push(
            "SGLang times the transfer from the backend's own latency where it gives one; Mooncake gives none and SGLang then times only the last chunk (transfer queue entry to completion): the latency is under-counted and the speed over-stated".into(),
        );
        out.push(f);
    }
}

fn nixl_telemetry(idx: &Index<'_>, ctx: &Context, out: &mut Vec<EngineFigures>) {
    let mut all: BTreeSet<String> = BTreeSet::new();
    for c in ["agent_tx_bytes_total", "agent_rx_bytes_total"] {
        all.extend(idx.series_of(c));
    }
    for series in all {
        let op = ctx.op.clone().unwrap_or_else(|| "read".into());
        // The initiator of a read receives; of a write, sends.
        let (bytes, reqs) = if op == "write" {
            ("agent_tx_bytes_total", "agent_tx_requests_num_total")
        } else {
            ("agent_rx_bytes_total", "agent_rx_requests_num_total")
        };
        let n = idx.get(reqs, &series).unwrap_or(0.0);
        let mut f = blank(
            "nixl-telemetry",
            "NIXL Prometheus telemetry exporter (agent_*)",
            series.clone(),
            op,
            n,
        );
        f.failures = idx.get("agent_errors_total", &series).unwrap_or(0.0);
        if n > 0.0 {
            let total = idx.get(bytes, &series);
            let us = idx.any(&["agent_xfer_time_total", "agent_xfer_time_us_sum"], &series);
            f.bytes_per_transfer = total.map(|b| b / n);
            f.bytes_per_request = f.bytes_per_transfer;
            f.transfer_ms = us.map(|u| u / n / 1e3);
            f.post_ms = idx
                .any(&["agent_xfer_post_time_total", "agent_xfer_post_time_us_sum"], &series)
                .map(|u| u / n / 1e3);
            f.rank_gbps = rate(total, us.map(|u| u / 1e6));
            f.pair_gbps = f.rank_gbps;
        }
        f.defects.push(
            "NIXL's telemetry has no transport label: these bytes may have gone over RDMA or a TCP fallback".into(),
        );
        f.defects.push(
            "NIXL's exporter serves only the process that bound its port: other ranks' transfers are not in it".into(),
        );
        out.push(f);
    }
}

/// bytes / seconds in GB/s (10^9), when both are known and positive.
pub fn rate(bytes: Option<f64>, seconds: Option<f64>) -> Option<f64> {
    match (bytes, seconds) {
        (Some(b), Some(s)) if s > 0.0 && b.is_finite() && s.is_finite() => Some(b / s / 1e9),
        _ => None,
    }
}
