//! YAML in and out (serde-saphyr, as kube itself uses): the dry-run output, and reading manifests
//! back for checks.

use crate::error::KubeError;
use k8s_openapi::api::core::v1::Pod;

/// Every document of a YAML stream, as JSON values (empty documents skipped).
pub fn documents(text: &str) -> Result<Vec<serde_json::Value>, KubeError> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| KubeError::Output(format!("bad YAML: {}", crate::error::one_line(&e.to_string()))))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The Pods of a YAML stream (what `--dry-run=client -o yaml` prints; its run's token Secret,
/// printed without its value, and its ResourceClaimTemplates are not pods and are skipped).
pub fn pods(text: &str) -> Result<Vec<Pod>, KubeError> {
    documents(text)?
        .into_iter()
        .filter(|d| d["kind"] != "Secret" && d["kind"] != "ResourceClaimTemplate")
        .map(|d| serde_json::from_value::<Pod>(d).map_err(|e| KubeError::Output(format!("not a Pod: {e}"))))
        .collect()
}

/// One object as a YAML document (`---` first), `apiVersion` and `kind` leading as kubectl
/// prints them, null fields left out.
pub fn document(api_version: &str, kind: &str, object: &impl serde::Serialize) -> Result<String, KubeError> {
    let value = serde_json::to_value(object).map_err(|e| KubeError::Output(format!("cannot render {kind}: {e}")))?;
    value_document(api_version, kind, value)
}

/// [`document`] of an object already turned into JSON (its caller words its own error for that).
pub(crate) fn value_document(api_version: &str, kind: &str, mut value: serde_json::Value) -> Result<String, KubeError> {
    strip_nulls(&mut value);
    if let serde_json::Value::Object(map) = &mut value {
        let mut ordered = serde_json::Map::new();
        ordered.insert("apiVersion".into(), api_version.into());
        ordered.insert("kind".into(), kind.into());
        for (k, v) in std::mem::take(map) {
            ordered.entry(k).or_insert(v);
        }
        *map = ordered;
    }
    let text = serde_saphyr::to_string(&value).map_err(|e| KubeError::Output(format!("cannot render YAML: {e}")))?;
    Ok(format!("---\n{text}"))
}

fn strip_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}
