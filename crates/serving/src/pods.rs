//! `probe serving --recipe FILE`: the workers' metrics endpoints found through the recipe's pods
//! (issue 42). The recipe names the prefill/decode workloads; their pods are listed through the
//! API (GET only) and each gives its IP and metrics port, or one "not read: why" line. A port is
//! never guessed: a container port named `metrics`, else the `prometheus.io/port` annotation.

use crate::Source;
use icb_kube::k8s_openapi::api::core::v1::Pod;
use icb_kube::kube::api::{Api, ListParams};
use icb_recipe::{Document, Input, Role};

/// Why the recipe's pods could not be looked for (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error(transparent)]
    Recipe(#[from] icb_recipe::RecipeError),
    #[error("--recipe {recipe}: no prefill, decode or worker role in it")]
    NoWorker { recipe: String },
    #[error("listing the pods of {workload} in {namespace}: {source}")]
    List {
        workload: String,
        namespace: String,
        source: icb_kube::kube::Error,
    },
    #[error(
        "--recipe {recipe}: no pod of its prefill/decode workers in namespace {namespace}; check -n/--namespace and that the recipe is deployed"
    )]
    NoPod { recipe: String, namespace: String },
}

/// How one workload's pods are found: a label selector, or the pod's own name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finder {
    Labels(String),
    Named(String),
}

/// The finder of the workload `Kind/name[ part]` (and, in a DynamoGraphDeployment, its service
/// `component`), from its document in the recipe; `Err` says why its pods cannot be found (a
/// kind whose pods this probe does not know how to select).
fn finder(workload: &str, component: &str, docs: &[Document]) -> Result<Finder, String> {
    let head = workload.split(' ').next().unwrap_or(workload);
    let (kind, name) = head.split_once('/').unwrap_or(("", head));
    if kind == "Pod" {
        return Ok(Finder::Named(name.to_string()));
    }
    if kind == "LeaderWorkerSet" {
        return Ok(Finder::Labels(format!("leaderworkerset.sigs.k8s.io/name={name}")));
    }
    // Dynamo's operator labels every pod of a graph's service with the graph's name and the
    // service's (its `nvidia.com/dynamo-graph-deployment-name` and `nvidia.com/dynamo-component`
    // constants, read in ai-dynamo/dynamo's deploy/cloud/operator).
    if kind == "DynamoGraphDeployment" {
        return Ok(Finder::Labels(format!(
            "nvidia.com/dynamo-graph-deployment-name={name},nvidia.com/dynamo-component={component}"
        )));
    }
    let doc = docs
        .iter()
        .find(|d| d.kind() == Some(kind) && d.name() == Some(name))
        .ok_or_else(|| format!("{workload}: its pods' labels are not known to this probe; give --endpoint URL"))?;
    let labels: Vec<String> = doc
        .root
        .path(&["spec", "selector", "matchLabels"])
        .map(|m| m.as_map())
        .unwrap_or_default()
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
        .collect();
    if labels.is_empty() {
        return Err(format!(
            "{workload}: no spec.selector.matchLabels to find its pods by; give --endpoint URL"
        ));
    }
    Ok(Finder::Labels(labels.join(",")))
}

/// The metrics URL of a pod, or why it has none.
fn endpoint(pod: &Pod) -> Result<String, String> {
    let status = pod.status.clone().unwrap_or_default();
    let phase = status.phase.unwrap_or_else(|| "not known".into());
    if phase != "Running" {
        return Err(format!("not running (phase {phase})"));
    }
    let ip = status
        .pod_ip
        .filter(|ip| !ip.is_empty())
        .ok_or("running but without an IP")?;
    let port_named = |name: &str| {
        pod.spec
            .iter()
            .flat_map(|s| &s.containers)
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port)
    };
    // `system`: the port Dynamo's operator gives a worker's status server, which serves its
    // `/metrics` (DynamoSystemPortName, 9090, in the operator's constants).
    let named = port_named("metrics").or_else(|| port_named("system"));
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let (port, path) = match named {
        Some(port) => (port.to_string(), "/metrics".to_string()),
        None => {
            let port = annotations.get("prometheus.io/port").ok_or(
                "no container port named `metrics` (or Dynamo's `system`) and no prometheus.io/port annotation: its metrics port is not known",
            )?;
            let path = annotations
                .get("prometheus.io/path")
                .cloned()
                .unwrap_or_else(|| "/metrics".into());
            (port.clone(), path)
        }
    };
    if !port.parse::<u16>().is_ok_and(|p| p != 0) {
        return Err(format!("metrics port '{port}' is not a port number"));
    }
    let path = if path.starts_with('/') {
        path
    } else {
        format!("/{path}")
    };
    Ok(format!("http://{ip}:{port}{path}"))
}

