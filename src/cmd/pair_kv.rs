//! `ic-bench pair --kv-shape MODEL …`: a model's KV transfer for one request, prefill TP a →
//! decode TP b: one process per rank (`icb_kv_transfer::ranks`; NIXL where it loads, else or with
//! `--engine ucx` the UCX engine), locally or on Kubernetes: two bench pods the ranks are exec'd
//! into (`icb_kv_transfer::kube_ranks`): whole-node pods on `node/A`, `node/B`; on one node, pods
//! shaped by `--gpus`/`--rdma`/`--host-ipc`/`--host-pid`; for `pod/…`, `deployment/…` pods
//! modelled on the workers. The descriptor sweep, when asked, runs on one more pair of pods.

use super::pair_rails_kube::node_pods_start;
use icb_kube::PodOptions;
use icb_kv::{KvFlags, KvShapeText};
use icb_kv_transfer::{KvEngine, KvExtraRuns, KvOp, KvOptions, KvTarget};
use icb_pair::PairPlan;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct KvArgs {
    /// Run one request's real KV transfer for MODEL (a built-in name, e.g. llama-3.1-70b, or
    /// the path of a Hugging Face config.json), prefill TP → decode TP, every rank at once
    #[arg(long, value_name = "MODEL|CONFIG", num_args = 0..=1, default_missing_value = "")]
    pub kv_shape: Option<String>,

    #[command(flatten)]
    pub geometry: KvGeometryArgs,

    /// With --kv-shape: read (decode pulls, vLLM's way) or write (prefill pushes) [default: read]
    #[arg(long, value_name = "OP", requires = "kv_shape", value_parser = parse_op)]
    pub kv_op: Option<KvOp>,

    /// With --kv-shape: fail the verdict when a request's KV transfer takes longer (p50, ms)
    #[arg(long, value_name = "MS", requires = "kv_shape", value_parser = parse_ms)]
    pub max_kv_ms: Option<f64>,

    /// With --kv-shape: also sweep 1, 10, … MAX descriptors per request at the model's block
    /// size (--profile full does it to 100000), showing where posting cost dominates
    #[arg(long, value_name = "MAX", requires = "kv_shape", num_args = 0..=1, default_missing_value = "100000",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub kv_descriptor_sweep: Option<u64>,

    /// With --kv-shape: the runs after the paged one, each on fresh ranks: all, none, or a list
    /// of bulk (one contiguous transfer), bursts (1-64 in flight), other-op [default: all]
    #[arg(long, value_name = "RUNS", requires = "kv_shape", value_parser = parse_extra_runs)]
    pub kv_extra_runs: Option<KvExtraRuns>,
}

/// A model's KV geometry besides the model itself: the flags `pair --kv-shape` and `probe serving
/// --kv-shape` share (each command names its model flag `kv_shape`, which these require).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KvGeometryArgs {
    /// With --kv-shape: prompt length in tokens [default: 8192]
    #[arg(long, value_name = "TOKENS", requires = "kv_shape")]
    pub isl: Option<String>,

    /// With --kv-shape: tokens per KV block (vLLM's --block-size) [default: 16]
    #[arg(long, value_name = "TOKENS", requires = "kv_shape")]
    pub page_size: Option<String>,

    /// With --kv-shape: KV cache element type: bf16, fp16 or fp8 [default: bf16]
    #[arg(long, value_name = "DTYPE", requires = "kv_shape")]
    pub kv_dtype: Option<String>,

    /// With --kv-shape: prefill tensor-parallel size a [default: 1]
    #[arg(long, value_name = "A", requires = "kv_shape")]
    pub prefill_tp: Option<String>,

    /// With --kv-shape: decode tensor-parallel size b [default: 1]
    #[arg(long, value_name = "B", requires = "kv_shape")]
    pub decode_tp: Option<String>,
}

impl KvGeometryArgs {
    /// The values as given, for icb-kv to parse (its errors are one line, defaults filled in).
    pub fn text(&self) -> KvShapeText {
        KvShapeText {
            isl: self.isl.clone(),
            page_size: self.page_size.clone(),
            kv_dtype: self.kv_dtype.clone(),
            prefill_tp: self.prefill_tp.clone(),
            decode_tp: self.decode_tp.clone(),
        }
    }
}

fn parse_op(s: &str) -> Result<KvOp, String> {
    s.parse()
}

