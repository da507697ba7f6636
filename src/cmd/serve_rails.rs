//! `ic-bench serve --rails`: the decode host of a bare-metal rails run. One serve rank per rail
//! of this host's rail map (pinned, serving client after client) and, on `--listen`, the rails
//! agent that `connect --rails` asks (`icb_pair::rails::agent`, `icb_pair::rails::remote`). Here
//! only the flags and the wiring; Ctrl-C stops every rank and exits 130.

use super::interrupt::Interrupt;
use icb_core::rails::RailPattern;
use icb_pair::local::LocalOptions;
use icb_pair::rails::info::{RAIL_TREE_ENV, node_info};
use icb_pair::rails::serve_run::{AgentEnd, RailsAgent, run_rails_agent};
use icb_pair::rails::{RailSelection, RailSite, plan_rows, read_selection, told_devices};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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

/// The selection and the devices told, as `--rails`/`--rail-devices` say between two hosts
/// (shared with connect; `icb_pair::rails::read_selection`'s rule).
pub fn selection(
    rails: Option<&str>,
    devices: Option<&Vec<String>>,
) -> anyhow::Result<(RailSelection, Option<Vec<String>>)> {
    let (_, selection) = read_selection(rails, devices.map(Vec::as_slice), RailSite::BareMetal)?;
    let told = told_devices(&selection, devices.cloned());
    Ok((selection, told))
}

/// This host's name (the node name in reports).
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into())
}

/// The recorded rail-map tree to read instead of `/sys` (tests on emulated nodes).
pub fn rail_tree() -> Option<PathBuf> {
    std::env::var_os(RAIL_TREE_ENV).map(PathBuf::from)
}

/// What the ranks run, like the local seam's sides.
pub fn rank_options(ucx_lib: Option<PathBuf>, side_args: Vec<String>, forward: bool) -> anyhow::Result<LocalOptions> {
    Ok(LocalOptions {
        isolation: icb_isolate::Isolation::None,
        exe: std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("cannot find the ic-bench executable to start the ranks: {e}"))?,
        ucx_lib,
        verbosity: if tracing::enabled!(tracing::Level::DEBUG) {
            vec!["-vv".into()]
        } else if tracing::enabled!(tracing::Level::INFO) {
            vec!["-v".into()]
        } else {
            vec![]
        },
        side_args,
        forward_stderr: forward,
        link_rate: None,
        // Ranks inherit IC_BENCH_TOKEN; a --token-file travels in `side_args`.
        token: None,
        recipe_env: Default::default(),
    })
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
    let (selection, told) = selection(args.rails.rails.as_deref(), args.rails.rail_devices.as_ref())?;
    let info = node_info(host_name(), rail_tree().as_deref(), Path::new("/sys"));
    let rows = plan_rows(&info, &info, &selection, told.as_deref(), RailPattern::Aligned)?;
    let ends: Vec<_> = rows.into_iter().map(|r| r.decode).collect();
    let mut side_flags = args.engine.side_flags();
    side_flags.extend(args.token.side_flags());
    if args.insecure_no_token {
        side_flags.push("--insecure-no-token".into());
    }
    let agent = RailsAgent {
        listen,
        info,
        ends,
        ranks: rank_options(args.ucx.ucx_lib.clone(), side_flags, true)?,
    };
    let interrupt = Interrupt::install()?;
    let listening = |address: &str, ranks: usize| {
        eprintln!("ic-bench: rails agent listening on {address}, {ranks} serve ranks");
        let line = icb_core::protocol::side_line(&icb_core::protocol::SideEvent::Listening(
            icb_core::protocol::Listening::new(address.to_string(), String::new()),
        ));
        println!("{line}");
    };
    let run = run_rails_agent(agent, interrupt.token(), listening);
    Ok(match super::common::runtime()?.block_on(run)? {
        AgentEnd::CancelledAtStart => interrupt.report("stopped the ranks started so far"),
        AgentEnd::Stopped(what) => interrupt.report(&format!("stopped {what}")),
    })
}
