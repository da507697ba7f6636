//! `ic-bench connect HOST:PORT --rails`: the prefill host of a bare-metal rails run, against
//! `ic-bench serve --rails` (its rails agent on HOST:PORT) on the decode host, through
//! `icb_pair::rails::remote`. The same rows, report, table and exit codes as `pair --rails`.
//! Here only the flags and the wiring.

use super::interrupt::Interrupt;
use super::pair_rails::{AloneArg, PatternArg, parse_percent};
use super::serve_rails::{host_name, rail_tree, rank_options, selection};
use icb_core::Locality;
use icb_core::rails::RailPattern;
use icb_pair::rails::remote::RemoteRails;
use icb_pair::rails::{AloneRuns, RailsPlan, plan_rows};
use icb_pair::{Deadlines, PairError, PairPlan};
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct ConnectRailArgs {
    /// Whole-node mode against `serve --rails` on HOST:PORT: every rail of both hosts at once,
    /// one pinned rank per rail on each (`auto`: the hosts' rail maps; or `gpu0=mlx5_0,…`, the
    /// same as serve was given)
    #[arg(long, value_name = "auto|gpuN=NIC,…")]
    pub rails: Option<String>,

    /// Host-memory rails over these network devices (one per rail); with --rails, what each
    /// prefill rank is told in UCX_NET_DEVICES instead of its own NIC
    #[arg(long, value_name = "DEV,…", value_delimiter = ',')]
    pub rail_devices: Option<Vec<String>>,

    /// aligned (rail i ↔ rail i) or cross (every prefill rail with every decode rail)
    #[arg(long, value_name = "PATTERN", value_enum, default_value_t = PatternArg::Aligned)]
    pub rail_pattern: PatternArg,

    /// A rail more than this far below the median of the rails fails, even above the floor
    #[arg(long, value_name = "PERCENT", default_value = "20%", value_parser = parse_percent)]
    pub rail_margin: f64,

    /// Which rails also run alone: suspects or all
    #[arg(long, value_name = "WHICH", value_enum, default_value_t = AloneArg::Suspects)]
    pub rail_alone: AloneArg,
}

impl ConnectRailArgs {
    pub fn wanted(&self) -> bool {
        self.rails.is_some() || self.rail_devices.is_some()
    }

    /// A rails-only flag given without --rails/--rail-devices.
    pub fn stray_flag(&self) -> Option<&'static str> {
        [
            (self.rail_pattern != PatternArg::Aligned, "--rail-pattern"),
            (self.rail_alone != AloneArg::Suspects, "--rail-alone"),
            ((self.rail_margin - 0.2).abs() > 1e-9, "--rail-margin"),
        ]
        .into_iter()
        .find_map(|(given, flag)| (given && !self.wanted()).then_some(flag))
    }
}

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
    let r = &args.rails;
    let (selection, told) = selection(r.rails.as_deref(), r.rail_devices.as_ref())?;
    let pattern = match r.rail_pattern {
        PatternArg::Aligned => RailPattern::Aligned,
        PatternArg::Cross => RailPattern::Cross,
    };
    let alone = match r.rail_alone {
        AloneArg::Suspects => AloneRuns::Suspects,
        AloneArg::All => AloneRuns::All,
    };
    let pair = pair_plan(&args)?;
    let output = args.output.resolve(icb_report::ReportKind::Pair)?;
    // Two hosts unless told otherwise: that is what serve/connect --rails is for.
    let locality = args.placement.locality().unwrap_or(Locality::DifferentHosts);
    let forward = tracing::enabled!(tracing::Level::INFO);
    let opts = rank_options(args.ucx.ucx_lib.clone(), args.engine.side_flags(), forward)?;
    let interrupt = Interrupt::install()?;
    super::common::runtime()?.block_on(async {
        let (mut seam, decode) = tokio::select! {
            r = RemoteRails::connect(&args.server, opts, locality, host_name()) => r?,
            _ = interrupt.token().cancelled() => return Ok(interrupt.report("nothing was started")),
        };
        let prefill = seam.prefill_info(rail_tree().as_deref());
        let rows = plan_rows(&prefill, &decode, &selection, told.as_deref(), pattern)?;
        tracing::info!("{} rail pairs between {} and {}", rows.len(), prefill.node, decode.node);
        let plan = RailsPlan {
            pair,
            rows,
            pattern,
            margin: r.rail_margin,
            alone,
        };
        let result = super::pair_rails::run_plan(&plan, &mut seam, &interrupt).await;
        drop(seam);
        match result {
            Ok(outcome) => super::common::emit_pair(&outcome.report, &output),
            Err(PairError::Interrupted(i)) => super::common::emit_interrupted(&i, &output, &interrupt),
            Err(e) => Err(e.into()),
        }
    })
}
