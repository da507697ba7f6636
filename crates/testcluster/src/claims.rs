//! ResourceClaims and ResourceClaimTemplates as the control plane keeps them, and what the
//! scheduler's DynamicResources plugin and the resourceclaim controller do with them for a pod:
//! make the pod's claims from its templates (owned by the pod, named `<pod>-<claim>-<suffix>`,
//! listed in `status.resourceClaimStatuses`), allocate devices on the chosen node
//! (`status.allocation`, `status.reservedFor`), and when the pod is removed, unreserve its claims,
//! free unreserved allocations and delete the claims it owned (the garbage collector).
//!
//! Lock order: the store, then `Shared::dra`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodResourceClaimStatus,
};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationResult, DeviceClass, DeviceRequestAllocationResult, ResourceClaim,
    ResourceClaimConsumerReference, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::api::new_uid;
use crate::config::NodeConfig;
use crate::dra::{self, ClaimError, DraDevice};
use crate::store::{PodKey, key_of, now};

/// The claims and templates, by (namespace, name).
#[derive(Default)]
pub struct DraState {
    pub claims: BTreeMap<PodKey, ResourceClaim>,
    pub templates: BTreeMap<PodKey, ResourceClaimTemplate>,
    /// Every allocation made, for tests ([`crate::TestCluster::dra_allocations`]).
    pub history: Vec<DraAllocation>,
}

/// One allocation the scheduler made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraAllocation {
    /// (namespace, claim name).
    pub claim: PodKey,
    /// The pod it was allocated for.
    pub pod: String,
    pub node: String,
    /// (request, driver, device).
    pub devices: Vec<(String, String, String)>,
}

/// Every node's ResourceSlices.
pub fn slices(nodes: &[NodeConfig]) -> Vec<ResourceSlice> {
    nodes.iter().flat_map(|n| dra::node_slices(&n.name, &n.dra)).collect()
}

/// One DeviceClass per driver any node publishes, named after the driver.
pub fn classes(nodes: &[NodeConfig]) -> BTreeMap<String, DeviceClass> {
    let drivers: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| n.dra.iter().map(|d| d.driver.as_str()))
        .collect();
    drivers
        .into_iter()
        .map(|d| (d.to_string(), dra::driver_class(d)))
        .collect()
}

/// The claims a pod uses, by (namespace, name), created from its templates where they are not
/// yet; `Err` is why the pod cannot be scheduled yet (a claim or template that does not exist).
pub fn resolve(pod: &Pod, state: &mut DraState) -> Result<(Vec<PodKey>, Vec<PodResourceClaimStatus>), ClaimError> {
    let ns = key_of(pod).0;
    let spec_claims = pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.clone())
        .unwrap_or_default();
    let known = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    let mut keys = Vec::new();
    let mut statuses = Vec::new();
    for claim in spec_claims {
        let name = match (&claim.resource_claim_name, &claim.resource_claim_template_name) {
            (Some(name), _) => {
                if !state.claims.contains_key(&(ns.clone(), name.clone())) {
                    return Err(ClaimError::NoSuchClaim(name.clone()));
                }
                name.clone()
            }
            (None, Some(template)) => {
                let made = known
                    .iter()
                    .find(|s| s.name == claim.name)
                    .and_then(|s| s.resource_claim_name.clone());
                match made {
                    Some(name) => name,
                    None => {
                        let name = from_template(pod, &claim.name, template, state)?;
                        statuses.push(PodResourceClaimStatus {
                            name: claim.name.clone(),
                            resource_claim_name: Some(name.clone()),
                        });
                        name
                    }
                }
            }
            (None, None) => return Err(ClaimError::Unnamed(claim.name.clone())),
        };
        keys.push((ns.clone(), name));
    }
    Ok((keys, statuses))
}

/// Makes the pod's claim `claim_name` from `template`, owned by the pod; returns its name.
fn from_template(pod: &Pod, claim_name: &str, template: &str, state: &mut DraState) -> Result<String, ClaimError> {
    let (ns, pod_name) = key_of(pod);
    let t = state
        .templates
        .get(&(ns.clone(), template.to_string()))
        .ok_or_else(|| ClaimError::NoSuchTemplate(template.to_string()))?;
    let suffix: String = new_uid().chars().filter(char::is_ascii_alphanumeric).take(5).collect();
    let name = format!("{pod_name}-{claim_name}-{suffix}");
    let mut claim = ResourceClaim::default();
    let meta = &mut claim.metadata;
    meta.name = Some(name.clone());
    meta.namespace = Some(ns.clone());
    meta.uid = Some(new_uid());
    meta.creation_timestamp = Some(now());
    meta.resource_version = Some("1".into());
    let template_spec = t.spec.clone().unwrap_or_default();
    meta.labels = template_spec.metadata.and_then(|m| m.labels);
    meta.annotations = Some(
        [(
            "resource.kubernetes.io/pod-claim-name".to_string(),
            claim_name.to_string(),
        )]
        .into(),
    );
    meta.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod_name,
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    claim.spec = template_spec.spec;
    state.claims.insert((ns, name.clone()), claim);
    Ok(name)
}

