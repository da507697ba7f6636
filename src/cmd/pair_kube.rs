//! `ic-bench pair --prefill X --decode Y` on Kubernetes: the flags, and the pair pipeline with
//! the Kubernetes launcher (`icb_pair::kube`).

use super::interrupt::Interrupt;
use super::kube_args::ClusterArgs;
use anyhow::Context as _;
use icb_kube::pair::BenchPodsPlan;
use icb_kube::target::Target;
use icb_pair::kube::KubeLauncher;
use icb_pair::{Launcher as _, PairError, PairPlan, run_pair};
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct KubePairArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub devices: super::devices::DeviceArgs,

    /// Bench image with ic-bench and UCX [default: ghcr.io/ic-bench/ic-bench:<this version>]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// imagePullPolicy of the bench pods: Always, IfNotPresent, Never [default: the cluster's]
    #[arg(long, value_name = "POLICY", value_parser = ["Always", "IfNotPresent", "Never"])]
    pub image_pull_policy: Option<String>,

    /// Run the bench pods privileged (as seed 002's GPU-visibility fix does); default: only if the modelled pod is
    #[arg(long)]
    pub privileged: bool,

    /// Give the bench pods the host's IPC namespace (lets UCX use shared memory between two pods on one node)
    #[arg(long)]
    pub host_ipc: bool,

    /// Give the bench pods the host's PID namespace (lets UCX use cma between two pods on one node)
    #[arg(long)]
    pub host_pid: bool,

    /// ServiceAccount for the bench pods (they need no API access; no token is mounted)
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,

    /// Name for this run: pods are ic-bench-<ID>-server/-client, labelled app.kubernetes.io/instance=<ID> [default: random]
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,

    /// Deadline for the whole run (scheduling, image pull, transfer) [default: from the test settings]
    #[arg(long, value_name = "DURATION", value_parser = super::common::parse_duration)]
    pub timeout: Option<Duration>,

    /// Print the pods a run would create, create nothing
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "client", value_enum)]
    pub dry_run: Option<DryRun>,
}

/// `--dry-run` modes: only what a run can do (kubectl's `server` mode would need the API server
/// to validate the pods, which ic-bench does not ask for).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DryRun {
    /// A real run.
    None,
    /// Print the pods, create nothing.
    Client,
}

/// A deadline the run can always meet: start-up allowance plus every case at its maximum time.
fn default_timeout(settings: &icb_core::RunSettings) -> Duration {
    let cases = settings.case_list().len() as f64;
    Duration::from_secs_f64(120.0 + cases * (settings.max_time_s + 1.0))
}

/// The bench pods' part of the plan: targets, image, privileges, deadlines.
pub fn build_pods_plan(args: &super::pair::Args, settings: &icb_core::RunSettings) -> anyhow::Result<BenchPodsPlan> {
    let (Some(prefill), Some(decode)) = (&args.prefill, &args.decode) else {
        anyhow::bail!("give both --prefill TARGET and --decode TARGET (e.g. node/gpu-1)");
    };
    let prefill: Target = prefill.parse().context("--prefill")?;
    let decode: Target = decode.parse().context("--decode")?;
    let k = &args.kube;
    let timeout = k.timeout.unwrap_or_else(|| default_timeout(settings));
    let run_id = match &k.run_id {
        Some(id) => {
            icb_kube::podspec::check_run_id(id).map_err(anyhow::Error::msg)?;
            id.clone()
        }
        None => icb_kube::podspec::new_run_id(),
    };
    let secs = timeout.as_secs().max(1).to_string() + "s";
    let dry_run_flag = k.dry_run == Some(DryRun::Client);
    Ok(BenchPodsPlan {
        prefill,
        decode,
        run_id,
        image: k.image.clone().unwrap_or_else(icb_kube::podspec::default_image),
        image_pull_policy: k.image_pull_policy.clone(),
        serve_args: [vec!["--idle-timeout".into(), secs], args.engine.side_flags()].concat(),
        connect_args: args.engine.side_flags(),
        privileged: k.privileged,
        host_ipc: k.host_ipc,
        host_pid: k.host_pid,
        service_account: k.service_account.clone(),
        devices: k.devices.request(),
        env: vec![],
        dry_run: dry_run_flag,
        read_nodes: true,
        labels: vec![],
        timeout,
        cleanup_timeout: Duration::from_secs(30).max(k.cluster.request_timeout),
    })
}

pub fn run_kube(args: &super::pair::Args, mut plan: PairPlan) -> anyhow::Result<i32> {
    let pods = build_pods_plan(args, &plan.settings)?;
    // On Kubernetes one deadline covers scheduling, image pulls and the transfer.
    plan.startup_timeout = pods.timeout;
    plan.startup_flag = "--timeout";
    plan.deadline = pods.timeout;
    plan.connect_timeout = Duration::from_secs(30);
    let dry_run = args.kube.dry_run == Some(DryRun::Client);
    let interrupt = Interrupt::install()?;
    let rt = super::common::runtime()?;
    rt.block_on(async {
        let prepare = async {
            let cluster = args.kube.cluster.connect().await?;
            Ok::<_, anyhow::Error>(KubeLauncher::prepare(cluster, pods).await?)
        };
        // Nothing exists yet: an interrupt here has nothing to clean up.
        let mut launcher = tokio::select! {
            l = prepare => l?,
            _ = interrupt.token().cancelled() => return Ok(interrupt.report("nothing was left to clean up")),
        };
        if dry_run {
            let child = plan.child_plan(launcher.locality(), &launcher.mode())?;
            let text = match args.output.format.as_str() {
                "json" => serde_json::to_string_pretty(&launcher.dry_run_json(&child))?,
                "yaml" | "table" => launcher.dry_run_yaml(&child)?,
                other => anyhow::bail!("-o {other} with --dry-run: use -o yaml or -o json"),
            };
            args.output.emit(&text)?;
            return Ok(icb_core::exit::OK);
        }
        let prepared = launcher.prepared();
        for note in &prepared.notes {
            // Device defaults are shown by --dry-run and at -v; stderr stays one line on errors.
            if note.contains("requesting") {
                tracing::info!("{note}");
            } else {
                eprintln!("ic-bench: {note}");
            }
        }
        let notes: Vec<String> = prepared
            .notes
            .iter()
            .filter(|n| !n.contains("picked") && !n.contains("requesting"))
            .map(|n| format!("kubernetes: {n}"))
            .collect();
        tracing::info!(
            "server on node {}, client on node {}, namespace {}",
            prepared.decode.node,
            prepared.prefill.node,
            prepared.namespace
        );
        let mut live =
            super::progress::CaseProgress::start(super::progress::total_cases(&plan.settings), plan.settings.unit);
        let mut progress = |p: &icb_core::protocol::CaseProgress| {
            tracing::debug!("case {}/{}", p.index, p.total);
            live.case(p.index, p.total, &p.case);
        };
        let result = run_pair(&plan, &mut launcher, interrupt.token(), &mut progress).await;
        live.finish();
        match result {
            Ok(mut outcome) => {
                tracing::info!(
                    "orchestration overhead {:.2}s (create → report → cleanup, minus the transfer); {}",
                    outcome.orchestration.as_secs_f64(),
                    outcome.cleanup
                );
                outcome.report.warnings.extend(notes);
                super::common::emit_pair(&outcome.report, &args.output)
            }
            Err(PairError::Interrupted(i)) => super::common::emit_interrupted(&i, &args.output, &interrupt),
            Err(e) => Err(e.into()),
        }
    })
}
