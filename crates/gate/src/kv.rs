//! `gate --kv-shape [MODEL]`: the gate's pair step is the deployment's own KV transfer. The
//! binary parses the flags once into a [`GateKv`]; what they leave out (model, TP sizes, block
//! size) comes from the recipe's engine arguments, read by the gate's `probe env` step.
//!
//! The transfer is `pair`'s per-rank model ([`icb_kv_transfer::kube_ranks`]): one process per TP
//! rank, all at once, exec'd into two bench pods. On node targets (`--prefill node/A --decode
//! node/B`, or one node for both) those are whole-node pods (or shaped by `--gpus`/`--rdma` on
//! one node), every rank under its side's recipe transport env, as the workers run; for
//! worker-shaped targets (`pod/…`, `deployment/…`) the bench pods modelled on the workers (or the
//! recipe's templates). The descriptor sweep, when asked, runs on per-pair bench pods.

use crate::{PairEnd, StepError};
use icb_core::model::ControlKind;
#[cfg(test)]
use icb_kube::devices::DeviceRequest;
use icb_kube::pair::{BenchPodsPlan, SideTemplates};
use icb_kube::target::Target;
use icb_kv_transfer::control::run_kv_with_controls;
use icb_kv_transfer::kube_runs::{KubeRuns, SweepPods};
use icb_kv_transfer::{KvOp, KvPlan};
use icb_pair::{CancellationToken, PairError, PairPlan};
#[cfg(test)]
use icb_rails::kube::PodDevices;
use icb_rails::kube::{EnvVars, KubeRailsPlan};
use icb_recipe::EngineArgs;

/// The recipe's prefill and decode engine arguments, where the gate read a recipe.
pub type RecipeEngines = (EngineArgs, EngineArgs);

/// What the gate's KV flags gave (`None`, or an empty model: left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KvGiven {
    pub model: Option<String>,
    pub shape: icb_kv::KvShapeText,
}

impl KvGiven {
    /// Completed from the recipe where the flags say nothing: the prefill role's model and TP,
    /// the decode role's TP, either's block size (a flag always wins). No model anywhere is one
    /// line naming the flag.
    pub fn completed(&self, roles: Option<&RecipeEngines>) -> Result<KvGiven, String> {
        let (prefill, decode) = match roles {
            Some((p, d)) => (Some(p), Some(d)),
            None => (None, None),
        };
        let mut kv = self.clone();
        if kv.model.as_deref().is_none_or(str::is_empty) {
            let model = prefill
                .and_then(|p| p.model.clone())
                .or_else(|| decode.and_then(|d| d.model.clone()));
            kv.model = Some(model.ok_or(
                "--kv-shape without a MODEL reads it from the recipe, which names none: give --kv-shape MODEL (e.g. llama-3.1-70b)",
            )?);
        }
        let tp = |e: Option<&EngineArgs>| e.and_then(|e| e.tensor_parallel).map(|t| t.to_string());
        let shape = &mut kv.shape;
        shape.prefill_tp = shape.prefill_tp.take().or_else(|| tp(prefill));
        shape.decode_tp = shape.decode_tp.take().or_else(|| tp(decode));
        let page = |e: Option<&EngineArgs>| e.and_then(|e| e.page_size).map(|p| p.to_string());
        shape.page_size = shape
            .page_size
            .take()
            .or_else(|| page(prefill))
            .or_else(|| page(decode));
        Ok(kv)
    }

    /// The request of the flags completed by the recipe (`None`: no recipe was read), each
    /// rank's buffer bounded as `pair`'s on Kubernetes; an `Err` is the one-line refusal.
    pub fn request(&self, roles: Option<&RecipeEngines>) -> Result<icb_kv::KvRequest, String> {
        let kv = self.completed(roles)?;
        let model = kv.model.as_deref().unwrap_or_default();
        let flags = kv
            .shape
            .flags(model, Some(icb_kv_transfer::MAX_RANK_BYTES))
            .map_err(|e| e.to_string())?;
        icb_kv::KvRequest::from_flags(&flags).map_err(|e| e.to_string())
    }
}

/// `--kv-shape` for the gate, parsed once by the binary.
#[derive(Debug, Clone)]
pub struct GateKv {
    /// The model and shape flags, completed from the recipe when the step runs.
    pub given: KvGiven,
    pub op: KvOp,
    pub max_kv_ms: Option<f64>,
    /// `--kv-descriptor-sweep[=MAX]`.
    pub sweep_max: Option<u64>,
    /// The engine the per-rank model's ranks run (NIXL wherever it loads, unless `--engine`),
    /// decided when the step runs.
    pub engine: icb_kv_transfer::KvEngine,
    /// This build, for the per-rank report.
    pub tool: icb_core::ToolInfo,
}

