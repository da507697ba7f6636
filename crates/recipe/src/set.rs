//! Splits the inputs into a SET of recipes, each judged only with its own inputs.
//!
//! * A kustomization not used as a base by another one is a recipe: what its `resources`,
//!   `components` and patch files render to.
//! * A DynamoGraphDeployment, LLMInferenceService or DisaggregatedSet is a whole deployment:
//!   one recipe each (with the partial documents that patch it).
//! * Plain workloads (Deployment/StatefulSet/Job/Pod/LeaderWorkerSet …) of one directory and
//!   namespace are one recipe (prefill and decode are often two Deployments side by side).
//! * A ConfigMap or Secret joins a recipe only when the recipe names it (`envFrom`,
//!   `configMapKeyRef`, a volume, `envFromSecret`); among same-named ones the nearest in the
//!   directory tree wins. A TensorRT-LLM engine config joins when its file name is mentioned or
//!   it sits in the recipe's folder. Other objects (ComputeDomain, Service …) join the recipes of
//!   their folder.
//! * A provider overlay or a partial document (a patch of a recipe object) applies only when
//!   named: `--overlay FILE`, a file named on the command line, or a kustomization's
//!   `resources`/`patches`. One found by walking a directory is reported, never layered by its
//!   `metadata.name` alone (kustomize would not layer it either).

use crate::load::Document;
use crate::patch;
use crate::render;
use crate::yaml::{Kind, Node};
use std::collections::{BTreeMap, HashSet};

/// Kinds that hold a whole disaggregated deployment (every role) in one object.
pub const WHOLE_KINDS: &[&str] = &["DynamoGraphDeployment", "LLMInferenceService", "DisaggregatedSet"];
/// Kinds that run one pod template (or a leader/worker pair).
pub const POD_KINDS: &[&str] = &[
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "Pod",
    "LeaderWorkerSet",
];

/// One recipe and everything that applies to it.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// `recipes/x/deploy.yaml (DynamoGraphDeployment/x)`, `kustomize overlays/aws`, `dir/`.
    pub name: String,
    pub docs: Vec<Document>,
    /// Problems met while rendering it (a patch file missing, a remote base).
    pub notes: Vec<String>,
    /// Files read to render it that hold no document of their own (kustomize patch files).
    pub files: Vec<String>,
}

/// The inputs as recipes.
#[derive(Debug, Default)]
pub struct RecipeSet {
    pub recipes: Vec<Recipe>,
    /// Provider overlays found in directories and applied to nothing.
    pub unused_overlays: Vec<String>,
    /// Partial documents (patches) found in directories that nothing references: `file:line (Kind/name)`.
    pub unused_patches: Vec<String>,
    /// Every Secret in the inputs: their values are masked in every recipe's output.
    pub secrets: Vec<Document>,
    /// Kustomize resources/bases that are not on disk (`kustomization:line: `path``): such a
    /// recipe cannot be rendered here.
    pub missing_bases: Vec<String>,
    /// Kinds seen that no recipe reader handles (for the "unsupported" error).
    pub unsupported: Vec<String>,
}

fn is_engine_config(d: &Document) -> bool {
    d.kind().is_none() && d.root.get("cache_transceiver_config").is_some()
}

/// The kustomizations' recipes (a kustomization no other renders, with objects of its own) and
/// the folder layers (one that renders no object: a Component, a patch-only kustomization beside
/// the recipe, which patches the recipes of its folder and below). Marks every file they read
/// as `claimed` and records missing bases in `set`.
fn kustomize_recipes(
    docs: &[Document],
    set: &mut RecipeSet,
    claimed: &mut HashSet<String>,
) -> (Vec<Recipe>, Vec<Document>) {
    let mut kustomizations: Vec<(&Document, render::Rendered)> = Vec::new();
    for d in docs.iter().filter(|d| d.root.is_map() && render::is_kustomization(d)) {
        let r = render::kustomize(d);
        set.missing_bases.extend(r.missing.iter().cloned());
        kustomizations.push((d, r));
    }
    // A kustomization that another one renders is a base, not a recipe of its own.
    let mut bases: HashSet<String> = HashSet::new();
    // Compared as normalised paths: `overlays/aws/../../base/x.yaml` is `base/x.yaml`.
    for (k, r) in &kustomizations {
        let own = render::same_file(&k.source);
        for f in r.files.iter().map(|f| render::same_file(f)).filter(|f| *f != own) {
            bases.insert(f);
        }
        claimed.extend(r.files.iter().map(|f| render::same_file(f)));
    }
    let mut kustomize_recipes = Vec::new();
    // A kustomization that renders no object of its own (a Component, a patch-only
    // kustomization beside the recipe) patches the recipes of its folder and below.
    let mut folder_layers: Vec<Document> = Vec::new();
    for (k, r) in kustomizations {
        if bases.contains(&render::same_file(&k.source)) {
            continue;
        }
        if r.docs.iter().all(render::is_kustomization) {
            claimed.remove(&render::same_file(&k.source));
            folder_layers.extend(r.docs);
            continue;
        }
        kustomize_recipes.push(Recipe {
            name: format!("kustomize {}", k.dir()),
            docs: r.docs,
            notes: r.notes,
            files: r.files,
        });
    }
    (kustomize_recipes, folder_layers)
}

