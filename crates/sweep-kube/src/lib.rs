//! icb-sweep-kube: the sweep on Kubernetes. [`Sweeper`] is `icb_sweep::run`'s pair runner (each pair one
//! `run_pair` with its own `KubeLauncher` and run id, or with `--rails` one run of every rail of
//! its two nodes, [`rails`]; its end reduced to an [`Outcome`], a failed launch sorted on its
//! kind by [`PairEnd::of_launch_failure`]). The rounds, passes and stops are
//! `icb_sweep::run_sweep`'s (pure, tested with a scripted runner); this crate is the I/O, apart
//! so that icb-sweep (and icb-report, which renders its results) stays free of Kubernetes.
#![forbid(unsafe_code)]

pub mod command;
pub mod conditions;
pub mod flow;
pub mod labels;
pub mod plan;
pub mod rails;
pub mod resume;
pub mod start;

pub use rails::{RailsFlagError, RailsJob};

use icb_core::model::ControlKind;
use icb_kube::PodOptions;
use icb_kube::k8s_openapi::api::core::v1::Pod;
use icb_kube::pair::BenchPodsPlan;
use icb_kube::target::Target;
use icb_kube::{lifecycle, podspec};
use icb_pair::controls::run_pair_with_controls;
use icb_pair::kube::KubeLauncher;
use icb_pair::{CancellationToken, Deadlines, ExpectationInput, LaunchError, PairError, PairPlan};
use icb_sweep::results::{Outcome, SweepResults};
use icb_sweep::run::{PairEnd, PairRunner, Pass};
use icb_sweep::schedule::Pair;
use std::time::Duration;

/// What every pair of a sweep runs with.
pub struct PairJob {
    pub settings: icb_core::RunSettings,
    pub expectation: ExpectationInput,
    /// The bench pods' options (`--image`, `--host-ipc`, `--memlock-unlimited`, the device
    /// flags, `--engine`/`--ucx-profile` for both sides); a rails pair's node pods take the
    /// image, memlock and engine flags (each pod holds its whole node, in its own namespaces).
    pub pods: PodOptions,
    pub budget: Duration,
    /// `--rails`: each pair runs every rail of its two nodes ([`rails`]).
    pub rails: Option<RailsJob>,
    /// The negative controls each second-pass pair runs after its main run (default: tcp;
    /// `--no-controls`: none): the pairs that accuse a node rest on a detector shown to work on
    /// them. The first pass runs none (its pairs only pick suspects).
    pub second_pass_controls: Vec<icb_core::model::ControlKind>,
}

impl PairJob {
    /// The controls a pair of `pass` runs after its main run: the second pass's, or none.
    pub fn controls_of(&self, pass: Pass) -> &[ControlKind] {
        match pass {
            Pass::First => &[],
            Pass::Second => &self.second_pass_controls,
        }
    }
}

pub struct Sweeper {
    pub cluster: icb_kube::Cluster,
    pub job: PairJob,
    pub token: CancellationToken,
    /// What each pair's two sides read of their nodes' readiness, by run id, until the sweep
    /// asks for it ([`PairRunner::readiness`]): the fleet view's input.
    pub readiness: std::sync::Mutex<std::collections::HashMap<String, icb_core::readiness::PairReadiness>>,
}

impl Sweeper {
    pub fn new(cluster: icb_kube::Cluster, job: PairJob, token: CancellationToken) -> Sweeper {
        Sweeper {
            cluster,
            job,
            token,
            readiness: Default::default(),
        }
    }
}

impl PairRunner for Sweeper {
    async fn run(&self, pair: &Pair, pass: Pass, run_id: &str, stop: &CancellationToken) -> PairEnd {
        match &self.job.rails {
            Some(rails) => {
                self.measure_rails(rails, pair, self.job.controls_of(pass), run_id, stop)
                    .await
            }
            None => self.measure(pair, self.job.controls_of(pass), run_id, stop).await,
        }
    }

    fn readiness(&self, run_id: &str) -> Option<icb_core::readiness::PairReadiness> {
        self.readiness.lock().ok()?.remove(run_id)
    }
}

impl Sweeper {
    fn pods(&self, pair: &Pair, run_id: &str) -> BenchPodsPlan {
        let job = &self.job;
        let mut pods = BenchPodsPlan::new(
            (Target::Node(pair.prefill.clone()), Target::Node(pair.decode.clone())),
            run_id.to_string(),
            &job.pods,
            job.budget,
            self.cluster.request_timeout(),
        );
        pods.resources = icb_kube::hardening::BenchResources::for_settings(&job.settings);
        // Every run id of a sweep starts with its id too; the label lets a selector find them.
        pods.labels = vec![(podspec::LABEL_SWEEP_ID.to_string(), sweep_id_of(run_id).to_string())];
        pods
    }

