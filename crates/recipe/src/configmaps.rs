//! What ConfigMaps and Secrets among a recipe's inputs contribute: `configMapKeyRef` /
//! `secretKeyRef` values, `envFrom` keys (Secret values are marked so they only print masked),
//! and engine configuration files (TensorRT-LLM `cache_transceiver_config`, SGLang `--config`).

use crate::engine;
use crate::load::Document;
use crate::mask;
use crate::model::{EnvValue, EnvVar, Role, RoleEnv};
use crate::patch::Merged;
use crate::resolve::Resolution;
use crate::yaml::Node;
use std::collections::HashMap;

/// TensorRT-LLM keeps `cache_transceiver_config` in a ConfigMap; a key naming a role
/// (`prefill.yaml`, `decode.yaml`) applies to that role, others to every engine role.
pub(crate) fn apply_configmap(res: &mut Resolution, m: &Merged) {
    let (cm, entries): (String, Vec<(String, String)>) = match m.doc.root.get("cache_transceiver_config") {
        Some(ctc) => {
            let file = m.doc.source.rsplit('/').next().unwrap_or(&m.doc.source).to_string();
            let backend = ctc.str_at("backend").unwrap_or_default();
            let text = format!("cache_transceiver_config: {{backend: {backend}}}");
            (format!("file {}", m.doc.source), vec![(file, text)])
        }
        None => (
            format!("ConfigMap/{}", m.doc.name().unwrap_or("unnamed")),
            m.doc
                .root
                .get("data")
                .map(Node::as_map)
                .unwrap_or_default()
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|t| (k.clone(), t.to_string())))
                .collect(),
        ),
    };
    for (key, text) in &entries {
        // An SGLang `--config FILE` kept in this ConfigMap under FILE's name.
        if let Some(b) = engine::sglang_backend_in_text(text) {
            for r in res.roles.iter_mut().filter(|r| r.engine.sglang_backend.is_none()) {
                let named = r
                    .engine
                    .config_file
                    .as_deref()
                    .is_some_and(|f| f.rsplit('/').next() == Some(key.as_str()));
                if named {
                    r.engine.sglang_backend = Some(b.clone());
                    r.layers.push(format!("{cm} {key} (--config)"));
                    if !r.sources.contains(&m.doc.source) {
                        r.sources.push(m.doc.source.clone());
                    }
                }
            }
        }
        let Some(backend) = engine::trt_backend_in_text(text) else {
            continue;
        };
        let k = key.to_ascii_lowercase();
        let target = if k.contains("prefill") || k.contains("context") {
            Some(Role::Prefill)
        } else if k.contains("decode") || k.contains("generation") {
            Some(Role::Decode)
        } else {
            None
        };
        for r in res.roles.iter_mut().filter(|r| r.role.is_engine()) {
            if target.as_ref().is_none_or(|t| *t == r.role) && r.engine.trt_backend.is_none() {
                r.engine.trt_backend = Some(backend.clone());
                r.layers.push(format!("{cm} {key}"));
                if !r.sources.contains(&m.doc.source) {
                    r.sources.push(m.doc.source.clone());
                }
            }
        }
    }
}

/// A ConfigMap's `data`, or a Secret's `stringData` and base64-decoded `data`, with lines.
pub(crate) fn secret_entries(doc: &Document) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (key, v) in doc.root.get("stringData").map(Node::as_map).unwrap_or_default() {
        if let Some(s) = v.as_str() {
            out.push((key.clone(), s.to_string()));
        }
    }
    for (key, v) in doc.root.get("data").map(Node::as_map).unwrap_or_default() {
        if let Some(plain) = v.as_str().and_then(mask::base64_text) {
            out.push((key.clone(), plain));
        }
    }
    out
}

/// Key → (value, line) of a ConfigMap (`data`) or a Secret (`stringData`, decoded `data`).
fn object_entries(m: &Merged) -> Vec<(String, String, usize)> {
    let line_of = |key: &str| {
        ["data", "stringData"]
            .iter()
            .find_map(|s| m.doc.root.path(&[s, key]))
            .map_or(m.doc.root.line, |n| n.line)
    };
    if m.doc.kind() == Some("Secret") {
        return secret_entries(&m.doc)
            .into_iter()
            .map(|(k, v)| {
                let line = line_of(&k);
                (k, v, line)
            })
            .collect();
    }
    m.doc
        .root
        .get("data")
        .map(Node::as_map)
        .unwrap_or_default()
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string(), v.line)))
        .collect()
}

/// Fills `configMapKeyRef`/`secretKeyRef` values and `envFrom` keys from the ConfigMaps and
/// Secrets that are among the recipe's inputs. Values from Secrets are marked so that they are
/// only ever printed masked.
pub(crate) fn resolve_configmap_refs(roles: &mut [RoleEnv], configmaps: &[&Merged], secrets: &[&Merged]) {
    let by_name: HashMap<(&str, &str), &Merged> = configmaps
        .iter()
        .filter(|m| m.doc.kind() == Some("ConfigMap"))
        .chain(secrets.iter())
        .filter_map(|m| Some(((m.doc.kind()?, m.doc.name()?), *m)))
        .collect();
    let lookup = |kind: &str, name: &str| {
        let k = if kind == "secret" { "Secret" } else { "ConfigMap" };
        by_name.get(&(k, name)).copied()
    };
    for r in roles {
        for var in &mut r.env {
            let (kind, name, key) = match &var.value {
                EnvValue::ConfigMap { name, key } => ("configMap", name.clone(), key.clone()),
                EnvValue::Secret { name, key } => ("secret", name.clone(), key.clone()),
                _ => continue,
            };
            let Some(obj) = lookup(kind, &name) else { continue };
            let Some((_, value, line)) = object_entries(obj).into_iter().find(|(k, _, _)| *k == key) else {
                continue;
            };
            let label = if kind == "secret" { "Secret" } else { "ConfigMap" };
            var.origin = format!("{label}/{name} {key} ({}:{line})", obj.doc.source);
            var.from_secret = kind == "secret";
            var.value = EnvValue::Literal { value };
        }
        let mut kept = Vec::new();
        for from in std::mem::take(&mut r.env_from) {
            let Some(obj) = lookup(&from.kind, &from.name) else {
                kept.push(from);
                continue;
            };
            let label = if from.kind == "secret" { "Secret" } else { "ConfigMap" };
            // envFrom sits below every explicit env entry, so it only fills the gaps.
            let mut added = Vec::new();
            for (key, value, line) in object_entries(obj) {
                if r.env.iter().any(|e| e.name == key) || added.iter().any(|e: &EnvVar| e.name == key) {
                    continue;
                }
                added.push(EnvVar {
                    name: key,
                    value: EnvValue::Literal { value },
                    origin: format!("envFrom {label}/{} ({}:{line})", from.name, obj.doc.source),
                    from_secret: from.kind == "secret",
                });
            }
            r.env.splice(0..0, added);
            r.reindex();
        }
        r.env_from = kept;
    }
}
