//! Resolves the effective settings of every role across a recipe's layers.
//!
//! Precedence (lowest first; a later layer replaces a variable set by an earlier one, and
//! `envFrom` never overrides an explicit `env` entry, as in Kubernetes):
//!
//! 1. DGD `spec.envs` (deployment-wide);
//! 2. DGD `spec.services.<N>.envs` / v1beta1 `spec.components[].envs` (+ `envFromSecret`);
//! 3. the pod template's main container `env` (`extraPodSpec.mainContainer.env`,
//!    `podTemplate.spec.containers[main].env`, `spec.template.spec.containers[…].env`);
//! 4. later documents with the same kind and name, and kustomize inline patches
//!    (strategic merge / JSON 6902; `$patch: delete` removes), folded into the base first;
//! 5. provider overlay profiles (`env:` map, `device:`, `securityContext:`), applied last to
//!    the roles they target, because they are appended to each worker's env.

use crate::claims::{ClaimTemplate, DeviceKind};
use crate::load::Document;
use crate::mask::{self, Masker};
use crate::model::{Role, RoleEnv};
use crate::patch::{self, Merged};
use crate::podspec;
use crate::yaml::{Kind, Node};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Everything the checks need.
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    pub roles: Vec<RoleEnv>,
    /// Problems that make the resolution doubtful (inline patches not applied, …).
    pub notes: Vec<String>,
    /// Files read, in order.
    pub sources: Vec<String>,
    /// Documents that were neither workloads, overlays nor known support objects.
    pub ignored: Vec<String>,
    /// The inputs' ResourceClaimTemplates, by name (`probe env`'s DRA rules read them).
    pub(crate) claim_templates: BTreeMap<String, ClaimTemplate>,
    /// The inputs' ComputeDomains: name and the claim template of their channel.
    pub(crate) compute_domains: Vec<(String, String)>,
    pub(crate) masker: Masker,
}

impl Resolution {
    /// Masks secrets in a line meant for output.
    pub fn mask(&self, text: &str) -> String {
        self.masker.mask(text)
    }

    /// Remembers a Secret's values (plain and base64-decoded) so no line can print them.
    pub fn remember_secret_document(&mut self, doc: &Document) {
        remember_secret(&mut self.masker, doc);
    }

    /// Remembers every secret value `secrets` holds (a [`secrets_masker`] of the inputs' Secret
    /// documents, built once for all the recipes that share them).
    pub fn remember_secrets(&mut self, secrets: &Masker) {
        self.masker.merge(secrets);
    }
}

/// A masker of every value of `docs` (Secret documents): what [`Resolution::remember_secret_document`]
/// remembers for each, read once.
pub fn secrets_masker(docs: &[Document]) -> Masker {
    let mut masker = Masker::default();
    for doc in docs {
        remember_secret(&mut masker, doc);
    }
    masker
}

fn remember_secret(masker: &mut Masker, doc: &Document) {
    for (_, text) in crate::configmaps::secret_entries(doc) {
        masker.add(&text);
    }
    // The base64 text itself is as secret as what it encodes.
    for (_, v) in doc.root.get("data").map(Node::as_map).unwrap_or_default() {
        if let Some(s) = v.as_str() {
            masker.add(s);
        }
    }
}

