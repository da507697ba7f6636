//! `ic-bench`: tells, with evidence, whether the fabric under disaggregated LLM serving is fast.
//!
//! This binary only parses arguments and wires the crates together; the logic lives in `crates/`.

mod cmd;

use clap::{CommandFactory, Parser, Subcommand};
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
    Connect(cmd::connect::Args),
    /// Read-only checks of recipes, nodes and NIXL installs
    Probe(cmd::probe::Args),
    /// Detect NCCL_IB_HCA / GID index / UCX_NET_DEVICES from sysfs and print them
    DetectEnv(cmd::detect_env::Args),
    /// Delete leftover ic-bench pods (by label)
    Gc(cmd::gc::Args),
    /// Print shell completions
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                icb_core::exit::USAGE_OR_SETUP
            } else {
                icb_core::exit::OK
            };
            let _ = e.print();
            return ExitCode::from(code as u8);
        }
    };
    init_logging(cli.verbose);
    if cli.version {
        cmd::version::print(LONG_VERSION);
        return ExitCode::SUCCESS;
    }
    let Some(command) = cli.command else {
        let _ = Cli::command().print_help();
        return ExitCode::from(icb_core::exit::USAGE_OR_SETUP as u8);
    };
    let result = match command {
        Command::Pair(args) => cmd::pair::run(*args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Connect(args) => cmd::connect::run(args),
        Command::Probe(args) => cmd::probe::run(args),
        Command::DetectEnv(args) => cmd::detect_env::run(args),
        Command::Gc(args) => cmd::gc::run(args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "ic-bench", &mut std::io::stdout());
            Ok(icb_core::exit::OK)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            // One line: the chain joined, so the cause and the fix are both visible.
            let msg = e.chain().map(|c| c.to_string()).collect::<Vec<_>>().join(": ");
            eprintln!("ic-bench: error: {msg}");
            ExitCode::from(icb_core::exit::USAGE_OR_SETUP as u8)
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        // kube-rs logs every failed attempt at ERROR; ic-bench reports the outcome in one line itself.
        0 => "warn,kube_client=off,kube_runtime=off",
        1 => "info,kube_client=warn",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("IC_BENCH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
