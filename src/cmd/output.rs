//! Where a report goes: `-o FORMAT` (a `ValueEnum` per command), `--output-file`, and the
//! `--export-FORMAT FILE` list, resolved once into an [`Output`] before any work starts; and the
//! one terminal-width rule every table follows.

use super::export_args::ExportArgs;
use anyhow::Context as _;
use clap::Args as ClapArgs;
use icb_report::{Format, ReportKind, View};
use std::path::{Path, PathBuf};

/// `-o` of `connect` and `probe`: the report formats.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Fitted to the terminal
    Table,
    /// Every row, unfolded (probe env: + variables per role)
    Wide,
    Json,
    Junit,
    Prometheus,
    Svg,
}

impl From<OutputFormat> for Format {
    fn from(f: OutputFormat) -> Format {
        match f {
            OutputFormat::Table => Format::Table,
            OutputFormat::Wide => Format::Wide,
            OutputFormat::Json => Format::Json,
            OutputFormat::Junit => Format::Junit,
            OutputFormat::Prometheus => Format::Prometheus,
            OutputFormat::Svg => Format::Svg,
        }
    }
}

/// `-o` of `pair`: the report formats, and yaml for the pods `--dry-run` prints.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairFormat {
    /// Fitted to the terminal (with --dry-run: the pods as YAML)
    Table,
    /// Every row, unfolded
    Wide,
    /// The report (with --dry-run: the pods)
    Json,
    Junit,
    Prometheus,
    Svg,
    /// With --dry-run: the pods, as kubectl prints them
    Yaml,
}

/// `-o` of `connect` and `probe`, with where the report goes.
#[derive(ClapArgs, Debug, Clone)]
pub struct OutputArgs {
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,

    #[command(flatten)]
    pub dest: DestArgs,
}

impl OutputArgs {
    /// Checked before any work starts: a typo must not cost a whole run and its report.
    pub fn resolve(&self, kind: ReportKind) -> anyhow::Result<Output> {
        self.dest.resolve(self.format.into(), kind)
    }
}

/// `-o` of `pair`, with where the report goes.
#[derive(ClapArgs, Debug, Clone)]
pub struct PairOutputArgs {
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PairFormat::Table)]
    pub format: PairFormat,

    #[command(flatten)]
    pub dest: DestArgs,
}

/// `--output-file` and the `--export-FORMAT FILE` list.
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct DestArgs {
    /// Write the report to this file instead of stdout
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<PathBuf>,

    #[command(flatten)]
    pub exports: ExportArgs,
}

impl DestArgs {
    /// The output for `format`, refused up front when `--output-file` cannot be written or an
    /// export cannot show `kind`.
    pub fn resolve(&self, format: Format, kind: ReportKind) -> anyhow::Result<Output> {
        if let Some(path) = &self.output_file {
            check_writable(path)?;
        }
        Ok(Output {
            format,
            file: self.output_file.clone(),
            exports: self.exports.exports(kind)?,
            width: width(self.output_file.is_some()),
            history: None,
        })
    }
}

fn check_writable(path: &Path) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "--output-file {}: directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    if path.is_dir() {
        anyhow::bail!("--output-file {} is a directory: name a file", path.display());
    }
    Ok(())
}

/// A resolved output: the format, stdout or a file, the export files.
#[derive(Debug)]
pub struct Output {
    pub format: Format,
    file: Option<PathBuf>,
    exports: icb_report::Exports,
    width: u16,
    /// `pair --history/--baseline`: compares and records the report before it is written.
    pub history: Option<super::history_args::RunHistory>,
}

impl Output {
    /// Who reads the table: see [`width`].
    pub fn view(&self) -> View {
        View {
            width: self.width,
            wide: false,
        }
    }

    /// Writes `report` to every `--export-FORMAT` file.
    pub fn write_exports(&self, report: icb_report::Report<'_>) -> anyhow::Result<()> {
        self.exports.write(report)?;
        Ok(())
    }

    /// Writes `text` to `--output-file` or stdout.
    pub fn emit(&self, text: &str) -> anyhow::Result<()> {
        self.emit_to(text, &mut std::io::stdout().lock())
    }

    /// Writes `text` to `--output-file`, or else to `out`.
    pub fn emit_to(&self, text: &str, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        match &self.file {
            Some(path) => std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display())),
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

/// The one terminal-width rule: `COLUMNS` when set to a usable width (shells export it), else
/// the width of the terminal stdout goes to, else 80 (a pipe); a report written to a file is
/// fitted to `COLUMNS` or 80.
pub fn width(to_file: bool) -> u16 {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w >= 20);
    let terminal = || {
        use std::io::IsTerminal as _;
        let out = std::io::stdout();
        out.is_terminal()
            .then(|| terminal_size::terminal_size_of(out).map(|(w, _)| w.0))
            .flatten()
    };
    match to_file {
        true => columns.unwrap_or(80),
        false => columns.or_else(terminal).unwrap_or(80),
    }
}