fn parse_extra_runs(s: &str) -> Result<KvExtraRuns, String> {
    s.parse().map_err(|e: icb_kv_transfer::BadExtraRuns| e.to_string())
}

fn parse_ms(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches("ms").parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "bad --max-kv-ms '{s}': give a positive number of milliseconds, e.g. 50"
        )),
    }
}

impl KvArgs {
    pub fn wanted(&self) -> bool {
        self.kv_shape.is_some()
    }

    /// The flags' values, each through icb-kv's parser (its errors are one line).
    pub fn flags(&self, max_rank_bytes: Option<u64>) -> Result<KvFlags, icb_kv::KvError> {
        let model = self.kv_shape.as_deref().unwrap_or_default();
        self.geometry.text().flags(model, max_rank_bytes)
    }
}

/// The `--kv-shape` target (`icb_kv_transfer::KvTarget`): the request, checked once (locally
/// against this host's memory), the rows and where the ranks run, on a plan of its own taken
/// from the command's. The cases are the geometry's; `--memory` picks one pair. The engine is
/// decided when the run starts (`icb_kv_transfer::KvEngine`).
pub fn target(args: &super::pair::Args, pods: &PodOptions, plan: &PairPlan) -> anyhow::Result<KvTarget> {
    refuse(args)?;
    let request = icb_kv_transfer::target::request(&args.kv.flags(None)?, args.local)?;
    let mut pair = plan.clone();
    pair.settings.memory = match args.test.memory.as_deref() {
        None => vec![icb_core::MemoryPair::HOST_HOST],
        Some([one]) => vec![*one],
        Some(_) => anyhow::bail!("--kv-shape moves one memory pair: give one --memory, e.g. cuda-cuda"),
    };
    if args.local {
        // Chosen (`--engine nixl`): NIXL must load here, where every rank runs.
        if args.engine.engine_given {
            super::pair_local::check_engine_loads(&args.engine)?;
        }
        let local = (super::pair_local::side_options(args)?, args.local_opts.startup_timeout);
        return Ok(KvTarget::local(pair, request, &kv_options(args), local));
    }
    let bench = super::pair_kube::bench_pods(args, pods, &pair.settings, false)?;
    let kube = (args.kube.cluster.options(), bench, pods);
    let start = node_pods_start(&args.kube);
    Ok(KvTarget::kube(pair, request, &kv_options(args), kube, start))
}

/// Refuses what a `--kv-shape` run cannot do.
fn refuse(args: &super::pair::Args) -> anyhow::Result<()> {
    let dry_run = args.kube.dry_run == Some(super::pair_kube::DryRun::Client);
    if args.rails.wanted() || args.in_place.in_place || dry_run {
        anyhow::bail!("--kv-shape runs its own ranks (--local or bench pods): drop --rails, --in-place or --dry-run");
    }
    if !args.local && (args.prefill.is_none() || args.decode.is_none()) {
        anyhow::bail!("say where to run: --local, or --prefill TARGET --decode TARGET (e.g. node/gpu-1)");
    }
    if args.kv.kv_shape.as_deref() == Some("") {
        anyhow::bail!(
            "--kv-shape needs a MODEL here (e.g. llama-3.1-70b, or a config.json path); gate reads it from --recipe"
        );
    }
    Ok(())
}

/// What the KV flags decide besides the request (`--profile full` sweeps to 100000
/// descriptors); the target sizes the sweep's buffers for where its ranks run.
fn kv_options(args: &super::pair::Args) -> KvOptions {
    let full = (args.test.profile == super::common::Profile::Full).then_some(100_000);
    KvOptions {
        op: args.kv.kv_op.unwrap_or_default(),
        engine: kv_engine(&args.engine),
        max_kv_ms: args.kv.max_kv_ms,
        sweep_max: args.kv.kv_descriptor_sweep.or(full),
        sweep_rank_bytes: icb_kv_transfer::MAX_RANK_BYTES,
        extra: args.kv.kv_extra_runs.unwrap_or_default(),
    }
}

/// The engine flags as a KV run decides its engine (when it starts: `icb_sides::nixl_loads`);
/// `pair` and `gate` decide the same way.
pub fn kv_engine(engine: &super::common::EngineArgs) -> KvEngine {
    let dir = engine.nixl_lib.clone();
    KvEngine::of_flags(engine.engine, engine.engine_given, dir, icb_sides::nixl_loads)
}
