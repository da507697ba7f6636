//! `ic-bench gate`: the pre-benchmark gate. `probe env` on the recipe, `probe node` on both
//! nodes (short-lived probe pods, each against its side's transport env), then the pair with
//! bench pods modelled on the recipe's prefill/decode pod templates where the workers are not
//! running yet (node targets), or on the running pods, all under one `--budget`; ONE verdict with
//! every finding. Exit 0 pass, 1 fail, 2 setup or over budget (naming what still ran), 130
//! interrupted.

use super::interrupt::Interrupt;
use icb_flags::cluster::ClusterArgs;
use icb_gate::emit;
use icb_gate::flags::GateFlags;
use icb_gate::kube::KubeGate;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub devices: icb_flags::devices::DeviceArgs,

    /// The serving recipe (anything `probe env` reads); on node targets the bench pods are cloned from its prefill/decode pod templates
    #[arg(long, value_name = "PATH")]
    pub recipe: Vec<String>,

    /// Recipe role to model both bench pods on (default: prefill for --prefill, decode for --decode)
    #[arg(long, value_name = "ROLE")]
    pub role: Option<String>,

    /// Prefill side: node/NAME, pod/NAME, deployment/NAME, statefulset/NAME, lws/NAME, dgd/NAME/COMPONENT or a selector
    #[arg(long, allow_hyphen_values = true)]
    pub prefill: String,

    /// Decode side (same forms)
    #[arg(long, allow_hyphen_values = true)]
    pub decode: String,

    /// Bound on the whole gate (probes + pair)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = icb_flags::common::parse_duration)]
    pub budget: Duration,

    /// Skip the node probes (when probe pods are not allowed)
    #[arg(long)]
    pub no_node_probe: bool,

    /// Negative controls after the pair step, comma separated or repeated [default: tcp: the same
    /// pair with UCX forced to TCP, which must be caught or the gate is not fit; and knobs-off when
    /// the recipe sets UCX_*/NIXL_* variables: the same pair without them, which warns when the
    /// recipe's env is slower than UCX's defaults; wrong-nic is `pair --rails`'s only; with
    /// --kv-shape: tcp, the KV transfer once more with every rank forced to TCP]
    #[arg(
        long = "control",
        value_name = "KIND",
        value_delimiter = ',',
        conflicts_with = "no_controls"
    )]
    pub controls: Vec<icb_core::model::ControlKind>,

    /// Run the pair step without its negative controls
    #[arg(long)]
    pub no_controls: bool,

    /// Bench and probe image [default: ghcr.io/ic-bench/ic-bench:<this version>]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// Tests of the pair (short: RMA put/get + tag latency)
    #[arg(long, value_delimiter = ',', default_value = "put_bw,get_bw,tag_lat")]
    pub tests: Vec<icb_core::TestKind>,

    /// Sizes of the pair: sizes or power-of-two ranges (8..64MiB), comma separated
    #[arg(long, value_delimiter = ',', default_value = "64KiB,1MiB", value_parser = icb_flags::common::SizeList::parse)]
    pub sizes: Vec<icb_flags::common::SizeList>,

    /// Memory pairs of the pair
    #[arg(long, value_delimiter = ',', default_value = "host-host")]
    pub memory: Vec<icb_core::MemoryPair>,

    /// How the pair step allocates GPU memory: legacy (cuMemAlloc), vmm (as PyTorch's
    /// expandable_segments:True), pool or fabric; see docs/pair.md [default: the recipe's engines'
    /// allocation: vmm where their PYTORCH_CUDA_ALLOC_CONF sets expandable_segments:True, else legacy]
    #[arg(long, value_name = "MODE", value_enum)]
    pub cuda_alloc: Option<icb_flags::common::CudaAlloc>,

    #[command(flatten)]
    pub expect: icb_flags::common::ExpectArgs,

    /// What stdout shows: the verdict and findings (table; wide does not wrap), json or junit
    #[arg(short = 'o', long = "output", value_enum, default_value_t = GateOutput::Table)]
    pub output: GateOutput,

    #[command(flatten)]
    pub exports: icb_flags::exports::ExportArgs,

    #[command(flatten)]
    pub engine: icb_flags::common::EngineArgs,

    /// Whole nodes: the pair step runs every rail of the two nodes at once (`auto`, or
    /// `gpu0=mlx5_0,…`), each rank under the recipe's transport env and its UCX_NET_DEVICES, so a
    /// per-rank NIC mapping that does not follow the nodes' rail maps is measured in the NICs'
    /// own counters
    #[arg(long, value_name = "auto|gpuN=NIC,…")]
    pub rails: Option<String>,

    /// With --rails: a rail more than this far below the median of the rails fails (e.g. 20%)
    #[arg(long, value_name = "PERCENT", default_value = "20%", value_parser = icb_flags::rails::parse_percent, requires = "rails")]
    pub rail_margin: f64,

    /// `--kv-shape [MODEL]`: the pair step is the deployment's own KV transfer (model, TP sizes
    /// and block size from the flags, else from the recipe's engine arguments)
    #[command(flatten)]
    pub kv: icb_flags::kv::KvArgs,

    #[command(flatten)]
    pub history: icb_flags::history::HistoryArgs,

    /// At the end, set the node condition ICBenchFabric on the nodes the gate measured: True (pass), False (a fail of their pair or their own probe) or Unknown (a fail elsewhere, over budget, a setup error), with reason, message and times (needs manifests/clusterrole-node-conditions.yaml)
    #[arg(long)]
    pub node_conditions: bool,
}

