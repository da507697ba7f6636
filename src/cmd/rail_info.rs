//! `ic-bench rail-info` (hidden): this node's rails as one JSON line, what the Kubernetes rails
//! seam execs in its bench pods (`icb_rails::info`). Only flags and wiring here.

use icb_rails::info::{InfoKind, RAIL_TREE_ENV, this_host};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Print a snapshot of this node's NIC counters instead of its rails
    #[arg(long, conflicts_with = "cpus")]
    pub counters: bool,

    /// Print this node's NUMA topology and the CPUs this process may use instead of its rails
    #[arg(long)]
    pub cpus: bool,

    /// The node's name in the output [default: this host's name]
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let node = args.node.unwrap_or_else(|| {
        nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let tree = std::env::var_os(RAIL_TREE_ENV).map(std::path::PathBuf::from);
    let kind = match (args.counters, args.cpus) {
        (true, _) => InfoKind::Counters,
        (_, true) => InfoKind::Cpus,
        _ => InfoKind::Rails,
    };
    let line = this_host(node, tree.as_deref(), kind);
    println!("{}", serde_json::to_string(&line)?);
    Ok(icb_core::exit::OK)
}