/// Resolves all documents (already loaded, in order) into per-role settings.
pub fn resolve(docs: &[Document]) -> Resolution {
    let mut res = Resolution::default();
    let mut seen: HashSet<&str> = HashSet::new();
    for d in docs {
        if seen.insert(&d.source) {
            res.sources.push(d.source.clone());
        }
    }
    let (merged, notes) = patch::merge_documents(docs);
    res.notes = notes;
    let mut overlays = Vec::new();
    let mut configmaps = Vec::new();
    let mut secrets = Vec::new();
    let mut dgd_names: HashMap<&str, usize> = HashMap::new();
    for m in merged.iter().filter(|m| m.doc.kind() == Some("DynamoGraphDeployment")) {
        *dgd_names.entry(m.doc.name().unwrap_or("")).or_default() += 1;
    }
    let isvc_configs: Vec<&Merged> = merged
        .iter()
        .filter(|m| m.doc.kind() == Some(crate::kserve::CONFIG_KIND))
        .collect();
    for m in &merged {
        let doc = &m.doc;
        if !doc.root.is_map() {
            continue;
        }
        match doc.kind() {
            Some("DynamoGraphDeployment") => {
                // Variants sharing a name (deploy.yaml, deploy_hopper.yaml) are separate deployments.
                let twins = doc.name().and_then(|n| dgd_names.get(n)).copied().unwrap_or(0);
                dgd(&mut res, m, twins > 1)
            }
            Some("Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet" | "Job") => {
                if let Some(spec) = doc.root.path(&["spec", "template", "spec"]) {
                    workload(&mut res, m, spec, None);
                }
            }
            Some("CronJob") => {
                if let Some(spec) = doc.root.path(&["spec", "jobTemplate", "spec", "template", "spec"]) {
                    workload(&mut res, m, spec, None);
                }
            }
            Some("Pod") => {
                if let Some(spec) = doc.root.get("spec") {
                    workload(&mut res, m, spec, None);
                }
            }
            Some("LeaderWorkerSet") => lws(&mut res, m),
            Some("LLMInferenceService") => crate::kinds::llm_inference_service(&mut res, m, &isvc_configs),
            // Read by the LLMInferenceService that references it (baseRefs, well-known names).
            Some(crate::kserve::CONFIG_KIND) => {}
            Some("DisaggregatedSet") => crate::kinds::disaggregated_set(&mut res, m),
            Some("Secret") => {
                res.remember_secret_document(doc);
                secrets.push(m);
            }
            Some("ConfigMap") => configmaps.push(m),
            None if is_overlay(&doc.root) => overlays.push(m),
            // A TensorRT-LLM engine config file (the source of the engine ConfigMap).
            None if doc.root.get("cache_transceiver_config").is_some() => configmaps.push(m),
            other => res.ignored.push(format!(
                "{} ({})",
                other.unwrap_or("document without kind"),
                doc.location()
            )),
        }
    }
    res.claim_templates = crate::claims::claim_templates(&merged);
    res.compute_domains = crate::claims::compute_domains(&merged);
    classify_claims(&mut res.roles, &res.claim_templates, &res.compute_domains);
    crate::configmaps::resolve_configmap_refs(&mut res.roles, &configmaps, &secrets);
    for cm in configmaps {
        crate::configmaps::apply_configmap(&mut res, cm);
    }
    for ov in overlays {
        apply_overlay(&mut res, ov);
    }
    // The container's script runs after the kubelet set `env`: its exports win.
    for r in &mut res.roles {
        let shell = std::mem::take(&mut r.shell_env);
        if !shell.is_empty() {
            r.layers.push("command (shell export / inline assignment)".into());
        }
        for v in shell {
            r.set_var(v);
        }
    }
    for r in &res.roles {
        for v in &r.env {
            if let Some(value) = v
                .literal()
                .filter(|val| mask::is_secret_name(&v.name) || mask::looks_like_token(val))
            {
                res.masker.add(value);
            }
        }
    }
    res
}

/// Whether a document is something `resolve` reads (a Kubernetes object, a provider profile or
/// an engine config file); input made only of other documents holds no recipe at all.
pub(crate) fn is_recipe_document(doc: &Document) -> bool {
    doc.root.is_map()
        && (doc.kind().is_some() || is_overlay(&doc.root) || doc.root.get("cache_transceiver_config").is_some())
}

/// Top-level keys of a provider profile (`recipes/addons/providers/*.yaml`).
const OVERLAY_KEYS: &[&str] = &[
    "provider",
    "fabric",
    "target",
    "image",
    "device",
    "annotations",
    "securityContext",
    "env",
    "kv_backend",
    "backend",
    "skip",
    "place",
];

/// A kind-less document made only of provider-profile keys, with something to apply. Any other
/// key (a CI workflow's `env:`, say) means it is not an overlay.
pub(crate) fn is_overlay(root: &Node) -> bool {
    let entries = root.as_map();
    !entries.is_empty()
        && entries.iter().all(|(k, _)| OVERLAY_KEYS.contains(&k.as_str()))
        && ["env", "device", "securityContext"]
            .iter()
            .any(|k| root.get(k).is_some())
}

