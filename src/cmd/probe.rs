//! `ic-bench probe env | node | nixl | serving`: read-only checks of recipes, nodes, NIXL installs
//! and the serving engines' KV-transfer metrics.
//! Exit 0 for ok/warn, 1 when a check fails, 2 for usage errors.

use icb_core::checks::ProbeReport;
use icb_flags::cluster::ClusterArgs;
use icb_flags::output::{Output, OutputArgs};
use icb_kube::probe_remote::{self, OpenError, RemoteFlags};
use icb_probe::request::{self, NixlRequest, NodeRequest};
use icb_probe::vantage::Opened;
use icb_probe::{GatherOptions, ReplayDirs, TransportEnv, Vantage};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum What {
    /// Check recipes' transport settings: files, directories, or - for stdin
    Env(Box<EnvArgs>),
    /// Check a node: RDMA ports, GID tables, GPUDirect mode, memlock, GPU↔NIC topology, UCX
    Node(Box<NodeArgs>),
    /// Check a NIXL install: libraries, plugins, Python package, nixlbench
    Nixl(Box<NixlArgs>),
    /// Read the serving engines' KV-transfer metrics and judge them against ic-bench's own
    /// measurement of the same node pair and KV shape (vLLM NIXL, SGLang, NIXL telemetry, TensorRT-LLM)
    Serving(Box<super::probe_serving::ServingArgs>),
}

#[derive(clap::Args, Debug, Clone)]
pub struct EnvArgs {
    /// Recipe files or directories (multi-document YAML, kustomizations, Helm charts); - reads stdin;
    /// KIND/NAME (dgd/NAME, llmisvc/NAME, disaggregatedset/NAME, lws/NAME, deployment/NAME) reads
    /// the applied object from the cluster (read-only). A directory is a set of recipes, each
    /// checked with its own inputs only
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,

    /// Provider overlay (or patch) to apply to every recipe; overlays found in directories are not applied
    #[arg(long, value_name = "FILE")]
    pub overlay: Vec<String>,

    /// Values file for the Helm chart given as PATH (`helm template -f FILE`; repeatable)
    #[arg(short = 'f', long = "values", value_name = "FILE")]
    pub values: Vec<String>,

    /// The cluster KIND/NAME inputs are read from
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// Where to find the node and how long to wait for it.
#[derive(clap::Args, Debug, Clone)]
pub struct RemoteArgs {
    /// Probe from inside this running pod (exec through the Kubernetes API; nothing is created)
    #[arg(long, value_name = "NAME")]
    pub pod: Option<String>,

    /// Container of --pod (default: the pod's default container)
    #[arg(long, requires = "pod")]
    pub container: Option<String>,

    /// Deadline for the whole remote probe, e.g. 2m
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = icb_flags::common::parse_duration)]
    pub timeout: Duration,

    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    #[command(flatten)]
    pub remote: RemoteArgs,

    /// Probe this node through a short-lived read-only probe pod (always deleted)
    #[arg(long = "node", value_name = "NAME", conflicts_with = "pod")]
    pub node_name: Option<String>,

    /// Image of the --node probe pod (needs sh; rdma-core, nvidia-smi and ucx_info when present are used)
    #[arg(long, requires = "node_name")]
    pub image: Option<String>,

    /// Cross-check UCX_NET_DEVICES / NCCL_IB_HCA / GID index from this recipe instead of the environment
    #[arg(long, value_name = "PATH")]
    pub recipe: Vec<String>,

    /// Recipe role to take the variables from: prefill, decode, worker
    #[arg(long, requires = "recipe")]
    pub role: Option<String>,

    /// Fail (not warn) when the node has no usable RDMA device
    #[arg(long)]
    pub require_rdma: bool,

    /// Read sysfs from this directory instead of /sys (replay a node)
    #[arg(long, value_name = "DIR", conflicts_with_all = ["pod", "node_name"])]
    pub sysfs_root: Option<PathBuf>,

    /// Read devfs from this directory instead of /dev
    #[arg(long, value_name = "DIR", conflicts_with_all = ["pod", "node_name"])]
    pub devfs_root: Option<PathBuf>,

    /// Read procfs from this directory instead of /proc
    #[arg(long, value_name = "DIR", conflicts_with_all = ["pod", "node_name"])]
    pub procfs_root: Option<PathBuf>,

    /// Use recorded tool outputs (ibstat.txt, ibv_devinfo.txt, topo.txt, ucx_info.txt, lsmod.txt) instead of running tools
    #[arg(long, value_name = "DIR", conflicts_with_all = ["pod", "node_name"])]
    pub tool_outputs: Option<PathBuf>,

    /// Deadline for each diagnostic tool
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = icb_flags::common::parse_duration)]
    pub tool_timeout: Duration,

    /// Pause between two readings of the port error counters (0s: read once)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = icb_flags::common::parse_interval)]
    pub counter_interval: Duration,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct NixlArgs {
    #[command(flatten)]
    pub remote: RemoteArgs,

    /// Deadline for python3 (finding the nixl package)
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = icb_flags::common::parse_duration)]
    pub tool_timeout: Duration,

    /// Directory holding libnixl_capi.so for the `--engine nixl` load check (as for `pair`)
    #[arg(long, value_name = "DIR", conflicts_with = "pod")]
    pub nixl_lib: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// An interrupted probe pod ends in `interrupt::Interrupted`, which `main` turns into its code.
pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.what {
        What::Env(a) => run_env(*a),
        What::Node(a) => run_node(*a),
        What::Nixl(a) => run_nixl(*a),
        What::Serving(a) => super::probe_serving::run(*a),
    }
}

fn output_of(o: &OutputArgs) -> anyhow::Result<Output> {
    o.resolve(icb_report::ReportKind::Probe)
}

pub(super) fn emit(report: &ProbeReport, o: &Output) -> anyhow::Result<i32> {
    let text = icb_report::render_probe_in(report, o.format, o.view())?;
    o.emit(&text)?;
    o.write_exports(icb_report::Report::Probe(report))?;
    Ok(report.exit_code())
}

fn run_env(a: EnvArgs) -> anyhow::Result<i32> {
    let output = output_of(&a.output)?;
    let inputs = env_inputs(&a)?;
    let opts = icb_recipe::EnvOptions {
        helm_values: a.values.iter().map(std::path::PathBuf::from).collect(),
        overlays: a.overlay.iter().map(|p| icb_recipe::Input::from_arg(p)).collect(),
    };
    let report = icb_recipe::probe_env_with(&inputs, &opts)?;
    emit(&report, &output)
}

/// `probe env` inputs: files, directories and `-`, and applied objects (`dgd/NAME`, when no such
/// path exists) read back from the cluster (`icb_kube::objects::probe_env_inputs`).
fn env_inputs(a: &EnvArgs) -> anyhow::Result<Vec<icb_recipe::Input>> {
    let cluster = a.cluster.options();
    Ok(super::runtime()?.block_on(icb_kube::objects::probe_env_inputs(&a.paths, &cluster))?)
}

/// The transport variables of the recipe role asked for (or the one all roles share).
pub(crate) fn recipe_env(paths: &[String], role: Option<&str>) -> anyhow::Result<(TransportEnv, bool)> {
    let inputs: Vec<icb_recipe::Input> = paths.iter().map(|p| icb_recipe::Input::from_arg(p)).collect();
    let (_, roles) = icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default())?;
    Ok(icb_gate::kube::node_env(roles.shared(role)?))
}

/// Reads the node at its vantage (`icb_kube::probe_remote::open`); a probe pod interrupted ends
/// in `interrupt::Interrupted`.
fn open(vantage: Vantage, script: &str, remote: &RemoteArgs, image: Option<String>) -> anyhow::Result<Opened> {
    let flags = RemoteFlags {
        cluster: remote.cluster.options(),
        container: remote.container.clone(),
        deadline: remote.timeout,
        image,
    };
    match probe_remote::open(vantage, script, flags) {
        Err(OpenError::Interrupted(interrupted)) => Err(interrupted.into()),
        opened => Ok(opened?),
    }
}

/// `--pod`, `--node`, or this machine (with `--*-root` replays, and the `ucx_info` beside the
/// UCX a run would load).
fn node_vantage(a: &NodeArgs) -> anyhow::Result<Vantage> {
    let replay = ReplayDirs {
        sysfs_root: a.sysfs_root.clone(),
        devfs_root: a.devfs_root.clone(),
        procfs_root: a.procfs_root.clone(),
        tool_outputs: a.tool_outputs.clone(),
    };
    let mut vantage = request::node_vantage(a.remote.pod.as_deref(), a.node_name.as_deref(), &replay)?;
    if let Vantage::Local(s) = &mut vantage
        && s.tool_outputs.is_none()
    {
        s.tool_at = icb_engine::local::ucx_info_of_loaded_ucx();
    }
    Ok(vantage)
}

fn run_node(a: NodeArgs) -> anyhow::Result<i32> {
    let output = output_of(&a.output)?;
    let recipe = match a.recipe.is_empty() {
        true => None,
        false => Some(recipe_env(&a.recipe, a.role.as_deref())?),
    };
    let request = NodeRequest {
        gather: GatherOptions {
            tool_timeout: a.tool_timeout,
            counter_interval: a.counter_interval,
        },
        recipe,
        require_rdma: a.require_rdma,
    };
    let vantage = node_vantage(&a)?;
    let opened = open(vantage.clone(), &request.script(), &a.remote, a.image.clone())?;
    emit(&request.report(&vantage, opened), &output)
}

fn run_nixl(a: NixlArgs) -> anyhow::Result<i32> {
    let output = output_of(&a.output)?;
    let request = NixlRequest {
        tool_timeout: a.tool_timeout,
        pod: a.remote.pod.clone(),
        namespace: a.remote.cluster.namespace.clone(),
        nixl_lib: a.nixl_lib.clone(),
    };
    let opened = open(request.vantage(), &request.script(), &a.remote, None)?;
    // Where the probe runs on this machine, it also says whether `--engine nixl` can load the
    // NIXL found here (a load without an agent: no UCX starts). Inside a pod this binary is not
    // there to try.
    let engine_load = a
        .remote
        .pod
        .is_none()
        .then(|| icb_nixl_engine::probe_load(a.nixl_lib.as_deref()));
    emit(&request.report(opened, engine_load), &output)
}
