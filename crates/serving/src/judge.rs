//! The comparison: each engine figure against ic-bench's own `--kv-shape` runs of the same node
//! pair, operation and KV geometry in the history, and the checks it makes.

use icb_core::checks::Check;
use icb_core::model::{CaseKey, Metric, Status};
use icb_core::serving::{EngineFigures, FabricBaseline};
use icb_history::query::CaseTrend;

/// The KV geometry of `--kv-shape …` (one request), as its reads: each decode rank's read of one
/// prefill rank is `descriptors` descriptors of `descriptor_bytes` (a `pair --kv-shape` case's
/// size and blocks).
#[derive(Debug, Clone, PartialEq)]
pub struct KvSpec {
    /// The flags as given (`--kv-shape llama-3.1-8b --isl 8192 …`), for the exact command.
    pub flags: String,
    pub reads: Vec<(u64, u64)>,
}

impl KvSpec {
    /// The spec of `pair --kv-shape MODEL …`'s request: its flags spelled out (for the exact
    /// command) and each decode rank's reads.
    pub fn of_request(model: &str, request: &icb_kv::KvRequest) -> KvSpec {
        let s = request.shape();
        let flags = format!(
            "--kv-shape {model} --isl {} --page-size {} --kv-dtype {} --prefill-tp {} --decode-tp {}",
            s.isl, s.page_size, s.kv_dtype, s.prefill_tp, s.decode_tp
        );
        let reads = request
            .geometry()
            .decode_ranks
            .iter()
            .flat_map(|r| r.reads.iter().map(|read| (read.descriptor_bytes, read.descriptors)))
            .collect();
        KvSpec { flags, reads }
    }
}

/// A fabric below this share of its own baseline has regressed.
pub const FABRIC_FLOOR: f64 = 0.9;
/// An engine at or above this share of the fabric's rate uses it well.
pub const ENGINE_FLOOR: f64 = 0.8;
/// An engine rate above this multiple of what ic-bench measured is suspect.
pub const ABOVE_FABRIC: f64 = 1.25;
/// Tolerance of a shape match without `--kv-shape`: the engine's means against a case's.
const NEAR: f64 = 0.1;

fn near(a: f64, b: f64) -> bool {
    b > 0.0 && ((a - b) / b).abs() <= NEAR
}

fn test_of(op: &str) -> &'static str {
    if op == "write" { "put_bw" } else { "get_bw" }
}

/// Whether `case` measured what `f` reports: the same operation and geometry (exactly, with
/// `--kv-shape`; within 10 % of the engine's mean transfer without it).
fn same_shape(case: &CaseKey, f: &EngineFigures, kv: Option<&KvSpec>) -> bool {
    let Some(blocks) = case.blocks.map(u64::from) else {
        return false;
    };
    if case.test != test_of(&f.op) {
        return false;
    }
    match kv {
        Some(k) => k.reads.iter().any(|&(len, n)| case.size == len && blocks == n),
        None => {
            let bytes_ok = f
                .bytes_per_transfer
                .is_some_and(|b| near(b, (case.size * blocks) as f64));
            let descs_ok = f.descriptors_per_transfer.is_none_or(|d| near(d, blocks as f64));
            bytes_ok && descs_ok
        }
    }
}

/// The best matching case's bandwidth trend: a NIXL-engine case first (what the engines use).
pub fn baseline_for(trends: &[CaseTrend], f: &EngineFigures, kv: Option<&KvSpec>) -> Option<(CaseKey, Vec<f64>)> {
    let mut found: Vec<&CaseTrend> = trends
        .iter()
        .filter(|t| t.metric == Metric::BandwidthBps && !t.points.is_empty() && same_shape(&t.case, f, kv))
        .collect();
    found.sort_by_key(|t| (t.case.engine != "nixl", std::cmp::Reverse(t.points.len())));
    found
        .first()
        .map(|t| (t.case.clone(), t.points.iter().map(|p| p.2 / 1e9).collect()))
}

