//! Kustomize-style layering: a later document with the same kind and name is a strategic-merge
//! patch of the earlier one, and `Kustomization`/`Component` documents contribute their inline
//! `patches` (strategic merge or JSON 6902). `$patch: delete` removes list items or fields.

use crate::load::Document;
use crate::yaml::{self, Kind, MAX_ITEMS, Node};
use std::collections::HashMap;

/// A document after patching, with every file that contributed to it (lowest first).
#[derive(Debug, Clone)]
pub struct Merged {
    pub doc: Document,
    pub sources: Vec<String>,
}

/// A real overlay stack has a handful of patches per object; each merge walks the object, so
/// the count is capped to keep hostile inputs linear.
const MAX_PATCHES: usize = 256;

/// Keys that identify list items in strategic merge (Kubernetes' `patchMergeKey`s we meet).
const MERGE_KEYS: &[&str] = &["name", "mountPath", "devicePath", "containerPort"];

fn identity(d: &Document) -> Option<(String, String, String)> {
    let kind = d.kind()?.to_string();
    let name = d.name()?.to_string();
    let ns = d
        .root
        .path(&["metadata", "namespace"])
        .and_then(Node::as_str)
        .unwrap_or("")
        .to_string();
    Some((kind, name, ns))
}

/// Whether a document reads as a patch rather than a whole object: it carries `$patch`-style
/// directives, or lacks what every complete object of its kind has (a `selector` for apps/v1
/// controllers, a component type for DGDs, a container image otherwise). A patch that only
/// bumps an image is still a patch because it has no selector.
pub fn is_partial(root: &Node) -> bool {
    let (has_type, directive) = scan(root, &["componentType", "subComponentType", "type"]);
    let (has_image, _) = scan(root, &["image"]);
    let complete = match root.str_at("kind") {
        Some("Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet") => root.path(&["spec", "selector"]).is_some(),
        Some("DynamoGraphDeployment") => has_type,
        _ => has_image,
    };
    directive || !complete
}

/// Whether any mapping key in the tree is one of `wanted`, and whether any is a `$` directive.
fn scan(root: &Node, wanted: &[&str]) -> (bool, bool) {
    let (mut found, mut directive) = (false, false);
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        match &n.kind {
            Kind::Map(entries) => {
                for (k, v) in entries {
                    directive |= k.starts_with('$');
                    found |= wanted.contains(&k.as_str());
                    stack.push(v);
                }
            }
            Kind::Seq(items) => stack.extend(items.iter()),
            _ => {}
        }
    }
    (found, directive)
}

/// Applies patches in load order. Problems with inline patches are returned as notes
/// (they make the resolved env doubtful but do not stop the probe).
pub fn merge_documents(docs: &[Document]) -> (Vec<Merged>, Vec<String>) {
    let mut out: Vec<Merged> = Vec::new();
    let mut notes = Vec::new();
    let mut kustomizations = Vec::new();
    let mut latest: HashMap<(String, String, String), usize> = HashMap::new();
    let mut patched: Vec<usize> = Vec::new();
    for d in docs {
        if crate::render::is_kustomization(d) {
            kustomizations.push(d);
            continue;
        }
        let id = identity(d);
        // A complete object with a name already seen is a variant (recipe folders keep several
        // deploy*.yaml with one metadata.name); only a partial one is a patch of the latest.
        let existing = match &id {
            Some(id) if is_partial(&d.root) => latest.get(id).copied(),
            _ => None,
        };
        match existing {
            Some(i) if patched[i] >= MAX_PATCHES => {
                if patched[i] == MAX_PATCHES {
                    notes.push(format!(
                        "{}: more than {MAX_PATCHES} patches of one object; the rest are ignored",
                        d.location()
                    ));
                }
                patched[i] += 1;
            }
            Some(i) => {
                patched[i] += 1;
                let base = &mut out[i];
                strategic_merge(&mut base.doc.root, &d.root);
                if !base.sources.contains(&d.source) {
                    base.sources.push(d.source.clone());
                }
            }
            None => {
                if let Some(id) = id {
                    latest.insert(id, out.len());
                }
                out.push(Merged {
                    doc: d.clone(),
                    sources: vec![d.source.clone()],
                });
                patched.push(0);
            }
        }
    }
    for k in kustomizations {
        apply_kustomization(k, &mut out, &mut notes);
        apply_transformers(k, &mut out, &mut notes);
    }
    (out, notes)
}

