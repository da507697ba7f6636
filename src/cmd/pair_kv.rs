//! `ic-bench pair --kv-shape MODEL …`: a model's KV transfer for one request, prefill TP a →
//! decode TP b: one process per rank (`icb_pair::kv::ranks`; NIXL where it loads, else or with
//! `--engine ucx` the UCX engine), locally or on Kubernetes: two bench pods the ranks are exec'd
//! into (`icb_pair::kv::kube_ranks`): whole-node pods on `node/A`, `node/B`; on one node, pods
//! shaped by `--gpus`/`--rdma`/`--host-ipc`/`--host-pid`; for `pod/…`, `deployment/…` pods
//! modelled on the workers. The descriptor sweep, when asked, runs on one more pair of pods.

use super::interrupt::Interrupt;
use super::pair::PairCommand;
use icb_kube::target::Target;
use icb_kv::{KvDtype, KvFlags, KvRequest, KvShape, ModelSpec};
use icb_pair::kv::control::{KvRuns, run_kv_with_controls};
use icb_pair::kv::kube_ranks::KubeRanks;
use icb_pair::kv::local_ranks::{LocalRanks, rank_pinner};
use icb_pair::kv::{KvOp, KvPlan, KvSeam};
use icb_pair::local::{LocalLauncher, LocalOptions};
use icb_pair::rails::kube::KubeRailsPlan;
use icb_pair::{LaunchError, PairPlan};

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
    /// The values, each through icb-kv's parser (its errors are one line), defaults filled in.
    pub fn shape(&self, max_rank_bytes: Option<u64>) -> Result<KvShape, icb_kv::KvError> {
        let or = |v: &Option<String>, d: &str| v.clone().unwrap_or_else(|| d.to_string());
        Ok(KvShape {
            isl: icb_kv::parse_isl(&or(&self.isl, "8192"))?,
            page_size: icb_kv::parse_page_size(&or(&self.page_size, "16"))?,
            kv_dtype: or(&self.kv_dtype, "bf16").parse::<KvDtype>()?,
            prefill_tp: icb_kv::parse_tp("--prefill-tp", &or(&self.prefill_tp, "1"))?,
            decode_tp: icb_kv::parse_tp("--decode-tp", &or(&self.decode_tp, "1"))?,
            max_rank_bytes,
        })
    }
}

fn parse_op(s: &str) -> Result<KvOp, String> {
    s.parse()
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
        Ok(KvFlags {
            kv_shape: self.kv_shape.as_deref().unwrap_or_default().parse::<ModelSpec>()?,
            shape: self.geometry.shape(max_rank_bytes)?,
        })
    }
}

/// Where the ranks run: a local pair, or two bench pods (the plan of the ranks' pods, and the
/// per-pair bench pods the descriptor sweep uses and worker-shaped targets are modelled with).
pub enum KvLaunch {
    Local(LocalOptions),
    Kube(Box<(super::pair_kube::KubeTarget, KubeRailsPlan)>),
}

/// A `--kv-shape` run, decided.
pub struct KvTarget {
    pub plan: KvPlan,
    pub launch: KvLaunch,
}

/// The request (checked against the engine's rules and, locally, this host's memory), the rows
/// and the launcher's options. The cases are the geometry's; `--memory` picks one pair.
pub fn target(args: &mut super::pair::Args, plan: &mut PairPlan) -> anyhow::Result<KvTarget> {
    let kv = args.kv.clone();
    if kv.kv_shape.as_deref() == Some("") {
        anyhow::bail!(
            "--kv-shape needs a MODEL here (e.g. llama-3.1-70b, or a config.json path); gate reads it from --recipe"
        );
    }
    let unlimited = KvRequest::from_flags(&kv.flags(Some(icb_pair::kv::MAX_RANK_BYTES))?)?;
    let request = if args.local {
        let processes = 2 * icb_pair::kv::kv_rows(unlimited.geometry(), KvOp::Read).len();
        KvRequest::from_flags(&kv.flags(Some(icb_pair::kv::local_rank_limit(processes)))?)?
    } else {
        unlimited
    };
    match args.test.memory.as_deref() {
        None => plan.settings.memory = vec![icb_core::MemoryPair::HOST_HOST],
        Some([one]) => plan.settings.memory = vec![*one],
        Some(_) => anyhow::bail!("--kv-shape moves one memory pair: give one --memory, e.g. cuda-cuda"),
    }
    args.engine.engine = kv_engine(&args.engine);
    let op = kv.kv_op.unwrap_or_default();
    let mut kv_plan = KvPlan::new(plan.clone(), request, op);
    kv_plan.engine = args.engine.engine;
    kv_plan.max_kv_ms = kv.max_kv_ms;
    let full = (args.test.profile == super::common::Profile::Full).then_some(100_000);
    if let Some(max) = kv.kv_descriptor_sweep.or(full) {
        let cap = if args.local {
            icb_pair::kv::local_rank_limit(2)
        } else {
            icb_pair::kv::MAX_RANK_BYTES
        };
        kv_plan.sweep = icb_pair::kv::sweep_counts(max, kv_plan.sweep_block, cap);
    }
    let launch = if args.local {
        let mut opts_plan = kv_plan.pair.clone();
        let opts = super::pair_local::options(args, &mut opts_plan)?;
        kv_plan.pair = opts_plan;
        KvLaunch::Local(opts)
    } else {
        let mut kube_plan = kv_plan.pair.clone();
        let t = super::pair_kube::target(args, &mut kube_plan, None)?;
        kv_plan.pair = kube_plan;
        // The ranks run with either engine (NIXL agents or UCX workers; the plan names it).
        let pods = kube_ranks_plan(args, &t, &kv_plan)?;
        KvLaunch::Kube(Box::new((t, pods)))
    };
    *plan = kv_plan.pair.clone();
    Ok(KvTarget { plan: kv_plan, launch })
}

