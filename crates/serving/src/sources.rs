//! Where the engines' figures come from, each read into figures or one line saying why not.

use crate::engines::{self, Context, Finding};
use crate::expo::LineError;
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
    /// `--recipe FILE`: a worker pod's metrics endpoint found through the API, read once like
    /// `--endpoint`, labelled with the pod's name.
    Pod { pod: String, url: String },
    /// `--recipe FILE`: a worker pod found whose endpoint could not be known (not running, no IP,
    /// no metrics port): one "not read" line, never a pass.
    PodUnreadable { pod: String, why: String },
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
            Source::Pod { pod, url } => format!("pod:{pod} ({url})"),
            Source::PodUnreadable { pod, .. } => format!("pod:{pod}"),
        }
    }

    pub fn read(&self, ctx: &Context, window: &str, deadline: Duration) -> Result<Read, SourceError> {
        match self {
            Source::MetricsFile(p) => {
                let text =
                    std::fs::read_to_string(p).map_err(|why| SourceError::MetricsFile { path: p.clone(), why })?;
                text_figures(&text, ctx).map_err(|why| SourceError::MetricsText { path: p.clone(), why })
            }
            Source::Endpoint(u) => {
                let text = crate::http::get(u, deadline).map_err(SourceError::Endpoint)?;
                text_figures(&text, ctx).map_err(|why| SourceError::EndpointText { url: u.clone(), why })
            }
            Source::Pod { pod, url } => {
                let text = crate::http::get(url, deadline).map_err(|why| SourceError::Pod {
                    pod: pod.clone(),
                    why: why.to_string(),
                })?;
                text_figures(&text, ctx).map_err(|why| SourceError::Pod {
                    pod: pod.clone(),
                    why: format!("{url}: line {}: {}", why.line, why.why),
                })
            }
            Source::PodUnreadable { pod, why } => Err(SourceError::Pod {
                pod: pod.clone(),
                why: why.clone(),
            }),
            Source::Prometheus(u) => {
                let samples = crate::prom::samples(u, window, deadline)?;
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

/// Why one source gave no figures (one line).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("--metrics {}: {why}", path.display())]
    MetricsFile { path: PathBuf, why: std::io::Error },
    #[error("--metrics {}: line {}: {}", path.display(), why.line, why.why)]
    MetricsText { path: PathBuf, why: LineError },
    #[error("--endpoint {0}")]
    Endpoint(crate::http::HttpError),
    #[error("--endpoint {url}: line {}: {}", why.line, why.why)]
    EndpointText { url: String, why: LineError },
    #[error("pod {pod}: not read: {why}")]
    Pod { pod: String, why: String },
    #[error(transparent)]
    Prometheus(#[from] crate::prom::PromError),
    #[error("--trtllm-csv {}: {why}", path.display())]
    CsvRead { path: PathBuf, why: std::io::Error },
    #[error("--trtllm-csv {}: no .csv file in it", path.display())]
    CsvNone { path: PathBuf },
    #[error("--trtllm-csv {0}")]
    Csv(#[from] crate::trtllm::CsvError),
}

fn text_figures(text: &str, ctx: &Context) -> Result<Read, LineError> {
    let samples = crate::expo::parse(text)?;
    Ok(engines::read(&samples, ctx))
}

/// Every `rank_*_{send,recv}.csv` of the paths (a directory: its files), read.
fn csv_files(paths: &[PathBuf]) -> Result<Vec<crate::trtllm::RankFile>, SourceError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut names: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|why| SourceError::CsvRead { path: p.clone(), why })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "csv"))
                .collect();
            names.sort();
            if names.is_empty() {
                return Err(SourceError::CsvNone { path: p.clone() });
            }
            files.extend(names);
        } else {
            files.push(p.clone());
        }
    }
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).map_err(|why| SourceError::CsvRead { path: f.clone(), why })?;
            let name = f
                .file_name()
                .map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into_owned());
            Ok(crate::trtllm::parse(&name, &text)?)
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

#[cfg(test)]
mod pod_tests {
    use super::*;

    #[test]
    fn a_pod_not_read_is_one_line_naming_it_and_a_pod_read_is_labelled_with_its_name() {
        let ctx = Context { tp: 1, op: None };
        let unread = Source::PodUnreadable {
            pod: "decode-0".into(),
            why: "not running (phase Pending)".into(),
        };
        assert_eq!(unread.label("5m"), "pod:decode-0");
        let e = unread.read(&ctx, "5m", Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, SourceError::Pod { .. }));
        assert_eq!(e.to_string(), "pod decode-0: not read: not running (phase Pending)");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let down = Source::Pod {
            pod: "decode-1".into(),
            url: format!("http://127.0.0.1:{port}/metrics"),
        };
        assert_eq!(
            down.label("5m"),
            format!("pod:decode-1 (http://127.0.0.1:{port}/metrics)")
        );
        let e = down.read(&ctx, "5m", Duration::from_secs(5)).unwrap_err();
        assert!(
            e.to_string().starts_with("pod decode-1: not read: http://127.0.0.1:"),
            "{e}"
        );
    }
}
