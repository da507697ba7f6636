//! The report exactly as the schema defines it (`docs/schema.md`), pretty-printed; for a sweep,
//! the results file itself (`ic-bench.sweep/v1`).

use crate::format::{ExportError, Exporter};
use icb_core::checks::ProbeReport;
use icb_core::model::{GateReport, PairReport};

pub struct JsonExporter;

fn pretty<T: serde::Serialize>(value: &T) -> Result<String, ExportError> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| ExportError::Serialize {
        format: "json",
        detail: e.to_string(),
    })?;
    text.push('\n');
    Ok(text)
}

impl Exporter for JsonExporter {
    fn pair(&self, report: &PairReport) -> Result<String, ExportError> {
        pretty(report)
    }
    fn probe(&self, report: &ProbeReport) -> Result<String, ExportError> {
        pretty(report)
    }
    fn sweep(&self, results: &icb_sweep::SweepResults) -> Result<String, ExportError> {
        pretty(results)
    }
    fn gate(&self, report: &GateReport) -> Result<String, ExportError> {
        pretty(report)
    }
}