pub(crate) fn label_words(meta: Option<&Node>) -> Vec<String> {
    let mut words = Vec::new();
    for key in ["labels", "annotations"] {
        for (k, v) in meta.and_then(|m| m.get(key)).map(Node::as_map).unwrap_or_default() {
            let k = k.to_ascii_lowercase();
            let interesting = k.contains("role") || k.contains("component") || k.contains("mode");
            if let Some(v) = v.as_str().filter(|_| interesting) {
                words.push(v.to_string());
            }
        }
    }
    words
}

/// Role from, in order: an explicit type field, the engine's own flags, labels, the name.
pub(crate) fn infer_role(explicit: &[Option<&str>], role: &RoleEnv, labels: &[String]) -> Role {
    for e in explicit.iter().flatten() {
        match Role::from_word(e) {
            Some(Role::Worker) | None => {}
            Some(r) => return r,
        }
    }
    if let Some(r) = &role.engine.role_hint {
        return r.clone();
    }
    for l in labels {
        if let Some(r @ (Role::Prefill | Role::Decode | Role::Frontend)) = Role::from_word(l) {
            return r;
        }
    }
    let name = role.component.to_ascii_lowercase();
    if name.contains("prefill") {
        Role::Prefill
    } else if name.contains("decode") {
        Role::Decode
    } else if name.contains("frontend") || name.contains("router") {
        Role::Frontend
    } else if explicit
        .iter()
        .flatten()
        .any(|e| Role::from_word(e) == Some(Role::Worker))
        || role.resources.gpus.is_some()
        || role.engine.framework.is_some()
        || name.contains("worker")
        // Whoever sets transport variables means to move data with them.
        || role.env.iter().any(|v| icb_core::fabric::is_transport_setting(&v.name))
    {
        Role::Worker
    } else {
        Role::Other("other".to_string())
    }
}

fn dgd(res: &mut Resolution, m: &Merged, variant: bool) {
    let doc = &m.doc;
    let name = doc.name().unwrap_or("unnamed");
    let workload_name = format!("DynamoGraphDeployment/{name}");
    let source = m.sources.join("+");
    let group = if variant {
        format!("{workload_name} in {source}")
    } else {
        workload_name.clone()
    };
    let spec = doc.root.get("spec");
    let framework = spec
        .and_then(|s| s.str_at("backendFramework"))
        .map(str::to_ascii_lowercase);
    let global_env = spec.and_then(|s| s.get("envs"));
    let mut components: Vec<(String, &Node, bool)> = Vec::new();
    for (svc_name, svc) in spec
        .and_then(|s| s.get("services"))
        .map(Node::as_map)
        .unwrap_or_default()
    {
        components.push((svc_name.clone(), svc, false));
    }
    for comp in spec
        .and_then(|s| s.get("components"))
        .map(Node::as_seq)
        .unwrap_or_default()
    {
        let cname = comp
            .str_at("name")
            .or_else(|| comp.str_at("componentName"))
            .unwrap_or("component");
        components.push((cname.to_string(), comp, true));
    }
    for (cname, svc, beta) in components {
        let mut r = RoleEnv::new(Role::Worker, &cname, &workload_name, &group, &source);
        r.sources = m.sources.clone();
        r.engine.framework = framework.clone();
        if let Some(env) = global_env {
            r.layers.push("spec.envs".into());
            podspec::apply_env(&mut r, env, "spec.envs", &doc.source);
        }
        let base = if beta {
            format!("spec.components[{cname}]")
        } else {
            format!("spec.services.{cname}")
        };
        if let Some(secret) = svc.str_at("envFromSecret") {
            r.env_from.push(crate::model::EnvFrom {
                kind: "secret".into(),
                name: secret.to_string(),
                origin: podspec::origin(&format!("{base}.envFromSecret"), &doc.source, svc),
            });
        }
        if let Some(env) = svc.get("envs") {
            r.layers.push(format!("{base}.envs"));
            podspec::apply_env(&mut r, env, &format!("{base}.envs"), &doc.source);
        }
        if let Some(resources) = svc.get("resources") {
            podspec::apply_resources(&mut r, resources);
        }
        // Dynamo v1beta1 writes `sharedMemorySize: 200Gi` on the component.
        if let Some(size) = svc.str_at("sharedMemorySize") {
            r.shm = Some((size.to_string(), podspec::parse_quantity(size)));
            r.shm_origin = Some(format!("{base}.sharedMemorySize"));
        }
        if let Some(shm) = svc.get("sharedMemory") {
            if shm.get("disabled").is_some_and(Node::is_true) {
                r.shm = Some(("disabled".into(), Some(0)));
            } else if let Some(size) = shm.str_at("size") {
                r.shm = Some((size.to_string(), podspec::parse_quantity(size)));
            }
            r.shm_origin = Some(format!("{base}.sharedMemory"));
        }
        if let Some(extra) = svc.get("extraPodSpec") {
            let layer = format!("{base}.extraPodSpec.mainContainer");
            let mounts = match extra.get("mainContainer") {
                Some(mc) => {
                    r.layers.push(format!("{layer}.env"));
                    podspec::apply_container(&mut r, mc, &layer, &doc.source)
                }
                None => Vec::new(),
            };
            podspec::apply_pod_fields(&mut r, extra, &mounts, &format!("{base}.extraPodSpec"));
        }
        if let Some(pod) = svc.path(&["podTemplate", "spec"]) {
            let layer = format!("{base}.podTemplate.spec");
            r.layers.push(format!("{layer}.containers[main].env"));
            podspec::apply_pod_spec(&mut r, pod, &layer, &doc.source);
        }
        r.replicas = svc.str_at("replicas").map(str::to_string);
        r.node_count = svc
            .path(&["multinode", "nodeCount"])
            .and_then(Node::as_str)
            .and_then(|n| n.trim().parse().ok());
        let labels = label_words(svc.get("extraPodMetadata"));
        r.role = infer_role(
            &[
                svc.str_at("subComponentType"),
                svc.str_at("type"),
                svc.str_at("componentType"),
            ],
            &r,
            &labels,
        );
        res.roles.push(r);
    }
}

