//! Recipe kinds that hold prefill and decode in one object:
//!
//! * KServe `LLMInferenceService` (serving.kserve.io): `spec.template` is the decode (or the only)
//!   pod spec, `spec.worker` its multi-node workers, `spec.prefill.{template,worker}` the prefill
//!   side; `parallelism` gives the node span. A recipe that names no KV backend gets the one
//!   KServe's P/D configs inject (vLLM with NixlConnector).
//! * llm-d `DisaggregatedSet` (kubernetes-sigs/lws `api/disaggregatedset/v1`): `spec.roles[]`,
//!   each named by its role and holding a LeaderWorkerSet spec.
//!
//! Both fill the same `RoleEnv` as every other shape, so every rule applies unchanged.

use crate::model::{Role, RoleEnv};
use crate::patch::Merged;
use crate::podspec;
use crate::resolve::{Resolution, infer_role, label_words};
use crate::yaml::Node;

/// Nodes spanned by one role: KServe `parallelism.{data/dataLocal}` or an LWS `size`.
fn node_span(entry: &Node) -> Option<u32> {
    let num = |path: &[&str]| {
        entry
            .path(path)
            .and_then(Node::as_str)
            .and_then(|s| s.trim().parse::<u32>().ok())
    };
    if let Some(size) = num(&["leaderWorkerTemplate", "size"]) {
        return Some(size);
    }
    let data = num(&["parallelism", "data"])?;
    let local = num(&["parallelism", "dataLocal"]).unwrap_or(data).max(1);
    Some(data.div_ceil(local))
}

struct Part<'a> {
    role: Role,
    name: String,
    layer: String,
    spec: &'a Node,
    span: Option<u32>,
}

fn add_roles(res: &mut Resolution, m: &Merged, parts: Vec<Part<'_>>, platform_default: Option<&str>) {
    let doc = &m.doc;
    let kind = doc.kind().unwrap_or("Recipe");
    let name = doc.name().unwrap_or("unnamed");
    let workload = format!("{kind}/{name}");
    for p in parts {
        let mut r = RoleEnv::new(p.role.clone(), &p.name, &workload, &workload, &doc.source);
        r.sources = m.sources.clone();
        r.layers.push(format!("{}.containers[].env", p.layer));
        // A spec merged from several files (KServe baseRefs, patches): a line may be any one's.
        podspec::apply_pod_spec(&mut r, p.spec, &p.layer, &m.sources.join("+"));
        r.node_count = p.span;
        if r.engine.framework.is_none() && platform_default.is_some() {
            r.engine.framework = Some("vllm".into());
        }
        r.engine.platform_default = platform_default.map(str::to_string);
        let labels = label_words(doc.root.get("metadata"));
        // The object's structure names the role; the engine's own flags may refine a worker.
        r.role = match p.role {
            Role::Worker => infer_role(&[], &r, &labels),
            known => known,
        };
        res.roles.push(r);
    }
}

