//! A `pair` command's target, decided: one typed value per way of running a pair (local
//! processes, bench pods, in place, the rails of a local or a Kubernetes node pair, a model's
//! KV transfer), built by the command's parse step, and [`PairTarget::run`], which drives it to
//! one [`PairEnd`]. The binary keeps the flags, what the person sees ([`RunView`]) and the emit.

use icb_core::model::{ControlKind, PairReport};
use icb_core::protocol::CaseProgress;
use icb_kube::pair::BenchPodsPlan;
use icb_kube::{ClusterOptions, KubeError};
use icb_kv_transfer::{KvHost, KvTarget};
use icb_pair::controls::run_pair_with_controls;
use icb_pair::inplace::{InPlaceLauncher, InPlacePlan};
use icb_pair::kube::KubeLauncher;
use icb_pair::launcher::{LaunchError, Launcher};
use icb_pair::local::{LocalLauncher, LocalOptions};
use icb_pair::plan::PairPlan;
use icb_pair::{PairError, PairOutcome};
use icb_rails::kube::KubeRailsPlan;
use icb_rails::kube_run::run_kube_rails;
use icb_rails::local_run::run_local_rails;
use icb_rails::{Choice, LocalRailsTarget, NodeRailInfo, RailRow};
use tokio_util::sync::CancellationToken;

/// Who starts the two sides, with everything the launcher needs.
pub enum PairTarget {
    /// Two local processes (`--local`), optionally isolated like pods or nodes.
    Local(LocalOptions),
    /// Two bench pods (`--prefill`/`--decode`).
    Kube(KubeTarget),
    /// Inside two running workers (`--in-place`).
    InPlace(InPlaceTarget),
    /// Every rail of a local node pair at once (`--local --rails`).
    LocalRails(Box<LocalRailsTarget>),
    /// Every rail of two Kubernetes nodes at once (`--prefill node/A --decode node/B --rails`).
    KubeRails(Box<KubeRailsTarget>),
    /// A model's KV transfer, every rank at once (`--kv-shape`).
    Kv(Box<KvTarget>),
}

/// What `--dry-run` prints the pods as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodsFormat {
    Yaml,
    Json,
}

/// Two bench pods, decided.
pub struct KubeTarget {
    pub cluster: ClusterOptions,
    pub pods: BenchPodsPlan,
    /// `--dry-run`: print the pods as this, create nothing.
    pub dry_run: Option<PodsFormat>,
}

/// Two running workers, decided.
pub struct InPlaceTarget {
    pub cluster: ClusterOptions,
    pub plan: InPlacePlan,
    /// What fitting the cases into the side budget changed.
    pub notes: Vec<String>,
    /// Held until the run ends: dropping it removes the stripped copy of this binary.
    pub _stripped: Option<tempfile::TempDir>,
}

/// Every rail of two Kubernetes nodes, decided.
pub struct KubeRailsTarget {
    pub cluster: ClusterOptions,
    pub pods: KubeRailsPlan,
    pub choice: Choice,
}

/// How a run ended.
#[derive(Debug)]
pub enum PairEnd {
    /// The run's outcome or its error: what the command emits.
    Ran(Box<Result<PairOutcome, PairError>>),
    /// `--dry-run`: the pods a run would create, as text; nothing was created.
    Pods(String),
    /// Interrupted before anything existed: nothing to clean up.
    NotStarted,
}

impl PairEnd {
    fn ran(result: Result<PairOutcome, PairError>) -> PairEnd {
        PairEnd::Ran(Box::new(result))
    }
}

/// Why a target could not be prepared (nothing ran; one line, exit 2): the errors the
/// preparation's own steps name, unchanged.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    Plan(#[from] icb_core::ParseError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// What the person sees of a run, on stderr.
pub trait RunView {
    /// The sides are about to start (what was prepared has been said).
    fn starting(&mut self);
    /// A case ended; `rail` is its row's rail on a rails run.
    fn case(&mut self, rail: Option<usize>, p: &CaseProgress);
    /// A line before anything starts: what fitting changed, what runs where, a note on the pods.
    fn say(&mut self, line: &str);
    /// An in-place run ended: which UCX each worker's side loaded.
    fn ucx_loaded(&mut self, report: &PairReport);
}

