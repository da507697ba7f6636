//! `ic-bench serve`: the decode side, like ucx_perftest started without a peer address.

use icb_core::protocol::SideWriter;
use icb_flags::common::{EngineArgs, UcxArgs};
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Address and port to listen on (port 0 picks a free one)
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:18515")]
    pub listen: String,

    /// Serve one client, then exit (0 when it finished cleanly)
    #[arg(long)]
    pub once: bool,

    /// Exit when no client connects within this long, e.g. 30s, 10m
    #[arg(long, value_name = "DURATION", value_parser = icb_flags::common::parse_duration)]
    pub idle_timeout: Option<Duration>,

    /// Started by a launching ic-bench (`pair`, `gate`, `sweep`): on an error, also print the
    /// typed `failed` side event on stdout, so the parent names the cause by type. A person
    /// running serve gets only the one line on stderr.
    #[arg(long, hide = true)]
    pub side_events: bool,

    #[command(flatten)]
    pub token: icb_flags::common::TokenArgs,

    /// Listen beyond loopback without a token, admitting anyone who can reach the port
    #[arg(long)]
    pub insecure_no_token: bool,

    /// Largest server-side buffer one case may ask, e.g. 4GiB (default: half the memory
    /// available at start, at most 16 GiB; a GPU buffer also at most half its GPU's free memory)
    #[arg(long, value_name = "SIZE", value_parser = icb_flags::common::parse_size_arg)]
    pub max_buffer: Option<u64>,

    /// Longest one client's session may last, e.g. 30m
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = icb_flags::common::parse_duration)]
    pub max_session: Duration,

    #[command(flatten)]
    pub ucx: UcxArgs,

    #[command(flatten)]
    pub engine: EngineArgs,

    #[command(flatten)]
    pub rails: super::serve_rails::ServeRailArgs,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.rails.wanted() {
        return super::serve_rails::run(args);
    }
    args.engine.check()?;
    let guard = icb_engine::admit::ServeGuard {
        token: args.token.resolve()?,
        allow_no_token: args.insecure_no_token,
        max_buffer: args.max_buffer.unwrap_or_else(icb_engine::admit::default_max_buffer),
        max_session: args.max_session,
        ..Default::default()
    };
    let out = std::sync::Arc::new(SideWriter::new(super::report_out::reserve()?));
    let interrupt = super::interrupt::Interrupt::install()?;
    let serve = icb_sides::serve::Serve {
        engine: super::connect::engine_choice(&args.engine),
        listen: args.listen,
        once: args.once,
        idle_timeout: args.idle_timeout,
        ucx_lib: args.ucx.ucx_lib,
        ucx_profile: args.engine.ucx_profile,
        tool: super::connect::tool_info(),
        guard,
        side_events: args.side_events,
    };
    match icb_sides::serve::serve(serve, &out, interrupt.token()) {
        Ok(()) => Ok(icb_core::exit::OK),
        Err(icb_engine::EngineError::Interrupted) => Ok(interrupt.report("the server stopped")),
        Err(e) => Err(e.into()),
    }
}
