//! A local rails run from its namespaces' creation to their removal (`pair --local --rails`):
//! typed options in ([`LocalRailsTarget`], the pair plan), one outcome out. The binary calls
//! [`run_local_rails`] and emits what it returns; the Kubernetes tail is
//! [`super::kube_run::run_kube_rails`].

use super::local::LocalRails;
use super::{LocalRailsTarget, RailProgress, RailsPlan, run_rails_with_controls};
use icb_core::model::ControlKind;
use icb_pair::PairPlan;
use icb_pair::{PairError, PairOutcome, SideRole};
use tokio_util::sync::CancellationToken;

/// Creates the local nodes, applies the target's emulated faults, reads both nodes' rails, plans
/// the rows from `pair`, runs them and then `controls` on `runtime`, and removes the namespaces
/// on every path, after `runtime` is shut down (a run's launchers use its threads). A failed
/// removal after a finished run is the run's error; after a failed run, the run's error stands.
pub fn run_local_rails(
    target: &LocalRailsTarget,
    pair: PairPlan,
    controls: &[ControlKind],
    runtime: tokio::runtime::Runtime,
    cancel: &CancellationToken,
    progress: &mut RailProgress<'_>,
) -> Result<PairOutcome, PairError> {
    let mut seam = LocalRails::create(target.opts.clone(), target.emulated)?;
    let result = plan(&seam, target, pair)
        .and_then(|plan| runtime.block_on(run_rails_with_controls(controls, &plan, &mut seam, cancel, progress)));
    drop(runtime);
    match (result, seam.cleanup()) {
        (Ok(_), Err(e)) => Err(PairError::Setup(format!(
            "the run finished, but cleaning up failed: {e}"
        ))),
        (result, _) => result,
    }
}

/// The emulated rails' faults applied, then the rows of both nodes' rails.
fn plan(seam: &LocalRails, target: &LocalRailsTarget, pair: PairPlan) -> Result<RailsPlan, PairError> {
    for (at, rate) in &target.slow {
        seam.limit_rail(at.side, at.rail, rate)?;
    }
    for at in &target.dead {
        seam.cut_rail(at.side, at.rail)?;
    }
    for (at, rate) in &target.congested {
        seam.congest_rail(at.side, at.rail, rate)?;
    }
    for (at, per_mille) in &target.lossy {
        seam.make_rail_lossy(at.side, at.rail, *per_mille)?;
    }
    let prefill = seam.node_info(SideRole::Prefill)?;
    let decode = seam.node_info(SideRole::Decode)?;
    target
        .choice
        .plan(pair, &prefill, &decode)
        .map_err(|e| PairError::Setup(e.to_string()))
}
