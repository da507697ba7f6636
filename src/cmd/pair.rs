//! `ic-bench pair`: one front door for local processes (`--local`) and Kubernetes pods
//! (`--prefill X --decode Y`), or inside two running workers (`--in-place`). All end in the same
//! report and verdict.

use super::common::{EngineArgs, ExpectArgs, OutputArgs, TestArgs, UcxArgs};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Run the server and client as local processes (no Kubernetes)
    #[arg(long, conflicts_with_all = ["prefill", "decode"])]
    pub local: bool,

    #[command(flatten)]
    pub local_opts: super::pair_local::LocalArgs,

    /// Prefill (client) side: node/NAME, pod/NAME, deployment/NAME, statefulset/NAME, lws/NAME, dgd/NAME/COMPONENT, or a label selector (app=prefill)
    #[arg(long, requires = "decode", allow_hyphen_values = true)]
    pub prefill: Option<String>,

    /// Decode (server) side: node/NAME, pod/NAME, deployment/NAME, statefulset/NAME, lws/NAME, dgd/NAME/COMPONENT, or a label selector (app=decode)
    #[arg(long, requires = "prefill", allow_hyphen_values = true)]
    pub decode: Option<String>,

    #[command(flatten)]
    pub kube: super::pair_kube::KubePairArgs,

    #[command(flatten)]
    pub in_place: super::pair_inplace::InPlaceArgs,

    #[command(flatten)]
    pub test: TestArgs,

    #[command(flatten)]
    pub expect: ExpectArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub ucx: UcxArgs,

    #[command(flatten)]
    pub engine: EngineArgs,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    // Everything that can be checked without the peers is checked now: a typo in a flag or a
    // file must not cost a whole benchmark run.
    let dry_run = args.kube.dry_run == Some(super::pair_kube::DryRun::Client);
    if args.local && dry_run {
        anyhow::bail!("--dry-run prints the pods of a Kubernetes run: use it with --prefill/--decode, not --local");
    }
    args.engine.check()?;
    let settings = args.test.settings_for(args.engine.engine)?;
    if !dry_run {
        // A dry run prints manifests (-o yaml|json), which the run's own code checks.
        args.output.check()?;
        args.output.check_exports(icb_report::ReportKind::Pair)?;
    }
    // The expectations file is read once, here; the pipeline resolves it for the placement.
    let mut plan = icb_pair::PairPlan::new(settings, args.expect.input()?);
    plan.ucx_profile = args.engine.ucx_profile;
    if args.local
        && let Some(flag) = kubernetes_only_flag(&args.kube)
    {
        anyhow::bail!("{flag} applies to Kubernetes runs (--prefill/--decode), not --local: drop it");
    }
    if !args.local && args.local_opts.isolation != icb_isolate::Isolation::None {
        anyhow::bail!("--isolation applies to --local runs; on Kubernetes the pods' own spec decides (see --host-ipc)");
    }
    if args.local {
        super::pair_local::run_local(&args, plan)
    } else if args.in_place.in_place {
        super::pair_inplace::run_in_place(&args, plan)
    } else if args.prefill.is_some() && args.decode.is_some() {
        super::pair_kube::run_kube(&args, plan)
    } else {
        anyhow::bail!("say where to run: --local, or --prefill TARGET --decode TARGET (e.g. node/gpu-1)")
    }
}

/// The first Kubernetes-only flag given, if any: with `--local` it would be silently ignored.
fn kubernetes_only_flag(k: &super::pair_kube::KubePairArgs) -> Option<&'static str> {
    let c = &k.cluster;
    [
        (k.image.is_some(), "--image"),
        (k.image_pull_policy.is_some(), "--image-pull-policy"),
        (k.privileged, "--privileged"),
        (k.host_ipc, "--host-ipc"),
        (k.host_pid, "--host-pid"),
        (k.service_account.is_some(), "--service-account"),
        (k.run_id.is_some(), "--run-id"),
        (k.timeout.is_some(), "--timeout"),
        (c.kubeconfig.is_some(), "--kubeconfig"),
        (c.context.is_some(), "--context"),
        (c.namespace.is_some(), "--namespace"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}