fn group_of(doc: &Document) -> String {
    let ns = doc
        .root
        .path(&["metadata", "namespace"])
        .and_then(Node::as_str)
        .unwrap_or("default");
    format!("namespace/{ns}")
}

fn workload(res: &mut Resolution, m: &Merged, spec: &Node, part: Option<(&str, &Node)>) {
    let doc = &m.doc;
    let kind = doc.kind().unwrap_or("Workload");
    let name = doc.name().unwrap_or("unnamed");
    let workload_name = match part {
        Some((p, _)) => format!("{kind}/{name} {p}"),
        None => format!("{kind}/{name}"),
    };
    let component = match part {
        Some((p, _)) => format!("{name}/{p}"),
        None => name.to_string(),
    };
    let mut r = RoleEnv::new(Role::Worker, &component, &workload_name, &group_of(doc), &doc.source);
    r.sources = m.sources.clone();
    let layer = match part {
        Some((p, _)) => format!("spec.leaderWorkerTemplate.{p}Template.spec"),
        None if kind == "Pod" => "spec".to_string(),
        None => "spec.template.spec".to_string(),
    };
    r.layers.push(format!("{layer}.containers[].env"));
    podspec::apply_pod_spec(&mut r, spec, &layer, &doc.source);
    r.replicas = doc
        .root
        .path(&["spec", "replicas"])
        .and_then(Node::as_str)
        .map(str::to_string);
    if let Some((_, size)) = part {
        r.node_count = size.as_str().and_then(|s| s.trim().parse().ok());
    }
    let mut labels = label_words(doc.root.get("metadata"));
    labels.extend(label_words(doc.root.path(&["spec", "template", "metadata"])));
    r.role = infer_role(&[], &r, &labels);
    res.roles.push(r);
}

fn lws(res: &mut Resolution, m: &Merged) {
    let Some(t) = m.doc.root.path(&["spec", "leaderWorkerTemplate"]) else {
        return;
    };
    let null = Node::new(t.line, Kind::Null);
    let size = t.get("size").unwrap_or(&null);
    if let Some(spec) = t.path(&["leaderTemplate", "spec"]) {
        workload(res, m, spec, Some(("leader", size)));
    }
    if let Some(spec) = t.path(&["workerTemplate", "spec"]) {
        workload(res, m, spec, Some(("worker", size)));
    }
}

