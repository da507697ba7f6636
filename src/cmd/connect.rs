//! `ic-bench connect HOST:PORT`: the prefill side; runs every case against `ic-bench serve`.
//!
//! Run by hand it takes its settings from flags and prints a report. Run by a launcher of the pair
//! pipeline it gets one `--plan` document instead (settings and the resolved expectation) and
//! prints the typed protocol lines (`icb_core::protocol`): one per case, then the report.

use anyhow::Context as _;
use icb_core::protocol::{ChildPlan, SideWriter};
use icb_core::{Locality, ToolInfo};
use icb_flags::common::{EngineArgs, ExpectArgs, TestArgs, UcxArgs, parse_duration};
use icb_flags::output::OutputArgs;
use icb_sides::connect::{ByHand, Side, run_by_hand, run_planned};
use std::sync::Arc;
use std::time::Duration;

/// The flags `--plan` decides (settings, expectation, placement, output): refused beside it.
/// `every_flag_is_decided_by_the_plan_or_named_as_not` keeps the list whole.
const PLAN_DECIDES: [&str; 30] = [
    "profile",
    "tests",
    "sizes",
    "blocks",
    "batches",
    "memory",
    "warmup",
    "min_iterations",
    "min_time",
    "max_time",
    "window",
    "unit",
    "require_cuda",
    "cuda_optional",
    "cuda_alloc",
    "min_host_bw",
    "min_cuda_bw",
    "min_bw_size",
    "allow_tcp",
    "expect_config",
    "json_line",
    "ucx_peer_errors",
    "placement",
    "connect_timeout",
    "format",
    "output_file",
    "export_json",
    "export_junit",
    "export_prometheus",
    "export_collectivex",
];

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Address of `ic-bench serve`, HOST:PORT
    #[arg(value_name = "HOST:PORT")]
    pub server: String,

    #[command(flatten)]
    pub token: icb_flags::common::TokenArgs,

    #[command(flatten)]
    pub test: TestArgs,

    #[command(flatten)]
    pub expect: ExpectArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub ucx: UcxArgs,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Where the two sides run: auto (compares the kernels' boot ids), same-host, different-hosts
    #[arg(long, value_name = "WHERE", default_value = "auto", value_parser = parse_placement)]
    pub placement: PlacementChoice,

    /// Print exactly one compact JSON line (the report) on stdout; human output goes to stderr
    #[arg(long)]
    pub json_line: bool,

    /// Give up connecting to the server after this long
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// Preflight (an init container before the serving engine starts; docs/kubernetes.md): the whole run, from the first connection attempt to the verdict, within this long, e.g. 10s. The server is waited for within 30 % of it and the cases are fitted into it; a run the deadline cuts short exits 2 (not known), never 0
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "plan")]
    pub within: Option<Duration>,

    /// Use UCX peer error handling on the endpoints (as NIXL does; UCX then skips sysv/posix)
    #[arg(long)]
    pub ucx_peer_errors: bool,

    /// The whole run as one document from the pair pipeline (icb_core::protocol::ChildPlan, JSON);
    /// prints protocol lines instead of a report. For launchers, not for people. Every flag the
    /// plan decides instead is refused beside it.
    #[arg(long, value_name = "JSON", hide = true, conflicts_with_all = PLAN_DECIDES)]
    pub plan: Option<String>,

    #[command(flatten)]
    pub rails: icb_flags::rails::RailArgs,
}

/// `--placement`: a forced locality, or `None` for auto.
#[derive(Debug, Clone, Copy)]
pub struct PlacementChoice(Option<Locality>);

impl PlacementChoice {
    /// The forced locality; `None` for auto.
    pub fn locality(&self) -> Option<Locality> {
        self.0
    }
}

fn parse_placement(s: &str) -> Result<PlacementChoice, String> {
    match s {
        "auto" => Ok(PlacementChoice(None)),
        "same-host" => Ok(PlacementChoice(Some(Locality::SameHost))),
        "different-hosts" => Ok(PlacementChoice(Some(Locality::DifferentHosts))),
        _ => Err(format!(
            "'{s}' is not a placement: use auto, same-host or different-hosts"
        )),
    }
}

