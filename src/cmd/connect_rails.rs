//! `ic-bench connect HOST:PORT --rails`: the prefill host of a bare-metal rails run, against
//! `ic-bench serve --rails` (its rails agent on HOST:PORT) on the decode host, through
//! `icb_rails::remote`. The same rows, report, table and exit codes as `pair --rails`.
//! Here only the flags and the wiring.

use super::interrupt::Interrupt;
use icb_core::Locality;
use icb_pair::PairPlan;
use icb_pair::local::LocalOptions;
use icb_rails::bare_metal::selection;
use icb_rails::remote_run::{RemoteEnd, RemoteRailsRun, run_remote_rails};

pub fn run(args: super::connect::Args) -> anyhow::Result<i32> {
    args.engine.check()?;
    if args.plan.is_some() || args.json_line {
        anyhow::bail!("--rails writes one report for every rail: drop --plan/--json-line (use -o json)");
    }
    let (selection, _) = selection(args.rails.rails.as_deref(), args.rails.rail_devices.as_deref())?;
    let choice = args.rails.choice(selection);
    let mut pair = PairPlan::new(args.test.settings_for(args.engine.engine)?, args.expect.input()?);
    pair.ucx_profile = args.engine.ucx_profile;
    pair.ucx_peer_errors = args.ucx_peer_errors;
    let output = args.output.resolve(icb_report::ReportKind::Pair)?;
    // Two hosts unless told otherwise: that is what serve/connect --rails is for.
    let locality = args.placement.locality().unwrap_or(Locality::DifferentHosts);
    let mut side_flags = args.engine.side_flags();
    side_flags.extend(args.token.side_flags());
    let forward = tracing::enabled!(tracing::Level::INFO);
    let ranks = LocalOptions::ranks_of_this_binary(args.ucx.ucx_lib.clone(), side_flags, forward)?;
    let mut progress = icb_target::view::rail_lines(pair.settings.unit);
    let run = RemoteRailsRun::from_this_host(&args.server, (ranks, locality), choice, pair, args.connect_timeout);
    let interrupt = Interrupt::install()?;
    super::runtime()?.block_on(async {
        match run_remote_rails(run, &[], interrupt.token(), &mut progress).await? {
            RemoteEnd::NotStarted => Ok(interrupt.report("nothing was started")),
            RemoteEnd::Ran(result) => Ok(icb_target::emit::emit_outcome(*result, &output, &interrupt, None)?),
        }
    })
}
