//! `ic-bench`: tells, with evidence, whether the fabric under disaggregated LLM serving is fast.
//!
//! This binary parses arguments and wires the crates together, as ripgrep does: each command's
//! clap `Args` are turned once into what to run (for `pair`, `cmd::pair::PairCommand`), and the
//! crates decide the rest. What is still decided here rather than in a crate is listed in
//! docs/architecture.md ("What `src/` decides").
#![forbid(unsafe_code)]

mod cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

/// Version line embedded by build.rs: crate version, git commit, UCX headers version.
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("IC_BENCH_GIT_COMMIT"),
    ", UCX headers ",
    env!("IC_BENCH_UCX_HEADERS"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "ic-bench",
    about = "Tells, with evidence, whether the fabric under disaggregated LLM serving is really fast",
    long_about = None,
    disable_version_flag = true,
    after_help = "Exit codes: 0 pass (or warnings only), 1 verdict failed, 2 usage or setup error, 130 interrupted (after cleanup)."
)]
struct Cli {
    /// Print version, git commit, the UCX headers version and the UCX found at run time
    #[arg(short = 'V', long, global = false)]
    version: bool,

    /// More logging on stderr (-v info, -vv debug)
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    /// No progress on stderr: pair's live line (drawn only on a terminal), sweep's bar and its per-pair log lines
    #[arg(short, long, global = true)]
    quiet: bool,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Active test between a prefill side and a decode side (local processes or Kubernetes pods)
    Pair(Box<cmd::pair::Args>),
    /// Run the decode-side server (like ucx_perftest without a peer address)
    Serve(cmd::serve::Args),
    /// Run the prefill-side client against a server and report
    Connect(Box<cmd::connect::Args>),
    /// Read-only checks of recipes, nodes and NIXL installs
    Probe(cmd::probe::Args),
    /// Detect NCCL_IB_HCA / GID index / UCX_NET_DEVICES from sysfs and print them
    DetectEnv(cmd::detect_env::Args),
    /// Pre-benchmark gate: probe env + probe node + the pair with the recipe's env, one verdict
    Gate(Box<cmd::gate::Args>),
    /// Qualify many nodes: measure node pairs on a schedule, name the bad nodes, write a results file
    Sweep(Box<cmd::sweep::Args>),
    /// What --history recorded: import, list, show node/NAME | pair A B, compare RUN_A RUN_B
    History(cmd::history::Args),
    /// Delete leftover ic-bench pods (by label), or with --local dead local runs' namespaces
    Gc(cmd::gc::Args),
    /// This node's rails (or with --counters its NIC counters) as one JSON line, for `pair --rails` on Kubernetes
    #[command(hide = true)]
    RailInfo(cmd::rail_info::Args),
    /// One TP rank of `pair --kv-shape` (started by pair itself)
    #[command(hide = true)]
    KvRank(Box<cmd::kv_rank::Args>),
    /// The coordinator of `pair --kv-shape`'s ranks, run in the decode pod (started by pair itself)
    #[command(hide = true)]
    KvCoordinate(cmd::kv_coordinate::Args),
    /// Print shell completions
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    // SIGINT/SIGTERM/SIGHUP → 130 for every subcommand, from the first instant; commands that
    // clean up claim the handler.
    if let Err(e) = cmd::interrupt::Interrupt::install_for_process() {
        eprintln!("ic-bench: error: {}", one_line_error(&e.into()));
        return ExitCode::from(icb_core::exit::USAGE_OR_SETUP as u8);
    }
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            eprintln!(
                "ic-bench: error: {} (see ic-bench --help)",
                icb_flags::one_line_clap_error(&e)
            );
            return ExitCode::from(icb_core::exit::USAGE_OR_SETUP as u8);
        }
        Err(e) => {
            // --help and the like: clap's own rendering, on stdout.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    icb_report::logging::init(cli.verbose);
    // UCX's own warnings and errors become one summary line unless asked for (-v, UCX_LOG_LEVEL).
    let ucx_prints_its_log = cli.verbose > 0 || std::env::var_os("UCX_LOG_LEVEL").is_some();
    ucx::log::set_passthrough(ucx_prints_its_log);
    icb_report::live::set_quiet(cli.quiet);
    if cli.version {
        cmd::version::print(LONG_VERSION);
        return ExitCode::SUCCESS;
    }
    let Some(command) = cli.command else {
        let _ = Cli::command().print_help();
        return ExitCode::from(icb_core::exit::USAGE_OR_SETUP as u8);
    };
    let result = dispatch(command);
    if !ucx_prints_its_log && let Some(line) = ucx::log::summary().line() {
        eprintln!("ic-bench: {line}");
    }
    let code = exit_code(result);
    if icb_nixl_engine::nixl_was_used() {
        // NIXL's wheel crashes in library destructors at exit: leave without running them (the
        // reports are written; `exit_process` flushes Rust's and C's output first).
        icb_nixl_engine::exit_process(code);
    }
    ExitCode::from(code as u8)
}

