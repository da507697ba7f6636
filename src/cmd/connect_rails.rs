//! `ic-bench connect HOST:PORT --rails`: the prefill host of a bare-metal rails run, against
//! `ic-bench serve --rails` (its rails agent on HOST:PORT) on the decode host, through
//! `icb_pair::rails::remote`. The same rows, report, table and exit codes as `pair --rails`.
//! Here only the flags and the wiring.

use super::interrupt::Interrupt;
use super::serve_rails::{host_name, rail_tree, rank_options, selection};
use icb_core::Locality;
use icb_pair::rails::remote_run::{RemoteEnd, RemoteRailsRun, run_remote_rails};
use icb_pair::{Deadlines, PairPlan};
use std::time::Duration;

/// The pair plan of every row, from connect's flags.
fn pair_plan(args: &super::connect::Args) -> anyhow::Result<PairPlan> {
    let settings = args.test.settings_for(args.engine.engine)?;
    let mut plan = PairPlan::new(settings, args.expect.input()?);
    plan.ucx_profile = args.engine.ucx_profile;
    plan.ucx_peer_errors = args.ucx_peer_errors;
    plan.set_deadlines(Deadlines::local(&plan.settings, Duration::from_secs(60)));
    plan.connect_timeout = args.connect_timeout;
    Ok(plan)
}

pub fn run(args: super::connect::Args) -> anyhow::Result<i32> {
    args.engine.check()?;
    if args.plan.is_some() || args.json_line {
        anyhow::bail!("--rails writes one report for every rail: drop --plan/--json-line (use -o json)");
    }
    let (selection, _) = selection(args.rails.rails.as_deref(), args.rails.rail_devices.as_ref())?;
    let choice = args.rails.choice(selection);
    let pair = pair_plan(&args)?;
    let output = args.output.resolve(icb_report::ReportKind::Pair)?;
    // Two hosts unless told otherwise: that is what serve/connect --rails is for.
    let locality = args.placement.locality().unwrap_or(Locality::DifferentHosts);
    let forward = tracing::enabled!(tracing::Level::INFO);
    let mut side_flags = args.engine.side_flags();
    side_flags.extend(args.token.side_flags());
    let opts = rank_options(args.ucx.ucx_lib.clone(), side_flags, forward)?;
    let mut progress = super::pair_rails::progress(pair.settings.unit);
    let run = RemoteRailsRun {
        agent: &args.server,
        ranks: opts,
        locality,
        prefill_node: host_name(),
        tree: rail_tree(),
        choice,
        pair,
    };
    let interrupt = Interrupt::install()?;
    super::common::runtime()?.block_on(async {
        match run_remote_rails(run, &[], interrupt.token(), &mut progress).await? {
            RemoteEnd::NotStarted => Ok(interrupt.report("nothing was started")),
            RemoteEnd::Ran(result) => super::common::emit_outcome(*result, &output, &interrupt, None),
        }
    })
}