fn apply_kustomization(k: &Document, out: &mut [Merged], notes: &mut Vec<String>) {
    let mut patches: Vec<(Option<&Node>, String, usize)> = Vec::new();
    for key in ["patches", "patchesJson6902"] {
        for p in k.root.get(key).map(Node::as_seq).unwrap_or_default() {
            match p.str_at("patch") {
                Some(text) => patches.push((p.get("target"), text.to_string(), p.line)),
                None if p.get("path").is_some() => notes.push(format!(
                    "{}:{}: patch file `{}` is not inlined; pass it as an input to have it applied",
                    k.source,
                    p.line,
                    p.str_at("path").unwrap_or("?")
                )),
                None => {}
            }
        }
    }
    for p in k
        .root
        .get("patchesStrategicMerge")
        .map(Node::as_seq)
        .unwrap_or_default()
    {
        if let Some(text) = p.as_str().filter(|t| t.contains('\n')) {
            patches.push((None, text.to_string(), p.line));
        }
    }
    for (target, text, line) in patches {
        let label = format!("{}:{line}", k.source);
        let parsed = match yaml::parse_stream(&label, &text) {
            Ok(p) => p,
            Err(e) => {
                notes.push(format!("inline patch skipped: {e}"));
                continue;
            }
        };
        for raw in parsed {
            let patch = raw.root;
            let t_kind = target.and_then(|t| t.str_at("kind")).or_else(|| patch.str_at("kind"));
            let t_name = match target {
                Some(t) => t.str_at("name"),
                None => patch.path(&["metadata", "name"]).and_then(Node::as_str),
            };
            let mut hit = false;
            for m in out.iter_mut() {
                if t_kind.is_some_and(|tk| m.doc.kind() != Some(tk))
                    || t_name.is_some_and(|tn| m.doc.name() != Some(tn))
                {
                    continue;
                }
                hit = true;
                match &patch.kind {
                    Kind::Seq(ops) => {
                        for op in ops {
                            if let Err(e) = json6902(&mut m.doc.root, op) {
                                notes.push(format!("{label}: {e}"));
                            }
                        }
                    }
                    Kind::Map(_) => {
                        let mut body = patch.clone();
                        if let Kind::Map(entries) = &mut body.kind {
                            // The patch's own metadata must not rename its target.
                            entries.retain(|(k, _)| k != "metadata" && k != "apiVersion" && k != "kind");
                        }
                        strategic_merge(&mut m.doc.root, &body);
                    }
                    _ => {}
                }
                if !m.sources.contains(&k.source) {
                    m.sources.push(k.source.clone());
                }
            }
            if !hit {
                notes.push(format!("{label}: inline patch matches no loaded document"));
            }
        }
    }
}

/// One kustomize `images` entry: name, newName, newTag, digest.
type ImageRule<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);

/// Kustomize fields that can change what a recipe runs but are not rendered here.
const UNRENDERED: &[&str] = &[
    "configMapGenerator",
    "secretGenerator",
    "replacements",
    "helmCharts",
    "vars",
];

/// The kustomization's `images` (newName/newTag/digest) and `namespace`, which change the image
/// prefill and decode run (role symmetry) and their grouping. Generators and replacements are
/// named in a note: render with kustomize for those.
fn apply_transformers(k: &Document, out: &mut [Merged], notes: &mut Vec<String>) {
    for key in UNRENDERED.iter().filter(|key| k.root.get(key).is_some()) {
        notes.push(format!(
            "{}: `{key}` is not rendered here; for its effect run `kubectl kustomize {}` and pass the output (`-`)",
            k.source,
            k.dir()
        ));
    }
    let images: Vec<ImageRule> = k
        .root
        .get("images")
        .map(Node::as_seq)
        .unwrap_or_default()
        .iter()
        .filter_map(|i| {
            Some((
                i.str_at("name")?,
                i.str_at("newName"),
                i.str_at("newTag"),
                i.str_at("digest"),
            ))
        })
        .collect();
    let namespace = k.root.str_at("namespace");
    for m in out.iter_mut() {
        if !images.is_empty() {
            retag_images(&mut m.doc.root, &images);
        }
        if let (Some(ns), Kind::Map(entries)) = (namespace, &mut m.doc.root.kind)
            && let Some((_, meta)) = entries.iter_mut().find(|(k, _)| k == "metadata")
            && let Kind::Map(fields) = &mut meta.kind
        {
            fields.retain(|(k, _)| k != "namespace");
            fields.push(("namespace".into(), Node::new(meta.line, Kind::Scalar(ns.to_string()))));
        }
    }
}

/// Splits `repo/name:tag@digest` into (name, tag, digest).
fn image_parts(image: &str) -> (&str, Option<&str>, Option<&str>) {
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    // A ':' after the last '/' is a tag; before it, a registry port.
    match rest.rfind(':').filter(|&i| !rest[i..].contains('/')) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..]), digest),
        None => (rest, None, digest),
    }
}

