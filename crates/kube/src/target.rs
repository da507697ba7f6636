//! `--prefill` / `--decode` targets and how they resolve to a node (and a reference pod).
//!
//! Deployments are resolved without reading the Deployment object: the Deployment controller
//! names each ReplicaSet `<deployment>-<pod-template-hash>` and stamps that hash on the pods, so
//! the owner reference of a pod identifies its Deployment. That keeps ic-bench's Role to pods only.

use crate::access::Cluster;
use crate::error::{InvalidName, KubeError};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use std::fmt;

/// Where one side of the pair should run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A node: plain bench pod, nothing copied.
    Node(String),
    /// A pod: run on its node, modelled on its spec.
    Pod(String),
    /// A Deployment's Ready pod, modelled on it.
    Deployment(String),
    /// A Ready pod matching a label selector, modelled on it.
    Selector(String),
    /// A StatefulSet's Ready pod (owner reference), modelled on it.
    StatefulSet(String),
    /// A LeaderWorkerSet's Ready pod (`leaderworkerset.sigs.k8s.io/name`), modelled on it.
    Lws(String),
    /// A Ready pod of one component of a Dynamo graph deployment (the operator's labels).
    Dgd { graph: String, component: String },
}

/// The label the LeaderWorkerSet controller puts on every pod of a group.
pub const LWS_NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
/// The labels the Dynamo operator puts on a graph deployment's pods.
pub const DYNAMO_GRAPH_LABEL: &str = "nvidia.com/dynamo-graph-deployment-name";
pub const DYNAMO_COMPONENT_LABEL: &str = "nvidia.com/dynamo-component";

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Node(n) => write!(f, "node/{n}"),
            Target::Pod(n) => write!(f, "pod/{n}"),
            Target::Deployment(n) => write!(f, "deployment/{n}"),
            Target::Selector(s) => write!(f, "-l {s}"),
            Target::StatefulSet(n) => write!(f, "statefulset/{n}"),
            Target::Lws(n) => write!(f, "lws/{n}"),
            Target::Dgd { graph, component } => write!(f, "dgd/{graph}/{component}"),
        }
    }
}

const FORMS: &str = "node/NAME, pod/NAME, deployment/NAME, statefulset/NAME, lws/NAME, dgd/NAME/COMPONENT, or a label selector such as app=decode";

impl std::str::FromStr for Target {
    type Err = KubeError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let s = raw.trim();
        let bad = |why: &dyn fmt::Display| KubeError::Target(format!("bad target '{raw}': {why}; use {FORMS}"));
        if s.is_empty() {
            return Err(bad(&"it is empty"));
        }
        for prefix in ["-l ", "-l=", "--selector ", "--selector=", "selector/", "l/"] {
            if let Some(sel) = s.strip_prefix(prefix) {
                return selector(sel.trim()).map_err(|why| bad(&why));
            }
        }
        // Object names never hold '=', spaces or '!': anything with them is a selector.
        if s.contains('=') || s.contains(' ') || s.starts_with('!') {
            return selector(s).map_err(|why| bad(&why));
        }
        let Some((kind, name)) = s.split_once('/') else {
            return Err(bad(&"say which kind of object it names"));
        };
        let kind = kind.to_ascii_lowercase();
        if matches!(
            kind.as_str(),
            "dgd" | "dynamographdeployment" | "dynamographdeployments"
        ) {
            let Some((graph, component)) = name.split_once('/') else {
                return Err(bad(
                    &"a Dynamo target is dgd/NAME/COMPONENT (e.g. dgd/llama/VllmDecodeWorker)",
                ));
            };
            check_name(graph.trim()).map_err(|why| bad(&why))?;
            let component = component.trim();
            check_label_value(component).map_err(|why| bad(&why))?;
            return Ok(Target::Dgd {
                graph: graph.trim().into(),
                component: component.into(),
            });
        }
        let name = name.trim();
        check_name(name).map_err(|why| bad(&why))?;
        match kind.as_str() {
            "node" | "nodes" | "no" => Ok(Target::Node(name.into())),
            "pod" | "pods" | "po" => Ok(Target::Pod(name.into())),
            "deployment" | "deployments" | "deploy" | "deployment.apps" => Ok(Target::Deployment(name.into())),
            "statefulset" | "statefulsets" | "sts" | "statefulset.apps" => Ok(Target::StatefulSet(name.into())),
            "lws" | "leaderworkerset" | "leaderworkersets" => Ok(Target::Lws(name.into())),
            other => Err(bad(&format_args!("unknown kind '{other}'"))),
        }
    }
}

