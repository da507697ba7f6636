//! `ic-bench probe env | node | nixl`: read-only checks of recipes, nodes and NIXL installs.
//! Exit 0 for ok/warn, 1 when a check fails, 2 for usage errors.

use super::kube_args::ClusterArgs;
use super::output::{Output, OutputArgs};
use icb_core::checks::ProbeReport;
use icb_probe::remote::{nixl_script, node_script};
use icb_probe::{GatherOptions, LocalSource, NodeExpectations, NodeSource, Snapshot, TransportEnv};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum What {
    /// Check recipes' transport settings: files, directories, or - for stdin
    Env(EnvArgs),
    /// Check a node: RDMA ports, GID tables, GPUDirect mode, memlock, GPU↔NIC topology, UCX
    Node(Box<NodeArgs>),
    /// Check a NIXL install: libraries, plugins, Python package, nixlbench
    Nixl(Box<NixlArgs>),
}

#[derive(clap::Args, Debug, Clone)]
pub struct EnvArgs {
    /// Recipe files or directories (multi-document YAML, kustomizations, Helm charts); - reads stdin.
    /// A directory is a set of recipes, each checked with its own inputs only
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,

    /// Provider overlay (or patch) to apply to every recipe; overlays found in directories are not applied
    #[arg(long, value_name = "FILE")]
    pub overlay: Vec<String>,

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
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = super::common::parse_duration)]
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
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::common::parse_duration)]
    pub tool_timeout: Duration,

    /// Pause between two readings of the port error counters (0s: read once)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = super::common::parse_interval)]
    pub counter_interval: Duration,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct NixlArgs {
    #[command(flatten)]
    pub remote: RemoteArgs,

    /// Deadline for python3 (finding the nixl package)
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::common::parse_duration)]
    pub tool_timeout: Duration,

    /// Directory holding libnixl_capi.so for the `--engine nixl` load check (as for `pair`)
    #[arg(long, value_name = "DIR", conflicts_with = "pod")]
    pub nixl_lib: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    run_probe(args).or_else(|e| match e.downcast_ref::<Interrupted>() {
        Some(Interrupted(code)) => Ok(*code),
        None => Err(e),
    })
}

fn run_probe(args: Args) -> anyhow::Result<i32> {
    match args.what {
        What::Env(a) => run_env(a),
        What::Node(a) => run_node(*a),
        What::Nixl(a) => run_nixl(*a),
    }
}

fn output_of(o: &OutputArgs) -> anyhow::Result<Output> {
    o.resolve(icb_report::ReportKind::Probe)
}

fn emit(report: &ProbeReport, o: &Output) -> anyhow::Result<i32> {
    let text = icb_report::render_probe_in(report, o.format, o.view())?;
    o.emit(&text)?;
    o.write_exports(icb_report::Report::Probe(report))?;
    Ok(report.exit_code())
}

fn run_env(a: EnvArgs) -> anyhow::Result<i32> {
    let output = output_of(&a.output)?;
    let inputs: Vec<icb_recipe::Input> = a.paths.iter().map(|p| icb_recipe::Input::from_arg(p)).collect();
    let opts = icb_recipe::EnvOptions {
        overlays: a.overlay.iter().map(|p| icb_recipe::Input::from_arg(p)).collect(),
    };
    let report = icb_recipe::probe_env_with(&inputs, &opts)?;
    emit(&report, &output)
}

/// The transport variables of the recipe role asked for (or the one all roles share).
pub(crate) fn recipe_env(paths: &[String], role: Option<&str>) -> anyhow::Result<(TransportEnv, bool)> {
    let inputs: Vec<icb_recipe::Input> = paths.iter().map(|p| icb_recipe::Input::from_arg(p)).collect();
    let (_, roles) = icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default())?;
    Ok(node_env(roles.shared(role)?))
}

/// What a node is probed against for a recipe role: its transport env, and whether it names
/// RDMA devices (then the node must have them).
pub(crate) fn node_env(role: &icb_recipe::EngineRole) -> (TransportEnv, bool) {
    let t = &role.transport;
    let env = TransportEnv::new(format!("recipe {}", t.scope), t.vars.clone());
    (env, t.ucx_net_devices.is_some() || t.nccl_ib_hca.is_some())
}

