//! `pair --kv-shape`, decided: the one typed target a command's parse step builds (the request
//! checked once, against this host's memory when every rank runs here; the rows; where the ranks
//! run) and [`KvTarget::run`], which drives it to one outcome: the ranks, the bulk row, the
//! descriptor sweep and the TCP control, locally or on Kubernetes. The binary keeps the flags,
//! the progress bar and the emit.

use super::control::run_kv_with_controls;
use super::kube_ranks::ranks_plan;
use super::kube_runs::run_kube_kv;
use super::local_ranks::LocalRuns;
use super::{KvEngine, KvOp, KvOptions, KvPlan, KvProgress, MAX_RANK_BYTES, kv_rows, local_rank_limit};
use icb_core::model::ControlKind;
use icb_kube::PodOptions;
use icb_kube::pair::BenchPodsPlan;
use icb_kv::{KvError, KvFlags, KvRequest};
use icb_pair::local::LocalOptions;
use icb_pair::plan::{Deadlines, PairPlan};
use icb_pair::{Interrupted, PairError, PairOutcome};
use icb_rails::kube::KubeRailsPlan;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Where a KV run's ranks run.
#[derive(Debug, Clone)]
pub enum KvPlace {
    /// Every rank on this host, on a local pair (`--local`).
    Local(LocalOptions),
    /// Two rank pods, exec'd into; the descriptor sweep on two bench pods.
    Kube(Box<KubeKv>),
}

/// A KV run on Kubernetes: the cluster, the bench pods (the descriptor sweep's, and the model of
/// worker-shaped targets) and the ranks' pods.
#[derive(Debug, Clone)]
pub struct KubeKv {
    pub cluster: icb_kube::ClusterOptions,
    pub bench: BenchPodsPlan,
    pub ranks: KubeRailsPlan,
}

/// A `--kv-shape` run, decided: nothing after its constructor reads a flag.
#[derive(Debug, Clone)]
pub struct KvTarget {
    /// The plan, its engine the one that runs where NIXL does not load until [`KvTarget::run`]
    /// decides it.
    pub plan: KvPlan,
    pub place: KvPlace,
    /// How the ranks' engine is decided (when the run starts: finding NIXL loads it).
    pub engine: KvEngine,
}

/// What the ranks' report and buffers take from the binary that runs them.
pub struct KvHost<'a> {
    /// This build, for the per-rank report.
    pub tool: icb_core::ToolInfo,
    /// This host's GPUs (asked only when the transfer uses GPU memory on local ranks).
    pub gpus: &'a dyn Fn() -> u32,
}

/// The request of `flags`; when every rank runs on this host, its ranks' buffers must fit this
/// host's memory together (the model is loaded once).
pub fn request(flags: &KvFlags, on_this_host: bool) -> Result<KvRequest, KvError> {
    let this_host: &dyn Fn(usize) -> u64 = &local_rank_limit;
    request_within(flags, on_this_host.then_some(this_host))
}

/// [`request`] with this host's limit per rank for a number of processes given (`None`: the
/// ranks run elsewhere): the limit reads this host's free memory, which moves between two reads,
/// so a test gives its own.
fn request_within(flags: &KvFlags, this_host: Option<&dyn Fn(usize) -> u64>) -> Result<KvRequest, KvError> {
    let model = flags.kv_shape.load()?;
    let shape = icb_kv::KvShape {
        max_rank_bytes: Some(MAX_RANK_BYTES),
        ..flags.shape
    };
    let unlimited = KvRequest::new(model.clone(), shape)?;
    let Some(limit) = this_host else {
        return Ok(unlimited);
    };
    let processes = 2 * kv_rows(unlimited.geometry(), KvOp::Read).len();
    let shape = icb_kv::KvShape {
        max_rank_bytes: Some(limit(processes)),
        ..flags.shape
    };
    KvRequest::new(model, shape)
}