fn selector(sel: &str) -> Result<Target, InvalidName> {
    if sel.is_empty() {
        return Err(InvalidName::EmptySelector);
    }
    if sel.contains('\n') {
        return Err(InvalidName::MultilineSelector);
    }
    Ok(Target::Selector(sel.to_string()))
}

/// DNS-1123 subdomain, as Kubernetes requires for node, pod and deployment names.
pub(crate) fn check_name(name: &str) -> Result<(), InvalidName> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(InvalidName::Object(name.to_string()))
    }
}

/// A label value (a Dynamo component name): 1-63 alphanumerics, '-', '_', '.'.
fn check_label_value(v: &str) -> Result<(), InvalidName> {
    let ok = !v.is_empty()
        && v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && v.starts_with(|c: char| c.is_ascii_alphanumeric())
        && v.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(InvalidName::Component(v.to_string()))
    }
}

/// A target turned into a node, with the pod to model the bench pod on, if any.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub target: Target,
    pub node: String,
    /// The reference pod (for `pod/`, `deployment/` and selectors).
    pub reference: Option<Pod>,
    /// `pod/NAME` of the reference, for the report's `modelled_on`.
    pub modelled_on: Option<String>,
    /// How a pod was picked among several (said to the user).
    pub note: Option<String>,
}

/// Looks the target up in the cluster's namespace.
pub async fn resolve(cluster: &Cluster, target: &Target) -> Result<Resolved, KubeError> {
    match target {
        Target::Node(node) => Ok(Resolved {
            target: target.clone(),
            node: node.clone(),
            reference: None,
            modelled_on: None,
            note: None,
        }),
        Target::Pod(name) => {
            let api = cluster.pods();
            let what = format!("get pod {}/{name}", cluster.namespace());
            let pod = cluster.call(&what, || api.get(name)).await.map_err(|e| {
                if e.is_not_found() {
                    KubeError::Target(format!(
                        "pod/{name} not found in namespace {}: check the name or pass -n NAMESPACE",
                        cluster.namespace()
                    ))
                } else {
                    e
                }
            })?;
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).ok_or_else(|| {
                KubeError::Target(format!(
                    "pod/{name} is not scheduled on a node yet (phase {}): wait for it or pick node/NAME",
                    phase(&pod)
                ))
            })?;
            Ok(Resolved {
                target: target.clone(),
                node,
                reference: Some(pod),
                modelled_on: Some(format!("pod/{name}")),
                note: None,
            })
        }
        Target::Deployment(name) => {
            let api = cluster.pods();
            let what = format!("list pods in {}", cluster.namespace());
            let lp = ListParams::default();
            let pods = cluster.call(&what, || api.list(&lp)).await?.items;
            let owned: Vec<Pod> = pods.into_iter().filter(|p| owned_by_deployment(p, name)).collect();
            if owned.is_empty() {
                return Err(KubeError::Target(format!(
                    "deployment/{name} has no pods in namespace {}: check the name, pass -n NAMESPACE, or scale it up",
                    cluster.namespace()
                )));
            }
            pick_ready(target, owned)
        }
        Target::StatefulSet(name) => {
            let pods = list_pods(cluster, None).await?;
            let owned: Vec<Pod> = pods.into_iter().filter(|p| owned_by(p, "StatefulSet", name)).collect();
            if owned.is_empty() {
                return Err(no_pods(target, cluster));
            }
            pick_ready(target, owned)
        }
        Target::Lws(name) => {
            let pods = list_pods(cluster, Some(&format!("{LWS_NAME_LABEL}={name}"))).await?;
            if pods.is_empty() {
                return Err(no_pods(target, cluster));
            }
            pick_ready(target, pods)
        }
        Target::Dgd { graph, component } => {
            let sel = format!("{DYNAMO_GRAPH_LABEL}={graph},{DYNAMO_COMPONENT_LABEL}={component}");
            let pods = list_pods(cluster, Some(&sel)).await?;
            if pods.is_empty() {
                return Err(no_pods(target, cluster));
            }
            pick_ready(target, pods)
        }
        Target::Selector(sel) => {
            let api = cluster.pods();
            let what = format!("list pods matching '{sel}' in {}", cluster.namespace());
            let lp = ListParams::default().labels(sel);
            // A broad selector must not pick a bench pod of an earlier run.
            let pods: Vec<Pod> = cluster
                .call(&what, || api.list(&lp))
                .await?
                .items
                .into_iter()
                .filter(|p| !is_bench_pod(p))
                .collect();
            if pods.is_empty() {
                return Err(KubeError::Target(format!(
                    "no pods match -l {sel} in namespace {}: check the selector or pass -n NAMESPACE",
                    cluster.namespace()
                )));
            }
            pick_ready(target, pods)
        }
    }
}

