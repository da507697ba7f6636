//! `ic-bench pair --prefill X --decode Y` on Kubernetes: the flags, and the glue between
//! `icb_kube` (pods) and the shared verdict/rendering in `common::finish_pair`.

use super::kube_args::ClusterArgs;
use anyhow::Context as _;
use icb_kube::KubeError;
use icb_kube::pair::PairPlan;
use icb_kube::target::Target;
use std::time::Duration;

/// Exit code after Ctrl-C / SIGTERM (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: i32 = icb_core::exit::INTERRUPTED;

#[derive(clap::Args, Debug, Clone)]
pub struct KubePairArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,

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
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,

    /// Print the pods a run would create, create nothing (only "client" is supported)
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "client", value_parser = ["none", "client", "server"])]
    pub dry_run: Option<String>,
}

/// A deadline the run can always meet: start-up allowance plus every case at its maximum time.
fn default_timeout(settings: &icb_core::RunSettings) -> Duration {
    let cases = (settings.tests.len() * settings.sizes.len() * settings.memory.len()) as f64;
    Duration::from_secs_f64(120.0 + cases * (settings.max_time_s + 1.0))
}

pub fn build_plan(args: &super::pair::Args) -> anyhow::Result<PairPlan> {
    let (Some(prefill), Some(decode)) = (&args.prefill, &args.decode) else {
        anyhow::bail!("give both --prefill TARGET and --decode TARGET (e.g. node/gpu-1)");
    };
    let prefill: Target = prefill.parse().context("--prefill")?;
    let decode: Target = decode.parse().context("--decode")?;
    let settings = args.test.settings()?;
    let k = &args.kube;
    let timeout = k.timeout.unwrap_or_else(|| default_timeout(&settings));
    let run_id = match &k.run_id {
        Some(id) => {
            icb_kube::podspec::check_run_id(id).map_err(anyhow::Error::msg)?;
            id.clone()
        }
        None => icb_kube::podspec::new_run_id(),
    };
    let secs = timeout.as_secs().max(1).to_string() + "s";
    let mut connect_args = super::common::settings_to_flags(&settings);
    connect_args.extend(["--connect-timeout".to_string(), "30s".to_string()]);
    Ok(PairPlan {
        prefill,
        decode,
        run_id,
        image: k.image.clone().unwrap_or_else(icb_kube::podspec::default_image),
        image_pull_policy: k.image_pull_policy.clone(),
        serve_args: vec!["--idle-timeout".into(), secs],
        connect_args,
        privileged: k.privileged,
        host_ipc: k.host_ipc,
        host_pid: k.host_pid,
        service_account: k.service_account.clone(),
        timeout,
        cleanup_timeout: Duration::from_secs(30).max(k.cluster.request_timeout),
    })
}

pub fn run_kube(args: &super::pair::Args) -> anyhow::Result<i32> {
    let plan = build_plan(args)?;
    let dry_run = match args.kube.dry_run.as_deref() {
        None | Some("none") => false,
        Some("client") => true,
        Some(other) => anyhow::bail!("--dry-run={other} is not supported: use --dry-run=client"),
    };
    let rt = super::kube_args::runtime()?;
    rt.block_on(async {
        let cluster = args.kube.cluster.connect().await?;
        let prepared = icb_kube::pair::prepare(&cluster, &plan).await?;
        if dry_run {
            let text = match args.output.format.as_str() {
                "json" => {
                    let pods = [
                        prepared.server_pod(),
                        prepared.client_pod(icb_kube::podspec::SERVER_PLACEHOLDER),
                    ];
                    serde_json::to_string_pretty(
                        &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": pods}),
                    )?
                }
                "yaml" | "table" => prepared.to_yaml()?,
                other => anyhow::bail!("-o {other} with --dry-run: use -o yaml or -o json"),
            };
            args.output.emit(&text)?;
            return Ok(icb_core::exit::OK);
        }
        for note in &prepared.notes {
            eprintln!("ic-bench: {note}");
        }
        tracing::info!(
            "run {}: server on node {}, client on node {}, namespace {}",
            plan.run_id,
            prepared.decode.node,
            prepared.prefill.node,
            prepared.namespace
        );
        match icb_kube::pair::run(&cluster, &prepared, &plan, super::kube_args::interrupted()).await {
            Ok(outcome) => {
                tracing::info!(
                    "orchestration overhead {:.2}s (create → report → cleanup, minus the transfer)",
                    outcome.orchestration.as_secs_f64()
                );
                let mut report = outcome.report;
                report.warnings.extend(
                    outcome
                        .notes
                        .iter()
                        .filter(|n| !n.contains("picked"))
                        .map(|n| format!("kubernetes: {n}")),
                );
                super::common::finish_pair(report, &args.expect, &args.output)
            }
            Err(KubeError::Interrupted(why)) => {
                eprintln!("ic-bench: interrupted: {why}");
                Ok(EXIT_INTERRUPTED)
            }
            Err(e) => Err(e.into()),
        }
    })
}
