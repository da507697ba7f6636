//! Rails node pods on nodes that offer their GPUs and NICs through DRA (`icb_kube::dra`) rather
//! than as extended resources: the whole-node pod claims every GPU and every NIC of its node
//! through a ResourceClaimTemplate named like the pod, created before the pod and deleted by name
//! at cleanup (the claim made from it is owned by the pod). With `--gpus`/`--rdma` the pod claims
//! exactly those GPUs, each with the NIC on its PCIe root, as a plain pair's bench pod does. The
//! devices the slices publish are kept, to be checked against the PCI tree the pod reads
//! ([`super::dra_roots`]).

use super::dra_roots::{self, SliceDevice};
use super::plan::NodeRailInfo;
use icb_core::rails::RailFinding;
use icb_kube::Cluster;
use icb_kube::devices::{self, DeviceRequest};
use icb_kube::dra::{self, DraOffer};
use icb_kube::k8s_openapi::api::resource::v1::{ResourceClaimSpec, ResourceClaimTemplate};
use icb_kube::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use icb_pair::launcher::{LaunchError, LaunchFailure};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// What a node without GPUs as extended resources offers through DRA.
enum DraNode {
    /// No GPU of `gpu.nvidia.com` in its slices (or the cluster serves no DRA).
    Nothing,
    /// Its slices could not be read (no RBAC): said to the user, nothing claimed.
    Unreadable(String),
    /// What it offers, and the devices its slices publish.
    Offer(DraOffer, Vec<SliceDevice>),
}

/// The devices each DRA node's slices publish, and what comparing them with the node's own PCI
/// tree found ([`dra_roots::compare`]) once its pod read that tree.
#[derive(Default)]
pub(super) struct DraRoots {
    published: BTreeMap<String, Vec<SliceDevice>>,
    /// By node: read again, a node's findings replace its earlier ones.
    found: Mutex<BTreeMap<String, Vec<RailFinding>>>,
}

impl DraRoots {
    /// The claim of every GPU and NIC of `node` when it offers its GPUs through DRA, and how many
    /// GPUs that is; what was claimed (or why nothing could be) goes to `notes`.
    pub(super) async fn claim(
        &mut self,
        cluster: &Cluster,
        node: &str,
        notes: &mut Vec<String>,
    ) -> Result<Option<(ResourceClaimSpec, u32)>, LaunchError> {
        let Some((offer, devices)) = read(cluster, node, notes).await? else {
            return Ok(None);
        };
        let claim = dra::whole_node_claim(&offer).map_err(|why| LaunchError::new(format!("node {node}: {why}")))?;
        notes.push(note(node, &offer));
        self.published.insert(node.to_string(), devices);
        Ok(Some((claim, u32::try_from(offer.gpus).unwrap_or(u32::MAX))))
    }

    /// `--gpus`/`--rdma` on a node that offers its GPUs only through DRA (`asked`: the request,
    /// what the node advertises, and the extended resources the request gave, replaced here):
    /// exactly those GPUs claimed, each with the NIC on its PCIe root unless `--rdma` chose an
    /// RDMA resource or none (`icb_kube::devices::apply_dra`, as a plain pair's bench pod does).
    pub(super) async fn claim_requested(
        &mut self,
        cluster: &Cluster,
        node: &str,
        asked: (
            &DeviceRequest,
            &BTreeMap<String, Quantity>,
            &mut BTreeMap<String, Quantity>,
        ),
        notes: &mut Vec<String>,
    ) -> Result<Option<(ResourceClaimSpec, u32)>, LaunchError> {
        let (request, advertised, devices) = asked;
        let has_gpu = advertised.get(devices::NVIDIA_GPU).is_some_and(|q| q.0.trim() != "0");
        if has_gpu || request.gpus == Some(0) {
            return Ok(None);
        }
        let Some((offer, published)) = read(cluster, node, notes).await? else {
            return Ok(None);
        };
        let mut choice = devices::decide(request, Some(advertised), false);
        devices::apply_dra(&mut choice, request, &offer)
            .map_err(|why| LaunchError::new(format!("node {node}: {why}")))?;
        let Some(claim) = choice.claim.take() else {
            return Ok(None);
        };
        devices.clear();
        choice.apply(devices);
        notes.extend(choice.notes.iter().map(|n| format!("the pod on node {node}: {n}")));
        self.published.insert(node.to_string(), published);
        Ok(Some((claim, request.gpus.unwrap_or(1))))
    }

    /// Checks a node's PCI view (from its pod) against its slices, where it has any.
    pub(super) fn check(&self, info: &NodeRailInfo) {
        if let Some(devices) = self.published.get(&info.node) {
            let (findings, _compared) = dra_roots::compare(devices, info);
            let mut found = self.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            found.insert(info.node.clone(), findings);
        }
    }

    /// Every node's findings, in node order.
    pub(super) fn findings(&self) -> Vec<RailFinding> {
        let found = self.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        found.values().flatten().cloned().collect()
    }
}

/// Reads `node`'s slices: its offer when it has DRA GPUs; slices it cannot read are a note.
async fn read(
    cluster: &Cluster,
    node: &str,
    notes: &mut Vec<String>,
) -> Result<Option<(DraOffer, Vec<SliceDevice>)>, LaunchError> {
    match whole_node(cluster, node).await? {
        DraNode::Offer(offer, devices) => Ok(Some((offer, devices))),
        DraNode::Unreadable(note) => {
            notes.push(note);
            Ok(None)
        }
        DraNode::Nothing => Ok(None),
    }
}

/// Reads `node`'s slices and what it offers through DRA.
async fn whole_node(cluster: &Cluster, node: &str) -> Result<DraNode, LaunchError> {
    let (offer, slices) = match dra::node_offer_and_slices(cluster, node).await {
        Ok(Some((offer, slices))) if offer.gpus > 0 => (offer, slices),
        Ok(_) => return Ok(DraNode::Nothing),
        Err(e) if e.cluster_level() => return Err(LaunchError::of(LaunchFailure::Cluster, e.to_string())),
        Err(e) => {
            return Ok(DraNode::Unreadable(format!(
                "cannot read the ResourceSlices of node {node} ({e}): GPUs it offers through DRA are not claimed"
            )));
        }
    };
    Ok(DraNode::Offer(offer, dra_roots::slice_devices(&slices)))
}

/// The note for a whole-node claim.
fn note(node: &str, offer: &DraOffer) -> String {
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