fn apply_overlay(res: &mut Resolution, m: &Merged) {
    let root = &m.doc.root;
    let provider = root.str_at("provider").unwrap_or("overlay");
    let targets: Vec<Role> = match root.path(&["target", "match"]) {
        Some(n) if !n.as_seq().is_empty() => n
            .as_seq()
            .iter()
            .filter_map(Node::as_str)
            .filter_map(Role::from_word)
            .collect(),
        Some(n) => n.as_str().and_then(Role::from_word).into_iter().collect(),
        None => vec![Role::Prefill, Role::Decode, Role::Worker],
    };
    let layer = format!("overlay {provider}");
    let mut hit = false;
    for r in res.roles.iter_mut().filter(|r| targets.contains(&r.role)) {
        hit = true;
        r.layers.push(layer.clone());
        if !r.sources.contains(&m.doc.source) {
            r.sources.push(m.doc.source.clone());
        }
        if let Some(env) = root.get("env") {
            podspec::apply_env(r, env, &format!("{layer} env"), &m.doc.source);
        }
        for (name, count) in root.get("device").map(Node::as_map).unwrap_or_default() {
            if podspec::is_rdma_resource(name) {
                r.resources
                    .rdma
                    .insert(name.clone(), count.as_str().unwrap_or("?").to_string());
            }
        }
        if let Some(sc) = root.get("securityContext") {
            podspec::apply_security_context(r, sc);
        }
        if let Some(place) = root.str_at("place") {
            r.placement.advice = Some(place.to_string());
        }
        if let Some(f) = root.str_at("fabric") {
            r.fabric = Some(f.to_ascii_lowercase());
        }
        if let Some(b) = root.str_at("kv_backend") {
            r.overlay_backend = Some(b.to_string());
        }
    }
    if !hit {
        res.notes.push(format!(
            "{}: overlay `{provider}` targets no role present in the inputs; pass it with the recipe it applies to",
            m.doc.location()
        ));
    }
}

/// Sorts claims into ComputeDomain channels (an NVLink fabric), accelerators (GPU/XPU through
/// DRA) and the rest (NICs): by the device classes of a loaded ResourceClaimTemplate when there
/// is one (a template that asks for a GPU and a NIC gives the pod a NIC), else by the claim's and
/// template's names. An XPU or RDMA claim is never an MNNVL ComputeDomain just because its
/// template is unknown.
fn classify_claims(
    roles: &mut [RoleEnv],
    res_templates: &BTreeMap<String, ClaimTemplate>,
    domains: &[(String, String)],
) {
    let is_domain = icb_core::fabric::is_compute_domain_claim_name;
    let is_accelerator = crate::claims::is_accelerator_class;
    for r in roles {
        let res = &mut r.resources;
        let (mut domain, mut gpu) = (Vec::new(), Vec::new());
        for c in &res.claims {
            let template = res.template_of.get(c).map(String::as_str);
            let kinds: Option<Vec<DeviceKind>> = template
                .and_then(|t| res_templates.get(t))
                .filter(|t| !t.requests.is_empty())
                .map(|t| t.requests.iter().map(|q| q.kind).collect());
            let named = |f: &dyn Fn(&str) -> bool| f(c) || template.is_some_and(f);
            let by_template = template.is_some_and(|t| domains.iter().any(|(_, d)| d == t));
            match kinds {
                Some(k) if k.iter().all(|k| *k == DeviceKind::Domain) => domain.push(c.clone()),
                Some(k) if k.contains(&DeviceKind::Gpu) && !k.contains(&DeviceKind::Nic) => gpu.push(c.clone()),
                Some(_) => {}
                None if by_template || named(&is_domain) => domain.push(c.clone()),
                None if named(&is_accelerator) => gpu.push(c.clone()),
                None => {}
            }
        }
        res.domain_claims = domain;
        res.gpu_claims = gpu;
    }
}