/// Splits `docs` (in load order) into recipes; `overlays` are the named provider overlays.
pub fn split(docs: &[Document], overlays: &[Document]) -> RecipeSet {
    let mut set = RecipeSet::default();
    let mut named_overlays: Vec<Document> = overlays.to_vec();
    let mut claimed: HashSet<String> = HashSet::new();
    let (kustomize_recipes, folder_layers) = kustomize_recipes(docs, &mut set, &mut claimed);
    let rendered: Vec<Document> = kustomize_recipes.iter().flat_map(|r| r.docs.iter().cloned()).collect();
    let all_docs: Vec<&Document> = docs.iter().chain(rendered.iter()).collect();
    let free: Vec<&Document> = docs
        .iter()
        .filter(|d| d.root.is_map() && !claimed.contains(&render::same_file(&d.source)))
        .collect();
    for d in &free {
        if d.kind() == Some("Secret") {
            set.secrets.push((*d).clone());
        }
        if d.kind().is_none() && crate::resolve::is_overlay(&d.root) {
            if d.from_dir {
                set.unused_overlays.push(d.source.clone());
            } else {
                named_overlays.push((*d).clone());
            }
        }
    }
    for r in &kustomize_recipes {
        set.secrets
            .extend(r.docs.iter().filter(|d| d.kind() == Some("Secret")).cloned());
    }
    // Whole deployments, one recipe each; plain workloads grouped by folder and namespace.
    let mut recipes: Vec<Recipe> = kustomize_recipes;
    let mut by_folder: BTreeMap<(String, String), Vec<&Document>> = BTreeMap::new();
    let mut folder_order: Vec<(String, String)> = Vec::new();
    // Whether a document is partial walks its whole tree: decided once per document, not once per
    // pair of documents (a recipe with hundreds of patches of a 12,000-entry env list took a
    // minute: `hostile_sizes_stay_linear`).
    let bases = complete_objects(&all_docs);
    let patches: Vec<&Document> = free
        .iter()
        .copied()
        .filter(|p| !p.from_dir && patch::is_partial(&p.root))
        .collect();
    for d in &free {
        let Some(kind) = d.kind() else { continue };
        // A patch of an object anywhere in the inputs (a kustomize base included) is not a
        // recipe of its own.
        if patch::is_partial(&d.root) && bases.contains(&(d.kind(), d.name())) {
            if d.from_dir {
                set.unused_patches
                    .push(format!("{} ({kind}/{})", d.location(), d.name().unwrap_or("unnamed")));
            }
            continue;
        }
        if WHOLE_KINDS.contains(&kind) {
            recipes.push(Recipe {
                name: format!("{} ({kind}/{})", d.source, d.name().unwrap_or("unnamed")),
                docs: vec![(*d).clone()],
                notes: Vec::new(),
                files: Vec::new(),
            });
        } else if POD_KINDS.contains(&kind) {
            let ns = d
                .root
                .path(&["metadata", "namespace"])
                .and_then(Node::as_str)
                .unwrap_or("")
                .to_string();
            let key = (d.dir().to_string(), ns);
            if !by_folder.contains_key(&key) {
                folder_order.push(key.clone());
            }
            by_folder.entry(key).or_default().push(d);
        } else if !matches!(kind, "ConfigMap" | "Secret" | crate::kserve::CONFIG_KIND) && !render::is_kustomization(d) {
            let k = kind.to_string();
            if !set.unsupported.contains(&k) {
                set.unsupported.push(k);
            }
        }
    }
    for key in folder_order {
        let members = by_folder.remove(&key).unwrap_or_default();
        let mut files: Vec<&str> = members.iter().map(|d| d.source.as_str()).collect();
        files.dedup();
        let name = if files.len() == 1 {
            files[0].to_string()
        } else {
            format!("{}/ ({} files)", key.0, files.len())
        };
        recipes.push(Recipe {
            name,
            docs: members.into_iter().cloned().collect(),
            notes: Vec::new(),
            files: Vec::new(),
        });
    }
    for r in &mut recipes {
        let home = r.docs.first().map(|d| d.dir().to_string()).unwrap_or_default();
        let layers = folder_layers.iter().filter(|k| is_within(&home, k.dir()));
        r.docs.extend(layers.cloned());
        attach_patches(r, &patches);
        attach_referenced(r, &free);
        attach_isvc_configs(r, &free);
        attach_folder_objects(r, &free);
        r.docs.extend(named_overlays.iter().cloned());
    }
    set.recipes = recipes;
    set
}

