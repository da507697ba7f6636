//! `--export-FORMAT FILE` beside `-o`, for every command that writes a report: each file is
//! rewritten whole (atomically) whenever the command writes its report (`icb_report::Exports`).

use icb_report::{Exports, FileFormat, Format, ReportKind};
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ExportArgs {
    /// Also write the JSON report to FILE (repeatable)
    #[arg(long, value_name = "FILE")]
    pub export_json: Vec<PathBuf>,

    /// Also write JUnit XML to FILE (repeatable)
    #[arg(long, value_name = "FILE")]
    pub export_junit: Vec<PathBuf>,

    /// Also write Prometheus text exposition to FILE (node_exporter's textfile collector)
    #[arg(long, value_name = "FILE")]
    pub export_prometheus: Vec<PathBuf>,

    /// Also write a pair --kv-shape report's rows as CollectiveX kv-transfer rows to FILE
    #[arg(long, value_name = "FILE")]
    pub export_collectivex: Vec<PathBuf>,
}

impl ExportArgs {
    /// The export files, refused up front when a format cannot show `kind`.
    pub fn exports(&self, kind: ReportKind) -> anyhow::Result<Exports> {
        let mut exports = Exports::new();
        for (format, files) in [
            (Format::Json, &self.export_json),
            (Format::Junit, &self.export_junit),
            (Format::Prometheus, &self.export_prometheus),
            (Format::Collectivex, &self.export_collectivex),
        ] {
            for f in files {
                exports.add(FileFormat::Format(format), f);
            }
        }
        exports.check(kind)?;
        Ok(exports)
    }
}