/// A replay root must be a readable directory: a typo would otherwise read as "no RDMA here".
pub(crate) fn replay_dir(flag: &str, dir: &Path) -> anyhow::Result<PathBuf> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(dir.to_path_buf()),
        Ok(_) => anyhow::bail!("{flag} {}: not a directory (pass the directory to read)", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("{flag} {}: no such directory", dir.display())
        }
        Err(e) => anyhow::bail!("{flag} {}: cannot read: {e}", dir.display()),
    }
}

async fn connect(c: &ClusterArgs) -> anyhow::Result<icb_kube::Cluster> {
    let opts = icb_kube::ClusterOptions {
        kubeconfig: c.kubeconfig.clone(),
        context: c.context.clone(),
        namespace: c.namespace.clone(),
        request_timeout: c.request_timeout,
    };
    Ok(icb_kube::connect(&opts).await?)
}

/// Runs `script` in an existing pod through the exec API (nothing is created).
fn exec_snapshot(r: &RemoteArgs, pod: &str, script: &str) -> anyhow::Result<Snapshot> {
    super::common::runtime()?.block_on(async {
        let cluster = connect(&r.cluster).await?;
        let cmd = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        let out = cluster.exec(pod, r.container.as_deref(), &cmd, r.timeout).await?;
        let target = format!("pod/{pod}");
        icb_probe::remote::snapshot_from_exec(&target, &out.stdout_lossy(), out.exit_code, &out.stderr_lossy())
            .map_err(|e| anyhow::anyhow!("{target}: {e}"))
    })
}

/// Runs `script` as the command of one short-lived probe pod on `node` (deleted on every path).
fn node_pod_snapshot(a: &NodeArgs, node: &str, script: &str) -> anyhow::Result<Snapshot> {
    let opts = icb_kube::probe_pod::ProbePodOptions {
        image: a.image.clone().unwrap_or_else(icb_kube::podspec::default_image),
        image_pull_policy: None,
        run_id: icb_kube::podspec::new_run_id(),
        deadline: a.remote.timeout,
    };
    let interrupt = super::interrupt::Interrupt::install()?;
    let target = format!("node/{node}");
    super::common::runtime()?.block_on(async {
        let cluster = connect(&a.remote.cluster).await?;
        let stopped = interrupt.token().cancelled();
        match icb_kube::probe_pod::run_probe_pod(&cluster, node, script, &opts, stopped).await {
            Ok(text) => icb_probe::remote::parse_snapshot(&target, &text).map_err(|e| anyhow::anyhow!("{target}: {e}")),
            Err(icb_kube::KubeError::Interrupted(what)) => {
                Err(anyhow::Error::new(Interrupted(interrupt.report(&what))))
            }
            Err(e) => Err(e.into()),
        }
    })
}

/// The `ucx_info` of the UCX that `serve`/`connect` would load here (`bin/ucx_info` beside its
/// `lib/`), run with that library directory first: the transports and memory types it lists
/// are then those a run would get, not those of whatever `ucx_info` is on `PATH`. Empty (PATH's
/// `ucx_info` is used) when no UCX loads or it ships no `ucx_info`.
fn ucx_info_of_loaded_ucx() -> std::collections::BTreeMap<icb_probe::tools::Tool, icb_probe::tools::ToolAt> {
    let Ok(ucx) = ucx::Ucx::load(None) else {
        return Default::default();
    };
    let lib = ucx.library_dir().to_path_buf();
    let candidates = [lib.join("../bin/ucx_info"), lib.join("../../bin/ucx_info")];
    match candidates.into_iter().find(|p| p.is_file()) {
        Some(exe) => {
            tracing::info!("probe node: using {} (beside the libucp ic-bench loads)", exe.display());
            std::collections::BTreeMap::from([(
                icb_probe::tools::Tool::UcxInfo,
                icb_probe::tools::ToolAt {
                    exe,
                    library_dir: Some(lib),
                },
            )])
        }
        None => Default::default(),
    }
}

/// Where a probed node is read from.
enum NodeAt<'a> {
    /// This machine, or a replayed root.
    Local(LocalSource),
    /// An existing pod, through the exec API (`--pod`).
    Pod(&'a RemoteArgs, &'a str),
    /// A short-lived probe pod on a node (`--node`).
    ProbePod(&'a NodeArgs, &'a str),
}