/// The formats that can show a gate report.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateOutput {
    Table,
    Wide,
    Json,
    Junit,
}

impl GateOutput {
    fn format(self) -> icb_report::Format {
        match self {
            GateOutput::Table => icb_report::Format::Table,
            GateOutput::Wide => icb_report::Format::Wide,
            GateOutput::Json => icb_report::Format::Json,
            GateOutput::Junit => icb_report::Format::Junit,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let flags = flags(&args);
    flags.refuse_rails_controls()?;
    let settings = settings(&args)?;
    flags.refuse(args.kv.wanted())?;
    let criteria = flags.criteria(&settings);
    let input = flags.input(settings)?;
    let format = args.output.format();
    // Refused now, before anything runs: a format that cannot show a gate report.
    let exports = args.exports.exports(icb_report::ReportKind::Gate)?;
    let history = args.history.prepare()?;
    let plan = icb_gate::GatePlan {
        budget: args.budget,
        probe_nodes: !args.no_node_probe,
        signal_name: super::interrupt::signal_name,
        criteria: Some(criteria),
    };
    // Claimed before the first step: from here on a signal ends in the report, exit 130.
    let interrupt = Interrupt::install()?;
    let mut steps = KubeGate::new(input);
    let rt = super::runtime()?;
    let mut report = rt.block_on(icb_gate::run_gate(&plan, &mut steps, interrupt.token()));
    let view = icb_report::View {
        width: icb_flags::output::width(false),
        wide: false,
    };
    let history_error = emit::write(&mut report, (format, view), &exports, history.as_ref())?;
    if args.node_conditions {
        eprintln!("ic-bench: {}", rt.block_on(steps.write_conditions(&report))?);
    }
    Ok(emit::exit_code(&report, history_error, history.as_ref(), &interrupt)?)
}

/// The flags as the gate takes them.
fn flags(args: &Args) -> GateFlags {
    GateFlags {
        cluster: args.cluster.options(),
        recipe: args.recipe.clone(),
        role: args.role.clone(),
        prefill: args.prefill.clone(),
        decode: args.decode.clone(),
        expect: args.expect.flags(),
        image: args.image.clone(),
        engine: args.engine.engine,
        ucx_profile: args.engine.choice().ucx_profile_named(),
        side_flags: args.engine.side_flags(),
        devices: args.devices.request(),
        rails: args.rails.clone(),
        rail_margin: args.rail_margin,
        // The ranks' engine is decided when the KV step runs (`icb_kv_transfer::KvEngine`).
        kv: super::gate_kv::gate_kv(&args.kv, &args.engine),
        controls: args.controls.clone(),
        no_controls: args.no_controls,
        cuda_alloc_given: args.cuda_alloc.is_some(),
        node_conditions: args.node_conditions,
    }
}

/// The pair step's settings: a qualification profile of the flags, as the engine runs it.
fn settings(args: &Args) -> anyhow::Result<icb_core::RunSettings> {
    let mut settings = icb_core::RunSettings::qualification(
        args.tests.clone(),
        icb_flags::common::SizeList::all(&args.sizes),
        args.memory.clone(),
        1.0,
    );
    settings.cuda_alloc = args.cuda_alloc.unwrap_or_default().into();
    icb_flags::common::qualified(&args.engine.choice(), settings)
}
