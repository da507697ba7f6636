//! Rails node pods on nodes that offer their GPUs and NICs through DRA (`icb_kube::dra`) rather
//! than as extended resources: the whole-node pod claims every GPU and every NIC of its node
//! through a ResourceClaimTemplate named like the pod, created before the pod and deleted by name
//! at cleanup (the claim made from it is owned by the pod).

use crate::launcher::{LaunchError, LaunchFailure};
use icb_kube::Cluster;
use icb_kube::dra::{self, DraOffer};
use icb_kube::k8s_openapi::api::resource::v1::{ResourceClaimSpec, ResourceClaimTemplate};
use std::collections::BTreeSet;

/// What a node without GPUs as extended resources offers through DRA.
pub(super) enum DraNode {
    /// No GPU of `gpu.nvidia.com` in its slices (or the cluster serves no DRA).
    Nothing,
    /// Its slices could not be read (no RBAC): said to the user, nothing claimed.
    Unreadable(String),
    /// Every GPU and NIC of the node.
    Claim(ResourceClaimSpec, DraOffer),
}

/// Reads `node`'s slices and, when it has DRA GPUs, the claim of all of its devices.
pub(super) async fn whole_node(cluster: &Cluster, node: &str) -> Result<DraNode, LaunchError> {
    let offer = match dra::node_offer(cluster, node).await {
        Ok(Some(offer)) if offer.gpus > 0 => offer,
        Ok(_) => return Ok(DraNode::Nothing),
        Err(e) if e.cluster_level() => return Err(LaunchError::of(LaunchFailure::Cluster, e.to_string())),
        Err(e) => {
            return Ok(DraNode::Unreadable(format!(
                "cannot read the ResourceSlices of node {node} ({e}): GPUs it offers through DRA are not claimed"
            )));
        }
    };
    let claim = dra::whole_node_claim(&offer).map_err(|why| LaunchError::new(format!("node {node}: {why}")))?;
    Ok(DraNode::Claim(claim, offer))
}

/// The note for a whole-node claim.
pub(super) fn note(node: &str, offer: &DraOffer) -> String {
    match &offer.nic_driver {
        Some(nic) if offer.nic_class.is_some() => format!(
            "the pod on node {node} claims all of its devices through DRA: {} GPU(s) of {} and {} NIC(s) of {nic}",
            offer.gpus,
            dra::GPU_DRIVER,
            offer.nics
        ),
        _ => format!(
            "the pod on node {node} claims all of its {} GPU(s) of {} through DRA (no NIC driver with a DeviceClass publishes its NICs)",
            offer.gpus,
            dra::GPU_DRIVER
        ),
    }
}

/// Creates the templates (before their pods).
pub(super) async fn create_templates(
    cluster: &Cluster,
    templates: &[ResourceClaimTemplate],
) -> Result<(), LaunchError> {
    for t in templates {
        dra::create_template(cluster, t)
            .await
            .map_err(|e| LaunchError::new(e.to_string()))?;
    }
    Ok(())
}

/// Deletes the templates by name; how many were there.
pub(super) async fn delete_templates(
    cluster: &Cluster,
    templates: &[ResourceClaimTemplate],
) -> Result<usize, LaunchError> {
    let names: BTreeSet<String> = templates.iter().filter_map(|t| t.metadata.name.clone()).collect();
    if names.is_empty() {
        return Ok(0);
    }
    dra::delete_named(cluster, cluster.namespace(), &names)
        .await
        .map_err(|e| {
            LaunchError::new(format!(
                "cleanup of the rails pods' resource claim templates failed: {e}; run `ic-bench gc`"
            ))
        })
}
