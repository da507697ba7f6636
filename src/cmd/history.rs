//! `ic-bench history`: what `--history` recorded. `import` loads pair, gate and sweep JSON;
//! `list` the runs; `show node/NAME` and `show pair A B` a trend with a sparkline; `compare RUN_A
//! RUN_B` one row per case. Every answer as a table fitted to the terminal (`-o wide`: nothing
//! cut; identifiers never are) or `-o json`.

use icb_history::{History, Thresholds, render};
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
    #[arg(long, global = true, value_name = "DURATION", default_value = "30s", value_parser = super::common::parse_duration)]
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

/// What `show` shows.
enum Subject {
    Node(String),
    Pair(String, String),
}

fn subject(what: &[String]) -> anyhow::Result<Subject> {
    match what {
        [one] if one.starts_with("node/") && one.len() > 5 => Ok(Subject::Node(one[5..].to_string())),
        [kind, a, b] if kind == "pair" => Ok(Subject::Pair(a.clone(), b.clone())),
        _ => anyhow::bail!("history show: give node/NAME or pair A B"),
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let Some(path) = args.file.clone() else {
        anyhow::bail!("history: give the database with --history FILE (or IC_BENCH_HISTORY)");
    };
    if !matches!(args.command, Sub::Import { .. }) && !path.exists() {
        anyhow::bail!(
            "--history {}: no such file (a run with --history FILE creates it)",
            path.display()
        );
    }
    let mut h = History::open(&path, args.history_timeout)?;
    // Identifiers are never cut; the case label fits the terminal unless -o wide.
    let width = (args.output == Format::Table).then(|| usize::from(super::output::width(false)));
    print!("{}", text(&mut h, args.command, args.output == Format::Json, width)?);
    Ok(icb_core::exit::OK)
}

/// What the subcommand prints: JSON, or its table.
fn text(h: &mut History, command: Sub, json: bool, width: Option<usize>) -> anyhow::Result<String> {
    Ok(match command {
        Sub::Import { files } => {
            let done = h.import(&files)?;
            match json {
                true => to_json(&done)?,
                false => done.iter().map(import_line).collect(),
            }
        }
        Sub::List { last } => {
            let runs = h.runs(last)?;
            if json { to_json(&runs)? } else { render::runs(&runs) }
        }
        Sub::Show { what, last } => match subject(&what)? {
            Subject::Node(n) => {
                let t = h.node_trend(&n, last)?;
                if json { to_json(&t)? } else { render::node(&n, &t) }
            }
            Subject::Pair(a, b) => {
                let t = h.pair_trend(&a, &b, last)?;
                if json {
                    to_json(&t)?
                } else {
                    render::pair(&a, &b, &t, width)
                }
            }
        },
        Sub::Compare {
            run_a,
            run_b,
            regression,
        } => {
            let rows = h.compare_runs(&run_a, &run_b, regression.unwrap_or_default())?;
            if json {
                to_json(&rows)?
            } else {
                render::compare(&run_a, &run_b, &rows, width)
            }
        }
    })
}

fn to_json(v: &impl serde::Serialize) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(v)? + "\n")
}

/// One imported file, as `history import` says it.
fn import_line(d: &icb_history::import::Imported) -> String {
    let replaced = if d.replaced { ", replaced" } else { "" };
    format!("{}: {} {} ({} figures{replaced})\n", d.file, d.kind, d.run_id, d.rows)
}