/// The engine of a KV transfer: NIXL's, wherever its library loads, unless `--engine` chose one
/// (`--engine ucx`: the UCX engine's block lists). `gate --kv-shape` decides the same way.
pub fn kv_engine(engine: &super::common::EngineArgs) -> icb_core::EngineKind {
    if engine.engine == icb_core::EngineKind::Ucx
        && !engine.engine_given
        && icb_nixl_engine::probe_load(engine.nixl_lib.as_deref()).is_ok()
    {
        return icb_core::EngineKind::Nixl;
    }
    engine.engine
}

/// The pods of the ranks. Both targets nodes (two, or one for both sides): whole-node pods, or
/// with `--gpus`/`--rdma`/`--resource` (and always on one node) what each side asks
/// (`icb_pair::kv::kube_ranks::pod_devices`), with `--host-ipc`/`--host-pid`. Worker-shaped
/// targets (`pod/…`, `deployment/…`): the bench pods modelled on the workers, decided when the
/// run reads the cluster.
fn kube_ranks_plan(
    args: &super::pair::Args,
    t: &super::pair_kube::KubeTarget,
    plan: &KvPlan,
) -> anyhow::Result<KubeRailsPlan> {
    let k = &args.kube;
    let (Target::Node(prefill), Target::Node(decode)) = (&t.pods.prefill, &t.pods.decode) else {
        // Modelled on the worker pods once the cluster is read (`kube_ranks::modelled`).
        let mut pods = super::pair_rails_kube::pods(args, (String::new(), String::new()), &plan.pair)?;
        pods.run_id = t.pods.run_id.clone();
        return Ok(icb_pair::kv::kube_ranks::ranks_pods(pods, plan));
    };
    let mut pods = super::pair_rails_kube::pods(args, (prefill.clone(), decode.clone()), &plan.pair)?;
    pods.run_id = t.pods.run_id.clone();
    pods.host_ipc = k.host_ipc;
    pods.host_pid = k.host_pid;
    pods.devices = icb_pair::kv::kube_ranks::pod_devices(plan, prefill == decode, &k.devices.request());
    Ok(icb_pair::kv::kube_ranks::ranks_pods(pods, plan))
}

/// The descriptor sweep's local pair: two plain processes (or isolated ones, `--isolation`).
struct LocalSeam(LocalOptions);

impl KvSeam for LocalSeam {
    type L = LocalLauncher;

    async fn launcher(&mut self) -> Result<LocalLauncher, LaunchError> {
        LocalLauncher::create(self.0.clone())
    }
}

/// The descriptor sweep's two bench pods (`<id>-ks`); for READ the initiator (the client pod)
/// runs on the decode node.
struct KubeSeam<'a> {
    target: &'a super::pair_kube::KubeTarget,
    op: KvOp,
}

impl KvSeam for KubeSeam<'_> {
    type L = icb_pair::kube::KubeLauncher;

    async fn launcher(&mut self) -> Result<Self::L, LaunchError> {
        let mut pods = self.target.pods.clone();
        pods.run_id = format!("{}-ks", pods.run_id);
        if self.op == KvOp::Read {
            std::mem::swap(&mut pods.prefill, &mut pods.decode);
        }
        let cluster = self
            .target
            .cluster
            .connect()
            .await
            .map_err(|e| LaunchError::new(e.to_string()))?;
        icb_pair::kube::KubeLauncher::prepare(cluster, pods)
            .await
            .map_err(|e| LaunchError::new(e.to_string()))
    }
}