/// The kind and name of every complete (not partial) document: the objects a patch can apply to.
fn complete_objects<'a>(all: &[&'a Document]) -> HashSet<(Option<&'a str>, Option<&'a str>)> {
    all.iter()
        .filter(|b| !patch::is_partial(&b.root))
        .map(|b| (b.kind(), b.name()))
        .collect()
}

/// Patches (partial documents with the same kind and name) of the recipe's objects, from files
/// named on the command line only: a patch found by walking a directory is never layered.
/// `patches` are the free documents that are such patches (partial, not from a directory walk).
fn attach_patches(r: &mut Recipe, patches: &[&Document]) {
    let ids: Vec<(Option<String>, Option<String>)> = r
        .docs
        .iter()
        .map(|d| (d.kind().map(str::to_string), d.name().map(str::to_string)))
        .collect();
    let dirs: Vec<String> = r.docs.iter().map(|d| d.dir().to_string()).collect();
    for p in patches {
        let id = (p.kind().map(str::to_string), p.name().map(str::to_string));
        if id.0.is_none() || !ids.contains(&id) {
            continue;
        }
        // A patch in the recipe's folder (or above it) is this recipe's; elsewhere it is another's.
        let near = dirs.iter().any(|d| is_within(d, p.dir()));
        let already = r.docs.iter().any(|d| d.source == p.source && d.index == p.index);
        if near && !already {
            r.docs.push((*p).clone());
        }
    }
}

/// `dir` is `ancestor` or lies below it.
fn is_within(dir: &str, ancestor: &str) -> bool {
    dir == ancestor || ancestor == "." || dir.starts_with(&format!("{ancestor}/"))
}

/// How many leading path components two directories share (the nearer, the larger).
fn closeness(a: &str, b: &str) -> usize {
    a.split('/').zip(b.split('/')).take_while(|(x, y)| x == y).count()
}

/// What a recipe's objects name: ConfigMaps and Secrets, and every scalar (for file names).
#[derive(Default)]
struct Refs {
    configmaps: Vec<String>,
    secrets: Vec<String>,
    words: String,
}

fn collect_refs(docs: &[Document]) -> Refs {
    let mut refs = Refs::default();
    for d in docs {
        let mut stack: Vec<(&str, &Node)> = vec![("", &d.root)];
        while let Some((key, n)) = stack.pop() {
            match &n.kind {
                Kind::Map(entries) => {
                    let name = n.str_at("name").map(str::to_string);
                    match (key, name) {
                        ("configMapRef" | "configMapKeyRef" | "configMap", Some(name)) => refs.configmaps.push(name),
                        ("secretRef" | "secretKeyRef", Some(name)) => refs.secrets.push(name),
                        _ => {}
                    }
                    if key == "secret"
                        && let Some(s) = n.str_at("secretName")
                    {
                        refs.secrets.push(s.to_string());
                    }
                    stack.extend(entries.iter().map(|(k, v)| (k.as_str(), v)));
                }
                Kind::Seq(items) => stack.extend(items.iter().map(|i| (key, i))),
                Kind::Scalar(s) => {
                    if key == "envFromSecret" {
                        refs.secrets.push(s.trim().to_string());
                    }
                    if refs.words.len() < crate::load::MAX_INPUT_BYTES {
                        refs.words.push_str(s);
                        refs.words.push(' ');
                    }
                }
                Kind::Null => {}
            }
        }
    }
    refs
}