fn retag_images(node: &mut Node, images: &[ImageRule]) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        match &mut n.kind {
            Kind::Map(entries) => {
                for (key, v) in entries.iter_mut() {
                    if key == "image"
                        && let Kind::Scalar(text) = &mut v.kind
                    {
                        let (name, tag, digest) = image_parts(text);
                        if let Some((_, new_name, new_tag, new_digest)) = images.iter().find(|i| i.0 == name) {
                            let name = new_name.unwrap_or(name);
                            *text = match (new_digest.or(digest.filter(|_| new_tag.is_none())), new_tag.or(tag)) {
                                (Some(d), _) => format!("{name}@{d}"),
                                (None, Some(t)) => format!("{name}:{t}"),
                                (None, None) => name.to_string(),
                            };
                        }
                    } else {
                        stack.push(v);
                    }
                }
            }
            Kind::Seq(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
}

fn directive(node: &Node) -> Option<&str> {
    node.str_at("$patch")
}

/// Drops `$patch` and other `$` directives from a node that is inserted as-is.
fn strip(node: &Node) -> Node {
    match &node.kind {
        Kind::Map(entries) => Node::new(
            node.line,
            Kind::Map(
                entries
                    .iter()
                    .filter(|(k, _)| !k.starts_with('$'))
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
        ),
        Kind::Seq(items) => Node::new(
            node.line,
            Kind::Seq(
                items
                    .iter()
                    .filter(|i| directive(i) != Some("delete"))
                    .map(strip)
                    .collect(),
            ),
        ),
        _ => node.clone(),
    }
}

/// Kubernetes strategic merge patch, reduced to what recipes use: maps merge, keyed lists
/// merge by key, `null` or `$patch: delete` removes, `$patch: replace` replaces.
pub fn strategic_merge(base: &mut Node, patch: &Node) {
    match (&mut base.kind, &patch.kind) {
        (Kind::Map(b), Kind::Map(p)) => {
            if directive(patch) == Some("replace") {
                *base = strip(patch);
                return;
            }
            // Indexed by key so that a hostile patch cannot make this quadratic; entries past
            // MAX_ITEMS are never read, so they are not carried either.
            b.truncate(MAX_ITEMS);
            let mut slots: Vec<Option<(String, Node)>> = std::mem::take(b).into_iter().map(Some).collect();
            let mut index: HashMap<String, usize> = HashMap::new();
            for (i, (k, _)) in slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|s| (i, s))) {
                index.insert(k.clone(), i);
            }
            for (k, pv) in p {
                if k.starts_with('$') {
                    continue;
                }
                let delete = matches!(pv.kind, Kind::Null) || directive(pv) == Some("delete");
                match (delete, index.get(k).copied()) {
                    (true, Some(i)) => {
                        slots[i] = None;
                        index.remove(k);
                    }
                    (true, None) => {}
                    (false, Some(i)) => {
                        if let Some((_, bv)) = slots[i].as_mut() {
                            if directive(pv) == Some("replace") {
                                *bv = strip(pv);
                            } else {
                                strategic_merge(bv, pv);
                            }
                        }
                    }
                    (false, None) => {
                        index.insert(k.clone(), slots.len());
                        slots.push(Some((k.clone(), strip(pv))));
                    }
                }
            }
            *b = slots.into_iter().flatten().collect();
        }
        (Kind::Seq(b), Kind::Seq(p)) => {
            let key = MERGE_KEYS.iter().find(|k| p.iter().any(|item| item.get(k).is_some()));
            let Some(key) = key else {
                *base = strip(patch);
                return;
            };
            b.truncate(MAX_ITEMS);
            let mut slots: Vec<Option<Node>> = std::mem::take(b).into_iter().map(Some).collect();
            let mut index: HashMap<String, usize> = HashMap::new();
            for (i, item) in slots.iter().enumerate() {
                if let Some(id) = item.as_ref().and_then(|n| n.str_at(key)) {
                    index.entry(id.to_string()).or_insert(i);
                }
            }
            for item in p {
                let id = item.str_at(key);
                let pos = id.and_then(|id| index.get(id).copied());
                match (directive(item), pos) {
                    (Some("delete"), Some(i)) => {
                        slots[i] = None;
                        if let Some(id) = id {
                            index.remove(id);
                        }
                    }
                    (Some("delete"), None) => {}
                    (_, Some(i)) => {
                        if let Some(n) = slots[i].as_mut() {
                            strategic_merge(n, item);
                        }
                    }
                    (_, None) => {
                        if let Some(id) = id {
                            index.insert(id.to_string(), slots.len());
                        }
                        slots.push(Some(strip(item)));
                    }
                }
            }
            *b = slots.into_iter().flatten().collect();
        }
        _ => *base = strip(patch),
    }
}

fn unescape(seg: &str) -> String {
    seg.replace("~1", "/").replace("~0", "~")
}