/// The fabric figures of a matched case: its latest run, the mean of up to five runs before it.
pub fn fabric(case: &CaseKey, gbps: &[f64], engine_gbps: f64) -> Option<FabricBaseline> {
    let (&latest, before) = gbps.split_last()?;
    let before = &before[before.len().saturating_sub(5)..];
    Some(FabricBaseline {
        case: format!("{} ({})", case.case_label(), case.engine),
        latest_gbps: latest,
        baseline_gbps: (!before.is_empty()).then(|| before.iter().sum::<f64>() / before.len() as f64),
        runs: gbps.len(),
        engine_ratio: if latest > 0.0 { engine_gbps / latest } else { 0.0 },
    })
}

fn check(id: &str, status: Status, scope: &str, detail: String, hint: Option<String>) -> Check {
    Check {
        id: id.into(),
        status,
        detail,
        scope: Some(scope.into()),
        hint,
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("not known".into(), |v| format!("{v:.3} ms"))
}

/// The checks of one figure judged against its fabric baseline.
pub fn judge(f: &EngineFigures, scope: &str) -> Vec<Check> {
    let (Some(b), Some(rank)) = (&f.fabric, f.rank_gbps) else {
        return vec![];
    };
    let mut out = Vec::new();
    match b.baseline_gbps {
        Some(base) if b.latest_gbps < base * FABRIC_FLOOR => out.push(check(
            "serving.fabric",
            Status::Fail,
            scope,
            format!(
                "fabric below its baseline: {} measured {:.2} GB/s, its baseline {:.2} GB/s ({:.0} %)",
                b.case,
                b.latest_gbps,
                base,
                100.0 * b.latest_gbps / base
            ),
            Some(
                "the fabric side: `ic-bench history pair` shows when it dropped; `ic-bench probe node` on both nodes"
                    .into(),
            ),
        )),
        Some(base) => out.push(check(
            "serving.fabric",
            Status::Ok,
            scope,
            format!(
                "the fabric holds its baseline: {} measured {:.2} GB/s, baseline {base:.2} GB/s",
                b.case, b.latest_gbps
            ),
            None,
        )),
        None => out.push(check(
            "serving.fabric",
            Status::Skipped,
            scope,
            format!("one run of {} in the history: no baseline to hold it to yet", b.case),
            None,
        )),
    }
    let pct = 100.0 * b.engine_ratio;
    if b.engine_ratio > ABOVE_FABRIC {
        out.push(check(
            "serving.metric_defect",
            Status::Warn,
            scope,
            format!(
                "{} reports {rank:.2} GB/s per rank, {pct:.0} % of the {:.2} GB/s ic-bench measured on this path: suspect the metric, not a faster fabric",
                f.engine, b.latest_gbps
            ),
            None,
        ));
    } else if b.engine_ratio >= ENGINE_FLOOR {
        out.push(check(
            "serving.engine",
            Status::Ok,
            scope,
            format!(
                "engine reaches {pct:.0} % of what the fabric delivers for this shape ({rank:.2} of {:.2} GB/s)",
                b.latest_gbps
            ),
            None,
        ));
    } else {
        let descs = f
            .descriptors_per_transfer
            .map_or("not known".into(), |d| format!("{d:.0}"));
        out.push(check(
            "serving.engine",
            Status::Warn,
            scope,
            format!(
                "engine reaches {pct:.0} % of what the fabric delivers for this shape ({rank:.2} of {:.2} GB/s); the gap is post time ({} of {} per transfer) / descriptors ({descs} per transfer)",
                b.latest_gbps,
                ms(f.post_ms),
                ms(f.transfer_ms)
            ),
            Some("the engine side: larger KV blocks (vLLM --block-size) mean fewer descriptors; `ic-bench pair --kv-shape … --kv-descriptor-sweep` shows where posting dominates".into()),
        ));
    }
    out
}

/// `ic-bench pair …` that would measure this pair's baseline for the shape.
pub fn baseline_command(prefill: &str, decode: &str, kv: Option<&KvSpec>, op: &str, history: &str) -> String {
    let shape = kv.map_or(
        "--kv-shape MODEL --isl TOKENS --prefill-tp A --decode-tp B".to_string(),
        |k| k.flags.clone(),
    );
    let op = if op == "write" { " --kv-op write" } else { "" };
    format!(
        "ic-bench pair --prefill node/{prefill} --decode node/{decode} {shape}{op} --engine nixl --history {history}"
    )
}
