//! icb-serving: `ic-bench probe serving` (issue 42). Reads the serving engines' own KV-transfer
//! metrics (a Prometheus server over a window, workers' `/metrics` endpoints, given or found through
//! a recipe's pods (`pods`), files in the
//! Prometheus text format, TensorRT-LLM's timing CSVs), translates them to one basis (per rank and
//! per node pair, bytes per request, GB/s = 10^9, descriptors and post time per transfer),
//! flags the metrics' known defects, and sets each figure beside ic-bench's own `--kv-shape`
//! measurement of the same pair and geometry from the history: is the fabric slow, or is the
//! engine using it badly? Read-only: nothing is written but the report.
#![forbid(unsafe_code)]

pub mod engines;
pub mod expo;
pub mod http;
pub mod judge;
pub mod pods;
pub mod prom;
mod sources;
pub mod trtllm;

pub use judge::KvSpec;
pub use sources::Source;

use icb_core::checks::{Check, ProbeReport};
use icb_core::model::Status;
use icb_core::serving::{SERVING_BASIS, ServingReport};
use std::path::PathBuf;
use std::time::Duration;

/// Everything the command was given.
#[derive(Debug, Clone)]
pub struct Options {
    pub sources: Vec<Source>,
    /// The PromQL window of `--prometheus` (`5m`).
    pub window: String,
    pub history: Option<PathBuf>,
    pub prefill: Option<String>,
    pub decode: Option<String>,
    /// Ranks on the initiating side (`--tp`).
    pub tp: u32,
    /// `read` or `write` (`--kv-op`); each engine's own way when absent.
    pub op: Option<String>,
    /// One rank's NIC line rate, Gb/s (`--line-rate`): the physical ceiling.
    pub line_rate_gbit: Option<f64>,
    pub kv: Option<KvSpec>,
    /// Deadline of each HTTP request and of the history's lock.
    pub deadline: Duration,
}

/// A flag of `probe serving` that does not parse (one line, naming the flag).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error("bad --window '{0}': give a PromQL duration, e.g. 5m, 30s, 1h")]
    Window(String),
    #[error("bad --line-rate '{0}': give Gb/s, e.g. 400")]
    LineRate(String),
}

/// `--window`: a PromQL duration (`5m`, `30s`, `1h`, `2d`).
pub fn parse_window(s: &str) -> Result<String, FlagError> {
    let ok = s.len() > 1 && s.ends_with(['s', 'm', 'h', 'd']) && s[..s.len() - 1].chars().all(|c| c.is_ascii_digit());
    match ok {
        true => Ok(s.to_string()),
        false => Err(FlagError::Window(s.to_string())),
    }
}

/// `--line-rate`: one rank's NIC line rate, Gb/s (finite, above zero).
pub fn parse_line_rate(s: &str) -> Result<f64, FlagError> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(FlagError::LineRate(s.to_string())),
    }
}

/// Why nothing could be judged (exit 2): one line per source.
#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    #[error(
        "give at least one of --metrics FILE, --endpoint URL, --trtllm-csv FILE|DIR, --prometheus URL, --recipe FILE"
    )]
    NoSource,
    #[error("nothing could be read:\n  {}", .0.join("\n  "))]
    NothingRead(Vec<String>),
    #[error("--history {0}: {1}")]
    History(String, String),
}

fn check(id: &str, status: Status, scope: &str, detail: String, hint: Option<&str>) -> Check {
    Check {
        id: id.into(),
        status,
        detail,
        scope: Some(scope.into()),
        hint: hint.map(str::to_string),
    }
}

/// Reads every source, translates, compares, judges: the `probe serving` report.
pub fn probe_serving(opts: &Options) -> Result<ProbeReport, ServingError> {
    if opts.sources.is_empty() {
        return Err(ServingError::NoSource);
    }
    let (mut checks, mut figures) = read_all(opts)?;
    let mut next_steps = Vec::new();
    let trends = history_trends(opts)?;
    for (label, f) in &mut figures {
        let scope = format!("{} {} ({label})", f.engine, f.series);
        checks.extend(figure_checks(f, &scope, opts.line_rate_gbit));
        if let Some((trends, history)) = &trends {
            checks.extend(compare(f, &scope, trends, history, opts, &mut next_steps));
        }
    }
    if trends.is_none() {
        // Said once, not per series: nothing was compared.
        checks.push(check(
            "serving.baseline",
            Status::Skipped,
            "history",
            "not compared with the fabric: give --history FILE with --prefill NODE --decode NODE".into(),
            None,
        ));
    }
    let target = opts
        .sources
        .iter()
        .map(|s| s.label(&opts.window))
        .collect::<Vec<_>>()
        .join(", ");
    let mut report = ProbeReport::new("serving", &target, checks, next_steps);
    report.serving = Some(ServingReport {
        basis: SERVING_BASIS.to_string(),
        prefill: opts.prefill.clone(),
        decode: opts.decode.clone(),
        sources: opts.sources.iter().map(|s| s.label(&opts.window)).collect(),
        engines: figures.into_iter().map(|(_, f)| f).collect(),
    });
    Ok(report)
}