/// ConfigMaps/Secrets the recipe names (nearest same-named one wins) and engine config files
/// it mentions or keeps in its folder.
fn attach_referenced(r: &mut Recipe, free: &[&Document]) {
    let refs = collect_refs(&r.docs);
    let home = r.docs.first().map(|d| d.dir().to_string()).unwrap_or_default();
    let home_files: HashSet<String> = r.docs.iter().map(|d| d.source.clone()).collect();
    // ConfigMaps and Secrets shipped in the recipe's own file are part of it.
    for d in free.iter().filter(|d| matches!(d.kind(), Some("ConfigMap" | "Secret"))) {
        if home_files.contains(&d.source) && !r.docs.iter().any(|x| x.source == d.source && x.index == d.index) {
            r.docs.push((*d).clone());
        }
    }
    let mut add: Vec<Document> = Vec::new();
    for (kind, names) in [("ConfigMap", &refs.configmaps), ("Secret", &refs.secrets)] {
        let mut seen: HashSet<&str> = HashSet::new();
        for name in names {
            if !seen.insert(name) || r.docs.iter().any(|d| d.kind() == Some(kind) && d.name() == Some(name)) {
                continue;
            }
            let best = free
                .iter()
                .filter(|d| d.kind() == Some(kind) && d.name() == Some(name.as_str()))
                .max_by_key(|d| closeness(d.dir(), &home));
            if let Some(d) = best {
                add.push((*d).clone());
            }
        }
    }
    for d in free.iter().filter(|d| is_engine_config(d)) {
        let mentioned = refs.words.contains(d.file_name());
        if mentioned || d.dir() == home {
            add.push((*d).clone());
        }
    }
    r.docs.extend(add);
}

/// The LLMInferenceServiceConfig objects an LLMInferenceService reads, as KServe looks them up:
/// those its `spec.baseRefs` name, and the well-known `kserve-config-llm-*` ones (which replace
/// the built-in copies). Among same-named ones the nearest wins.
fn attach_isvc_configs(r: &mut Recipe, free: &[&Document]) {
    let services: Vec<&Document> = r
        .docs
        .iter()
        .filter(|d| d.kind() == Some("LLMInferenceService"))
        .collect();
    if services.is_empty() {
        return;
    }
    let mut names: Vec<String> = Vec::new();
    for s in &services {
        let refs = s.root.path(&["spec", "baseRefs"]).map(Node::as_seq).unwrap_or_default();
        names.extend(refs.iter().filter_map(|n| n.str_at("name")).map(str::to_string));
    }
    let home = services[0].dir().to_string();
    let configs: Vec<&&Document> = free
        .iter()
        .filter(|d| d.kind() == Some(crate::kserve::CONFIG_KIND))
        .collect();
    let mut add: Vec<Document> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for d in &configs {
        let Some(name) = d.name() else { continue };
        let wanted = names.iter().any(|n| n == name) || name.starts_with("kserve-config-llm-");
        if !wanted || !seen.insert(name) {
            continue;
        }
        let best = configs
            .iter()
            .filter(|c| c.name() == Some(name))
            .max_by_key(|c| closeness(c.dir(), &home));
        if let Some(c) = best {
            add.push((**c).clone());
        }
    }
    r.docs.extend(add);
}

/// Objects of other kinds (ComputeDomain, ResourceClaimTemplate, Service …) in the recipe's
/// folder: a ComputeDomain decides whether a claim is an NVLink fabric.
fn attach_folder_objects(r: &mut Recipe, free: &[&Document]) {
    let dirs: HashSet<String> = r.docs.iter().map(|d| d.dir().to_string()).collect();
    let mut add = Vec::new();
    for d in free {
        let Some(kind) = d.kind() else { continue };
        let other = !WHOLE_KINDS.contains(&kind)
            && !POD_KINDS.contains(&kind)
            && !matches!(kind, "ConfigMap" | "Secret" | crate::kserve::CONFIG_KIND)
            && !render::is_kustomization(d);
        if other && dirs.contains(d.dir()) {
            add.push((*d).clone());
        }
    }
    r.docs.extend(add);
}