/// Where the gate's pair step runs its KV transfer.
pub(crate) struct KvSite<'a> {
    pub cluster: icb_kube::Cluster,
    pub pods: &'a BenchPodsPlan,
    pub templates: &'a SideTemplates,
    /// The recipe's transport env of each side's workers: (prefill, decode).
    pub envs: (EnvVars, EnvVars),
    /// The gate's pod options (image, the engine flags every rank gets, device flags).
    pub options: icb_kube::PodOptions,
    /// The gate's budget: the ranks' pods start within what is left of it.
    pub deadline: tokio::time::Instant,
    /// The bench pods decided for the targets (modelled on the workers or the templates).
    pub prepared: &'a icb_kube::pair::Prepared,
}

/// The pods of the per-rank model ([`icb_kv_transfer::kube_ranks::ranks_plan`], the constructor
/// `pair` uses too): on node targets every rank under its side's recipe env (`envs`).
/// Worker-shaped targets (`pod/…`, `deployment/…`): the bench pods `prepared` modelled on the
/// workers (or the recipe's templates), whose env is already theirs
/// ([`icb_kv_transfer::kube_ranks::modelled`]).
pub fn ranks_pods(
    pods: &BenchPodsPlan,
    prepared: &icb_kube::pair::Prepared,
    kv: &KvPlan,
    options: &icb_kube::PodOptions,
    envs: (EnvVars, EnvVars),
    times: (std::time::Duration, std::time::Duration),
) -> KubeRailsPlan {
    let targets = (&pods.prefill, &pods.decode);
    let plan = icb_kv_transfer::kube_ranks::ranks_plan(targets, &pods.run_id, options, kv, times, envs);
    match targets {
        (Target::Node(_), Target::Node(_)) => plan,
        _ => icb_kv_transfer::kube_ranks::modelled(plan, prepared),
    }
}

