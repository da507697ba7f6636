//! Admission of a validated pod, as a real API server's admission chain does it: Pod Security
//! admission from the namespace's `pod-security.kubernetes.io/*` labels (enforce → 403, warn →
//! a `Warning` header, audit → the cluster's audit list), then ResourceQuota (a namespace with a
//! quota refuses pods that do not specify what it tracks, or that would exceed it).

use std::collections::BTreeMap;

use icb_core::fabric::quantity::parse_milli;
use icb_pss::{Level, NamespacePolicy};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::cluster::{Shared, is_terminal, lock};
use crate::status::ApiError;

/// What admission adds to an accepted pod's response.
#[derive(Debug, Default)]
pub struct Admitted {
    /// `Warning` header texts (the `warn` mode's verdict).
    pub warnings: Vec<String>,
}

/// A 403 for pod `name`, with the details a real server sends (`kind`, `name`).
fn forbidden(name: &str, message: String) -> ApiError {
    let mut e = ApiError::new(403, "Forbidden", message);
    e.details = Some(json!({"name": name, "kind": "pods"}));
    e
}

/// Pod Security admission, then quota.
pub fn admit(shared: &Shared, ns: &str, pod: &Pod) -> Result<Admitted, ApiError> {
    let admitted = pod_security(shared, ns, pod)?;
    quota(shared, ns, pod)?;
    Ok(admitted)
}

fn pod_security(shared: &Shared, ns: &str, pod: &Pod) -> Result<Admitted, ApiError> {
    let labels = shared.config.namespace_labels.get(ns).cloned().unwrap_or_default();
    let policy = NamespacePolicy::from_labels(&labels);
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let check = |level: Level| icb_pss::evaluate(level, &pod.metadata, &spec);
    let refused = check(policy.enforce.level);
    if !refused.is_empty() {
        return Err(forbidden(
            &name,
            icb_pss::forbidden_message(&name, &policy.enforce, &refused),
        ));
    }
    let audited = check(policy.audit.level);
    if !audited.is_empty() {
        lock(&shared.audit).push(format!(
            "{ns}/{name}: {}",
            icb_pss::warning_message(&policy.audit, &audited)
        ));
    }
    let warned = check(policy.warn.level);
    let warnings = if warned.is_empty() {
        Vec::new()
    } else {
        vec![icb_pss::warning_message(&policy.warn, &warned)]
    };
    Ok(Admitted { warnings })
}

/// The compute resources a quota may track, with the container field each reads.
const COMPUTE: &[(&str, &str, bool)] = &[
    ("limits.cpu", "cpu", true),
    ("limits.memory", "memory", true),
    ("requests.cpu", "cpu", false),
    ("requests.memory", "memory", false),
    ("cpu", "cpu", false),
    ("memory", "memory", false),
];

/// The pod's total of one quota resource (`None`: some container does not specify it).
fn pod_usage(pod: &Pod, quota_key: &str) -> Option<i128> {
    if quota_key == "pods" {
        return Some(1000);
    }
    let (_, field, limit) = COMPUTE.iter().find(|(k, _, _)| *k == quota_key)?;
    let spec = pod.spec.as_ref()?;
    let mut total = 0;
    for c in &spec.containers {
        let res = c.resources.as_ref()?;
        let map = if *limit { &res.limits } else { &res.requests };
        total += parse_milli(&map.as_ref()?.get(*field)?.0)?;
    }
    Some(total)
}

/// `limits.cpu=3000m`, `limits.memory=1073741824`, as quota errors print them.
fn show(key: &str, milli: i128) -> String {
    if key.ends_with("cpu") {
        format!("{key}={milli}m")
    } else {
        format!("{key}={}", milli / 1000)
    }
}

fn quota(shared: &Shared, ns: &str, pod: &Pod) -> Result<(), ApiError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let quotas: Vec<&(String, String, BTreeMap<String, String>)> =
        shared.config.quotas.iter().filter(|(q_ns, _, _)| q_ns == ns).collect();
    if quotas.is_empty() {
        return Ok(());
    }
    let others: Vec<Pod> = lock(&shared.store)
        .pods()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns) && !is_terminal(p))
        .cloned()
        .collect();
    for (_, quota_name, hard) in quotas {
        let containers: Vec<String> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter().map(|c| c.name.clone()))
            .collect();
        let missing: Vec<String> = hard
            .keys()
            .filter(|k| COMPUTE.iter().any(|(c, _, _)| c == k))
            .filter(|k| pod_usage(pod, k).is_none())
            .map(|k| format!("{k} for: {}", containers.join(",")))
            .collect();
        if !missing.is_empty() {
            return Err(forbidden(
                &name,
                format!(
                    "pods \"{name}\" is forbidden: failed quota: {quota_name}: must specify {}",
                    missing.join("; ")
                ),
            ));
        }
        let (mut requested, mut used, mut limited) = (Vec::new(), Vec::new(), Vec::new());
        for (key, limit) in hard {
            let (Some(want), Some(limit)) = (pod_usage(pod, key), parse_milli(limit)) else {
                continue;
            };
            let in_use: i128 = others.iter().filter_map(|p| pod_usage(p, key)).sum();
            if in_use + want > limit {
                requested.push(show(key, want));
                used.push(show(key, in_use));
                limited.push(format!("{key}={}", hard[key]));
            }
        }
        if !requested.is_empty() {
            return Err(forbidden(
                &name,
                format!(
                    "pods \"{name}\" is forbidden: exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
                    requested.join(","),
                    used.join(","),
                    limited.join(",")
                ),
            ));
        }
    }
    Ok(())
}