    async fn measure(&self, pair: &Pair, controls: &[ControlKind], run_id: &str, stop: &CancellationToken) -> PairEnd {
        let job = &self.job;
        let mut plan = PairPlan::new(job.settings.clone(), job.expectation.clone());
        plan.set_deadlines(Deadlines::budget(job.budget, "--pair-timeout"));
        let prepared = tokio::select! {
            l = KubeLauncher::prepare(self.cluster.clone(), self.pods(pair, run_id)) => l,
            _ = stop.cancelled() => return PairEnd::Interrupted,
        };
        let mut launcher = match prepared {
            _ if stop.is_cancelled() => return PairEnd::Interrupted,
            Ok(l) => l,
            Err(e) if e.cluster_level() => return PairEnd::ClusterDown(e.to_string()),
            Err(e) => return PairEnd::Recorded(Outcome::Error { reason: e.to_string() }),
        };
        let mut progress = |_: &icb_core::protocol::CaseProgress| {};
        // The controls run on the same launcher: their pods cross the path the main run crossed.
        let result = run_pair_with_controls(controls, &plan, &mut launcher, stop, &mut progress).await;
        // Whatever came back after a cancel — a report of the cases done so far, an error of any
        // kind the cancel provoked — is not this pair's result.
        if stop.is_cancelled() {
            return PairEnd::Interrupted;
        }
        match result {
            Ok(outcome) => {
                if let (Some(read), Ok(mut kept)) = (outcome.report.readiness.clone(), self.readiness.lock()) {
                    kept.insert(run_id.to_string(), *read);
                }
                PairEnd::Recorded(Outcome::from_report(&outcome.report))
            }
            Err(PairError::Interrupted(_)) => PairEnd::Interrupted,
            // A side killed from outside (often seen first as its peer's lost connection):
            // nothing about either node.
            Err(e) if !api_down(&e) && launcher.last_pods().iter().any(icb_kube::killed::killed) => {
                PairEnd::Recorded(Outcome::Disrupted { reason: e.to_string() })
            }
            // The launcher's kind says it (`icb_sweep`'s rule): the API down, a pod the scheduler
            // cannot place, the pair's own failure read from the pod's status.
            Err(PairError::Launch(LaunchError { kind, message })) => {
                match PairEnd::of_launch_failure(&kind, message.clone()) {
                    Some(end) => end,
                    None => self.untyped(pair, message, &launcher).await,
                }
            }
            Err(e) => self.untyped(pair, e.to_string(), &launcher).await,
        }
    }

    /// A failure of no kind that says where the fault is (the pipeline's own text): ask the API
    /// once, and read the pods' status (a side that timed out waiting may still be one the
    /// scheduler could not place).
    async fn untyped(&self, pair: &Pair, reason: String, launcher: &KubeLauncher) -> PairEnd {
        match self.api_failure().await {
            Some(down) => PairEnd::ClusterDown(down),
            None => PairEnd::Recorded(classify_error(pair, reason, &launcher.last_pods())),
        }
    }

    /// After a pair failed of no kind that says where the fault is: is the API server itself
    /// failing? The sweep asks the server once more and decides on that call's error type
    /// (bounded by the cluster's request timeout).
    async fn api_failure(&self) -> Option<String> {
        use icb_kube::k8s_openapi::api::core::v1::Node;
        let api: icb_kube::kube::Api<Node> = icb_kube::kube::Api::all(self.cluster.client().clone());
        let lp = icb_kube::kube::api::ListParams::default().limit(1);
        match self
            .cluster
            .call("check the Kubernetes API after a failed pair", || api.list(&lp))
            .await
        {
            Err(e) if e.cluster_level() => Some(e.to_string()),
            _ => None,
        }
    }
}

/// The sweep id a run id starts with (`icb_sweep::SweepResults::sweep_id_of`).
fn sweep_id_of(run_id: &str) -> &str {
    SweepResults::sweep_id_of(run_id)
}

/// A bench pod that cannot be placed is not a fabric verdict (decided on the pods' status by
/// `icb_kube::lifecycle::unschedulable_node`, never on the message).
/// The pair failed because the cluster's API did (its launch kind says so).
fn api_down(e: &PairError) -> bool {
    matches!(
        e,
        PairError::Launch(LaunchError {
            kind: icb_core::launch::LaunchFailure::Cluster,
            ..
        })
    )
}

fn classify_error(pair: &Pair, reason: String, pods: &[Pod]) -> Outcome {
    match lifecycle::unschedulable_node(pods, &pair.prefill, &pair.decode) {
        Some(node) => Outcome::Unschedulable { node, reason },
        None => Outcome::Error { reason },
    }
}