/// Devices of `node` taken by allocated claims (indices into its `dra`).
fn taken(node: &NodeConfig, state: &DraState) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for claim in state.claims.values() {
        for r in allocated(claim) {
            if r.pool == node.name
                && let Some(i) = node.dra.iter().position(|d| d.driver == r.driver && d.name == r.device)
            {
                out.insert(i);
            }
        }
    }
    out
}

fn allocated(claim: &ResourceClaim) -> impl Iterator<Item = &DeviceRequestAllocationResult> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
}

/// What allocating a pod's claims on one node gives: per claim not yet allocated, its results.
pub type NodePlan = Vec<(PodKey, Vec<DeviceRequestAllocationResult>)>;

/// Allocates every claim of `keys` on `node` (claims allocated already must be on it);
/// `Ok(None)`: they do not fit ("cannot allocate all claims").
pub fn plan_on(
    node: &NodeConfig,
    keys: &[PodKey],
    state: &DraState,
    classes: &BTreeMap<String, DeviceClass>,
) -> Result<Option<NodePlan>, ClaimError> {
    let mut taken = taken(node, state);
    let mut plan = Vec::new();
    for key in keys {
        let Some(claim) = state.claims.get(key) else {
            return Err(ClaimError::NoSuchClaim(key.1.clone()));
        };
        if claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
            if allocated(claim).any(|r| r.pool != node.name) {
                return Ok(None);
            }
            continue;
        }
        let spec = claim.spec.clone().unwrap_or_default();
        let Some(picks) = dra::allocate(&spec, &node.dra, &taken, classes)? else {
            return Ok(None);
        };
        let results = picks
            .into_iter()
            .map(|(request, i)| {
                taken.insert(i);
                result(node, &node.dra[i], request)
            })
            .collect();
        plan.push((key.clone(), results));
    }
    Ok(Some(plan))
}

fn result(node: &NodeConfig, device: &DraDevice, request: String) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request,
        driver: device.driver.clone(),
        pool: node.name.clone(),
        device: device.name.clone(),
        ..Default::default()
    }
}

/// Writes the plan's allocations and reserves every claim of `keys` for `pod`.
pub fn commit(pod: &Pod, node: &str, keys: &[PodKey], plan: NodePlan, state: &mut DraState) {
    for (key, results) in plan {
        state.history.push(DraAllocation {
            claim: key.clone(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
            node: node.to_string(),
            devices: results
                .iter()
                .map(|r| (r.request.clone(), r.driver.clone(), r.device.clone()))
                .collect(),
        });
        if let Some(claim) = state.claims.get_mut(&key) {
            let status = claim.status.get_or_insert_with(Default::default);
            status.allocation = Some(AllocationResult {
                allocation_timestamp: Some(now()),
                devices: Some(DeviceAllocationResult {
                    results: Some(results),
                    config: None,
                }),
                node_selector: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_fields: Some(vec![NodeSelectorRequirement {
                            key: "metadata.name".into(),
                            operator: "In".into(),
                            values: Some(vec![node.to_string()]),
                        }]),
                        match_expressions: None,
                    }],
                }),
            });
        }
    }
    let consumer = ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    };
    for key in keys {
        if let Some(claim) = state.claims.get_mut(key) {
            let reserved = claim
                .status
                .get_or_insert_with(Default::default)
                .reserved_for
                .get_or_insert_with(Vec::new);
            if !reserved.iter().any(|c| c.uid == consumer.uid) {
                reserved.push(consumer.clone());
            }
            bump(claim);
        }
    }
}

fn bump(claim: &mut ResourceClaim) {
    let v: u64 = claim
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    claim.metadata.resource_version = Some((v + 1).to_string());
}

/// After pods went: drops reservations of pods not in `live` (uids), deletes claims owned only by
/// pods that are gone and claims marked for deletion that nobody holds, and frees the allocation
/// of a claim nobody holds. Returns how many claims were deleted.
pub fn release(live: &BTreeSet<String>, state: &mut DraState) -> usize {
    let before = state.claims.len();
    state.claims.retain(|_, claim| {
        let owners = claim.metadata.owner_references.as_deref().unwrap_or_default();
        let orphaned = !owners.is_empty()
            && owners
                .iter()
                .all(|o| o.kind == "Pod" && o.api_version == "v1" && !live.contains(&o.uid));
        if orphaned {
            return false;
        }
        let Some(status) = claim.status.as_mut() else {
            return claim.metadata.deletion_timestamp.is_none();
        };
        if let Some(reserved) = status.reserved_for.as_mut() {
            reserved.retain(|c| live.contains(&c.uid));
        }
        let held = status.reserved_for.as_ref().is_some_and(|r| !r.is_empty());
        if !held {
            status.reserved_for = None;
            status.allocation = None;
        }
        held || claim.metadata.deletion_timestamp.is_none()
    });
    state.templates.retain(|_, t| {
        let owners = t.metadata.owner_references.as_deref().unwrap_or_default();
        owners.is_empty()
            || owners
                .iter()
                .any(|o| !(o.kind == "Pod" && o.api_version == "v1") || live.contains(&o.uid))
    });
    before - state.claims.len()
}

/// Whether a claim is reserved for a pod (its deletion then waits for the pod, as the API
/// server's finalizer makes it).
pub fn is_reserved(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|r| !r.is_empty())
}