/// KServe `LLMInferenceService`, merged over the well-known configs and `baseRefs` KServe
/// applies (`configs`: the LLMInferenceServiceConfig objects among the inputs; see `kserve`).
pub(crate) fn llm_inference_service(res: &mut Resolution, m: &Merged, configs: &[&Merged]) {
    let eff = crate::kserve::effective(m, configs);
    res.notes.extend(eff.notes.iter().cloned());
    let m = &eff.merged;
    let Some(spec) = m.doc.root.get("spec") else { return };
    let name = m.doc.name().unwrap_or("llmisvc").to_string();
    let prefill = spec.get("prefill");
    let main_role = if prefill.is_some() { Role::Decode } else { Role::Worker };
    let mut parts = Vec::new();
    let span = node_span(spec);
    if let Some(t) = spec.get("template").filter(|t| t.get("containers").is_some()) {
        parts.push(Part {
            role: main_role.clone(),
            name: format!("{name}/{}", main_role.as_str()),
            layer: "spec.template".into(),
            spec: t,
            span,
        });
    }
    if let Some(w) = spec.get("worker").filter(|t| t.get("containers").is_some()) {
        parts.push(Part {
            role: main_role.clone(),
            name: format!("{name}/{}-worker", main_role.as_str()),
            layer: "spec.worker".into(),
            spec: w,
            span,
        });
    }
    if let Some(p) = prefill {
        let span = node_span(p);
        for (key, suffix) in [("template", ""), ("worker", "-worker")] {
            if let Some(t) = p.get(key).filter(|t| t.get("containers").is_some()) {
                parts.push(Part {
                    role: Role::Prefill,
                    name: format!("{name}/prefill{suffix}"),
                    layer: format!("spec.prefill.{key}"),
                    spec: t,
                    span,
                });
            }
        }
    }
    // KServe's P/D well-known configs start vLLM with NixlConnector over UCX when the recipe's
    // own container names no connector (config-llm-prefill/decode-template).
    let default = prefill
        .is_some()
        .then_some("KServe LLMInferenceService P/D default (vLLM NixlConnector over UCX)");
    let entrypoints: Vec<Option<Node>> = parts.iter().map(|p| main_command(p.spec)).collect();
    let first = res.roles.len();
    add_roles(res, m, parts, default);
    for (r, cmd) in res.roles[first..].iter_mut().zip(entrypoints) {
        r.layers.splice(0..0, eff.layers.iter().cloned());
        crate::kserve::derive_roce(r, cmd.as_ref());
    }
}

/// The `command` of the pod's `main` container (KServe's name for the engine), else the first.
fn main_command(pod: &Node) -> Option<Node> {
    let containers = pod.get("containers")?.as_seq();
    let main = containers
        .iter()
        .find(|c| c.str_at("name") == Some("main"))
        .or_else(|| containers.first())?;
    main.get("command").cloned()
}

/// llm-d `DisaggregatedSet` (`disaggregatedset.x-k8s.io`), as upstream defines it in
/// kubernetes-sigs/lws `api/disaggregatedset/v1/disaggregatedset_types.go`: `spec.roles[]`, each
/// `{name, metadata, spec: LeaderWorkerSetSpec}` (`LeaderWorkerSetTemplateSpec` inlined), so the
/// pods are `spec.roles[].spec.leaderWorkerTemplate.{leaderTemplate,workerTemplate}` and the
/// node span is its `size`. The earlier `v1alpha1` (`api/disaggregatedset/v1alpha1/…`) inlines
/// the `LeaderWorkerSetSpec` itself: `spec.roles[].leaderWorkerTemplate`. The role is the entry's
/// `name` (`prefill`, `decode`; other names are workers whose engine flags may say more).
pub(crate) fn disaggregated_set(res: &mut Resolution, m: &Merged) {
    let Some(spec) = m.doc.root.get("spec") else { return };
    let name = m.doc.name().unwrap_or("disaggregatedset").to_string();
    let mut parts = Vec::new();
    for item in spec.get("roles").map(Node::as_seq).unwrap_or_default() {
        let label = item.str_at("name").unwrap_or("role");
        let role = Role::from_word(label)
            .filter(|r| matches!(r, Role::Prefill | Role::Decode))
            .unwrap_or(Role::Worker);
        // v1: the LWS spec sits under `spec`; v1alpha1: inline in the role entry.
        let lws = item
            .get("spec")
            .filter(|s| s.get("leaderWorkerTemplate").is_some())
            .unwrap_or(item);
        let Some(template) = lws.get("leaderWorkerTemplate") else {
            continue;
        };
        let span = node_span(lws);
        for (part, key) in [("leader", "leaderTemplate"), ("worker", "workerTemplate")] {
            let Some(pod) = template.path(&[key, "spec"]).filter(|n| n.get("containers").is_some()) else {
                continue;
            };
            parts.push(Part {
                role: role.clone(),
                name: format!("{name}/{label}-{part}"),
                layer: format!("spec.roles[{label}].leaderWorkerTemplate.{key}.spec"),
                spec: pod,
                span,
            });
        }
    }
    add_roles(res, m, parts, None);
}
