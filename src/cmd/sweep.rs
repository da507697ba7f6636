//! `ic-bench sweep`: many node pairs through the pair pipeline (one `run_pair` with its own
//! `KubeLauncher` and run id per pair, the pairs of a round concurrently), the results file
//! rewritten atomically after every pair, a second pass on suspects, and node verdicts.
//! Scheduling and scoring are `icb_sweep`'s (pure, tested without a cluster).

use super::interrupt::Interrupt;
use icb_core::model::{MemoryPair, TestKind};
use icb_flags::cluster::ClusterArgs;
use icb_flags::output::OutputFormat;
use icb_nixl_engine::EngineChoice;
use icb_sweep::results::SweepResults;
use icb_sweep::resume::Given;
use icb_sweep::schedule::Schedule;
use icb_sweep_kube::RailsJob;
use icb_sweep_kube::command::{CommandEnd, Outputs, SweepCommand};
use icb_sweep_kube::flow::{FlowEnd, FlowOptions};
use icb_sweep_kube::plan::NodeChoice;
use icb_sweep_kube::start::PlanFlags;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub devices: icb_flags::devices::DeviceArgs,

    /// Nodes to qualify, by label selector [default: every Ready, schedulable node]
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR", conflicts_with = "nodes")]
    pub selector: Option<String>,

    /// Nodes to qualify, by name (comma-separated)
    #[arg(long, value_delimiter = ',', value_name = "A,B,C")]
    pub nodes: Vec<String>,

    /// Prefill pool (label selector); with --decode-pool, pairs every prefill node with every decode node
    #[arg(long, value_name = "SELECTOR", requires = "decode_pool")]
    pub prefill_pool: Option<String>,

    /// Decode pool (label selector)
    #[arg(long, value_name = "SELECTOR", requires = "prefill_pool")]
    pub decode_pool: Option<String>,

    /// all-pairs, ring, bipartite, intra-node, or linear (ring + --matchings random perfect matchings) [default: all-pairs; bipartite with pools]
    #[arg(long, value_parser = ["all-pairs", "ring", "bipartite", "intra-node", "linear"])]
    pub schedule: Option<String>,

    /// Random perfect matchings on top of the ring for --schedule linear
    #[arg(long, default_value_t = 2)]
    pub matchings: usize,

    /// Seed of the linear schedule's matchings (the plan is written to the results file)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// At most this many pairs at once (0: a whole round)
    #[arg(long, default_value_t = 0)]
    pub max_concurrent: usize,

    /// Time budget of one pair: scheduling, start, transfer
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = icb_flags::common::parse_duration)]
    pub pair_timeout: Duration,

    // The criteria flags have no clap defaults: `--resume` must tell a flag given now (refused
    // when it differs from the file) from one left out (the file's value); `sweep_resume`
    // fills the defaults in.
    /// Tests per pair (the short default profile: RMA put/get + tag latency) [default: put_bw,get_bw,tag_lat]
    #[arg(long, value_delimiter = ',')]
    pub tests: Vec<TestKind>,

    /// Message sizes per pair: sizes or power-of-two ranges (8..64MiB), comma separated [default: 64KiB,1MiB]
    #[arg(long, value_delimiter = ',', value_parser = icb_flags::common::SizeList::parse)]
    pub sizes: Vec<icb_flags::common::SizeList>,

    /// Memory pairs per pair (cuda-cuda on GPU nodes) [default: host-host]
    #[arg(long, value_delimiter = ',')]
    pub memory: Vec<MemoryPair>,

    /// Longest measurement of one case, seconds [default: 1]
    #[arg(long)]
    pub max_time: Option<f64>,

    #[command(flatten)]
    pub expect: icb_flags::common::ExpectArgs,

    /// Bench image [default: ghcr.io/ic-bench/ic-bench:<this version>]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// Give the bench pods the host's IPC namespace (intra-node shared memory)
    #[arg(long)]
    pub host_ipc: bool,

    /// The container runtime gives pods an unlimited memlock limit: RDMA bench pods then run as non-root without IPC_LOCK (Pod Security "restricted" instead of "privileged")
    #[arg(long)]
    pub memlock_unlimited: bool,

    #[command(flatten)]
    pub engine: icb_flags::common::EngineArgs,

    /// Results file, rewritten atomically after every pair [default: ic-bench-sweep-<ID>.json]
    #[arg(long, value_name = "FILE", conflicts_with = "resume")]
    pub results: Option<PathBuf>,

    /// Continue the sweep in FILE: run only the pairs it does not have yet
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,

    /// Also write a self-contained HTML report (heatmap, node table, second pass, per-pair plots), rewritten after every pair; repeatable
    #[arg(long, value_name = "FILE")]
    pub export_html: Vec<PathBuf>,

    /// `--export-json/--export-junit/--export-prometheus FILE`, rewritten after every pair
    #[command(flatten)]
    pub exports: icb_flags::exports::ExportArgs,

    /// Whole-node mode: each node pair runs every GPU↔NIC rail at once (one pod per node holding
    /// all of its GPUs and RDMA devices): `auto` (the nodes' rail maps) or `gpu0=mlx5_0,…`
    #[arg(long, value_name = "auto|gpuN=NIC,…")]
    pub rails: Option<String>,

    /// With --rails: a rail more than this far below its node pair's median fails (e.g. 20%)
    #[arg(long, value_name = "PERCENT", requires = "rails", value_parser = icb_flags::rails::parse_percent)]
    pub rail_margin: Option<f64>,

    /// Run the second pass's pairs without their tcp control (by default each pair that re-measures a suspect repeats one short case with UCX forced to TCP, which must be caught or the node is left unjudged)
    #[arg(long)]
    pub no_controls: bool,

    /// Print the plan (rounds, pairs, pods at once, estimated wall) and run nothing
    #[arg(long)]
    pub dry_run: bool,

    /// At the end, label each node with a verdict ic-bench.dev/fabric=pass|fail and annotate time, sweep id and reason (needs manifests/clusterrole-label-nodes.yaml; never taints)
    #[arg(long)]
    pub label_nodes: bool,

    /// At the end, set the node condition ICBenchFabric on every node of the sweep: True (pass), False (fail) or Unknown (not measured, unschedulable, suspect, inconclusive), with reason, message and times (needs manifests/clusterrole-node-conditions.yaml)
    #[arg(long)]
    pub node_conditions: bool,

    /// At the end, write the node-pair matrix (per ordered pair: bandwidth, latency, transport, verdict, when measured; docs/sweep.md) into ConfigMap NAME of the namespace, key matrix.json, for topology-aware schedulers (needs manifests/role-fabric-matrix.yaml)
    #[arg(long, value_name = "NAME", value_parser = icb_kube::fabric_matrix::parse_name)]
    pub matrix_configmap: Option<String>,

    /// Bandwidth unit of the node annotations (--label-nodes): gb (10^9 B/s) or mib (2^20 B/s)
    #[arg(long, value_name = "UNIT", default_value = "gb", value_parser = icb_flags::common::parse_unit)]
    pub unit: icb_core::BandwidthUnit,

    /// stdout at the end: table (node verdicts), wide (with all evidence), json, junit or prometheus
    #[arg(short = 'o', long = "output", value_name = "FORMAT", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,

    #[command(flatten)]
    pub history: icb_flags::history::HistoryArgs,
}

