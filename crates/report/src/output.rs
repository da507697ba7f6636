//! Where a report goes once the flags are read: its format, stdout or `--output-file`, the
//! `--export-FORMAT` files ([`Output`]), and the one terminal-width rule every table follows
//! ([`width`]). Resolved before any work starts: a typo must not cost a whole run.

use crate::{Exports, Format, View};
use std::path::{Path, PathBuf};

/// Why a report cannot go where it was asked to (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("--output-file {path}: directory {dir} does not exist")]
    NoDirectory { path: String, dir: String },
    #[error("--output-file {0} is a directory: name a file")]
    IsDirectory(String),
    #[error("cannot write {path}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Stdout(#[from] std::io::Error),
    #[error(transparent)]
    Export(#[from] crate::ExportFileError),
    #[error(transparent)]
    Render(#[from] crate::ExportError),
    #[error("cannot serialize the report")]
    Serialize(#[source] serde_json::Error),
}

/// A resolved output: the format, stdout or a file, the export files.
#[derive(Debug)]
pub struct Output {
    pub format: Format,
    file: Option<PathBuf>,
    exports: Exports,
    width: u16,
}

impl Output {
    /// The output for `format`, refused up front when `file` (`--output-file`) cannot be
    /// written; the table is fitted by [`width`].
    pub fn new(format: Format, file: Option<PathBuf>, exports: Exports) -> Result<Output, OutputError> {
        if let Some(path) = &file {
            check_writable(path)?;
        }
        Ok(Output {
            format,
            width: width(file.is_some()),
            file,
            exports,
        })
    }

    /// Who reads the table: see [`width`].
    pub fn view(&self) -> View {
        View {
            width: self.width,
            wide: false,
        }
    }

    /// Writes `report` to every `--export-FORMAT` file.
    pub fn write_exports(&self, report: crate::Report<'_>) -> Result<(), OutputError> {
        Ok(self.exports.write(report)?)
    }

    /// Writes `text` to `--output-file` or stdout.
    pub fn emit(&self, text: &str) -> Result<(), OutputError> {
        self.emit_to(text, &mut std::io::stdout().lock())
    }

    /// A pair report as `connect` writes it on `out` (its reserved stdout): one compact JSON
    /// line with the table on stderr (`json_line`), or as `-o` asks; then the export files.
    pub fn emit_pair(
        &self,
        report: &icb_core::PairReport,
        json_line: bool,
        out: &mut dyn std::io::Write,
    ) -> Result<(), OutputError> {
        let view = self.view();
        if json_line {
            let line = serde_json::to_string(report).map_err(OutputError::Serialize)?;
            writeln!(out, "{line}")?;
            out.flush()?;
            if let Ok(table) = crate::render_pair_in(report, Format::Table, view) {
                eprintln!("{table}");
            }
        } else {
            self.emit_to(&crate::render_pair_in(report, self.format, view)?, out)?;
        }
        self.write_exports(crate::Report::Pair(report))
    }

    /// Writes `text` to `--output-file`, or else to `out` (ending in one newline).
    pub fn emit_to(&self, text: &str, out: &mut dyn std::io::Write) -> Result<(), OutputError> {
        match &self.file {
            Some(path) => std::fs::write(path, text).map_err(|source| OutputError::Write {
                path: path.display().to_string(),
                source,
            }),
            None => {
                out.write_all(text.as_bytes())?;
                if !text.ends_with('\n') {
                    out.write_all(b"\n")?;
                }
                out.flush()?;
                Ok(())
            }
        }
    }
}

/// `--output-file` must name a file in a directory that exists.
fn check_writable(path: &Path) -> Result<(), OutputError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(OutputError::NoDirectory {
            path: path.display().to_string(),
            dir: dir.display().to_string(),
        });
    }
    if path.is_dir() {
        return Err(OutputError::IsDirectory(path.display().to_string()));
    }
    Ok(())
}

/// The one terminal-width rule: `COLUMNS` when set to a usable width (shells export it), else
/// the width of the terminal stdout goes to, else 80 (a pipe); a report written to a file is
/// fitted to `COLUMNS` or 80.
pub fn width(to_file: bool) -> u16 {
    let columns = std::env::var("COLUMNS").ok();
    let terminal = || {
        use std::io::IsTerminal as _;
        let out = std::io::stdout();
        out.is_terminal()
            .then(|| terminal_size::terminal_size_of(out).map(|(w, _)| w.0))
            .flatten()
    };
    width_of(columns.as_deref(), to_file, terminal)
}

/// [`width`] on given inputs: `COLUMNS`, a file or not, the terminal's width if any.
fn width_of(columns: Option<&str>, to_file: bool, terminal: impl FnOnce() -> Option<u16>) -> u16 {
    let columns = columns.and_then(|c| c.trim().parse::<u16>().ok()).filter(|w| *w >= 20);
    match to_file {
        true => columns.unwrap_or(80),
        false => columns.or_else(terminal).unwrap_or(80),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_wins_then_the_terminal_then_80_and_a_file_never_asks_the_terminal() {
        let tty = || Some(132);
        assert_eq!(width_of(Some("100"), false, tty), 100);
        assert_eq!(width_of(None, false, tty), 132);
        assert_eq!(width_of(Some("12"), false, tty), 132, "too narrow to be meant");
        assert_eq!(width_of(Some("wide"), false, || None), 80);
        assert_eq!(width_of(None, true, || panic!("a file has no terminal")), 80);
        assert_eq!(width_of(Some(" 90 "), true, tty), 90);
    }

    #[test]
    fn an_output_file_must_be_a_file_in_a_directory_that_exists() {
        let dir = tempfile::tempdir().unwrap();
        let nowhere = dir.path().join("missing").join("r.json");
        let e = Output::new(Format::Json, Some(nowhere), Exports::new()).unwrap_err();
        assert!(matches!(e, OutputError::NoDirectory { .. }), "{e}");
        let e = Output::new(Format::Json, Some(dir.path().to_path_buf()), Exports::new()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("--output-file {} is a directory: name a file", dir.path().display())
        );
        let file = dir.path().join("r.txt");
        let out = Output::new(Format::Table, Some(file.clone()), Exports::new()).unwrap();
        out.emit_to("report", &mut std::io::sink()).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "report");
        let stdout = Output::new(Format::Table, None, Exports::new()).unwrap();
        let mut buf = Vec::new();
        stdout.emit_to("line", &mut buf).unwrap();
        assert_eq!(buf, b"line\n");
    }
}
