//! `ic-bench gc`: delete leftover ic-bench pods (label `app.kubernetes.io/managed-by=ic-bench`),
//! or with `--local` what `pair --local` runs whose ic-bench died left on this machine (network
//! namespaces named after a dead pid, and any process still tagged with such a run), through the
//! same stale-run scheme every local run applies at its start (`icb_isolate::cleanup_stale`).

use icb_flags::cluster::ClusterArgs;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// Only pods created at least this long ago, e.g. 1h, 30m
    #[arg(long, value_name = "DURATION", value_parser = icb_flags::common::parse_duration)]
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
    let lines = match args.local {
        // Leftovers of dead local runs (`icb-<dead pid>-…`); live runs are never touched.
        true if args.dry_run => icb_isolate::find_stale(icb_isolate::DEFAULT_PREFIX)?.report_lines(true),
        true => icb_isolate::cleanup_stale(icb_isolate::DEFAULT_PREFIX)?.report_lines(false),
        false => super::runtime()?.block_on(async {
            let cluster = args.cluster.connect().await?;
            let opts = icb_kube::gc::GcOptions {
                older_than: args.older_than,
                run_id: args.run_id.clone(),
                all_namespaces: args.all_namespaces,
                dry_run: args.dry_run,
            };
            let taken = icb_kube::gc::collect(&cluster, &opts).await?;
            anyhow::Ok(icb_kube::gc::report_lines(&taken, args.dry_run))
        })?,
    };
    for line in lines {
        println!("{line}");
    }
    Ok(icb_core::exit::OK)
}