/// Why `--recipe` gives no connector (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum KvRecipeError {
    #[error(transparent)]
    Recipe(#[from] icb_recipe::RecipeError),
    #[error(transparent)]
    Role(#[from] icb_recipe::RoleError),
}

impl KvTarget {
    /// Every rank on this host: the launcher's deadlines (`startup`) on the plan the KV plan
    /// takes, the descriptor sweep's buffers within this host's memory.
    pub fn local(
        mut pair: PairPlan,
        request: KvRequest,
        options: &KvOptions,
        (local, startup): (LocalOptions, Duration),
    ) -> KvTarget {
        pair.set_deadlines(Deadlines::local(&pair.settings, startup));
        let options = KvOptions {
            sweep_rank_bytes: local_rank_limit(2),
            ..options.clone()
        };
        KvTarget {
            plan: KvPlan::with_options(pair, request, &options),
            place: KvPlace::Local(local),
            engine: options.engine,
        }
    }

    /// The ranks in two pods shaped by the command's pod options on `bench`'s targets: one
    /// deadline (`bench.timeout`, `--timeout`) for the pair, `node_start` for the rank pods.
    pub fn kube(
        mut pair: PairPlan,
        request: KvRequest,
        options: &KvOptions,
        (cluster, bench, pod_options): (icb_kube::ClusterOptions, BenchPodsPlan, &PodOptions),
        node_start: Duration,
    ) -> KvTarget {
        pair.set_deadlines(Deadlines::budget(bench.timeout, "--timeout"));
        let options = KvOptions {
            sweep_rank_bytes: MAX_RANK_BYTES,
            ..options.clone()
        };
        let plan = KvPlan::with_options(pair, request, &options);
        let times = (node_start, cluster.request_timeout);
        let targets = (&bench.prefill, &bench.decode);
        let ranks = ranks_plan(targets, &bench.run_id, pod_options, &plan, times, Default::default());
        KvTarget {
            plan,
            place: KvPlace::Kube(Box::new(KubeKv { cluster, bench, ranks })),
            engine: options.engine,
        }
    }

    /// This target with its engine decided: NIXL found here (no `--engine`) is the plan's
    /// engine, and every side this target starts (the ranks, the descriptor sweep's pair) gets
    /// `--engine nixl` as it would have on the command line.
    pub fn engine_decided(&self) -> KvTarget {
        let mut target = self.clone();
        let engine = self.engine.decide();
        target.engine = KvEngine::Chosen(engine);
        if engine == self.plan.engine {
            return target;
        }
        target.plan.engine = engine;
        let flag = ["--engine".to_string(), engine.to_string()];
        match &mut target.place {
            KvPlace::Local(opts) => opts.side_args.extend(flag),
            KvPlace::Kube(kube) => {
                kube.bench.serve_args.extend(flag.clone());
                kube.bench.connect_args.extend(flag.clone());
                kube.ranks.side_args.extend(flag);
            }
        }
        target
    }

    /// `--recipe` (`--role`: whose connector; else the decode role's first): the recipe's KV
    /// connector, its operation when known and else why not, which the output marks.
    pub fn read_recipe_connector(&mut self, paths: &[String], role: Option<&str>) -> Result<(), KvRecipeError> {
        if paths.is_empty() {
            return Ok(());
        }
        let inputs: Vec<icb_recipe::Input> = paths.iter().map(|p| icb_recipe::Input::from_arg(p)).collect();
        let (_, roles) = icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default())?;
        let source = format!("the recipe {}", paths.join(", "));
        self.plan.connector = Some(match role {
            Some(r) => super::directions::role_connector(roles.for_side(icb_recipe::Role::Decode, Some(r))?, &source),
            None => super::directions::recipe_connector(&roles, &source),
        });
        Ok(())
    }

    /// Cases the progress counts: every row, then every point of the descriptor sweep.
    pub fn cases(&self) -> usize {
        self.plan.rows.len() + self.plan.sweep.len()
    }

    /// The transfer on the engine decided now ([`KvTarget::engine_decided`]), then `controls`
    /// (tcp only: `pair` refuses the others before this), to one outcome; on Kubernetes an
    /// interrupt before the cluster answers leaves nothing behind.
    pub async fn run(
        &self,
        controls: &[ControlKind],
        host: &KvHost<'_>,
        cancel: &CancellationToken,
        progress: &mut KvProgress<'_>,
    ) -> Result<PairOutcome, PairError> {
        let target = self.engine_decided();
        let plan = &target.plan;
        match &target.place {
            KvPlace::Local(opts) => {
                let gpus = if plan.memory().uses_cuda() { (host.gpus)() } else { 0 };
                let tool = host.tool.clone();
                let mut runs = LocalRuns {
                    opts: opts.clone(),
                    gpus,
                    tool,
                };
                run_kv_with_controls(controls, plan, &mut runs, cancel, progress).await
            }
            KvPlace::Kube(kube) => {
                let cluster = tokio::select! {
                    c = icb_kube::connect(&kube.cluster) => c.map_err(|e| PairError::Setup(e.to_string()))?,
                    _ = cancel.cancelled() => return Err(PairError::Interrupted(Interrupted::default())),
                };
                let pods = (kube.bench.clone(), kube.ranks.clone());
                run_kube_kv(cluster, pods, plan, (controls, host.tool.clone()), cancel, progress).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_kv::KvShapeText;

    fn flags(model: &str) -> KvFlags {
        let text = KvShapeText {
            isl: Some("64".into()),
            ..Default::default()
        };
        text.flags(model, None).unwrap()
    }

    fn options() -> KvOptions {
        KvOptions {
            op: KvOp::Read,
            engine: KvEngine::Chosen(icb_core::EngineKind::Ucx),
            max_kv_ms: Some(5.0),
            sweep_max: Some(1000),
            sweep_rank_bytes: 1,
            extra: super::super::KvExtraRuns::ALL,
        }
    }

    fn pair() -> PairPlan {
        PairPlan::new(icb_core::RunSettings::full_curve(), Default::default())
    }

    fn local_options() -> LocalOptions {
        LocalOptions::new("/bin/true".into())
    }

    /// The request is checked once, with the limit of where its ranks run: on this host its
    /// ranks share this host's memory, elsewhere one buffer may hold the engine's cap.
    #[test]
    fn the_request_is_limited_by_where_its_ranks_run() {
        let f = flags("llama-3.1-8b");
        let elsewhere = request(&f, false).unwrap();
        assert_eq!(elsewhere.shape().max_rank_bytes, Some(MAX_RANK_BYTES));
        // This host's limit reads its free memory, which moves between two reads (the ASan run
        // once saw 9,800,087,960 against 9,800,323,888): the test gives its own.
        let limit = |processes: usize| (64u64 << 30) / processes as u64;
        let here = request_within(&f, Some(&limit)).unwrap();
        let processes = 2 * kv_rows(here.geometry(), KvOp::Read).len();
        assert_eq!(here.shape().max_rank_bytes, Some(limit(processes)));
        assert_eq!(here.geometry(), elsewhere.geometry());
        let e = request(&flags("./no-such-config.json"), true).unwrap_err();
        assert!(e.to_string().contains("no-such-config.json"), "{e}");
    }

    /// A local target takes the local deadlines and sizes the sweep for this host; the caller's
    /// options decide the rest (the sweep's counts stop below the limit, never above).
    #[test]
    fn a_local_target_takes_the_local_deadlines() {
        let f = flags("llama-3.1-8b");
        let startup = Duration::from_secs(7);
        let limit_before = local_rank_limit(2);
        let t = KvTarget::local(
            pair(),
            request(&f, true).unwrap(),
            &options(),
            (local_options(), startup),
        );
        assert_eq!(t.plan.pair.deadlines(), Deadlines::local(&pair().settings, startup));
        assert_eq!(t.plan.max_kv_ms, Some(5.0));
        assert_eq!(t.plan.engine, icb_core::EngineKind::Ucx);
        // The sweep stops below this host's limit, read once by `local`: free memory moves
        // between reads, so the plan's counts are those of the limit read just before or after.
        let after = local_rank_limit(2);
        let want = super::super::sweep_counts(1000, t.plan.sweep_block, after);
        let before = super::super::sweep_counts(1000, t.plan.sweep_block, limit_before);
        assert!(t.plan.sweep == want || t.plan.sweep == before, "{:?}", t.plan.sweep);
        assert!(!t.plan.sweep.is_empty());
        assert_eq!(t.cases(), t.plan.rows.len() + want.len());
        assert!(matches!(t.place, KvPlace::Local(_)));
    }

    /// No `--engine`: the engine is decided when the run starts, not when the target is built;
    /// NIXL found here becomes the plan's engine and every side's `--engine nixl`, NIXL not
    /// found leaves the target as it was; a chosen engine is kept.
    #[test]
    fn the_engine_is_decided_when_the_run_starts() {
        fn loads(_: Option<&std::path::Path>) -> bool {
            true
        }
        fn does_not_load(_: Option<&std::path::Path>) -> bool {
            false
        }
        let f = flags("llama-3.1-8b");
        let target = |loads: super::super::NixlLoads| {
            let engine = KvEngine::of_flags(icb_core::EngineKind::Ucx, false, None, loads);
            let options = KvOptions { engine, ..options() };
            KvTarget::local(
                pair(),
                request(&f, true).unwrap(),
                &options,
                (local_options(), Duration::ZERO),
            )
        };
        let side_args = |t: &KvTarget| match &t.place {
            KvPlace::Local(opts) => opts.side_args.clone(),
            KvPlace::Kube(_) => panic!("not local"),
        };
        let found = target(loads);
        assert_eq!(found.plan.engine, icb_core::EngineKind::Ucx);
        let decided = found.engine_decided();
        assert_eq!(decided.plan.engine, icb_core::EngineKind::Nixl);
        assert_eq!(side_args(&decided), ["--engine", "nixl"]);
        assert!(matches!(decided.engine, KvEngine::Chosen(icb_core::EngineKind::Nixl)));
        let missing = target(does_not_load).engine_decided();
        assert_eq!(missing.plan.engine, icb_core::EngineKind::Ucx);
        assert!(side_args(&missing).is_empty());
        let chosen = KvTarget::local(
            pair(),
            request(&f, true).unwrap(),
            &options(),
            (local_options(), Duration::ZERO),
        );
        let kept = chosen.engine_decided();
        assert_eq!(
            (kept.plan.engine, side_args(&kept).len()),
            (icb_core::EngineKind::Ucx, 0)
        );
    }

    /// `--recipe`: the decode role's connector (vLLM's NixlConnector reads); no recipe leaves
    /// it unknown; a file that is not there is one error, not a guess.
    #[test]
    fn the_recipe_names_the_connector_or_leaves_it_unknown() {
        let f = flags("llama-3.1-8b");
        let mut t = KvTarget::local(
            pair(),
            request(&f, true).unwrap(),
            &options(),
            (local_options(), Duration::ZERO),
        );
        t.read_recipe_connector(&[], None).unwrap();
        assert!(t.plan.connector.is_none());
        let recipe = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/gate/kv.yaml");
        t.read_recipe_connector(&[recipe.to_string()], None).unwrap();
        assert_eq!(t.plan.connector.as_ref().and_then(|c| c.op), Some(KvOp::Read));
        let e = t
            .read_recipe_connector(&["/nonexistent/recipe.yaml".into()], None)
            .unwrap_err();
        assert!(matches!(e, KvRecipeError::Recipe(_)), "{e}");
    }
}