/// Pods in the namespace (optionally by selector), bench pods of earlier runs left out.
async fn list_pods(cluster: &Cluster, selector: Option<&str>) -> Result<Vec<Pod>, KubeError> {
    let api = cluster.pods();
    let what = format!("list pods in {}", cluster.namespace());
    let mut lp = ListParams::default();
    if let Some(sel) = selector {
        lp = lp.labels(sel);
    }
    Ok(cluster
        .call(&what, || api.list(&lp))
        .await?
        .items
        .into_iter()
        .filter(|p| !is_bench_pod(p))
        .collect())
}

fn no_pods(target: &Target, cluster: &Cluster) -> KubeError {
    KubeError::Target(format!(
        "{target} has no pods in namespace {}: check the name, pass -n NAMESPACE, or scale it up",
        cluster.namespace()
    ))
}

/// The pod's controller is a `kind` named `name`.
pub fn owned_by(pod: &Pod, kind: &str, name: &str) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == kind && o.name == name)
}

/// The pod's ReplicaSet owner is `<deployment>-<pod-template-hash>`.
pub fn owned_by_deployment(pod: &Pod, deployment: &str) -> bool {
    let Some(hash) = pod.metadata.labels.as_ref().and_then(|l| l.get("pod-template-hash")) else {
        return false;
    };
    let expected = format!("{deployment}-{hash}");
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "ReplicaSet" && o.name == expected)
}

/// Picks a Ready pod (the oldest, so repeated runs pick the same one) and says which.
pub fn pick_ready(target: &Target, pods: Vec<Pod>) -> Result<Resolved, KubeError> {
    let total = pods.len();
    let mut ready: Vec<Pod> = pods
        .into_iter()
        .filter(|p| is_ready(p) && p.metadata.deletion_timestamp.is_none() && node_of(p).is_some())
        .collect();
    if ready.is_empty() {
        return Err(KubeError::Target(format!(
            "{target}: none of its {total} pod(s) is Ready: wait for one to become Ready, or use pod/NAME or node/NAME"
        )));
    }
    ready.sort_by(|a, b| {
        let ka = (
            a.metadata.creation_timestamp.as_ref().map(|t| t.0),
            a.metadata.name.clone(),
        );
        let kb = (
            b.metadata.creation_timestamp.as_ref().map(|t| t.0),
            b.metadata.name.clone(),
        );
        ka.cmp(&kb)
    });
    let n_ready = ready.len();
    let pod = ready.swap_remove(0);
    let name = pod.metadata.name.clone().unwrap_or_default();
    let node = node_of(&pod).unwrap_or_default();
    Ok(Resolved {
        target: target.clone(),
        node: node.clone(),
        modelled_on: Some(format!("pod/{name}")),
        note: Some(format!(
            "{target}: picked pod/{name} on node {node} (oldest of {n_ready} Ready, {total} total)"
        )),
        reference: Some(pod),
    })
}

