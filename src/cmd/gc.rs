//! `ic-bench gc`: delete leftover ic-bench pods (label `app.kubernetes.io/managed-by=ic-bench`),
//! or with `--local` what `pair --local` runs whose ic-bench died left on this machine (network
//! namespaces named after a dead pid, and any process still tagged with such a run), through the
//! same stale-run scheme every local run applies at its start (`icb_isolate::cleanup_stale`).

use super::kube_args::ClusterArgs;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// Only pods created at least this long ago, e.g. 1h, 30m
    #[arg(long, value_name = "DURATION", value_parser = super::common::parse_duration)]
    pub older_than: Option<Duration>,

    /// Only the pods of this run (its app.kubernetes.io/instance label)
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,

    /// Every namespace (needs cluster-wide list/delete on pods)
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,

    /// This machine instead of a cluster: remove the namespaces and processes of `pair --local`
    /// runs whose ic-bench is gone (root)
    #[arg(long, conflicts_with_all = ["older_than", "run_id", "all_namespaces"])]
    pub local: bool,

    /// List what would be deleted, delete nothing
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.local {
        return run_local(args.dry_run);
    }
    let rt = super::common::runtime()?;
    rt.block_on(async {
        let cluster = args.cluster.connect().await?;
        let opts = icb_kube::gc::GcOptions {
            older_than: args.older_than,
            run_id: args.run_id.clone(),
            all_namespaces: args.all_namespaces,
            dry_run: args.dry_run,
        };
        let taken = icb_kube::gc::collect(&cluster, &opts).await?;
        let verb = if args.dry_run { "would delete" } else { "deleted" };
        for c in &taken {
            let age = c
                .age
                .map(|a| humantime::format_duration(Duration::from_secs(a.as_secs())).to_string());
            println!(
                "{verb} pod {}/{} (age {})",
                c.namespace,
                c.name,
                age.as_deref().unwrap_or("unknown")
            );
        }
        if taken.is_empty() {
            println!("no ic-bench pods to delete");
        }
        Ok(icb_core::exit::OK)
    })
}

/// `gc --local`: leftovers of dead local runs (`icb-<dead pid>-…`); live runs are never touched.
fn run_local(dry_run: bool) -> anyhow::Result<i32> {
    let prefix = icb_isolate::DEFAULT_PREFIX;
    let found = if dry_run {
        icb_isolate::find_stale(prefix)?
    } else {
        icb_isolate::cleanup_stale(prefix)?
    };
    let verb = if dry_run { "would delete" } else { "deleted" };
    for ns in &found.namespaces {
        println!("{verb} network namespace {ns}");
    }
    if !found.processes.is_empty() {
        let verb = if dry_run { "would kill" } else { "killed" };
        println!(
            "{verb} {} leftover processes: {:?}",
            found.processes.len(),
            found.processes
        );
    }
    if found.is_empty() {
        println!("no leftovers of dead local runs");
    }
    Ok(icb_core::exit::OK)
}
