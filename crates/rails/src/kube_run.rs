//! A Kubernetes rails run from its pods' start to their deletion (`pair --prefill node/A
//! --decode node/B --rails`): typed options in ([`KubeRailsPlan`], the command's row choice),
//! one outcome out. The binary connects, calls [`run_kube_rails`] and emits what it returns.

use super::kube::{KubeRails, KubeRailsPlan};
use super::{NodeRailInfo, RailPlanError, RailProgress, RailsPlan, run_rails_with_controls};
use icb_core::model::ControlKind;
use icb_kube::Cluster;
use icb_pair::{PairError, PairOutcome, SideRole};
use std::cell::Cell;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long the rails may take, after a cancel, to stop their rows and hand back the cases
/// measured so far (each row's own stop is bounded; this keeps a stuck one from holding the exit).
const RAILS_STOP_GRACE: Duration = Duration::from_secs(15);

/// Runs every rail of `pods`' two nodes: starts the pods, reads both nodes' rails, plans the
/// rows (`rows`: the command's choice), runs them and then `controls`, and deletes the pods on
/// every path. Everything until the pods are deleted stops at `cancel`; once the rails measure,
/// they stop on it themselves and bring back the cases measured so far (a partial report),
/// within [`RAILS_STOP_GRACE`]. An interrupted run's cleanup line says what the deletion did.
pub async fn run_kube_rails(
    cluster: Cluster,
    pods: KubeRailsPlan,
    rows: impl FnOnce(&NodeRailInfo, &NodeRailInfo) -> Result<RailsPlan, RailPlanError>,
    controls: &[ControlKind],
    cancel: &CancellationToken,
    progress: &mut RailProgress<'_>,
) -> Result<PairOutcome, PairError> {
    let mut seam = KubeRails::new(cluster, pods);
    let measuring = Cell::new(false);
    let result = {
        let run = measure(&mut seam, rows, controls, cancel, progress, &measuring);
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => r,
            _ = cancel.cancelled() => match measuring.get() {
                true => tokio::time::timeout(RAILS_STOP_GRACE, &mut run)
                    .await
                    .unwrap_or_else(|_| Err(PairError::Interrupted(Default::default()))),
                false => Err(PairError::Interrupted(Default::default())),
            },
        }
    };
    for note in seam.notes() {
        tracing::info!("{note}");
    }
    let removed = seam.cleanup().await;
    match (result, removed) {
        (Err(PairError::Interrupted(mut i)), removed) => {
            i.cleanup = match removed {
                Ok(what) => [i.cleanup.as_str(), what.as_str()]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join("; "),
                Err(e) => format!("{}; cleaning up failed: {e}", i.cleanup),
            };
            Err(PairError::Interrupted(i))
        }
        (Ok(_), Err(e)) => Err(PairError::Setup(format!(
            "the run finished, but cleaning up failed: {e}"
        ))),
        (result, _) => result,
    }
}

/// Starts the pods, reads both nodes' rails, plans the rows and runs them.
async fn measure(
    seam: &mut KubeRails,
    rows: impl FnOnce(&NodeRailInfo, &NodeRailInfo) -> Result<RailsPlan, RailPlanError>,
    controls: &[ControlKind],
    cancel: &CancellationToken,
    progress: &mut RailProgress<'_>,
    measuring: &Cell<bool>,
) -> Result<PairOutcome, PairError> {
    seam.start().await?;
    let prefill = seam.node_info(SideRole::Prefill).await?;
    let decode = seam.node_info(SideRole::Decode).await?;
    let plan = rows(&prefill, &decode).map_err(|RailPlanError(why)| PairError::Setup(why))?;
    measuring.set(true);
    run_rails_with_controls(controls, &plan, seam, cancel, progress).await
}
