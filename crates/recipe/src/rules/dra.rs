//! Per-role rules for devices claimed through DRA (`resourceClaims`, ResourceClaimTemplates,
//! ComputeDomains), judged like the extended-resource requests: `pod.dra_claims` (every claim
//! the container uses is defined by the pod, every claim the pod defines reaches the container,
//! the recipe's ComputeDomain is claimed) and `pod.dra_rail` (a GPU and its NIC are tied to one
//! PCIe root, so they land on one rail).

use super::mk;
use crate::claims::{ClaimTemplate, DeviceKind};
use crate::model::RoleEnv;
use crate::resolve::Resolution;
use icb_core::checks::Check;
use icb_core::fabric::PCIE_ROOT_ATTRIBUTE;
use icb_core::model::Status;

pub(crate) fn role_checks(r: &RoleEnv, res: &Resolution, out: &mut Vec<Check>) {
    let scope = r.scope();
    claims_defined(r, &scope, out);
    compute_domain_claimed(r, res, &scope, out);
    rail_pairing(r, res, &scope, out);
}

fn quoted(names: &[&String]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// The container's `resources.claims` against the pod's `resourceClaims`: a name the pod does not
/// define makes the API server reject the pod; a claim the container does not list is allocated
/// but never reaches the engine (for a ComputeDomain channel: no IMEX channel, no MNNVL).
fn claims_defined(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let res = &r.resources;
    if res.container_claims.is_empty() && res.pod_claims.is_empty() {
        return;
    }
    let findings_before = out.len();
    let undefined: Vec<&String> = res
        .container_claims
        .iter()
        .filter(|c| !res.pod_claims.contains(c))
        .collect();
    let unused: Vec<&String> = res
        .pod_claims
        .iter()
        .filter(|c| !res.container_claims.contains(c))
        .collect();
    if !undefined.is_empty() {
        let defined: Vec<&String> = res.pod_claims.iter().collect();
        out.push(mk(
            "pod.dra_claims",
            Status::Fail,
            format!(
                "the container's resources.claims names {} but the pod's resourceClaims defines {}: the API server rejects the pod",
                quoted(&undefined),
                if defined.is_empty() { "no claim".to_string() } else { format!("only {}", quoted(&defined)) }
            ),
            scope,
            Some("define each claim in the pod's resourceClaims ({name: NAME, resourceClaimTemplateName: TEMPLATE}), or rename the container's claim to one the pod defines"),
        ));
    }
    let (domain, devices): (Vec<&String>, Vec<&String>) =
        unused.into_iter().partition(|c| res.domain_claims.contains(c));
    if !domain.is_empty() {
        out.push(mk(
            "pod.dra_claims",
            Status::Warn,
            format!(
                "the ComputeDomain channel claim {} is in the pod's resourceClaims but not in the container's resources.claims: the engine gets no IMEX channel, so MNNVL transfers fail",
                quoted(&domain)
            ),
            scope,
            Some("add the claim to the main container: resources.claims: [{name: NAME}]"),
        ));
    }
    if !devices.is_empty() {
        out.push(mk(
            "pod.dra_claims",
            Status::Warn,
            format!(
                "the claim {} is in the pod's resourceClaims but not in the container's resources.claims: its devices are allocated and never visible to the engine",
                quoted(&devices)
            ),
            scope,
            Some("add the claim to the main container: resources.claims: [{name: NAME}]"),
        ));
    }
    if out.len() == findings_before {
        let all: Vec<&String> = res.container_claims.iter().collect();
        out.push(mk(
            "pod.dra_claims",
            Status::Ok,
            format!(
                "every claim the container uses is defined by the pod and reaches it: {}",
                quoted(&all)
            ),
            scope,
            None,
        ));
    }
}

/// A ComputeDomain in the recipe whose channel this engine role does not claim: the role runs
/// outside the NVLink domain the recipe sets up.
fn compute_domain_claimed(r: &RoleEnv, res: &Resolution, scope: &str, out: &mut Vec<Check>) {
    if res.compute_domains.is_empty() || r.uses_compute_domain() {
        return;
    }
    let domains: Vec<String> = res
        .compute_domains
        .iter()
        .map(|(name, template)| format!("{name} (channel template {template})"))
        .collect();
    out.push(mk(
        "pod.dra_claims",
        Status::Warn,
        format!(
            "the recipe's ComputeDomain {} is not claimed by this role: no IMEX channel, so KV cannot use multi-node NVLink (MNNVL)",
            domains.join(", ")
        ),
        scope,
        Some("claim it: the pod's resourceClaims: [{name: channel, resourceClaimTemplateName: TEMPLATE}], the container's resources.claims: [{name: channel}]"),
    ));
}

/// What one of the role's GPU or NIC claims says about the GPU↔NIC pairing.
enum Pairing<'a> {
    /// One template asks for GPUs and NICs, tied (or not) by a pcieRoot constraint.
    Both {
        template: &'a str,
        tied: bool,
        gpu: Vec<&'a str>,
        nic: Vec<&'a str>,
    },
    /// The claim asks for one kind only.
    One(DeviceKind),
    /// The claim's template is not among the inputs.
    NotKnown(String),
}

