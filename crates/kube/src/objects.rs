//! Applied recipe objects read back from the cluster, for `probe env dgd/NAME -n NS`: one GET per
//! API version tried, nothing written. The object comes back as JSON (a YAML document), with
//! `status` and `metadata.managedFields` dropped: the recipe reader judges the spec.

use crate::access::{Cluster, ClusterOptions, connect};
use crate::error::KubeError;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

/// A recipe kind as the API serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedKind {
    pub kind: &'static str,
    pub group: &'static str,
    /// Served versions, tried in order (the first that knows the object wins).
    pub versions: &'static [&'static str],
    pub plural: &'static str,
    /// The short words `KIND/NAME` accepts.
    pub words: &'static [&'static str],
}

/// The recipe kinds `probe env KIND/NAME` reads from a cluster.
pub const APPLIED_KINDS: &[AppliedKind] = &[
    AppliedKind {
        kind: "DynamoGraphDeployment",
        group: "nvidia.com",
        versions: &["v1alpha1", "v1beta1"],
        plural: "dynamographdeployments",
        words: &["dgd", "dynamographdeployment", "dynamographdeployments"],
    },
    AppliedKind {
        kind: "LLMInferenceService",
        group: "serving.kserve.io",
        versions: &["v1alpha2", "v1alpha1"],
        plural: "llminferenceservices",
        words: &["llmisvc", "llminferenceservice", "llminferenceservices"],
    },
    AppliedKind {
        kind: "DisaggregatedSet",
        group: "disaggregatedset.x-k8s.io",
        versions: &["v1", "v1alpha1"],
        plural: "disaggregatedsets",
        words: &["disaggregatedset", "disaggregatedsets"],
    },
    AppliedKind {
        kind: "LeaderWorkerSet",
        group: "leaderworkerset.x-k8s.io",
        versions: &["v1"],
        plural: "leaderworkersets",
        words: &["lws", "leaderworkerset", "leaderworkersets"],
    },
    AppliedKind {
        kind: "Deployment",
        group: "apps",
        versions: &["v1"],
        plural: "deployments",
        words: &["deploy", "deployment", "deployments"],
    },
    AppliedKind {
        kind: "StatefulSet",
        group: "apps",
        versions: &["v1"],
        plural: "statefulsets",
        words: &["sts", "statefulset", "statefulsets"],
    },
];

/// `dgd/NAME` → the kind and the name; `None` when the word is no recipe kind or the name is empty.
pub fn parse_applied(arg: &str) -> Option<(&'static AppliedKind, &str)> {
    let (word, name) = arg.split_once('/')?;
    // `deploy/x.yaml` is a file path (that may not exist), not a Deployment named `x.yaml`.
    let file_like = [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e));
    if name.is_empty() || name.contains('/') || file_like {
        return None;
    }
    let word = word.to_ascii_lowercase();
    APPLIED_KINDS
        .iter()
        .find(|k| k.words.contains(&word.as_str()))
        .map(|k| (k, name))
}

/// Reads the applied object (read-only). `Ok(None)`: no served version knows it.
pub async fn get_applied(cluster: &Cluster, kind: &AppliedKind, name: &str) -> Result<Option<String>, KubeError> {
    for version in kind.versions {
        let gvk = GroupVersionKind::gvk(kind.group, version, kind.kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, kind.plural);
        let api: Api<DynamicObject> = Api::namespaced_with(cluster.client().clone(), cluster.namespace(), &ar);
        let what = format!("get {}/{name} ({}/{version})", kind.plural, kind.group);
        match cluster.call(&what, || api.get(name)).await {
            Ok(mut obj) => {
                obj.metadata.managed_fields = None;
                obj.data.as_object_mut().map(|m| m.remove("status"));
                let text = serde_json::to_string_pretty(&obj).map_err(|e| KubeError::Output(e.to_string()))?;
                return Ok(Some(text));
            }
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// An applied object `probe env` was asked for that no served version knows.
#[derive(Debug, thiserror::Error)]
pub enum AppliedError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(
        "{arg}: no {} {name} in namespace {namespace} ({} {} tried); check the name and -n NAMESPACE",
        kind.kind, kind.group, kind.versions.join(", ")
    )]
    Missing {
        arg: String,
        kind: &'static AppliedKind,
        name: String,
        namespace: String,
    },
}

/// `probe env`'s input `arg` (`dgd/NAME`): the applied object, named after the argument and the
/// namespace it was read from.
pub async fn applied_input(
    cluster: &Cluster,
    kind: &'static AppliedKind,
    name: &str,
    arg: &str,
) -> Result<icb_recipe::Input, AppliedError> {
    match get_applied(cluster, kind, name).await? {
        Some(content) => Ok(icb_recipe::Input::Text {
            name: format!("{arg} (namespace {})", cluster.namespace()),
            content,
        }),
        None => Err(AppliedError::Missing {
            arg: arg.to_string(),
            kind,
            name: name.to_string(),
            namespace: cluster.namespace().to_string(),
        }),
    }
}

/// `probe env`'s inputs: files, directories and `-` as given, and applied objects (`dgd/NAME`,
/// where no such path exists) read back from `cluster` (connected at the first one; a GET per
/// served version, nothing written).
pub async fn probe_env_inputs(
    paths: &[String],
    cluster: &ClusterOptions,
) -> Result<Vec<icb_recipe::Input>, AppliedError> {
    let mut connected = None;
    let mut out = Vec::new();
    for p in paths {
        match parse_applied(p).filter(|_| !std::path::Path::new(p).exists()) {
            Some((kind, name)) => {
                let c = match connected.take() {
                    Some(c) => c,
                    None => connect(cluster).await?,
                };
                out.push(applied_input(&c, kind, name, p).await?);
                connected = Some(c);
            }
            None => out.push(icb_recipe::Input::from_arg(p)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths are read as given without a cluster; an applied object needs one, and a cluster
    /// that cannot be reached is its error (one line), not a guess.
    #[tokio::test]
    async fn paths_need_no_cluster_and_applied_objects_do() {
        let cluster = ClusterOptions {
            kubeconfig: Some("/nonexistent/kubeconfig".into()),
            ..Default::default()
        };
        let paths = ["recipe.yaml".to_string(), "-".to_string()];
        let inputs = probe_env_inputs(&paths, &cluster).await.unwrap();
        assert_eq!(inputs.len(), 2);
        let e = probe_env_inputs(&["dgd/llama".to_string()], &cluster)
            .await
            .unwrap_err();
        assert!(matches!(e, AppliedError::Kube(_)), "{e}");
    }

    #[test]
    fn kind_words_and_names_parse() {
        let (k, n) = parse_applied("dgd/llama").unwrap();
        assert_eq!((k.kind, n), ("DynamoGraphDeployment", "llama"));
        assert_eq!(parse_applied("Deployment/x").unwrap().0.plural, "deployments");
        assert!(parse_applied("recipes/deploy.yaml").is_none());
        assert!(parse_applied("dgd/").is_none());
        assert!(parse_applied("dgd/a/b").is_none());
        assert!(parse_applied("deploy/missing.yaml").is_none());
    }
}
