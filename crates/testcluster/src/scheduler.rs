//! Where a pod may run: node selector, required node affinity, taints and extended-resource
//! capacity, with the kube-scheduler's way of explaining why nowhere fits.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PodSpec};

use crate::config::NodeConfig;
use icb_core::fabric::quantity::{format_milli, parse_milli};

/// Resource name → milli-units.
pub type Resources = BTreeMap<String, i128>;

/// What the pod asks for: containers summed (requests, else limits), init containers as a maximum,
/// plus one `pods` slot.
pub fn pod_requests(spec: &PodSpec) -> Resources {
    let container = |c: &k8s_openapi::api::core::v1::Container| -> Resources {
        let mut out = Resources::new();
        if let Some(res) = &c.resources {
            for source in [&res.limits, &res.requests].into_iter().flatten() {
                for (name, q) in source {
                    if let Some(v) = parse_milli(&q.0) {
                        out.insert(name.clone(), v);
                    }
                }
            }
        }
        out
    };
    let mut total = Resources::new();
    for c in &spec.containers {
        for (name, v) in container(c) {
            *total.entry(name).or_default() += v;
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (name, v) in container(c) {
            let slot = total.entry(name).or_default();
            *slot = (*slot).max(v);
        }
    }
    total.insert("pods".to_string(), 1000);
    total
}

/// What the node offers (allocatable, else capacity).
pub fn node_allocatable(node: &NodeConfig) -> Resources {
    let mut out = Resources::new();
    for (name, q) in node.capacity.iter().chain(node.allocatable.iter()) {
        if let Some(v) = parse_milli(q) {
            out.insert(name.clone(), v);
        }
    }
    out
}

fn expression_matches(req: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    let value = labels.get(&req.key);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (value.and_then(|v| v.parse::<i64>().ok()), values.first()) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else { return false };
            if req.operator == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

/// nodeSelector and required node affinity.
pub fn placement_matches(spec: &PodSpec, node: &NodeConfig) -> bool {
    if let Some(selector) = &spec.node_selector
        && !selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
    let Some(required) = required else { return true };
    let mut fields = BTreeMap::new();
    fields.insert("metadata.name".to_string(), node.name.clone());
    required.node_selector_terms.iter().any(|term| {
        let exprs = term.match_expressions.as_deref().unwrap_or_default();
        let field_exprs = term.match_fields.as_deref().unwrap_or_default();
        (!exprs.is_empty() || !field_exprs.is_empty())
            && exprs.iter().all(|e| expression_matches(e, &node.labels))
            && field_exprs.iter().all(|e| expression_matches(e, &fields))
    })
}

/// The first NoSchedule/NoExecute taint the pod does not tolerate, as the scheduler words it.
pub fn untolerated_taint(spec: &PodSpec, node: &NodeConfig) -> Option<String> {
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    node.taints
        .iter()
        .filter(|(_, _, effect)| effect != "PreferNoSchedule")
        .find_map(|(key, value, effect)| {
            let tolerated = tolerations.iter().any(|t| {
                let key_ok = match t.key.as_deref() {
                    None | Some("") => t.operator.as_deref() == Some("Exists"),
                    Some(k) => k == key,
                };
                let value_ok = t.operator.as_deref() == Some("Exists") || t.value.as_deref() == value.as_deref();
                let effect_ok = t.effect.as_deref().is_none_or(|e| e.is_empty() || e == effect);
                key_ok && value_ok && effect_ok
            });
            (!tolerated).then(|| {
                format!(
                    "node(s) had untolerated taint {{{key}: {}}}",
                    value.as_deref().unwrap_or("")
                )
            })
        })
}

/// Resources the node lacks for `wanted` given `used`; unknown resources count as zero capacity
/// except cpu/memory/ephemeral-storage, which a node config may leave out.
pub fn insufficient(wanted: &Resources, used: &Resources, allocatable: &Resources) -> Vec<String> {
    let mut short = Vec::new();
    for (name, want) in wanted {
        if *want <= 0 {
            continue;
        }
        let cap = match allocatable.get(name) {
            Some(c) => *c,
            None if matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage") => continue,
            None => 0,
        };
        if used.get(name).copied().unwrap_or(0) + want > cap {
            short.push(if name == "pods" {
                "Too many pods".to_string()
            } else {
                format!("Insufficient {name}")
            });
        }
    }
    short
}

/// Why one node was rejected (kube-scheduler stops at the first failing filter per node, resources
/// being checked last and listing every short resource).
pub fn node_rejections(spec: &PodSpec, node: &NodeConfig, used: &Resources) -> Vec<String> {
    if let Some(taint) = untolerated_taint(spec, node) {
        return vec![taint];
    }
    if !placement_matches(spec, node) {
        return vec!["node(s) didn't match Pod's node affinity/selector".to_string()];
    }
    insufficient(&pod_requests(spec), used, &node_allocatable(node))
}

/// "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
pub fn unschedulable_message(node_count: usize, rejections: &[Vec<String>]) -> String {
    if node_count == 0 {
        return "no nodes available to schedule pods".to_string();
    }
    let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
    for reasons in rejections {
        for r in reasons {
            *histogram.entry(r.as_str()).or_default() += 1;
        }
    }
    let parts: Vec<String> = histogram.iter().map(|(r, n)| format!("{n} {r}")).collect();
    format!("0/{node_count} nodes are available: {}.", parts.join(", "))
}

/// The kubelet's admission message when a pod bound by `spec.nodeName` does not fit.
pub fn admission_failure(spec: &PodSpec, node: &NodeConfig, used: &Resources) -> Option<(String, String)> {
    let wanted = pod_requests(spec);
    let alloc = node_allocatable(node);
    let short = insufficient(&wanted, used, &alloc);
    let first = short.first()?;
    let resource = first.strip_prefix("Insufficient ").unwrap_or("pods").to_string();
    let message = format!(
        "Pod was rejected: Node didn't have enough resource: {resource}, requested: {}, used: {}, capacity: {}",
        format_milli(wanted.get(&resource).copied().unwrap_or(0)),
        format_milli(used.get(&resource).copied().unwrap_or(0)),
        format_milli(alloc.get(&resource).copied().unwrap_or(0)),
    );
    Some((format!("OutOf{resource}"), message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn gpu_pod(gpus: u32) -> PodSpec {
        PodSpec {
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    limits: Some([("nvidia.com/gpu".to_string(), Quantity(gpus.to_string()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn gpu_capacity_and_message() {
        let node = NodeConfig::gpu("g1", 8);
        let used = Resources::new();
        assert!(node_rejections(&gpu_pod(8), &node, &used).is_empty());
        let r = node_rejections(&gpu_pod(9), &node, &used);
        assert_eq!(r, ["Insufficient nvidia.com/gpu"]);
        let msg = unschedulable_message(2, &[r.clone(), r]);
        assert_eq!(msg, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
        let plain = NodeConfig::new("cpu");
        assert_eq!(
            node_rejections(&gpu_pod(1), &plain, &used),
            ["Insufficient nvidia.com/gpu"]
        );
        let busy: Resources = [("nvidia.com/gpu".to_string(), 8000)].into();
        let (reason, message) = admission_failure(&gpu_pod(1), &node, &busy).unwrap();
        assert_eq!(reason, "OutOfnvidia.com/gpu");
        assert!(message.contains("requested: 1, used: 8, capacity: 8"), "{message}");
    }

    #[test]
    fn selector_affinity_and_taints() {
        let node = NodeConfig::new("n")
            .label("zone", "a")
            .label("rank", "5")
            .taint("gpu", Some("yes"), "NoSchedule");
        let mut spec = gpu_pod(0);
        assert!(untolerated_taint(&spec, &node).is_some());
        spec.tolerations = Some(vec![k8s_openapi::api::core::v1::Toleration {
            key: Some("gpu".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }]);
        assert!(untolerated_taint(&spec, &node).is_none());
        spec.node_selector = Some([("zone".to_string(), "b".to_string())].into());
        assert!(!placement_matches(&spec, &node));
        spec.node_selector = Some([("zone".to_string(), "a".to_string())].into());
        assert!(placement_matches(&spec, &node));
        let req = |key: &str, op: &str, values: &[&str]| NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        };
        let labels = &node.labels;
        assert!(expression_matches(&req("zone", "In", &["a", "b"]), labels));
        assert!(!expression_matches(&req("zone", "NotIn", &["a"]), labels));
        assert!(expression_matches(&req("zone", "Exists", &[]), labels));
        assert!(expression_matches(&req("gpu", "DoesNotExist", &[]), labels));
        assert!(expression_matches(&req("rank", "Gt", &["4"]), labels));
        assert!(!expression_matches(&req("rank", "Lt", &["4"]), labels));
    }
}
