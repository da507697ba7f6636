//! What a run adds to the history: one row per measured case and metric, keyed by
//! [`CaseKey`] (what was measured) and [`EnvKey`] (what it was measured with), from a pair
//! report, a gate report or a sweep's results.

pub use crate::run_verdict::RunVerdict;
use icb_core::model::{CaseKey, CaseResult, CaseStatus, Direction, EnvKey, GateReport, Metric, PairReport, TestKind};
use icb_sweep::results::{Outcome, SweepResults};
use std::collections::BTreeMap;

/// Which command measured a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Pair,
    Sweep,
    Gate,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Pair => "pair",
            RunKind::Sweep => "sweep",
            RunKind::Gate => "gate",
        }
    }
}

/// One figure of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub case: CaseKey,
    pub env: EnvKey,
    pub metric: Metric,
    pub value: f64,
    /// The case's own verdict (`ok`, `warn`, `fail`; `pass`/`fail` for a sweep pair).
    pub status: String,
}

/// A node's verdict in a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub node: String,
    pub status: String,
    pub median_bps: Option<f64>,
    pub median_latency_us: Option<f64>,
}

/// One run, ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Unique per run: the sweep id, or `pair-<start>-<prefill>-<decode>`.
    pub run_id: String,
    pub kind: RunKind,
    /// RFC 3339 UTC, normalised, so runs order by it.
    pub started_at: String,
    pub tool_version: String,
    /// How the run ended, as the command printed it and exited with it.
    pub verdict: RunVerdict,
    pub rows: Vec<Row>,
    pub nodes: Vec<NodeRow>,
}

/// `host→cuda` and `host-cuda` both as `host-cuda`, the spelling flags use.
fn memory_name(m: &str) -> String {
    m.replace('→', "-")
}

/// RFC 3339 in UTC with a `Z`, whatever offset it was written with; the text as given when it
/// does not parse.
pub fn normalise_time(t: &str) -> String {
    t.parse::<jiff::Timestamp>()
        .map(|ts| ts.to_string())
        .unwrap_or_else(|_| t.to_string())
}

/// FNV-1a, 64 bits: stable across builds and platforms (std's hasher is not).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The environment of a pair report: both sides' UCX and NIXL versions and a hash of both sides'
/// transport environment, only the variables the one rule keys
/// ([`icb_core::fabric::is_baseline_env`]): never a per-run value such as the prefill side's
/// `IC_BENCH_SERVER` (the decode pod's address and random port), which made every Kubernetes run
/// a new baseline.
pub fn pair_env(report: &PairReport) -> EnvKey {
    let both = |a: &str, b: &str| match (a.is_empty(), a == b) {
        (true, _) if b.is_empty() => None,
        (_, true) => Some(a.to_string()),
        _ => Some(format!("{a}/{b}")),
    };
    let nixl = |p: &icb_core::model::PeerInfo| p.nixl.as_ref().map(|n| n.version.clone()).unwrap_or_default();
    let keyed = |side: &'static str, env: &'_ BTreeMap<String, String>| {
        env.iter()
            .filter(|(k, _)| icb_core::fabric::is_baseline_env(k))
            .map(move |(k, v)| (format!("{side}:{k}"), v.clone()))
            .collect::<Vec<_>>()
    };
    let env: BTreeMap<String, String> = keyed("prefill", &report.client.env)
        .into_iter()
        .chain(keyed("decode", &report.server.env))
        .collect();
    let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    EnvKey {
        ucx: both(&report.client.ucx_version, &report.server.ucx_version),
        nixl: both(&nixl(&report.client), &nixl(&report.server)),
        transport_env: Some(format!("{:016x}", fnv1a(text.as_bytes()))),
        ..EnvKey::default()
    }
}

/// The key of a pair report's case.
pub fn case_key(report: &PairReport, case: &CaseResult) -> CaseKey {
    CaseKey::of_case(report, case)
}

/// The figures of one measured case: bandwidth and/or latency p50.
fn case_figures(case: &CaseResult) -> Vec<(Metric, f64)> {
    let Some(m) = case
        .measurement
        .as_ref()
        .filter(|_| case.status == CaseStatus::Measured)
    else {
        return vec![];
    };
    let mut out = vec![];
    if let Some(bw) = m.bandwidth_bps {
        out.push((Metric::BandwidthBps, bw));
    }
    if let Some(l) = &m.latency_us {
        out.push((Metric::LatencyP50Us, l.p50));
    }
    out
}