/// Why a JSON 6902 operation of a kustomization does not apply (the render notes it and goes on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PatchOpError {
    #[error("JSON patch op without `{0}`")]
    Missing(&'static str),
    #[error("JSON patch path `{0}` is empty")]
    EmptyPath(String),
    #[error("JSON patch path `{0}` does not exist in the target")]
    NoSuchPath(String),
    #[error("bad index in `{0}`")]
    BadIndex(String),
    #[error("index out of range in `{0}`")]
    OutOfRange(String),
    #[error("JSON patch op `{op}` at `{path}` is not supported here")]
    Unsupported { op: String, path: String },
}

/// One JSON 6902 operation (`add`, `replace`, `remove`) on a node tree.
fn json6902(root: &mut Node, op: &Node) -> Result<(), PatchOpError> {
    let kind = op.str_at("op").ok_or(PatchOpError::Missing("op"))?;
    let path = op.str_at("path").ok_or(PatchOpError::Missing("path"))?;
    let segs: Vec<String> = path.split('/').skip(1).map(unescape).collect();
    let Some((last, parents)) = segs.split_last() else {
        return Err(PatchOpError::EmptyPath(path.to_string()));
    };
    let mut cur = root;
    for s in parents {
        cur = match &mut cur.kind {
            Kind::Map(entries) => entries.iter_mut().find(|(k, _)| k == s).map(|(_, v)| v),
            Kind::Seq(items) => s.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| PatchOpError::NoSuchPath(path.to_string()))?;
    }
    let value = op.get("value").cloned().unwrap_or(Node::new(op.line, Kind::Null));
    let bad_index = || PatchOpError::BadIndex(path.to_string());
    let out_of_range = || PatchOpError::OutOfRange(path.to_string());
    match (&mut cur.kind, kind) {
        (Kind::Seq(items), "add") if last == "-" => items.push(value),
        (Kind::Seq(items), "add") => {
            let i = last.parse::<usize>().map_err(|_| bad_index())?;
            if i > items.len() {
                return Err(out_of_range());
            }
            items.insert(i, value);
        }
        (Kind::Seq(items), "replace") => {
            let i = last.parse::<usize>().map_err(|_| bad_index())?;
            *items.get_mut(i).ok_or_else(out_of_range)? = value;
        }
        (Kind::Seq(items), "remove") => {
            let i = last.parse::<usize>().map_err(|_| bad_index())?;
            if i >= items.len() {
                return Err(out_of_range());
            }
            items.remove(i);
        }
        (Kind::Map(entries), "add" | "replace") => {
            entries.retain(|(k, _)| k != last);
            entries.push((last.clone(), value));
        }
        (Kind::Map(entries), "remove") => entries.retain(|(k, _)| k != last),
        (_, other) => {
            return Err(PatchOpError::Unsupported {
                op: other.to_string(),
                path: path.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(text: &str) -> Node {
        yaml::parse_stream("t", text).unwrap().remove(0).root
    }

    #[test]
    fn delete_directive_removes_keyed_item() {
        let mut base = node("env:\n- {name: A, value: '1'}\n- {name: B, value: '2'}\n");
        strategic_merge(
            &mut base,
            &node("env:\n- name: A\n  $patch: delete\n- {name: C, value: '3'}\n"),
        );
        let names: Vec<_> = base
            .get("env")
            .unwrap()
            .as_seq()
            .iter()
            .filter_map(|i| i.str_at("name"))
            .collect();
        assert_eq!(names, vec!["B", "C"]);
    }

    #[test]
    fn image_names_tags_and_registry_ports() {
        assert_eq!(
            image_parts("ghcr.io/x/vllm:0.11"),
            ("ghcr.io/x/vllm", Some("0.11"), None)
        );
        assert_eq!(image_parts("reg:5000/x/vllm"), ("reg:5000/x/vllm", None, None));
        assert_eq!(image_parts("x@sha256:ab"), ("x", None, Some("sha256:ab")));
        let mut n = node("containers:\n- {name: a, image: 'ghcr.io/x/vllm:0.11'}\n- {name: b, image: other:1}\n");
        retag_images(&mut n, &[("ghcr.io/x/vllm", None, Some("0.12"), None)]);
        let imgs: Vec<_> = n
            .get("containers")
            .unwrap()
            .as_seq()
            .iter()
            .filter_map(|c| c.str_at("image"))
            .collect();
        assert_eq!(imgs, vec!["ghcr.io/x/vllm:0.12", "other:1"]);
    }

    #[test]
    fn json6902_appends() {
        let mut base = node("spec:\n  env: []\n");
        json6902(
            &mut base,
            &node("op: add\npath: /spec/env/-\nvalue: {name: X, value: y}\n"),
        )
        .unwrap();
        assert_eq!(base.path(&["spec", "env"]).unwrap().as_seq().len(), 1);
        assert_eq!(
            json6902(&mut base, &node("op: add\npath: /nope/env/-\nvalue: 1\n")),
            Err(PatchOpError::NoSuchPath("/nope/env/-".into()))
        );
    }
}
