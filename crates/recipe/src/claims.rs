//! The DRA objects a recipe carries beside its workloads: ResourceClaimTemplates (what each
//! request asks for, and which requests a `matchAttribute` constraint ties to one PCIe root) and
//! ComputeDomains (the claim template of their IMEX channel). The rules in `rules::dra` judge a
//! role's claims against them.

use crate::patch::Merged;
use crate::yaml::Node;
use std::collections::BTreeMap;

use icb_core::fabric::PCIE_ROOT_ATTRIBUTE;

/// What one device request of a claim template selects, by its device class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// A GPU or other accelerator.
    Gpu,
    /// An NVIDIA ComputeDomain (IMEX) channel: an NVLink fabric, not a device.
    Domain,
    /// Anything else, which a serving recipe asks for to get an RDMA NIC.
    Nic,
}

impl DeviceKind {
    /// Sorts a device class name the way `resolve::classify_claims` sorts a whole claim.
    pub fn of_class(class: &str) -> DeviceKind {
        if icb_core::fabric::is_compute_domain_claim_name(class) {
            DeviceKind::Domain
        } else if is_accelerator_class(class) {
            DeviceKind::Gpu
        } else {
            DeviceKind::Nic
        }
    }
}

/// A device class (or claim name) that names an accelerator and no NIC.
pub fn is_accelerator_class(name: &str) -> bool {
    let s = name.to_ascii_lowercase();
    [
        "gpu",
        "xpu",
        "mig.nvidia.com",
        "intel.com",
        "amd.com",
        "gaudi",
        "accelerator",
    ]
    .iter()
    .any(|w| s.contains(w))
        && !s.contains("nic")
        && !s.contains("rdma")
}

/// One request of a claim template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRequest {
    pub name: String,
    pub class: String,
    pub kind: DeviceKind,
}

/// A ResourceClaimTemplate as the rules need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimTemplate {
    /// `file:line` of the template, for the finding.
    pub location: String,
    pub requests: Vec<DeviceRequest>,
    /// Each `matchAttribute: resource.kubernetes.io/pcieRoot` constraint: the request names it
    /// ties (empty: every request of the claim, as the API defines an absent list).
    pub pcie_root_constraints: Vec<Vec<String>>,
}

impl ClaimTemplate {
    pub fn names_of(&self, kind: DeviceKind) -> Vec<&str> {
        self.requests
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.name.as_str())
            .collect()
    }

    /// Whether one pcieRoot constraint covers every GPU and NIC request: only then does the
    /// scheduler give each GPU a NIC on its own root.
    pub fn gpu_and_nic_tied(&self) -> bool {
        let wanted: Vec<&str> = self
            .requests
            .iter()
            .filter(|r| r.kind != DeviceKind::Domain)
            .map(|r| r.name.as_str())
            .collect();
        self.pcie_root_constraints
            .iter()
            .any(|tied| tied.is_empty() || wanted.iter().all(|w| tied.iter().any(|t| t == w)))
    }
}

/// The device class of a request: v1 `exactly.deviceClassName`, v1beta1 `deviceClassName`,
/// or the first alternative of `firstAvailable`.
fn request_class(req: &Node) -> Option<&str> {
    req.path(&["exactly", "deviceClassName"])
        .and_then(Node::as_str)
        .or_else(|| req.str_at("deviceClassName"))
        .or_else(|| {
            req.get("firstAvailable")
                .map(Node::as_seq)
                .and_then(|alts| alts.first())
                .and_then(|alt| alt.str_at("deviceClassName"))
        })
}

fn parse_template(m: &Merged) -> ClaimTemplate {
    let devices = m.doc.root.path(&["spec", "spec", "devices"]);
    let field = |key: &str| devices.and_then(|d| d.get(key)).map(Node::as_seq).unwrap_or_default();
    let requests = field("requests")
        .iter()
        .filter_map(|req| {
            let class = request_class(req)?;
            Some(DeviceRequest {
                name: req.str_at("name").unwrap_or("").to_string(),
                class: class.to_string(),
                kind: DeviceKind::of_class(class),
            })
        })
        .collect();
    let pcie_root_constraints = field("constraints")
        .iter()
        .filter(|c| c.str_at("matchAttribute") == Some(PCIE_ROOT_ATTRIBUTE))
        .map(|c| {
            c.get("requests")
                .map(Node::as_seq)
                .unwrap_or_default()
                .iter()
                .filter_map(Node::as_str)
                .map(str::to_string)
                .collect()
        })
        .collect();
    ClaimTemplate {
        location: m.doc.location(),
        requests,
        pcie_root_constraints,
    }
}

/// Every ResourceClaimTemplate of the inputs, by name.
pub fn claim_templates(merged: &[Merged]) -> BTreeMap<String, ClaimTemplate> {
    merged
        .iter()
        .filter(|m| m.doc.kind() == Some("ResourceClaimTemplate"))
        .filter_map(|m| Some((m.doc.name()?.to_string(), parse_template(m))))
        .collect()
}

/// Every ComputeDomain of the inputs: its name and its channel's claim template.
pub fn compute_domains(merged: &[Merged]) -> Vec<(String, String)> {
    merged
        .iter()
        .filter(|m| m.doc.kind() == Some("ComputeDomain"))
        .filter_map(|m| {
            let template = m
                .doc
                .root
                .path(&["spec", "channel", "resourceClaimTemplate", "name"])
                .and_then(Node::as_str)?;
            Some((m.doc.name().unwrap_or("?").to_string(), template.to_string()))
        })
        .collect()
}