/// The rows of a pair report.
pub fn pair_rows(report: &PairReport) -> Vec<Row> {
    let env = pair_env(report);
    report
        .cases
        .iter()
        .flat_map(|case| {
            let key = case_key(report, case);
            let status = case
                .verdict
                .as_ref()
                .map_or("measured", |v| v.status.as_str())
                .to_string();
            let env = env.clone();
            case_figures(case).into_iter().map(move |(metric, value)| Row {
                case: key.clone(),
                env: env.clone(),
                metric,
                value,
                status: status.clone(),
            })
        })
        .collect()
}

/// A pair (or gate) run's record.
pub fn pair_record(report: &PairReport, kind: RunKind) -> RunRecord {
    let started_at = normalise_time(&report.started_at);
    RunRecord {
        run_id: format!(
            "{}-{started_at}-{}-{}",
            kind.as_str(),
            report.placement.prefill.host,
            report.placement.decode.host
        ),
        kind,
        started_at,
        tool_version: report.tool.version.clone(),
        verdict: RunVerdict::of_pair(report),
        rows: pair_rows(report),
        nodes: vec![],
    }
}

/// A gate's record: its pair's cases; `None` when the pair never ran.
pub fn gate_record(report: &GateReport) -> Option<RunRecord> {
    let pair = report.pair.as_ref()?;
    let mut r = pair_record(pair, RunKind::Gate);
    r.verdict = RunVerdict::of_gate(report);
    Some(r)
}

/// The rows of a sweep: each first-pass pair's bandwidth per size and latency per size (a
/// second-pass pair only where the first pass did not measure it).
pub fn sweep_rows(results: &SweepResults) -> Vec<Row> {
    let engine = results
        .criteria
        .as_ref()
        .map_or("ucx", |c| c.engine.as_str())
        .to_string();
    let mut seen = std::collections::BTreeSet::new();
    let mut rows = vec![];
    let mut pairs: Vec<_> = results.pairs.iter().collect();
    pairs.sort_by_key(|p| p.pass);
    for p in pairs {
        let Outcome::Measured {
            verdict,
            series,
            latency,
            ..
        } = &p.outcome
        else {
            continue;
        };
        if !seen.insert((p.pair.prefill.clone(), p.pair.decode.clone())) {
            continue;
        }
        let key = |test: TestKind, memory: &Option<String>, size: u64, direction: Option<Direction>| CaseKey {
            prefill: p.pair.prefill.clone(),
            decode: p.pair.decode.clone(),
            rail: None,
            test: test.to_string(),
            memory: memory.as_deref().map_or_else(|| "host-host".into(), memory_name),
            size,
            blocks: None,
            direction: direction.map(|d| d.to_string()),
            engine: engine.clone(),
        };
        let row = |case: CaseKey, metric, value| Row {
            case,
            env: EnvKey::default(),
            metric,
            value,
            status: verdict.as_str().to_string(),
        };
        for s in series {
            rows.push(row(
                key(s.test, &s.memory, s.size, s.direction),
                Metric::BandwidthBps,
                s.bandwidth_bps,
            ));
        }
        for l in latency {
            rows.push(row(
                key(l.test, &l.memory, l.size, None),
                Metric::LatencyP50Us,
                l.p50_us,
            ));
        }
    }
    rows
}

/// A sweep's record: its rows and node verdicts.
pub fn sweep_record(results: &SweepResults) -> RunRecord {
    let nodes: Vec<NodeRow> = results
        .node_verdicts
        .iter()
        .map(|v| NodeRow {
            node: v.node.clone(),
            status: v.status.as_str().into(),
            median_bps: v.median_bps,
            median_latency_us: v.median_latency_us,
        })
        .collect();
    RunRecord {
        run_id: results.sweep_id.clone(),
        kind: RunKind::Sweep,
        started_at: normalise_time(&results.started_at),
        tool_version: results.tool_version.clone(),
        verdict: RunVerdict::of_sweep(results),
        rows: sweep_rows(results),
        nodes,
    }
}
