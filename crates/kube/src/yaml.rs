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

/// The Pods of a YAML stream (what `--dry-run=client -o yaml` prints).
pub fn pods(text: &str) -> Result<Vec<Pod>, KubeError> {
    documents(text)?
        .into_iter()
        .map(|d| serde_json::from_value::<Pod>(d).map_err(|e| KubeError::Output(format!("not a Pod: {e}"))))
        .collect()
}
