//! Where a report goes: `-o FORMAT` (a `ValueEnum` per command), `--output-file`, and the
//! `--export-FORMAT FILE` list, resolved once into an `icb_report::output::Output` (with the one
//! terminal-width rule every table follows) before any work starts.

use crate::exports::ExportArgs;
use clap::Args as ClapArgs;
pub use icb_report::output::{Output, width};
use icb_report::{Format, ReportKind};
use std::path::PathBuf;

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
    /// With --kv-shape: the KV rows as SemiAnalysis CollectiveX's kv-transfer rows (docs/collectivex.md)
    Collectivex,
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
        let exports = self.exports.exports(kind)?;
        Ok(Output::new(format, self.output_file.clone(), exports)?)
    }
}