/// The checks of one figure on its own: failures, the physical ceiling.
fn figure_checks(f: &EngineFigures, scope: &str, line_rate_gbit: Option<f64>) -> Vec<Check> {
    let mut out = Vec::new();
    if f.failures > 0.0 {
        out.push(check(
            "serving.failures",
            Status::Warn,
            scope,
            format!("{} failed transfers or notifications in the window", f.failures),
            Some("the engine's log says which peer; `ic-bench probe node` on both nodes"),
        ));
    }
    if let (Some(rank), Some(line)) = (f.rank_gbps, line_rate_gbit) {
        let ceiling = line / 8.0;
        if rank > ceiling {
            out.push(check(
                "serving.metric_defect",
                Status::Fail,
                scope,
                format!(
                    "{} reports {rank:.2} GB/s per rank, above the NIC's line rate of {ceiling:.2} GB/s ({line} Gb/s): a metric bug, not a fast fabric",
                    f.engine
                ),
                Some("read the engine's defects in the JSON's serving.engines[].defects; do not trust this figure"),
            ));
        }
    }
    out
}

use icb_core::serving::EngineFigures;

/// The history's trends for the pair, when a history and a pair were given.
fn history_trends(opts: &Options) -> Result<Option<(Vec<icb_history::query::CaseTrend>, String)>, ServingError> {
    let (Some(path), Some(p), Some(d)) = (&opts.history, &opts.prefill, &opts.decode) else {
        return Ok(None);
    };
    let shown = path.display().to_string();
    if !path.is_file() {
        return Err(ServingError::History(shown, "no such file".into()));
    }
    let history = icb_history::History::open(path, opts.deadline)
        .map_err(|e| ServingError::History(shown.clone(), e.to_string()))?;
    let trends = history
        .pair_trend(p, d, 100)
        .map_err(|e| ServingError::History(shown.clone(), e.to_string()))?;
    Ok(Some((trends, shown)))
}

/// Each figure with the label of the source it came from.
type Labelled = Vec<(String, EngineFigures)>;

/// Every source read: the checks of reading and the figures with their source's label; an error
/// (exit 2) when no source gave a figure.
fn read_all(opts: &Options) -> Result<(Vec<Check>, Labelled), ServingError> {
    let ctx = engines::Context {
        tp: opts.tp.max(1),
        op: opts.op.clone(),
    };
    let mut checks = Vec::new();
    let mut figures = Vec::new();
    let mut unread = Vec::new();
    for source in &opts.sources {
        let label = source.label(&opts.window);
        match source.read(&ctx, &opts.window, opts.deadline) {
            Err(why) => {
                checks.push(check(
                    "serving.source",
                    Status::Warn,
                    &label,
                    format!("could not be read: {why}"),
                    None,
                ));
                unread.push(why.to_string());
            }
            Ok((found, findings)) => {
                checks.extend(sources::finding_checks(&label, &findings));
                if found.is_empty() {
                    let why = format!(
                        "{label}: no KV-transfer metric of vLLM's NIXL connector, SGLang, NIXL's telemetry or TensorRT-LLM"
                    );
                    checks.push(check("serving.source", Status::Warn, &label, why.clone(), None));
                    unread.push(why);
                } else {
                    checks.push(check(
                        "serving.source",
                        Status::Ok,
                        &label,
                        format!("{} engine series read", found.len()),
                        None,
                    ));
                }
                figures.extend(found.into_iter().map(|f| (label.clone(), f)));
            }
        }
    }
    if figures.is_empty() {
        return Err(ServingError::NothingRead(unread));
    }
    Ok((checks, figures))
}

/// One figure against the history: its fabric baseline and the judgement, or the exact command
/// that would measure the baseline.
fn compare(
    f: &mut EngineFigures,
    scope: &str,
    trends: &[icb_history::query::CaseTrend],
    history: &str,
    opts: &Options,
    next_steps: &mut Vec<String>,
) -> Vec<Check> {
    let Some(rank) = f.rank_gbps else {
        // An idle window or a missing metric: no rate, so no baseline to ask for either.
        return vec![check(
            "serving.engine",
            Status::Skipped,
            scope,
            format!(
                "no transfer rate in the window ({} transfers, or a metric missing): nothing to compare",
                f.transfers
            ),
            None,
        )];
    };
    f.fabric =
        judge::baseline_for(trends, f, opts.kv.as_ref()).and_then(|(case, gbps)| judge::fabric(&case, &gbps, rank));
    if f.fabric.is_some() {
        return judge::judge(f, scope);
    }
    let (p, d) = (
        opts.prefill.as_deref().unwrap_or("P"),
        opts.decode.as_deref().unwrap_or("D"),
    );
    let cmd = judge::baseline_command(p, d, opts.kv.as_ref(), &f.op, history);
    let missing_shape = if opts.kv.is_none() {
        " (give the model's --kv-shape flags to this probe for the exact geometry)"
    } else {
        ""
    };
    let c = check(
        "serving.baseline",
        Status::Skipped,
        scope,
        format!("no baseline for this pair: run `{cmd}`{missing_shape}"),
        Some(format!("run `{cmd}`").as_str()),
    );
    if !next_steps.contains(&cmd) {
        next_steps.push(cmd);
    }
    vec![c]
}

#[cfg(test)]
mod flag_tests {
    use super::*;

    #[test]
    fn the_window_is_a_promql_duration_and_the_line_rate_a_positive_number() {
        assert_eq!(parse_window("5m").unwrap(), "5m");
        assert_eq!(parse_window("30s").unwrap(), "30s");
        for bad in ["m", "5", "5x", "-5m", "1.5h"] {
            assert_eq!(parse_window(bad), Err(FlagError::Window(bad.into())), "{bad}");
        }
        assert_eq!(parse_line_rate("400").unwrap(), 400.0);
        for bad in ["0", "-1", "inf", "NaN", "fast"] {
            assert_eq!(parse_line_rate(bad), Err(FlagError::LineRate(bad.into())), "{bad}");
        }
        assert_eq!(
            parse_line_rate("x").unwrap_err().to_string(),
            "bad --line-rate 'x': give Gb/s, e.g. 400"
        );
    }
}