impl PairTarget {
    /// Runs the target under `plan` and then `controls` on `runtime` (shut down when it
    /// returns), until `cancel`; `host` is what a KV run's ranks take from the binary.
    pub fn run(
        &self,
        (plan, controls): (&PairPlan, &[ControlKind]),
        runtime: tokio::runtime::Runtime,
        cancel: &CancellationToken,
        host: &KvHost<'_>,
        view: &mut dyn RunView,
    ) -> Result<PairEnd, PrepareError> {
        let run = (plan, controls);
        match self {
            PairTarget::Local(opts) => runtime.block_on(async {
                let mut launcher = LocalLauncher::create(opts.clone())?;
                Ok::<_, PrepareError>(PairEnd::ran(drive(run, &mut launcher, cancel, view).await))
            }),
            PairTarget::Kube(t) => runtime.block_on(t.run(run, cancel, view)),
            PairTarget::InPlace(t) => runtime.block_on(t.run(run, cancel, view)),
            PairTarget::KubeRails(t) => runtime.block_on(t.run(run, cancel, view)),
            PairTarget::Kv(t) => runtime.block_on(async {
                view.starting();
                let mut progress = |p: &CaseProgress| view.case(None, p);
                Ok::<_, PrepareError>(PairEnd::ran(t.run(controls, host, cancel, &mut progress).await))
            }),
            PairTarget::LocalRails(t) => {
                view.starting();
                let mut progress = |row: &RailRow, p: &CaseProgress| view.case(Some(row.index), p);
                Ok(PairEnd::ran(run_local_rails(
                    t,
                    plan.clone(),
                    controls,
                    runtime,
                    cancel,
                    &mut progress,
                )))
            }
        }
    }
}

/// The pipeline with a prepared launcher, then `controls`, each case on the view.
async fn drive<L: Launcher>(
    (plan, controls): (&PairPlan, &[ControlKind]),
    launcher: &mut L,
    cancel: &CancellationToken,
    view: &mut dyn RunView,
) -> Result<PairOutcome, PairError> {
    view.starting();
    let mut progress = |p: &CaseProgress| {
        tracing::debug!("case {}/{}", p.index, p.total);
        view.case(None, p);
    };
    run_pair_with_controls(controls, plan, launcher, cancel, &mut progress).await
}

/// `cluster`, unless `cancel` comes first (then nothing exists yet: `None`).
async fn connect(cluster: &ClusterOptions, cancel: &CancellationToken) -> Result<Option<icb_kube::Cluster>, KubeError> {
    tokio::select! {
        c = icb_kube::connect(cluster) => c.map(Some),
        _ = cancel.cancelled() => Ok(None),
    }
}

/// The one preparation of the two targets in running pods (bench pods, in place): connect to
/// `cluster` and `prepare` a launcher there, unless `cancel` comes first (then nothing exists
/// yet and an interrupt has nothing to clean up: `None`).
async fn prepare_on<L, E, Fut>(
    cluster: &ClusterOptions,
    cancel: &CancellationToken,
    prepare: impl FnOnce(icb_kube::Cluster) -> Fut,
) -> Result<Option<L>, PrepareError>
where
    Fut: std::future::Future<Output = Result<L, E>>,
    PrepareError: From<E>,
{
    let connected = async {
        let cluster = icb_kube::connect(cluster).await?;
        Ok::<_, PrepareError>(prepare(cluster).await?)
    };
    tokio::select! {
        l = connected => l.map(Some),
        _ = cancel.cancelled() => Ok(None),
    }
}

impl KubeTarget {
    async fn run(
        &self,
        run: (&PairPlan, &[ControlKind]),
        cancel: &CancellationToken,
        view: &mut dyn RunView,
    ) -> Result<PairEnd, PrepareError> {
        let prepare = |cluster| KubeLauncher::prepare(cluster, self.pods.clone());
        let Some(mut launcher) = prepare_on(&self.cluster, cancel, prepare).await? else {
            return Ok(PairEnd::NotStarted);
        };
        if let Some(format) = self.dry_run {
            let child = run.0.child_plan(launcher.locality(), &launcher.mode())?;
            return Ok(PairEnd::Pods(match format {
                PodsFormat::Json => serde_json::to_string_pretty(&launcher.dry_run_json(&child))?,
                PodsFormat::Yaml => launcher.dry_run_yaml(&child)?,
            }));
        }
        let notes = show_notes(launcher.prepared(), view);
        let result = drive(run, &mut launcher, cancel, view).await;
        Ok(PairEnd::ran(result.map(|mut outcome| {
            tracing::info!(
                "orchestration overhead {:.2}s (create → report → cleanup, minus the transfer); {}",
                outcome.orchestration.as_secs_f64(),
                outcome.cleanup
            );
            outcome.report.warnings.extend(notes);
            outcome
        })))
    }
}