/// The one place a probe gets its node from: the source, and the transport environment seen
/// there when the source has one (a probe pod's own environment says nothing about the workers).
fn open_node_source(at: NodeAt, script: &str) -> anyhow::Result<(Box<dyn NodeSource>, Option<TransportEnv>)> {
    Ok(match at {
        NodeAt::Local(source) => (Box::new(source), Some(TransportEnv::from_process())),
        NodeAt::Pod(remote, pod) => {
            let snap = exec_snapshot(remote, pod, script)?;
            let env = TransportEnv::new(format!("pod/{pod} env"), snap.env.clone());
            (Box::new(snap), Some(env))
        }
        NodeAt::ProbePod(args, node) => (Box::new(node_pod_snapshot(args, node, script)?), None),
    })
}

/// The probe pod was stopped by a signal after cleanup; carries the exit code (130).
#[derive(Debug)]
struct Interrupted(i32);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

fn run_node(a: NodeArgs) -> anyhow::Result<i32> {
    let output = output_of(&a.output)?;
    let gather = GatherOptions {
        tool_timeout: a.tool_timeout,
        counter_interval: a.counter_interval,
    };
    let recipe = if a.recipe.is_empty() {
        None
    } else {
        Some(recipe_env(&a.recipe, a.role.as_deref())?)
    };
    let pause = a.counter_interval.as_secs().min(30) as u32;
    let tool_s = a.tool_timeout.as_secs();
    let at = if let Some(pod) = &a.remote.pod {
        NodeAt::Pod(&a.remote, pod)
    } else if let Some(node) = &a.node_name {
        NodeAt::ProbePod(&a, node)
    } else {
        let mut s = LocalSource::default();
        if let Some(d) = &a.sysfs_root {
            s.sysfs_root = replay_dir("--sysfs-root", d)?;
        }
        if let Some(d) = &a.devfs_root {
            s.devfs_root = replay_dir("--devfs-root", d)?;
        }
        if let Some(d) = &a.procfs_root {
            s.procfs_root = replay_dir("--procfs-root", d)?;
        }
        s.tool_outputs = a
            .tool_outputs
            .as_deref()
            .map(|d| replay_dir("--tool-outputs", d))
            .transpose()?;
        if s.tool_outputs.is_none() {
            s.tool_at = ucx_info_of_loaded_ucx();
        }
        NodeAt::Local(s)
    };
    let (source, pod_env) = open_node_source(at, &node_script(pause, tool_s))?;
    let (env, recipe_rdma) = match recipe {
        Some((env, rdma)) => (env, rdma),
        None => (pod_env.unwrap_or_default(), false),
    };
    let expect = NodeExpectations {
        env,
        rdma_required: a.require_rdma || recipe_rdma,
    };
    let (mut report, _facts) = icb_probe::probe_node(source.as_ref(), &gather, &expect);
    if a.node_name.is_some() {
        // The probe pod's own limits say nothing about the workers'.
        for c in report.checks.iter_mut().filter(|c| c.id == "node.memlock") {
            c.status = icb_core::Status::Skipped;
            c.detail = "not meaningful from a probe pod: run with --pod on a worker".into();
            c.hint = None;
        }
        let rail_map = report.rail_map.take();
        report = ProbeReport::new("node", &report.target, report.checks, report.next_steps);
        report.rail_map = rail_map;
    }
    emit(&report, &output)
}

fn run_nixl(a: NixlArgs) -> anyhow::Result<i32> {
    let output = output_of(&a.output)?;
    let ns = a
        .remote
        .cluster
        .namespace
        .as_deref()
        .map(|n| format!(" -n {n}"))
        .unwrap_or_default();
    let at = match &a.remote.pod {
        Some(pod) => NodeAt::Pod(&a.remote, pod),
        None => NodeAt::Local(LocalSource::default()),
    };
    let me = a.remote.pod.as_ref().map(|pod| format!("pod/{pod}{ns}"));
    let (source, env) = open_node_source(at, &nixl_script(a.tool_timeout.as_secs()))?;
    let env = env.unwrap_or_default();
    let opts = icb_probe::NixlOptions {
        env,
        tool_timeout: a.tool_timeout,
        pair_hint_target: me,
    };
    // Where the probe runs on this machine, it also says whether `--engine nixl` can load the
    // NIXL found here (a load without an agent: no UCX starts). Inside a pod this binary is not
    // there to try.
    let engine_load = a
        .remote
        .pod
        .is_none()
        .then(|| icb_nixl_engine::probe_load(a.nixl_lib.as_deref()));
    let report = icb_probe::probe_nixl_with_engine(source.as_ref(), &opts, engine_load);
    emit(&report, &output)
}
