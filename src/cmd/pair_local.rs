//! `ic-bench pair --local`: the pair pipeline with the local launcher (two processes of this
//! binary, optionally isolated like pods or nodes: `icb_isolate::Isolation`).

use anyhow::Context as _;
use icb_isolate::Isolation;
use icb_pair::local::LocalOptions;
use icb_pair::{Deadlines, PairPlan};
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct LocalArgs {
    /// With --local: isolate the two sides as none (plain processes), pod (two pods on one node:
    /// shared network, separate IPC and PID namespaces), host-ipc (pods with hostIPC) or node (two
    /// nodes joined by a veth). All but none need root
    #[arg(long, value_name = "MODE", default_value = "none", requires = "local", value_parser = parse_isolation)]
    pub isolation: Isolation,

    /// With --local: how long the decode side may take to start listening (e.g. 30s, 1m)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = icb_flags::common::parse_duration, requires = "local")]
    pub startup_timeout: Duration,

    /// With --isolation node: limit the emulated link to RATE (tc tbf, e.g. 30mbit, 1gbit), to see
    /// what a degraded link or a slow TCP fallback reports
    #[arg(long, value_name = "RATE", requires = "local", value_parser = icb_isolate::parse_rate)]
    pub link_rate: Option<String>,
}

fn parse_isolation(s: &str) -> Result<Isolation, String> {
    s.parse::<Isolation>().map_err(|e| e.to_string())
}

/// The local launcher's options; its deadlines on the plan (`--startup-timeout`).
pub fn options(args: &super::pair::Args, plan: &mut PairPlan) -> anyhow::Result<LocalOptions> {
    check_engine_loads(&args.engine)?;
    let opts = side_options(args)?;
    plan.set_deadlines(Deadlines::local(&plan.settings, args.local_opts.startup_timeout));
    Ok(opts)
}

/// With `--engine nixl`, NIXL must load here: both sides would fail the same way, so it is said
/// once, before anything starts. Loading the library starts no agent, so this process holds no
/// UCX afterwards.
pub fn check_engine_loads(engine: &icb_flags::common::EngineArgs) -> anyhow::Result<()> {
    if engine.engine == icb_core::EngineKind::Nixl {
        icb_nixl_engine::probe_load(engine.nixl_lib.as_deref()).map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

/// What both local sides are started with (`--isolation`, `--link-rate`, the engine flags, a
/// token of this run's own).
pub fn side_options(args: &super::pair::Args) -> anyhow::Result<LocalOptions> {
    let local = &args.local_opts;
    if local.link_rate.is_some() && local.isolation != Isolation::Node {
        anyhow::bail!("--link-rate limits the link between two emulated nodes: use it with --isolation node");
    }
    let exe = std::env::current_exe().context("cannot find the ic-bench executable to start both sides")?;
    Ok(LocalOptions {
        isolation: local.isolation,
        ucx_lib: args.ucx.ucx_lib.clone(),
        forward_stderr: tracing::enabled!(tracing::Level::INFO),
        side_args: args.engine.side_flags(),
        link_rate: local.link_rate.clone(),
        // One token per run: only this run's two sides admit each other.
        token: Some(icb_pair::local::RunToken(
            icb_engine::auth::Token::generate().expose().to_string(),
        )),
        ..LocalOptions::new(exe)
    })
}