/// The command line, with what the types alone cannot say: whether `pair`'s or `gate`'s
/// `--engine` was given (a `--kv-shape` run moves its blocks with NIXL wherever it loads, unless
/// told otherwise).
fn parse() -> Result<Cli, clap::Error> {
    let matches = Cli::command().try_get_matches()?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    let given = |command: &str| {
        matches
            .subcommand_matches(command)
            .and_then(|m| m.value_source("engine"))
            .is_some_and(|s| s == clap::parser::ValueSource::CommandLine)
    };
    match cli.command.as_mut() {
        Some(Command::Pair(args)) => args.engine.engine_given = given("pair"),
        Some(Command::Gate(args)) => args.engine.engine_given = given("gate"),
        _ => {}
    }
    Ok(cli)
}

fn dispatch(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Pair(args) => cmd::pair::run(*args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Connect(args) => cmd::connect::run(*args),
        Command::Probe(args) => cmd::probe::run(args),
        Command::DetectEnv(args) => cmd::detect_env::run(args),
        Command::Gc(args) => cmd::gc::run(args),
        Command::History(args) => cmd::history::run(args),
        Command::Sweep(args) => cmd::sweep::run(*args),
        Command::Gate(args) => cmd::gate::run(*args),
        Command::RailInfo(args) => cmd::rail_info::run(args),
        Command::KvRank(args) => cmd::kv_rank::run(*args),
        Command::KvCoordinate(args) => cmd::kv_coordinate::run(args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "ic-bench", &mut std::io::stdout());
            Ok(icb_core::exit::OK)
        }
    }
}

/// A command's end as the process's exit code; an error is said in one line on stderr.
fn exit_code(result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(code) => code.clamp(0, 255),
        Err(e) => match e.downcast_ref::<cmd::interrupt::Interrupted>() {
            // Already said on stderr, in the signal handler's one line.
            Some(cmd::interrupt::Interrupted(code)) => (*code).clamp(0, 255),
            None => {
                eprintln!("ic-bench: error: {}", one_line_error(&e));
                icb_core::exit::USAGE_OR_SETUP
            }
        },
    }
}

/// The error chain on one line (`icb_core::error_line`: no repeated cause, secrets masked).
pub(crate) fn one_line_error(e: &anyhow::Error) -> String {
    icb_core::error_line::one_line(e.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chain_is_one_line_without_repeats() {
        let inner = anyhow::anyhow!("Address already in use (os error 98)");
        let e =
            inner.context("cannot bind 0.0.0.0:1: Address already in use (os error 98): pick another --listen port");
        assert_eq!(
            one_line_error(&e),
            "cannot bind 0.0.0.0:1: Address already in use (os error 98): pick another --listen port"
        );
        let e = anyhow::anyhow!("root cause").context("what failed");
        assert_eq!(one_line_error(&e), "what failed: root cause");
    }

    #[test]
    fn clap_errors_become_one_line() {
        let e = Cli::try_parse_from(["ic-bench", "pair", "--bogus"])
            .err()
            .expect("an error");
        let line = icb_flags::one_line_clap_error(&e);
        assert!(line.starts_with("unexpected argument '--bogus' found"), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn a_value_outside_a_fixed_set_lists_the_set() {
        let e = Cli::try_parse_from(["ic-bench", "pair", "--local", "-o", "bogus"])
            .err()
            .expect("an error");
        let line = icb_flags::one_line_clap_error(&e);
        assert!(
            line.starts_with("invalid value 'bogus' for '--output <FORMAT>'; possible values: table, wide, json"),
            "{line}"
        );
        assert!(line.contains("yaml") && !line.contains('\n'), "{line}");
    }

    #[test]
    fn sweep_and_gate_sizes_take_ranges_like_pair() {
        let sizes = |cli: Cli| match cli.command {
            Some(Command::Sweep(a)) => icb_flags::common::SizeList::all(&a.sizes),
            Some(Command::Gate(a)) => icb_flags::common::SizeList::all(&a.sizes),
            _ => panic!("not a sweep or a gate"),
        };
        let sweep = Cli::try_parse_from(["ic-bench", "sweep", "--sizes", "8..32,1MiB"]).expect("parses");
        assert_eq!(sizes(sweep), vec![8, 16, 32, 1 << 20]);
        let gate = Cli::try_parse_from([
            "ic-bench",
            "gate",
            "--prefill",
            "node/a",
            "--decode",
            "node/b",
            "--sizes",
            "4KiB..16KiB",
        ])
        .expect("parses");
        assert_eq!(sizes(gate), vec![4096, 8192, 16384]);
        let default =
            Cli::try_parse_from(["ic-bench", "gate", "--prefill", "node/a", "--decode", "node/b"]).expect("parses");
        assert_eq!(sizes(default), vec![64 << 10, 1 << 20]);
    }

    #[test]
    fn a_missing_argument_is_named() {
        let e = Cli::try_parse_from(["ic-bench", "pair", "--prefill", "node/a"])
            .err()
            .expect("an error");
        let line = icb_flags::one_line_clap_error(&e);
        assert!(
            line.starts_with("the following required arguments were not provided: --decode <DECODE>"),
            "{line}"
        );
    }
}