fn pairing_of<'a>(claim: &'a str, r: &'a RoleEnv, res: &'a Resolution) -> Pairing<'a> {
    let Some(template_name) = r.resources.template_of.get(claim) else {
        return Pairing::NotKnown(format!("claim `{claim}` (a ResourceClaim made outside the recipe)"));
    };
    let Some(template): Option<&ClaimTemplate> = res.claim_templates.get(template_name) else {
        return Pairing::NotKnown(format!("template {template_name} (not among the inputs)"));
    };
    let (gpu, nic) = (template.names_of(DeviceKind::Gpu), template.names_of(DeviceKind::Nic));
    match (gpu.is_empty(), nic.is_empty()) {
        (false, false) => Pairing::Both {
            template: template_name,
            tied: template.gpu_and_nic_tied(),
            gpu,
            nic,
        },
        (false, true) => Pairing::One(DeviceKind::Gpu),
        _ => Pairing::One(DeviceKind::Nic),
    }
}

/// `pod.dra_rail`: a GPU and a NIC claimed through DRA share a PCIe root only when one claim asks
/// for both and a `matchAttribute: resource.kubernetes.io/pcieRoot` constraint ties them; a
/// constraint binds the requests of one claim, so a GPU claim beside a NIC claim is never tied.
fn rail_pairing(r: &RoleEnv, res: &Resolution, scope: &str, out: &mut Vec<Check>) {
    let claims: Vec<&String> = r
        .resources
        .claims
        .iter()
        .filter(|c| !r.resources.domain_claims.contains(c))
        .collect();
    let pairings: Vec<(&String, Pairing)> = claims.iter().map(|c| (*c, pairing_of(c, r, res))).collect();
    let (mut untied, mut tied, mut not_known) = (Vec::new(), Vec::new(), Vec::new());
    let (mut gpu_only, mut nic_only) = (Vec::new(), Vec::new());
    for (claim, p) in &pairings {
        match p {
            Pairing::Both {
                template, tied: true, ..
            } => tied.push(template.to_string()),
            Pairing::Both {
                template,
                tied: false,
                gpu,
                nic,
            } => untied.push(format!(
                "{template} (requests {} and {})",
                gpu.join(", "),
                nic.join(", ")
            )),
            Pairing::One(DeviceKind::Gpu) => gpu_only.push(claim.as_str()),
            Pairing::One(_) => nic_only.push(claim.as_str()),
            Pairing::NotKnown(what) => not_known.push(what.clone()),
        }
    }
    if !untied.is_empty() {
        out.push(mk(
            "pod.dra_rail",
            Status::Warn,
            format!(
                "ResourceClaimTemplate {} asks for GPUs and NICs with no matchAttribute on {PCIE_ROOT_ATTRIBUTE}: a GPU and its NIC may land on different PCIe roots (rails)",
                untied.join("; ")
            ),
            scope,
            Some("add to the template's spec.spec.devices.constraints: {requests: [GPU, NIC], matchAttribute: resource.kubernetes.io/pcieRoot}"),
        ));
    } else if !gpu_only.is_empty() && !nic_only.is_empty() {
        out.push(mk(
            "pod.dra_rail",
            Status::Warn,
            format!(
                "GPU claim {} and NIC claim {} are separate claims: a constraint binds one claim's requests only, so nothing keeps a GPU and its NIC on one PCIe root",
                gpu_only.join(", "),
                nic_only.join(", ")
            ),
            scope,
            Some("ask for both in one ResourceClaimTemplate, tied by constraints: [{requests: [GPU, NIC], matchAttribute: resource.kubernetes.io/pcieRoot}]"),
        ));
    } else if !not_known.is_empty() {
        out.push(mk(
            "pod.dra_rail",
            Status::Skipped,
            format!(
                "not known whether the claimed GPUs and NICs share a PCIe root: {}",
                not_known.join("; ")
            ),
            scope,
            Some("pass the ResourceClaimTemplate with the recipe (a file argument or the recipe's folder)"),
        ));
    } else if !tied.is_empty() {
        out.push(mk(
            "pod.dra_rail",
            Status::Ok,
            format!(
                "GPUs and NICs of {} are tied to one PCIe root (matchAttribute {PCIE_ROOT_ATTRIBUTE})",
                tied.join(", ")
            ),
            scope,
            None,
        ));
    }
}