/// What goes into every report's `tool` field.
pub fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "ic-bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("IC_BENCH_GIT_COMMIT").into(),
        ucx_headers: env!("IC_BENCH_UCX_HEADERS").into(),
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(flag) = args.rails.stray_flag() {
        anyhow::bail!("{flag} needs --rails or --rail-devices");
    }
    if args.rails.wanted() {
        if args.within.is_some() {
            anyhow::bail!("--within bounds one pair's preflight, not a rails run: drop --within or --rails");
        }
        return super::connect_rails::run(args);
    }
    if let Some(plan) = &args.plan {
        let plan = ChildPlan::from_json(plan).context("--plan")?;
        return run_with_plan(&args, plan);
    }
    run_human(&args)
}

/// The engine flags as `icb_sides` takes them (the one place that picks the engine).
pub fn engine_choice(engine: &EngineArgs) -> icb_sides::EngineChoice {
    icb_sides::EngineChoice {
        kind: engine.engine,
        nixl: engine.nixl_options(),
    }
}

/// Who this side is, for either way of connecting.
fn side(args: &Args, token: Option<icb_engine::auth::Token>) -> Side {
    Side {
        server: args.server.clone(),
        engine: engine_choice(&args.engine),
        ucx_lib: args.ucx.ucx_lib.clone(),
        ucx_profile: args.engine.ucx_profile,
        tool: tool_info(),
        token,
    }
}

/// The human `connect`: one pair against `--server`, the report printed.
fn run_human(args: &Args) -> anyhow::Result<i32> {
    args.engine.check()?;
    let mut settings = args.test.settings_for(args.engine.engine)?;
    if let Some(within) = args.within {
        let note = icb_engine::preflight::fit(&mut settings, within).map_err(anyhow::Error::msg)?;
        note.into_iter().for_each(|n| eprintln!("ic-bench: {n}"));
    }
    // Resolved before stdout is set aside: the width of the terminal the report goes to.
    let output = args.output.resolve(icb_report::ReportKind::Pair)?;
    let mut out = super::report_out::reserve()?;
    let interrupt = super::interrupt::Interrupt::install()?;
    let expectation = args.expect.input()?;
    let run = ByHand {
        settings,
        connect_timeout: args.connect_timeout,
        within: args.within,
        locality: args.placement.0,
        expect_flags: expectation.flags,
        expect_config: expectation.config,
        ucx_peer_errors: args.ucx_peer_errors,
    };
    let emit = |report: &_| Ok::<_, anyhow::Error>(output.emit_pair(report, args.json_line, &mut out)?);
    run_by_hand(&side(args, args.token.resolve()?), run, &interrupt, emit)
}

/// `connect --plan`: the prefill side of a pipeline run. Prints one protocol line per case and
/// then the report; the parent renders and judges.
fn run_with_plan(args: &Args, plan: ChildPlan) -> anyhow::Result<i32> {
    args.engine.check()?;
    let out = Arc::new(SideWriter::new(super::report_out::reserve()?));
    let interrupt = super::interrupt::Interrupt::install()?;
    run_planned(&side(args, args.token.resolve()?), &plan, &interrupt, &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags `--plan` does not decide: who the server is, the token, which engine and UCX,
    /// the preflight bound (refused beside `--plan` on its own), and the rails' flags (a rails
    /// run takes no plan).
    const PLAN_LEAVES: [&str; 13] = [
        "server",
        "token_file",
        "ucx_lib",
        "engine",
        "nixl_lib",
        "ucx_profile",
        "within",
        "plan",
        "rails",
        "rail_devices",
        "rail_pattern",
        "rail_margin",
        "rail_alone",
    ];

    #[test]
    fn every_flag_is_decided_by_the_plan_or_named_as_not() {
        let command = <Args as clap::Args>::augment_args(clap::Command::new("connect"));
        let mut unnamed = vec![];
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            let decided = PLAN_DECIDES.contains(&id);
            assert!(!(decided && PLAN_LEAVES.contains(&id)), "{id} is in both lists");
            if !decided && !PLAN_LEAVES.contains(&id) {
                unnamed.push(id.to_string());
            }
        }
        assert!(
            unnamed.is_empty(),
            "say whether --plan decides {unnamed:?}: add each to PLAN_DECIDES or PLAN_LEAVES"
        );
        let ids: Vec<&str> = command.get_arguments().map(|a| a.get_id().as_str()).collect();
        for id in PLAN_DECIDES.iter().chain(&PLAN_LEAVES) {
            assert!(ids.contains(id), "{id} is not a flag of connect");
        }
    }
}
