//! `sweep --rails auto`: each node pair of the sweep runs through the Kubernetes rails seam
//! (`icb_rails::kube`: one pod per node holding all of its devices, every rail at once)
//! instead of one bench pod pair; its end is reduced to the same `Outcome` as a plain pair, the
//! rails section riding along in the report. Scoring per rail is the sweep crate's.

use super::Sweeper;
use icb_core::model::ControlKind;
use icb_pair::{CancellationToken, Deadlines, LaunchError, PairError, PairOutcome, PairPlan, SideRole};
use icb_rails::kube::{KubeRails, KubeRailsPlan};
use icb_rails::{AloneRuns, RailSelection, RailsPlan, plan_rows, run_rails_with_controls};
use icb_sweep::results::Outcome;
use icb_sweep::run::PairEnd;
use icb_sweep::schedule::Pair;

/// What every rails pair of a sweep runs with (`--rails`, `--rail-margin`).
#[derive(Debug, Clone, PartialEq)]
pub struct RailsJob {
    pub selection: RailSelection,
    pub margin: f64,
}

/// Why `--rails` cannot run in this sweep (one line, exit 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RailsFlagError {
    #[error("--rails pairs two nodes (each side takes all of its node's devices): not with --schedule intra-node")]
    IntraNode,
    #[error(transparent)]
    Selection(#[from] icb_rails::RailPlanError),
}

impl RailsJob {
    /// `--rails`/`--rail-margin` (default 20 %), read once: `None` without `--rails`.
    pub fn read(
        rails: Option<&str>,
        margin: Option<f64>,
        schedule: Option<&str>,
    ) -> Result<Option<Self>, RailsFlagError> {
        let Some(text) = rails else {
            return Ok(None);
        };
        if schedule == Some("intra-node") {
            return Err(RailsFlagError::IntraNode);
        }
        Ok(Some(RailsJob {
            selection: text.parse::<RailSelection>()?,
            margin: margin.unwrap_or(0.2),
        }))
    }
}

/// Why a rails pair did not end with a report.
enum Failed {
    Launch(LaunchError),
    Other(String),
}

impl Sweeper {
    pub(super) async fn measure_rails(
        &self,
        rails: &RailsJob,
        pair: &Pair,
        controls: &[ControlKind],
        run_id: &str,
        stop: &CancellationToken,
    ) -> PairEnd {
        let job = &self.job;
        let mut plan = PairPlan::new(job.settings.clone(), job.expectation.clone());
        plan.set_deadlines(Deadlines::local(&job.settings, std::time::Duration::from_secs(60)));
        let mut pods = KubeRailsPlan::new(
            (&pair.prefill, &pair.decode),
            run_id.to_string(),
            &job.pods,
            (job.budget, self.cluster.request_timeout()),
            &plan,
        );
        pods.extra_labels.insert(
            icb_kube::podspec::LABEL_SWEEP_ID.to_string(),
            super::sweep_id_of(run_id).to_string(),
        );
        let mut seam = KubeRails::new(self.cluster.clone(), pods);
        let mut read = None;
        let result = tokio::select! {
            r = rails_pair(rails, &plan, controls, &mut seam, stop, &mut read) => Some(r),
            _ = stop.cancelled() => None,
        };
        if let Err(e) = seam.cleanup().await {
            tracing::warn!("{pair}: {e}");
        }
        let Some(result) = result.filter(|_| !stop.is_cancelled()) else {
            return PairEnd::Interrupted;
        };
        // The fleet view's input, as a plain pair's sides send theirs: each node's readiness as
        // its rails pod read it, kept whatever the rails measured.
        if let (Some(read), Ok(mut kept)) = (read, self.readiness.lock()) {
            kept.insert(run_id.to_string(), read);
        }
        match result {
            Ok(outcome) => PairEnd::Recorded(Outcome::from_report(&outcome.report)),
            Err(Failed::Launch(LaunchError { kind, message })) => PairEnd::of_launch_failure(&kind, message.clone())
                .unwrap_or(PairEnd::Recorded(Outcome::Error { reason: message })),
            Err(Failed::Other(reason)) => PairEnd::Recorded(Outcome::Error { reason }),
        }
    }
}

/// The pods, both nodes' rails, the rows, the run; `read` gets both nodes' readiness as soon as
/// their rails pods have read it (the sweep's fleet view).
async fn rails_pair(
    rails: &RailsJob,
    pair: &PairPlan,
    controls: &[ControlKind],
    seam: &mut KubeRails,
    stop: &CancellationToken,
    read: &mut Option<icb_core::readiness::PairReadiness>,
) -> Result<PairOutcome, Failed> {
    seam.start().await.map_err(Failed::Launch)?;
    let prefill = seam.node_info(SideRole::Prefill).await.map_err(Failed::Launch)?;
    let decode = seam.node_info(SideRole::Decode).await.map_err(Failed::Launch)?;
    *read = Some(icb_core::readiness::PairReadiness::of(
        prefill.readiness.clone(),
        decode.readiness.clone(),
    ));
    let pattern = icb_core::rails::RailPattern::Aligned;
    let rows =
        plan_rows(&prefill, &decode, &rails.selection, None, pattern).map_err(|e| Failed::Other(e.to_string()))?;
    let plan = RailsPlan {
        pair: pair.clone(),
        rows,
        pattern,
        margin: rails.margin,
        alone: AloneRuns::Suspects,
    };
    let mut progress = |_: &icb_rails::RailRow, _: &icb_core::protocol::CaseProgress| {};
    let ran = run_rails_with_controls(controls, &plan, seam, stop, &mut progress).await;
    ran.map_err(|e| match e {
        PairError::Launch(l) => Failed::Launch(l),
        e => Failed::Other(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rails_are_read_once_with_the_default_margin_and_never_within_a_node() {
        assert_eq!(RailsJob::read(None, Some(0.5), None), Ok(None));
        let job = RailsJob::read(Some("auto"), None, Some("all-pairs")).unwrap().unwrap();
        assert_eq!(job.selection, RailSelection::Auto);
        assert_eq!(job.margin, 0.2);
        assert_eq!(
            RailsJob::read(Some("auto"), Some(0.3), None).unwrap().unwrap().margin,
            0.3
        );
        assert_eq!(
            RailsJob::read(Some("auto"), None, Some("intra-node")),
            Err(RailsFlagError::IntraNode)
        );
        assert!(matches!(
            RailsJob::read(Some("gpu0"), None, None),
            Err(RailsFlagError::Selection(_))
        ));
    }
}
