//! Where the engines' figures come from, each read into figures or one line saying why not.

use crate::engines::{self, Context, Finding};
use icb_core::checks::Check;
use icb_core::model::Status;
use icb_core::serving::EngineFigures;
use std::path::PathBuf;
use std::time::Duration;

/// One place to read from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// `--metrics FILE`: a scrape saved in the Prometheus text format.
    MetricsFile(PathBuf),
    /// `--endpoint URL`: a worker's `/metrics`, read once.
    Endpoint(String),
    /// `--trtllm-csv FILE|DIR…`: every rank's timing file, read together (a request is merged
    /// across ranks).
    TrtllmCsv(Vec<PathBuf>),
    /// `--prometheus URL`: the server's increase over the window.
    Prometheus(String),
}

type Read = (Vec<EngineFigures>, Vec<Finding>);

impl Source {
    pub fn label(&self, window: &str) -> String {
        match self {
            Source::MetricsFile(p) => format!("file:{}", p.display()),
            Source::Endpoint(u) => format!("endpoint:{u}"),
            Source::TrtllmCsv(ps) => format!(
                "csv:{}",
                ps.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(",")
            ),
            Source::Prometheus(u) => format!("prometheus:{u} (window {window})"),
        }
    }

    pub fn read(&self, ctx: &Context, window: &str, deadline: Duration) -> Result<Read, String> {
        match self {
            Source::MetricsFile(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| format!("--metrics {}: {e}", p.display()))?;
                text_figures(&text, ctx).map_err(|e| format!("--metrics {}: {e}", p.display()))
            }
            Source::Endpoint(u) => {
                let text = crate::http::get(u, deadline).map_err(|e| format!("--endpoint {e}"))?;
                text_figures(&text, ctx).map_err(|e| format!("--endpoint {u}: {e}"))
            }
            Source::Prometheus(u) => {
                let samples = crate::prom::samples(u, window, deadline).map_err(|e| e.to_string())?;
                Ok(engines::read(&samples, ctx))
            }
            Source::TrtllmCsv(paths) => {
                let files = csv_files(paths)?;
                let op = ctx.op.clone().unwrap_or_else(|| "write".into());
                Ok((crate::trtllm::figures(&files, &op), Vec::new()))
            }
        }
    }
}

fn text_figures(text: &str, ctx: &Context) -> Result<Read, String> {
    let samples = crate::expo::parse(text).map_err(|e| format!("line {}: {}", e.line, e.why))?;
    Ok(engines::read(&samples, ctx))
}

/// Every `rank_*_{send,recv}.csv` of the paths (a directory: its files), read.
fn csv_files(paths: &[PathBuf]) -> Result<Vec<crate::trtllm::RankFile>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut names: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("--trtllm-csv {}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "csv"))
                .collect();
            names.sort();
            if names.is_empty() {
                return Err(format!("--trtllm-csv {}: no .csv file in it", p.display()));
            }
            files.extend(names);
        } else {
            files.push(p.clone());
        }
    }
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).map_err(|e| format!("--trtllm-csv {}: {e}", f.display()))?;
            let name = f
                .file_name()
                .map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into_owned());
            crate::trtllm::parse(&name, &text).map_err(|e| format!("--trtllm-csv {e}"))
        })
        .collect()
}

/// A missing metric or another version's names, as checks.
pub fn finding_checks(label: &str, findings: &[Finding]) -> Vec<Check> {
    findings
        .iter()
        .map(|f| match f {
            Finding::Missing { engine, metric } => Check {
                id: "serving.metric_missing".into(),
                status: Status::Warn,
                detail: format!("{engine}: {metric} is not in it; the figures it gives are not known"),
                scope: Some(label.to_string()),
                hint: None,
            },
            Finding::OtherNames { engine, seen } => Check {
                id: "serving.metric_names".into(),
                status: Status::Warn,
                detail: format!(
                    "{engine}: KV-transfer metrics under names this probe does not know (another engine version?): {}",
                    seen.join(", ")
                ),
                scope: Some(label.to_string()),
                hint: Some("docs/probe.md lists the metric names and engine versions read".into()),
            },
        })
        .collect()
}
