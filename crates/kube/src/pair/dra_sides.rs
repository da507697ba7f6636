//! The DRA side of deciding a bench pod's devices (`crate::dra`): whether a node target's node
//! offers its GPUs through ResourceSlices, and moving the GPU request into a claim when it does.

use super::{BenchPodsPlan, NodeResources, Note, NoteKind};
use crate::access::Cluster;
use crate::devices::{self, DeviceChoice};
use crate::error::KubeError;
use crate::target::Resolved;

/// What a node target's node offers through DRA, read when it decides the devices: the node
/// was read, advertises no `nvidia.com/gpu`, and `--gpus 0` was not given. `Err(note)` when the
/// slices cannot be read for a reason that does not stop the run (no RBAC on resourceslices).
pub(super) async fn dra_offer(
    cluster: &Cluster,
    plan: &BenchPodsPlan,
    side: &Resolved,
    advertised: Option<&NodeResources>,
) -> Result<Option<Result<devices::DraOfferRead, String>>, KubeError> {
    let Some(Ok(advertised)) = advertised else {
        return Ok(None);
    };
    let has_gpu = advertised.get(devices::NVIDIA_GPU).is_some_and(|q| q.0.trim() != "0");
    if has_gpu || plan.devices.gpus == Some(0) {
        return Ok(None);
    }
    match crate::dra::node_offer(cluster, &side.node).await {
        Ok(offer) => Ok(offer.map(Ok)),
        Err(e) if e.is_unreachable() && !plan.dry_run => Err(e),
        Err(e) => Ok(Some(Err(format!(
            "cannot read the ResourceSlices of node {} ({e}); GPUs offered through DRA are not claimed",
            side.node
        )))),
    }
}

/// Moves a side's GPU request into a DRA claim when its node offers GPUs only through DRA.
pub(super) fn claim_dra_devices(
    plan: &BenchPodsPlan,
    choice: &mut DeviceChoice,
    offer: Option<Result<devices::DraOfferRead, String>>,
    side: &Resolved,
    name: &str,
    notes: &mut Vec<Note>,
) -> Result<(), KubeError> {
    let offer = match offer {
        None => return Ok(()),
        Some(Err(why)) => {
            notes.push(Note::other(format!("{name}: {why}")));
            return Ok(());
        }
        Some(Ok(offer)) => offer,
    };
    let before = choice.notes.len();
    devices::apply_dra(choice, &plan.devices, &offer)
        .map_err(|why| KubeError::Target(format!("{name}: node {}: {why}", side.node)))?;
    notes.extend(choice.notes[before.min(choice.notes.len())..].iter().map(|n| Note {
        kind: NoteKind::DeviceDefault,
        text: format!("{name}: node {}: {n}", side.node),
    }));
    Ok(())
}