/// The gate's pair step as the KV transfer: one judged report whose verdict carries
/// `--max-kv-ms`, and the gate's TCP control (`controls` holds `tcp` unless `--no-controls`) on
/// the same sides, which must be caught or the step is inconclusive.
pub(crate) async fn pair(
    kv: &GateKv,
    engines: Option<&RecipeEngines>,
    plan: PairPlan,
    site: KvSite<'_>,
    controls: &[ControlKind],
    cancel: &CancellationToken,
) -> Result<PairEnd, StepError> {
    let request = kv.given.request(engines).map_err(StepError::Setup)?;
    let options = icb_kv_transfer::KvOptions {
        op: kv.op,
        engine: icb_kv_transfer::KvEngine::Chosen(kv.engine.decide()),
        max_kv_ms: kv.max_kv_ms,
        sweep_max: kv.sweep_max,
        sweep_rank_bytes: icb_kv_transfer::MAX_RANK_BYTES,
        // The bulk row, the bursts and the other operation are `pair --kv-shape`'s: the gate's
        // budget covers the paged request only.
        extra: icb_kv_transfer::KvExtraRuns::NONE,
    };
    let kv_plan = KvPlan::with_options(plan, request, &options);
    let left = site.deadline.saturating_duration_since(tokio::time::Instant::now());
    let timeout = site.cluster.request_timeout();
    let pods = ranks_pods(
        site.pods,
        site.prepared,
        &kv_plan,
        &site.options,
        site.envs,
        (left, timeout),
    );
    // The descriptor sweep's pods are modelled as the gate's own bench pods are.
    let sweep = SweepPods {
        cluster: site.cluster.clone(),
        pods: site.pods.clone(),
        templates: site.templates.clone(),
        op: kv.op,
    };
    let mut progress = |_: &icb_core::protocol::CaseProgress| {};
    let mut runs = KubeRuns {
        cluster: site.cluster,
        pods,
        sweep,
        tool: kv.tool.clone(),
    };
    match run_kv_with_controls(controls, &kv_plan, &mut runs, cancel, &mut progress).await {
        Ok(o) => Ok(PairEnd::Judged(Box::new(o.report))),
        Err(PairError::Interrupted(i)) => Ok(PairEnd::Interrupted {
            cleanup: i.cleanup_text(),
            partial: i.partial,
        }),
        Err(e) => Err(StepError::Setup(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Llama-3.1-8B at 32 tokens, TP2 → TP1 (each prefill rank 2 MiB, the decode rank 4 MiB).
    fn kv_plan() -> KvPlan {
        let shape = icb_kv::KvShape {
            isl: 32,
            page_size: 16,
            kv_dtype: icb_kv::KvDtype::Bf16,
            prefill_tp: 2,
            decode_tp: 1,
            max_rank_bytes: None,
        };
        let request = icb_kv::KvRequest::new(icb_kv::builtin("llama-3.1-8b").unwrap(), shape).unwrap();
        let pair = PairPlan::new(icb_core::RunSettings::full_curve(), Default::default());
        KvPlan::new(pair, request, KvOp::Read)
    }

    /// The gate's pod options: its image pulled `Never`, memlock unlimited, the engine flags.
    fn options(flags: &[String]) -> icb_kube::PodOptions {
        icb_kube::PodOptions {
            image_pull_policy: Some("Never".into()),
            memlock_unlimited: true,
            ..icb_kube::PodOptions::new("img:1".into(), flags.to_vec())
        }
    }

    fn bench_pods(prefill: &str, decode: &str, options: &icb_kube::PodOptions) -> BenchPodsPlan {
        let targets = (prefill.parse().unwrap(), decode.parse().unwrap());
        let timeouts = (Duration::from_secs(60), Duration::from_secs(30));
        BenchPodsPlan::new(targets, "run1".into(), options, timeouts.0, timeouts.1)
    }

    /// What `prepare` decided for two worker pods: a bench pod per side on the worker's node.
    fn prepared() -> icb_kube::pair::Prepared {
        use icb_kube::podspec::{BenchPod, Role};
        let side = |node: &str, target: &str| icb_kube::target::Resolved {
            target: target.parse().unwrap(),
            node: node.into(),
            reference: None,
            modelled_on: Some(target.into()),
            note: None,
        };
        let bench = |role, node: &str| BenchPod {
            run_id: "run1".into(),
            role,
            namespace: "ns".into(),
            node: node.into(),
            image: "img:1".into(),
            image_pull_policy: None,
            args: vec!["serve".into()],
            env: Vec::new(),
            model: None,
            devices: Default::default(),
            active_deadline_s: 60,
            privileged: false,
            host_ipc: true,
            host_pid: false,
            service_account: None,
            extra_labels: Default::default(),
            tolerations: Vec::new(),
            resources: Default::default(),
            memlock_unlimited: false,
        };
        icb_kube::pair::Prepared {
            namespace: "ns".into(),
            decode: side("gpu-2", "pod/decode-0"),
            prefill: side("gpu-1", "pod/prefill-0"),
            server: bench(Role::Server, "gpu-2"),
            client: bench(Role::Client, "gpu-1"),
            notes: Vec::new(),
        }
    }

    /// Two different nodes: the ranks' whole-node pods, carrying the gate's image, engine flags
    /// and each side's recipe env, sized for the larger rank buffer; one node: two pods shaped
    /// by the device flags; worker-shaped targets: the pods modelled on the workers, with no
    /// recipe env on top of theirs.
    #[test]
    fn node_targets_get_the_ranks_own_pods_and_workers_the_modelled_ones() {
        let kv = kv_plan();
        let flags = vec!["--nixl-lib".to_string(), "/opt/nixl".into()];
        let env = |v: &str| vec![("UCX_TLS".to_string(), v.to_string())];
        let envs = (env("rc,tcp"), env("tcp"));
        let times = (Duration::from_secs(90), Duration::from_secs(30));
        let prepared = prepared();
        let opts = options(&flags);
        let pods = bench_pods("node/gpu-1", "node/gpu-2", &opts);
        let got = ranks_pods(&pods, &prepared, &kv, &opts, envs.clone(), times);
        assert_eq!(
            (got.prefill_node.as_str(), got.decode_node.as_str()),
            ("gpu-1", "gpu-2")
        );
        assert_eq!(got.run_id, "run1-kr");
        assert_eq!(
            (got.image.as_str(), got.image_pull_policy.as_deref()),
            ("img:1", Some("Never"))
        );
        assert!(got.memlock_unlimited);
        assert_eq!(got.side_args, flags);
        assert_eq!(got.side_env, envs);
        assert_eq!(got.start_timeout, times.0);
        let largest = 4 << 20;
        assert_eq!(
            got.rank_resources,
            icb_kube::hardening::BenchResources::for_buffer(largest)
        );
        assert_eq!(got.devices, PodDevices::WholeNode);
        assert!(got.modelled.is_none());
        // One node for both sides: two pods that cannot both hold every device; a GPU transfer
        // asks a GPU per rank of each side (TP2 → TP1).
        let mut kv_cuda = kv_plan();
        kv_cuda.pair.settings.memory = vec![icb_core::MemoryPair {
            initiator: icb_core::MemoryType::Cuda,
            target: icb_core::MemoryType::Cuda,
        }];
        let ipc = icb_kube::PodOptions {
            host_ipc: true,
            ..opts.clone()
        };
        let one = bench_pods("node/gpu-1", "node/gpu-1", &ipc);
        let got = ranks_pods(&one, &prepared, &kv_cuda, &ipc, envs.clone(), times);
        assert!(got.host_ipc && !got.host_pid);
        let gpus = |n| DeviceRequest {
            gpus: Some(n),
            ..DeviceRequest::default()
        };
        assert_eq!(got.devices, PodDevices::Requested(gpus(2), gpus(1)));
        // `--gpus 1` wins, on two nodes too.
        let one_gpu = icb_kube::PodOptions {
            devices: gpus(1),
            ..opts.clone()
        };
        let given = bench_pods("node/gpu-1", "node/gpu-2", &one_gpu);
        let got = ranks_pods(&given, &prepared, &kv_cuda, &one_gpu, envs.clone(), times);
        assert_eq!(got.devices, PodDevices::Requested(gpus(1), gpus(1)));
        // Worker pods: the modelled bench pods, on the workers' nodes, their env their own.
        let workers = bench_pods("pod/prefill-0", "pod/decode-0", &opts);
        let got = ranks_pods(&workers, &prepared, &kv, &opts, envs.clone(), times);
        assert_eq!(
            (got.prefill_node.as_str(), got.decode_node.as_str()),
            ("gpu-1", "gpu-2")
        );
        let (client, server) = *got.modelled.clone().expect("modelled pods");
        assert_eq!((client.node.as_str(), server.node.as_str()), ("gpu-1", "gpu-2"));
        assert!(client.host_ipc);
        assert!(got.side_env.0.is_empty() && got.side_env.1.is_empty());
        assert_eq!(got.side_args, flags);
        assert_eq!(got.run_id, "run1-kr");
    }

    #[test]
    fn the_recipe_fills_what_the_flags_leave_out() {
        let prefill = EngineArgs {
            model: Some("meta-llama/Llama-3.1-70B-Instruct".into()),
            tensor_parallel: Some(8),
            page_size: Some(32),
            ..EngineArgs::default()
        };
        let decode = EngineArgs {
            tensor_parallel: Some(4),
            ..EngineArgs::default()
        };
        let roles = (prefill, decode);
        let kv = KvGiven {
            model: Some(String::new()),
            ..KvGiven::default()
        }
        .completed(Some(&roles))
        .unwrap();
        assert_eq!(kv.model.as_deref(), Some("meta-llama/Llama-3.1-70B-Instruct"));
        assert_eq!(
            (kv.shape.prefill_tp.as_deref(), kv.shape.decode_tp.as_deref()),
            (Some("8"), Some("4"))
        );
        assert_eq!(kv.shape.page_size.as_deref(), Some("32"));
        // A flag wins over the recipe.
        let kv = KvGiven {
            model: Some("qwen3-32b".into()),
            shape: icb_kv::KvShapeText {
                decode_tp: Some("2".into()),
                ..Default::default()
            },
        }
        .completed(Some(&roles))
        .unwrap();
        assert_eq!(
            (kv.model.as_deref(), kv.shape.decode_tp.as_deref()),
            (Some("qwen3-32b"), Some("2"))
        );
        // The request is built from the completed values directly (no clap struct between).
        let request = KvGiven {
            model: Some(String::new()),
            shape: icb_kv::KvShapeText {
                isl: Some("4096".into()),
                ..Default::default()
            },
        }
        .request(Some(&roles))
        .unwrap();
        let shape = request.shape();
        assert_eq!(
            (shape.isl, shape.prefill_tp, shape.decode_tp, shape.page_size),
            (4096, 8, 4, 32)
        );
        assert_eq!(shape.max_rank_bytes, Some(icb_kv_transfer::MAX_RANK_BYTES));
        let bad = KvGiven {
            model: Some("qwen3-32b".into()),
            shape: icb_kv::KvShapeText {
                isl: Some("0".into()),
                ..Default::default()
            },
        };
        let e = bad.request(None).unwrap_err();
        assert!(e.contains("--isl"), "{e}");
        // No model anywhere: one line naming the flag.
        let e = KvGiven::default().completed(None).unwrap_err();
        assert!(
            e.starts_with("--kv-shape without a MODEL reads it from the recipe"),
            "{e}"
        );
    }
}