/// One source per pod of the recipe's prefill/decode (or aggregated) workers in the namespace,
/// and a "not read" one per workload without pods; an error (exit 2) naming what to fix when the
/// recipe has no worker, the API cannot be read, or no pod is there and no other source was given.
pub async fn discover(
    recipe: &[String],
    cluster: &icb_kube::Cluster,
    others_given: bool,
) -> Result<Vec<Source>, DiscoverError> {
    let inputs: Vec<Input> = recipe.iter().map(|p| Input::from_arg(p)).collect();
    let (_, roles) = icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default())?;
    let docs = icb_recipe::load_inputs(&inputs)?;
    let workers: Vec<_> = roles
        .roles()
        .iter()
        .filter(|r| matches!(r.env.role, Role::Prefill | Role::Decode | Role::Worker))
        .collect();
    if workers.is_empty() {
        return Err(DiscoverError::NoWorker {
            recipe: recipe.join(","),
        });
    }
    let api: Api<Pod> = Api::namespaced(cluster.client().clone(), cluster.namespace());
    let mut sources = Vec::new();
    // Two roles of one workload (a leader and its workers' containers) list the same pods:
    // each pod is read once.
    let mut pods_seen = std::collections::BTreeSet::new();
    let mut pods_listed = 0;
    for w in workers {
        match workload_sources(&api, cluster.namespace(), &w.env.workload, &w.env.component, &docs).await? {
            WorkloadPods::Listed(pods) => {
                pods_listed += pods.len();
                for (name, source) in pods {
                    if pods_seen.insert(name) {
                        sources.push(source);
                    }
                }
            }
            WorkloadPods::NotRead(why) => sources.push(Source::PodUnreadable {
                pod: w.env.workload.clone(),
                why,
            }),
        }
    }
    if pods_listed == 0 && !others_given {
        return Err(DiscoverError::NoPod {
            recipe: recipe.join(","),
            namespace: cluster.namespace().to_string(),
        });
    }
    Ok(sources)
}

/// What the API gave for one workload.
enum WorkloadPods {
    /// Each pod's name and its source: its endpoint, or why it has none.
    Listed(Vec<(String, Source)>),
    /// Its pods cannot be selected, or none is there: why.
    NotRead(String),
}

async fn workload_sources(
    api: &Api<Pod>,
    namespace: &str,
    workload: &str,
    component: &str,
    docs: &[Document],
) -> Result<WorkloadPods, DiscoverError> {
    let params = match finder(workload, component, docs) {
        Ok(Finder::Labels(sel)) => ListParams::default().labels(&sel),
        Ok(Finder::Named(name)) => ListParams::default().fields(&format!("metadata.name={name}")),
        Err(why) => return Ok(WorkloadPods::NotRead(why)),
    };
    let pods = api.list(&params).await.map_err(|source| DiscoverError::List {
        workload: workload.to_string(),
        namespace: namespace.to_string(),
        source,
    })?;
    if pods.items.is_empty() {
        return Ok(WorkloadPods::NotRead(format!("no pod of it in namespace {namespace}")));
    }
    Ok(WorkloadPods::Listed(
        pods.items
            .iter()
            .map(|pod| {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let source = match endpoint(pod) {
                    Ok(url) => Source::Pod { pod: name.clone(), url },
                    Err(why) => Source::PodUnreadable { pod: name.clone(), why },
                };
                (name, source)
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_kube::k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec, PodStatus};
    use icb_kube::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(phase: &str, ip: Option<&str>, port: Option<(&str, i32)>, ann: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                annotations: Some(ann.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    ports: port.map(|(n, p)| {
                        vec![ContainerPort {
                            name: Some(n.into()),
                            container_port: p,
                            ..Default::default()
                        }]
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                pod_ip: ip.map(str::to_string),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn the_port_is_the_named_one_else_the_annotation_else_not_known() {
        let ip = Some("10.0.0.5");
        assert_eq!(
            endpoint(&pod("Running", ip, Some(("metrics", 8000)), &[])).unwrap(),
            "http://10.0.0.5:8000/metrics"
        );
        let ann = [("prometheus.io/port", "9400"), ("prometheus.io/path", "stats")];
        assert_eq!(
            endpoint(&pod("Running", ip, Some(("http", 80)), &ann)).unwrap(),
            "http://10.0.0.5:9400/stats"
        );
        let none = endpoint(&pod("Running", ip, Some(("http", 80)), &[])).unwrap_err();
        assert!(none.contains("not known"), "{none}");
        assert!(
            endpoint(&pod("Pending", ip, Some(("metrics", 1)), &[]))
                .unwrap_err()
                .contains("not running")
        );
        assert!(
            endpoint(&pod("Running", None, Some(("metrics", 1)), &[]))
                .unwrap_err()
                .contains("without an IP")
        );
        // Dynamo's worker pods: the operator's `system` port serves /metrics.
        assert_eq!(
            endpoint(&pod("Running", ip, Some(("system", 9090)), &[])).unwrap(),
            "http://10.0.0.5:9090/metrics"
        );
        let bad = [("prometheus.io/port", "http")];
        assert!(
            endpoint(&pod("Running", ip, None, &bad))
                .unwrap_err()
                .contains("not a port")
        );
    }

    #[test]
    fn a_dynamo_graph_service_is_found_by_the_operators_labels() {
        assert_eq!(
            finder("DynamoGraphDeployment/llama", "VllmDecodeWorker", &[]),
            Ok(Finder::Labels(
                "nvidia.com/dynamo-graph-deployment-name=llama,nvidia.com/dynamo-component=VllmDecodeWorker".into()
            ))
        );
        assert_eq!(
            finder("Pod/decode-0", "main", &[]),
            Ok(Finder::Named("decode-0".into()))
        );
        let unknown = finder("Deployment/elsewhere", "main", &[]).unwrap_err();
        assert!(unknown.contains("give --endpoint URL"), "{unknown}");
    }
}
