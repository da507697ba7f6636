//! `ic-bench serve --rails`: the decode host of a bare-metal rails run. One serve rank per rail
//! of this host's rail map (pinned, serving client after client) and, on `--listen`, the rails
//! agent that `connect --rails` asks (`icb_rails::agent`, `icb_rails::remote`). Here
//! only the flags and the wiring; Ctrl-C stops every rank and exits 130.

use super::interrupt::Interrupt;
use icb_pair::local::LocalOptions;
use icb_rails::serve_run::{AgentEnd, RailsAgent, run_rails_agent};
use std::net::SocketAddr;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeRailArgs {
    /// Whole-node mode on a bare-metal decode host: one serve rank per rail of this host
    /// (`auto`: its rail map, as `probe node` prints it; or `gpu0=mlx5_0,gpu1=mlx5_3,…`), each
    /// pinned to its GPU, NIC and NUMA node; --listen is then the rails agent that
    /// `connect HOST:PORT --rails` asks
    #[arg(long, value_name = "auto|gpuN=NIC,…")]
    pub rails: Option<String>,

    /// Host-memory rails over these network devices (one per rail); with --rails, what each
    /// rank is told in UCX_NET_DEVICES instead of its own NIC
    #[arg(long, value_name = "DEV,…", value_delimiter = ',')]
    pub rail_devices: Option<Vec<String>>,
}

impl ServeRailArgs {
    pub fn wanted(&self) -> bool {
        self.rails.is_some() || self.rail_devices.is_some()
    }
}

pub fn run(args: super::serve::Args) -> anyhow::Result<i32> {
    args.engine.check()?;
    if args.once || args.idle_timeout.is_some() {
        anyhow::bail!("--once and --idle-timeout end a single server; serve --rails runs until Ctrl-C: drop them");
    }
    let listen: SocketAddr = args
        .listen
        .parse()
        .map_err(|_| anyhow::anyhow!("--listen {:?}: give ADDR:PORT, e.g. 0.0.0.0:18515", args.listen))?;
    let mut side_flags = args.engine.side_flags();
    side_flags.extend(args.token.side_flags());
    if args.insecure_no_token {
        side_flags.push("--insecure-no-token".into());
    }
    let rails = (args.rails.rails.as_deref(), args.rails.rail_devices.as_deref());
    let ranks = LocalOptions::ranks_of_this_binary(args.ucx.ucx_lib.clone(), side_flags, true)?;
    let agent = RailsAgent::for_this_host(listen, rails, ranks)?;
    let interrupt = Interrupt::install()?;
    let listening = |address: &str, ranks: usize| {
        eprintln!("ic-bench: rails agent listening on {address}, {ranks} serve ranks");
        let line = icb_core::protocol::side_line(&icb_core::protocol::SideEvent::Listening(
            icb_core::protocol::Listening::new(address.to_string(), String::new()),
        ));
        println!("{line}");
    };
    let run = run_rails_agent(agent, interrupt.token(), listening);
    Ok(match super::runtime()?.block_on(run)? {
        AgentEnd::CancelledAtStart => interrupt.report("stopped the ranks started so far"),
        AgentEnd::Stopped(what) => interrupt.report(&format!("stopped {what}")),
    })
}