impl Args {
    /// Every `--export-*` file, refused up front when its format cannot show a sweep.
    fn exports(&self) -> anyhow::Result<icb_report::Exports> {
        let mut exports = self.exports.exports(icb_report::ReportKind::Sweep)?;
        for p in &self.export_html {
            exports.add(icb_report::FileFormat::Html, p);
        }
        Ok(exports)
    }
}

/// The sweep the flags and the resumed file decide: the file's criteria over the flags', and
/// everything derived from them that this run measures with.
fn command(args: &Args) -> anyhow::Result<SweepCommand> {
    // Read before anything connects: a resumed sweep runs with the file's criteria.
    let mut resumed = icb_sweep_kube::resume::Resumed::read(args.resume.as_deref(), super::sweep_resume::given(args))?;
    let given = &resumed.given;
    let engine = super::sweep_resume::engine(args, given)?;
    // After the file's criteria: a resumed rails sweep stays one.
    let rails = RailsJob::read(given.rails.as_deref(), given.rail_margin, args.schedule.as_deref())?;
    let pods = pod_options(args, given, &engine);
    let criteria = resumed.criteria();
    Ok(SweepCommand {
        cluster: args.cluster.options(),
        plan: plan_flags(args),
        dry_run: args.dry_run,
        // The criteria's qualification profile, as the engine runs it.
        settings: icb_flags::common::qualified(&engine, criteria.settings()?)?,
        expectation: icb_pair::ExpectationInput::read(&resumed.expectation())?,
        file: resumed.file,
        pods,
        criteria,
        rails,
        second_pass_controls: match args.no_controls {
            true => vec![],
            false => vec![icb_core::model::ControlKind::Tcp],
        },
    })
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    check_output(args.output.into())?;
    args.exports()?;
    let command = command(&args)?;
    if args.dry_run
        && let Some(r) = match &command.file {
            Some(r) => Some(r.clone()),
            None => command.plan.offline(&command.criteria)?,
        }
    {
        print!("{}", icb_report::sweep_progress::plan_text(&r));
        return Ok(icb_core::exit::OK);
    }
    let interrupt = Interrupt::install()?;
    let outputs = |results: &SweepResults| -> anyhow::Result<Outputs> {
        Ok((flow_options(&args, results), args.exports()?, args.history.prepare()?))
    };
    let end = super::runtime()?.block_on(command.run(interrupt.token(), outputs))?;
    Ok(match end {
        CommandEnd::NotStarted => interrupt.report("nothing was started"),
        CommandEnd::Planned(results) => {
            print!("{}", icb_report::sweep_progress::plan_text(&results));
            icb_core::exit::OK
        }
        CommandEnd::Flowed(FlowEnd::Exit(code)) => code,
        CommandEnd::Flowed(FlowEnd::Interrupted(line)) => interrupt.report(&line),
    })
}