pub fn run(cmd: &PairCommand, target: &KvTarget) -> anyhow::Result<i32> {
    let interrupt = Interrupt::install()?;
    super::common::runtime()?.block_on(async {
        let plan = &target.plan;
        let mut bar =
            icb_report::live::CaseProgress::start(plan.rows.len() + plan.sweep.len(), plan.pair.settings.unit);
        let mut done = 0usize;
        let mut progress = |p: &icb_core::protocol::CaseProgress| {
            done += 1;
            bar.case(done, plan.rows.len() + plan.sweep.len(), &p.case);
        };
        let result = match &target.launch {
            KvLaunch::Local(opts) => {
                let mut runs = LocalRuns { opts: opts.clone() };
                run_kv_with_controls(&cmd.controls, plan, &mut runs, interrupt.token(), &mut progress).await
            }
            KvLaunch::Kube(kube) => {
                let (t, pods) = &**kube;
                kube_ranks(cmd, plan, t, pods.clone(), &interrupt, &mut progress).await
            }
        };
        bar.finish();
        match result {
            Ok(outcome) => super::common::emit_pair(&outcome.report, &cmd.output, cmd.history.as_ref()),
            Err(icb_pair::PairError::Interrupted(i)) => {
                super::common::emit_interrupted(&i, &cmd.output, &interrupt, cmd.history.as_ref())
            }
            Err(e) => Err(e.into()),
        }
    })
}

/// Local ranks: each run (the main one, then a control) on a local pair of its own, every rank
/// pinned from this host's topology; the descriptor sweep, when asked, on one more pair.
struct LocalRuns {
    opts: LocalOptions,
}

impl KvRuns for LocalRuns {
    async fn run(
        &mut self,
        plan: &KvPlan,
        _run: u32,
        cancel: &icb_pair::CancellationToken,
        progress: &mut icb_pair::kv::KvProgress<'_>,
    ) -> Result<icb_pair::PairOutcome, icb_pair::PairError> {
        let memory = plan.memory();
        let gpus = if memory.initiator == icb_core::MemoryType::Cuda || memory.target == icb_core::MemoryType::Cuda {
            icb_engine::local::cuda_info().devices
        } else {
            0
        };
        let topology = icb_probe::numa::cpu_topology(&icb_probe::LocalSource::default());
        let allowed = icb_pair::kv::cpus::allowed_cpus();
        let mut ranks = LocalRanks::create(self.opts.clone(), rank_pinner(gpus, topology, allowed))?;
        let mut seam = LocalSeam(self.opts.clone());
        let tool = super::connect::tool_info();
        icb_pair::kv::run_kv_ranks(plan, &mut ranks, &mut seam, &tool, cancel, progress).await
    }
}

/// Kubernetes ranks: each run in two bench pods of its own (a control's named `<run>-c<n>`, so
/// that its creates never meet the main run's pods while they are being deleted).
struct KubeRuns<'a> {
    cluster: icb_kube::Cluster,
    pods: KubeRailsPlan,
    seam: KubeSeam<'a>,
}

impl KvRuns for KubeRuns<'_> {
    async fn run(
        &mut self,
        plan: &KvPlan,
        run: u32,
        cancel: &icb_pair::CancellationToken,
        progress: &mut icb_pair::kv::KvProgress<'_>,
    ) -> Result<icb_pair::PairOutcome, icb_pair::PairError> {
        let mut pods = self.pods.clone();
        if run > 0 {
            pods.run_id = icb_pair::kube::rearmed_run_id(&pods.run_id, run);
        }
        let tool = super::connect::tool_info();
        let ranks = KubeRanks::new(self.cluster.clone(), pods, plan);
        icb_pair::kv::kube_ranks::run(plan, ranks, &mut self.seam, &tool, cancel, progress).await
    }
}

/// The ranks in two whole-node pods (`icb_pair::kv::kube_ranks::run`), once connected.
async fn kube_ranks(
    cmd: &PairCommand,
    plan: &KvPlan,
    t: &super::pair_kube::KubeTarget,
    pods: KubeRailsPlan,
    interrupt: &Interrupt,
    progress: &mut icb_pair::kv::KvProgress<'_>,
) -> Result<icb_pair::PairOutcome, icb_pair::PairError> {
    use icb_pair::PairError;
    let cancel = interrupt.token();
    let cluster = tokio::select! {
        c = t.cluster.connect() => c.map_err(|e| PairError::Setup(e.to_string()))?,
        _ = cancel.cancelled() => return Err(PairError::Interrupted(Default::default())),
    };
    // Worker-shaped targets: the pods the per-pair model would create, modelled on the workers
    // (reading the cluster creates nothing).
    let node = |t: &Target| matches!(t, Target::Node(_));
    let pods = if node(&t.pods.prefill) && node(&t.pods.decode) {
        pods
    } else {
        let prepared = tokio::select! {
            p = icb_pair::kube::KubeLauncher::prepare(cluster.clone(), t.pods.clone()) => p.map_err(|e| PairError::Setup(e.to_string()))?,
            _ = cancel.cancelled() => return Err(PairError::Interrupted(Default::default())),
        };
        icb_pair::kv::kube_ranks::modelled(pods, prepared.prepared())
    };
    let seam = KubeSeam { target: t, op: plan.op };
    let mut runs = KubeRuns { cluster, pods, seam };
    run_kv_with_controls(&cmd.controls, plan, &mut runs, cancel, progress).await
}
