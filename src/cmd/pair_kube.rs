//! `ic-bench pair --prefill X --decode Y` on Kubernetes: the flags, and the pair pipeline with
//! the Kubernetes launcher (`icb_pair::kube`).

use anyhow::Context as _;
use icb_flags::cluster::ClusterArgs;
use icb_kube::PodOptions;
use icb_kube::pair::BenchPodsPlan;
use icb_kube::target::Target;
use icb_pair::{Deadlines, PairPlan};
use icb_target::{KubeTarget, PodsFormat};
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct KubePairArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub devices: icb_flags::devices::DeviceArgs,

    /// Bench image with ic-bench and UCX [default: ghcr.io/ic-bench/ic-bench:<this version>]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// imagePullPolicy of the bench pods [default: the cluster's]
    #[arg(long, value_name = "POLICY", value_enum)]
    pub image_pull_policy: Option<PullPolicy>,

    /// Run the bench pods privileged (as seed 002's GPU-visibility fix does); default: only if the modelled pod is
    #[arg(long)]
    pub privileged: bool,

    /// Give the bench pods the host's IPC namespace (lets UCX use shared memory between two pods on one node)
    #[arg(long)]
    pub host_ipc: bool,

    /// Give the bench pods the host's PID namespace (lets UCX use cma between two pods on one node)
    #[arg(long)]
    pub host_pid: bool,

    /// The container runtime gives pods an unlimited memlock limit: RDMA bench pods then run as non-root without IPC_LOCK (Pod Security "restricted" instead of "privileged")
    #[arg(long)]
    pub memlock_unlimited: bool,

    /// ServiceAccount for the bench pods (they need no API access; no token is mounted)
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,

    /// Name for this run: pods are ic-bench-<ID>-server/-client, labelled app.kubernetes.io/instance=<ID> [default: random]
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,

    /// Deadline for the whole run (scheduling, image pull, transfer) [default: from the test settings]
    #[arg(long, value_name = "DURATION", value_parser = icb_flags::common::parse_duration)]
    pub timeout: Option<Duration>,

    /// Print the pods a run would create, create nothing
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "client", value_enum)]
    pub dry_run: Option<DryRun>,
}

/// `--image-pull-policy`, spelled as Kubernetes spells it.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    #[value(name = "Always")]
    Always,
    #[value(name = "IfNotPresent")]
    IfNotPresent,
    #[value(name = "Never")]
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
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

impl KubePairArgs {
    /// The bench pods' options: the one reading of the pod flags (image, privileges, host
    /// namespaces, devices), with `side_flags` (the engine selection) for both sides. Every pods
    /// plan of a pair run (its bench pods, rails' and KV ranks' node pods) takes it.
    pub fn pod_options(&self, side_flags: Vec<String>) -> PodOptions {
        let image = self.image.clone().unwrap_or_else(icb_kube::podspec::default_image);
        PodOptions {
            image_pull_policy: self.image_pull_policy.map(|p| p.as_str().to_string()),
            privileged: self.privileged,
            host_ipc: self.host_ipc,
            host_pid: self.host_pid,
            memlock_unlimited: self.memlock_unlimited,
            service_account: self.service_account.clone(),
            devices: self.devices.request(),
            ..PodOptions::new(image, side_flags)
        }
    }
}

/// The first Kubernetes-only flag given, if any: with `--local` it would be silently ignored.
pub fn kubernetes_only_flag(k: &KubePairArgs) -> Option<&'static str> {
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

/// Both sides parsed from `--prefill`/`--decode`.
pub fn targets(args: &super::pair::Args) -> anyhow::Result<(Target, Target)> {
    let (Some(prefill), Some(decode)) = (&args.prefill, &args.decode) else {
        anyhow::bail!("give both --prefill TARGET and --decode TARGET (e.g. node/gpu-1)");
    };
    Ok((
        prefill.parse().context("--prefill")?,
        decode.parse().context("--decode")?,
    ))
}

/// The bench pods (targets, the command's pod options) and, on the plan, the deadlines: on
/// Kubernetes one deadline (`--timeout`) covers scheduling, image pulls and the transfer.
pub fn target(
    args: &super::pair::Args,
    options: &PodOptions,
    plan: &mut PairPlan,
    dry_run: Option<PodsFormat>,
) -> anyhow::Result<KubeTarget> {
    let pods = bench_pods(args, options, &plan.settings, dry_run.is_some())?;
    plan.set_deadlines(Deadlines::budget(pods.timeout, "--timeout"));
    Ok(KubeTarget {
        cluster: args.kube.cluster.options(),
        pods,
        dry_run,
    })
}

/// The two bench pods of `--prefill`/`--decode`, sized for `settings`, under one deadline
/// (`--timeout`, else the run's own plus a minute for scheduling and image pulls).
pub fn bench_pods(
    args: &super::pair::Args,
    options: &PodOptions,
    settings: &icb_core::RunSettings,
    dry_run: bool,
) -> anyhow::Result<BenchPodsPlan> {
    let targets = targets(args)?;
    let k = &args.kube;
    let timeout = k.timeout.unwrap_or_else(|| Deadlines::pods_default(settings));
    let run_id = icb_kube::podspec::run_id_or_new(k.run_id.as_deref()).map_err(anyhow::Error::msg)?;
    let mut pods = BenchPodsPlan::new(targets, run_id, options, timeout, k.cluster.request_timeout);
    pods.resources = icb_kube::hardening::BenchResources::for_settings(settings);
    pods.dry_run = dry_run;
    Ok(pods)
}