/// The preparation's notes, said (`NoteKind::on_stderr`) or logged; returns those the report
/// keeps as warnings (`Prepared::report_warnings`).
fn show_notes(prepared: &icb_kube::pair::Prepared, view: &mut dyn RunView) -> Vec<String> {
    for note in &prepared.notes {
        if note.kind.on_stderr() {
            view.say(&note.to_string());
        } else {
            tracing::info!("{note}");
        }
    }
    tracing::info!(
        "server on node {}, client on node {}, namespace {}",
        prepared.decode.node,
        prepared.prefill.node,
        prepared.namespace
    );
    prepared.report_warnings()
}

impl InPlaceTarget {
    async fn run(
        &self,
        run: (&PairPlan, &[ControlKind]),
        cancel: &CancellationToken,
        view: &mut dyn RunView,
    ) -> Result<PairEnd, PrepareError> {
        let prepare = |cluster| InPlaceLauncher::prepare(cluster, self.plan.clone());
        let Some(mut launcher) = prepare_on(&self.cluster, cancel, prepare).await? else {
            return Ok(PairEnd::NotStarted);
        };
        for line in self.notes.iter().chain(launcher.describe().iter()) {
            view.say(line);
        }
        let result = drive(run, &mut launcher, cancel, view).await;
        if let Ok(outcome) = &result {
            view.ucx_loaded(&outcome.report);
            tracing::info!("{}", outcome.cleanup);
        }
        Ok(PairEnd::ran(result))
    }
}

impl KubeRailsTarget {
    async fn run(
        &self,
        (plan, controls): (&PairPlan, &[ControlKind]),
        cancel: &CancellationToken,
        view: &mut dyn RunView,
    ) -> Result<PairEnd, PrepareError> {
        let Some(cluster) = connect(&self.cluster, cancel).await? else {
            return Ok(PairEnd::NotStarted);
        };
        view.starting();
        let rows = |prefill: &NodeRailInfo, decode: &NodeRailInfo| self.choice.plan(plan.clone(), prefill, decode);
        let mut progress = |row: &RailRow, p: &CaseProgress| view.case(Some(row.index), p);
        let result = run_kube_rails(cluster, self.pods.clone(), rows, controls, cancel, &mut progress).await;
        Ok(PairEnd::ran(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a run showed, in order.
    #[derive(Default)]
    struct Seen {
        starts: usize,
        cases: usize,
        said: Vec<String>,
    }

    impl RunView for Seen {
        fn starting(&mut self) {
            self.starts += 1;
        }
        fn case(&mut self, _: Option<usize>, _: &CaseProgress) {
            self.cases += 1;
        }
        fn say(&mut self, line: &str) {
            self.said.push(line.to_string());
        }
        fn ucx_loaded(&mut self, _: &PairReport) {}
    }

    /// A local pair whose sides cannot start: the run ends in the pipeline's own error (what
    /// the one emit turns into exit 2), after the view was told once that the sides start.
    #[test]
    fn a_local_pair_that_cannot_start_ends_in_the_pipelines_error() {
        let opts = LocalOptions::new("/nonexistent/ic-bench".into());
        let mut plan = PairPlan::new(icb_core::RunSettings::full_curve(), Default::default());
        plan.set_deadlines(icb_pair::Deadlines::local(
            &plan.settings,
            std::time::Duration::from_secs(5),
        ));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let tool = icb_core::ToolInfo {
            name: "ic-bench".into(),
            version: "0".into(),
            git_commit: String::new(),
            ucx_headers: String::new(),
        };
        let host = KvHost { tool, gpus: &|| 0 };
        let mut seen = Seen::default();
        let end = PairTarget::Local(opts).run((&plan, &[]), runtime, &CancellationToken::new(), &host, &mut seen);
        let Ok(PairEnd::Ran(result)) = end else {
            panic!("not a run: {end:?}")
        };
        assert!(result.is_err(), "{result:?}");
        assert_eq!((seen.starts, seen.cases), (1, 0));
        assert!(seen.said.is_empty(), "{:?}", seen.said);
    }
}
