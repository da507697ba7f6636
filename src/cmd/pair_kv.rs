//! `ic-bench pair --kv-shape MODEL …`: a model's KV transfer for one request, prefill TP a →
//! decode TP b: one process per rank (`icb_kv_transfer::ranks`; NIXL where it loads, else or with
//! `--engine ucx` the UCX engine), locally or on Kubernetes: two bench pods the ranks are exec'd
//! into (`icb_kv_transfer::kube_ranks`): whole-node pods on `node/A`, `node/B`; on one node, pods
//! shaped by `--gpus`/`--rdma`/`--host-ipc`/`--host-pid`; for `pod/…`, `deployment/…` pods
//! modelled on the workers. The descriptor sweep, when asked, runs on one more pair of pods.

use super::pair_rails_kube::node_pods_start;
use icb_kube::PodOptions;
use icb_kv_transfer::{KvEngine, KvOptions, KvTarget};
use icb_pair::PairPlan;

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
    let full = (args.test.profile == icb_flags::common::Profile::Full).then_some(100_000);
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
pub fn kv_engine(engine: &icb_flags::common::EngineArgs) -> KvEngine {
    let dir = engine.nixl_lib.clone();
    KvEngine::of_flags(engine.engine, engine.engine_given, dir, icb_sides::nixl_loads)
}