/// How the sweep runs and what it writes, from the flags.
fn flow_options(args: &Args, results: &SweepResults) -> FlowOptions {
    let path = args.resume.clone().or_else(|| args.results.clone());
    FlowOptions {
        path: path.unwrap_or_else(|| PathBuf::from(format!("ic-bench-sweep-{}.json", results.sweep_id))),
        resumed: args.resume.is_some(),
        max_concurrent: args.max_concurrent,
        writes: icb_sweep_kube::plan::NodeWrites {
            labels: args.label_nodes,
            conditions: args.node_conditions,
            matrix_config_map: args.matrix_configmap.clone(),
        },
        unit: args.unit,
        format: args.output.into(),
        view: stdout_view(args.output.into()),
        signal_name: super::interrupt::signal_name,
    }
}

/// The bench pods' options, from the sweep's flags and criteria.
fn pod_options(args: &Args, given: &Given, engine: &EngineChoice) -> icb_kube::PodOptions {
    let image = args.image.clone().unwrap_or_else(icb_kube::podspec::default_image);
    icb_kube::PodOptions {
        host_ipc: given.host_ipc,
        memlock_unlimited: given.memlock_unlimited,
        devices: args.devices.request(),
        ..icb_kube::PodOptions::new(image, engine.side_flags())
    }
}

/// The flags that plan a new sweep.
fn plan_flags(args: &Args) -> PlanFlags {
    PlanFlags {
        choice: NodeChoice::of_flags(
            (args.prefill_pool.as_deref(), args.decode_pool.as_deref()),
            &args.nodes,
            args.selector.as_deref(),
        ),
        schedule: args.schedule.clone(),
        matchings: args.matchings,
        seed: args.seed,
        max_concurrent: args.max_concurrent,
        pair_budget: args.pair_timeout,
        tool_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Refuses an `-o` format that cannot show a sweep (svg) before anything connects: the
/// exporter itself says so, on empty results.
fn check_output(format: icb_report::Format) -> anyhow::Result<()> {
    let empty = SweepResults::new(String::new(), Schedule::AllPairs, vec![], 0.0, vec![]);
    icb_report::render_sweep_in(&empty, format, icb_report::View::default())?;
    Ok(())
}

/// The table fitted to the terminal stdout goes to (the one width rule).
fn stdout_view(format: icb_report::Format) -> icb_report::View {
    icb_report::View {
        width: icb_flags::output::width(false),
        wide: format == icb_report::Format::Wide,
    }
}
