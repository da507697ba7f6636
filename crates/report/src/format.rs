//! The exporter trait and the `-o FORMAT` choice.

use icb_core::checks::ProbeReport;
use icb_core::model::PairReport;
use std::fmt;
use std::str::FromStr;

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The format has nothing meaningful to show for this kind of report.
    #[error("-o {format} cannot show {what}: use {instead}")]
    Unsupported {
        format: &'static str,
        what: &'static str,
        instead: &'static str,
    },
    /// A serializer failed (a bug, or a value the format cannot carry).
    #[error("cannot write {format} output: {detail}")]
    Serialize { format: &'static str, detail: String },
}

/// One output format. Implementations are pure: same report in, same text out.
pub trait Exporter {
    fn pair(&self, report: &PairReport) -> Result<String, ExportError>;
    fn probe(&self, report: &ProbeReport) -> Result<String, ExportError>;
}

/// The values `-o` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Table,
    Json,
    Junit,
    Prometheus,
    Svg,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Table,
        Format::Json,
        Format::Junit,
        Format::Prometheus,
        Format::Svg,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Prometheus => "prometheus",
            Format::Svg => "svg",
        }
    }

    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Table => Box::new(crate::TableExporter),
            Format::Json => Box::new(crate::JsonExporter),
            Format::Junit => Box::new(crate::JunitExporter),
            Format::Prometheus => Box::new(crate::PrometheusExporter),
            Format::Svg => Box::new(crate::SvgExporter),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = icb_core::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Format::ALL.into_iter().find(|f| f.as_str() == wanted).ok_or_else(|| {
            icb_core::ParseError::new(format!(
                "unknown output format '{s}': use table, json, junit, prometheus or svg"
            ))
        })
    }
}

/// Renders a pair report in `format`.
pub fn render_pair(report: &PairReport, format: Format) -> Result<String, ExportError> {
    format.exporter().pair(report)
}

/// Renders a probe report in `format`.
pub fn render_probe(report: &ProbeReport, format: Format) -> Result<String, ExportError> {
    format.exporter().probe(report)
}
