//! `ic-bench history`: what `--history` recorded. `import` loads pair, gate and sweep JSON;
//! `list` the runs; `show node/NAME` and `show pair A B` a trend with a sparkline; `compare RUN_A
//! RUN_B` one row per case. Every answer as a table fitted to the terminal (`-o wide`: nothing
//! cut; identifiers never are) or `-o json`; the answers are `icb_history::answer`'s.

use icb_history::Thresholds;
use icb_history::answer::{Question, Style, answer, open_asked};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The history database (what --history wrote)
    #[arg(long = "history", global = true, value_name = "FILE", env = "IC_BENCH_HISTORY")]
    pub file: Option<PathBuf>,

    /// table (fitted to the terminal: COLUMNS, else its width), wide (nothing cut), or json
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,

    /// How long to wait for another run's lock
    #[arg(long, global = true, value_name = "DURATION", default_value = "30s", value_parser = icb_flags::common::parse_duration)]
    pub history_timeout: std::time::Duration,

    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Wide,
    Json,
}

#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Load pair, gate and sweep JSON files (ic-bench.pair/v1, gate/v1, sweep/v1)
    Import {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// The recorded runs, newest first
    List {
        #[arg(long, default_value_t = 30)]
        last: u32,
    },
    /// A trend: `show node/NAME` or `show pair A B`
    Show {
        #[arg(required = true, num_args = 1..=3, value_name = "node/NAME | pair A B")]
        what: Vec<String>,
        /// Runs to show
        #[arg(long, default_value_t = 30)]
        last: u32,
    },
    /// Two runs case by case: before, after, change, verdict
    Compare {
        run_a: String,
        run_b: String,
        /// Threshold of the verdict column (as --regression)
        #[arg(long, value_name = "PERCENT", value_parser = Thresholds::parse)]
        regression: Option<Thresholds>,
    },
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let importing = matches!(args.command, Sub::Import { .. });
    let mut h = open_asked(args.file.as_deref(), args.history_timeout, importing)?;
    let question = match args.command {
        Sub::Import { files } => Question::Import(files),
        Sub::List { last } => Question::List { last },
        Sub::Show { what, last } => Question::show(&what, last)?,
        Sub::Compare {
            run_a,
            run_b,
            regression,
        } => Question::Compare {
            run_a,
            run_b,
            thresholds: regression.unwrap_or_default(),
        },
    };
    // Identifiers are never cut; the case label fits the terminal unless -o wide.
    let style = match args.output {
        Format::Json => Style::Json,
        Format::Wide => Style::Table { width: None },
        Format::Table => Style::Table {
            width: Some(usize::from(icb_flags::output::width(false))),
        },
    };
    print!("{}", answer(&mut h, question, style)?);
    Ok(icb_core::exit::OK)
}