fn is_bench_pod(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(crate::podspec::LABEL_MANAGED_BY))
        .map(String::as_str)
        == Some(crate::podspec::APP)
}

pub fn node_of(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
}

pub(crate) fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "unknown".into())
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

    #[test]
    fn parses_every_form() {
        assert_eq!("node/gpu-1".parse::<Target>().unwrap(), Target::Node("gpu-1".into()));
        assert_eq!("pod/p-0".parse::<Target>().unwrap(), Target::Pod("p-0".into()));
        assert_eq!("deploy/x".parse::<Target>().unwrap(), Target::Deployment("x".into()));
        assert_eq!(
            "deployment/x".parse::<Target>().unwrap(),
            Target::Deployment("x".into())
        );
        assert_eq!(
            "-l app=a,tier=b".parse::<Target>().unwrap(),
            Target::Selector("app=a,tier=b".into())
        );
        assert_eq!("app=a".parse::<Target>().unwrap(), Target::Selector("app=a".into()));
        assert_eq!(
            "example.com/role=decode".parse::<Target>().unwrap(),
            Target::Selector("example.com/role=decode".into())
        );
        assert_eq!("sts/db".parse::<Target>().unwrap(), Target::StatefulSet("db".into()));
        assert_eq!("lws/vllm".parse::<Target>().unwrap(), Target::Lws("vllm".into()));
        assert_eq!(
            "dgd/llama/VllmDecodeWorker".parse::<Target>().unwrap(),
            Target::Dgd {
                graph: "llama".into(),
                component: "VllmDecodeWorker".into()
            }
        );
        assert_eq!(
            "selector/app in (a,b)".parse::<Target>().unwrap(),
            Target::Selector("app in (a,b)".into())
        );
    }

    #[test]
    fn rejects_bad_targets_with_the_forms() {
        for bad in [
            "",
            "gpu-1",
            "svc/x",
            "pod/",
            "pod/Bad_Name",
            "-l ",
            "node/-x",
            "dgd/x",
            "dgd/x/",
            "dgd/x/a.",
            "dgd/X/a",
        ] {
            let err = bad.parse::<Target>().unwrap_err().to_string();
            assert!(err.contains("node/NAME, pod/NAME"), "{bad}: {err}");
            assert!(!err.contains('\n'));
        }
    }

    fn pod(name: &str, node: &str, ready: bool, created: i64, owner: Option<(&str, &str)>) -> Pod {
        let mut labels = std::collections::BTreeMap::new();
        let mut owners = None;
        if let Some((rs, hash)) = owner {
            labels.insert("pod-template-hash".to_string(), hash.to_string());
            owners = Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: rs.into(),
                uid: "u".into(),
                ..Default::default()
            }]);
        }
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels),
                owner_references: owners,
                creation_timestamp: Some(Time(jiff::Timestamp::from_second(1_700_000_000 + created).unwrap())),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn deployment_ownership_via_replicaset_name() {
        assert!(owned_by_deployment(
            &pod("a", "n", true, 0, Some(("web-5d9c", "5d9c"))),
            "web"
        ));
        assert!(!owned_by_deployment(
            &pod("a", "n", true, 0, Some(("web-api-5d9c", "5d9c"))),
            "web"
        ));
        assert!(!owned_by_deployment(&pod("a", "n", true, 0, None), "web"));
    }

    #[test]
    fn picks_the_oldest_ready_pod_and_says_which() {
        let t = Target::Selector("app=x".into());
        let r = pick_ready(
            &t,
            vec![
                pod("new", "n2", true, 10, None),
                pod("old", "n1", true, 1, None),
                pod("older", "n3", false, 0, None),
            ],
        )
        .unwrap();
        assert_eq!(r.node, "n1");
        assert_eq!(r.modelled_on.as_deref(), Some("pod/old"));
        assert!(
            r.note
                .unwrap()
                .contains("picked pod/old on node n1 (oldest of 2 Ready, 3 total)")
        );
        let err = pick_ready(&t, vec![pod("a", "n", false, 0, None)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("none of its 1 pod(s) is Ready"), "{err}");
    }
}
