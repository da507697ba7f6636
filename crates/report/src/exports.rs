//! One way out for every command (hyperfine's ExportManager): the report on stdout in the `-o`
//! format, plus any number of files (`--export-json FILE`, `--export-junit FILE`, …), each
//! rewritten whole and atomically every time the command writes (a sweep after every pair), so a
//! reader never sees half a file. Which formats can show which report is known up front
//! ([`Exports::check`]), so a wrong combination is refused before anything runs.

use crate::format::{ExportError, Exporter, Format, View, masked_gate, masked_pair, masked_probe, masked_sweep};
use icb_core::checks::ProbeReport;
use icb_core::model::{GateReport, PairReport};
use icb_sweep::SweepResults;
use std::path::{Path, PathBuf};

/// Any report ic-bench writes.
#[derive(Clone, Copy)]
pub enum Report<'a> {
    Pair(&'a PairReport),
    Probe(&'a ProbeReport),
    Sweep(&'a SweepResults),
    Gate(&'a GateReport),
}

/// The kinds of report, for [`FileFormat::supports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    Pair,
    Probe,
    Sweep,
    Gate,
}

impl ReportKind {
    fn what(self) -> &'static str {
        match self {
            ReportKind::Pair => "a pair report",
            ReportKind::Probe => "a probe report",
            ReportKind::Sweep => "a sweep",
            ReportKind::Gate => "a gate report",
        }
    }
}

impl Report<'_> {
    pub fn kind(&self) -> ReportKind {
        match self {
            Report::Pair(_) => ReportKind::Pair,
            Report::Probe(_) => ReportKind::Probe,
            Report::Sweep(_) => ReportKind::Sweep,
            Report::Gate(_) => ReportKind::Gate,
        }
    }

    /// The report rendered by `exporter`, from a masked copy (what may be printed).
    pub fn render(&self, exporter: &dyn Exporter) -> Result<String, ExportError> {
        match self {
            Report::Pair(r) => exporter.pair(&masked_pair(r)),
            Report::Probe(r) => exporter.probe(&masked_probe(r)),
            Report::Sweep(r) => exporter.sweep(&masked_sweep(r)),
            Report::Gate(r) => exporter.gate(&masked_gate(r)),
        }
    }
}

/// What an export file is written as: one of the `-o` formats, or the sweep's HTML page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Format(Format),
    Html,
}

impl FileFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            FileFormat::Format(f) => f.as_str(),
            FileFormat::Html => "html",
        }
    }

    /// Whether this format has something to show for `kind` (the exporters' own answer, known
    /// before a report exists).
    pub fn supports(self, kind: ReportKind) -> Result<(), ExportError> {
        use Format::*;
        let ok = match (self, kind) {
            (FileFormat::Html, k) => k == ReportKind::Sweep,
            (FileFormat::Format(Svg | Collectivex), k) => k == ReportKind::Pair,
            (FileFormat::Format(Prometheus), k) => k != ReportKind::Gate,
            (FileFormat::Format(Table | Wide | Json | Junit), _) => true,
        };
        if ok {
            return Ok(());
        }
        Err(ExportError::Unsupported {
            format: self.as_str(),
            what: kind.what(),
            instead: match kind {
                ReportKind::Gate => "table, json or junit",
                ReportKind::Sweep => "table, json, junit, prometheus or html",
                ReportKind::Probe => "table, json, junit or prometheus",
                ReportKind::Pair => "table, json, junit, prometheus, svg or collectivex",
            },
        })
    }

    fn exporter(self) -> Box<dyn Exporter> {
        match self {
            FileFormat::Format(f) => f.exporter(),
            FileFormat::Html => Box::new(crate::HtmlExporter),
        }
    }
}

/// Why an export file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportFileError {
    #[error(transparent)]
    Render(#[from] ExportError),
    #[error("cannot write --export-{format} {path}: {source}")]
    Io {
        format: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The files a command exports to, besides its `-o` output.
#[derive(Debug, Clone, Default)]
pub struct Exports {
    files: Vec<(FileFormat, PathBuf)>,
}

impl Exports {
    pub fn new() -> Exports {
        Exports::default()
    }

    pub fn add(&mut self, format: FileFormat, path: impl Into<PathBuf>) {
        self.files.push((format, path.into()));
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Refuses, before anything runs, a file format that cannot show `kind`.
    pub fn check(&self, kind: ReportKind) -> Result<(), ExportError> {
        self.files.iter().try_for_each(|(f, _)| f.supports(kind))
    }

    /// Writes `report` to every file: each rendered, then replaced atomically (a temporary file
    /// in the same directory, renamed over the old one).
    pub fn write(&self, report: Report<'_>) -> Result<(), ExportFileError> {
        for (format, path) in &self.files {
            let text = report.render(format.exporter().as_ref())?;
            replace(path, &text).map_err(|source| ExportFileError::Io {
                format: format.as_str(),
                path: path.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

/// The `-o` output of `report` for a reader with `view`.
pub fn render_primary(report: Report<'_>, format: Format, view: View) -> Result<String, ExportError> {
    report.render(format.exporter_in(view).as_ref())
}

fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_that_cannot_show_a_report_are_refused_up_front() {
        let mut e = Exports::new();
        e.add(FileFormat::Format(Format::Json), "/tmp/x.json");
        assert!(e.check(ReportKind::Gate).is_ok());
        e.add(FileFormat::Html, "/tmp/x.html");
        let err = e.check(ReportKind::Gate).unwrap_err().to_string();
        assert_eq!(err, "-o html cannot show a gate report: use table, json or junit");
        assert!(e.check(ReportKind::Sweep).is_ok());
        assert!(FileFormat::Format(Format::Svg).supports(ReportKind::Probe).is_err());
        assert!(
            FileFormat::Format(Format::Prometheus)
                .supports(ReportKind::Pair)
                .is_ok()
        );
    }

    #[test]
    fn every_file_is_written_whole_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("gate.json");
        let junit = dir.path().join("gate.xml");
        std::fs::write(&json, "old and longer than the new content ".repeat(100)).unwrap();
        let mut e = Exports::new();
        e.add(FileFormat::Format(Format::Json), &json);
        e.add(FileFormat::Format(Format::Junit), &junit);
        let mut gate = GateReport::new();
        gate.conclude();
        e.write(Report::Gate(&gate)).unwrap();
        let back: GateReport = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(back.verdict, gate.verdict);
        assert!(std::fs::read_to_string(&junit).unwrap().contains("<testsuites"));
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 2, "no temporary file left behind");
        let bad = Exports {
            files: vec![(FileFormat::Format(Format::Json), dir.path().join("no/such/dir/x.json"))],
        };
        let err = bad.write(Report::Gate(&gate)).unwrap_err().to_string();
        assert!(err.starts_with("cannot write --export-json"), "{err}");
    }
}
