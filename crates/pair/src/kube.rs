//! The Kubernetes launcher: the decode side is a bench pod running `ic-bench serve`, the prefill
//! side a bench pod running `ic-bench connect --plan` against the server pod's IP; both are placed
//! and specified as `icb_kube::pair::prepare` decided (dry runs print exactly those pods), followed
//! through their logs, and deleted by the run's label at cleanup.

use crate::launcher::{LaunchError, LaunchFailure, Launcher, Side};
use icb_core::model::{Endpoint, Locality, PairReport, Placement};
use icb_core::protocol::{ChildPlan, Listening};
use icb_kube::k8s_openapi::api::core::v1::Pod;
use icb_kube::pair::{BenchPodsPlan, Prepared, join_host_port};
use icb_kube::podrun::{PodObserver, PodRun};
use icb_kube::{Cluster, KubeError, lifecycle, podspec, target};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

pub struct KubeLauncher {
    cluster: Cluster,
    plan: BenchPodsPlan,
    prepared: Prepared,
    /// Set as soon as a create may have reached the API server: until then there is nothing to
    /// delete, and no cleanup error is stacked on the real one.
    maybe_created: AtomicBool,
    /// The pod waits' deadline, fixed when the first pod is created.
    until: Option<Instant>,
    server: Option<(String, PodObserver)>,
    client: Option<(String, PodObserver)>,
    /// A knobs-off control's variables: left out of both pods' containers' env.
    removed_env: Vec<String>,
    /// The run id the launcher was prepared with, and how many runs it was rearmed for since.
    base_run_id: String,
    rearms: u32,
}

impl KubeLauncher {
    /// Resolves the targets and decides both pods (reads the cluster; creates nothing).
    pub async fn prepare(cluster: Cluster, plan: BenchPodsPlan) -> Result<KubeLauncher, KubeError> {
        Self::prepare_with_templates(cluster, plan, &icb_kube::pair::SideTemplates::default()).await
    }

    /// [`Self::prepare`], with pod templates for sides whose workers are not running yet.
    pub async fn prepare_with_templates(
        cluster: Cluster,
        plan: BenchPodsPlan,
        templates: &icb_kube::pair::SideTemplates,
    ) -> Result<KubeLauncher, KubeError> {
        let prepared = icb_kube::pair::prepare_with_templates(&cluster, &plan, templates).await?;
        Ok(KubeLauncher {
            cluster,
            base_run_id: plan.run_id.clone(),
            rearms: 0,
            plan,
            prepared,
            maybe_created: AtomicBool::new(false),
            until: None,
            server: None,
            client: None,
            removed_env: Vec::new(),
        })
    }

    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    /// The bench pods as last seen (the server's, then the client's, those that were created):
    /// what a caller reads a failure's cause from, by the pods' fields rather than the text.
    pub fn last_pods(&self) -> Vec<Pod> {
        [&self.server, &self.client]
            .into_iter()
            .filter_map(|seen| seen.as_ref().and_then(|(_, o)| o.last_pod()))
            .collect()
    }

    /// The client pod's arguments for `plan` (what a dry run prints and a real run creates).
    fn with_plan(&self, plan: &ChildPlan) -> Prepared {
        let mut prepared = self.prepared.clone();
        // `$(VAR)` in a container's args is expanded by the kubelet; `$$` keeps a literal `$`.
        let json = plan.to_json().replace("$(", "$$(");
        prepared.client.args.extend(["--plan".to_string(), json]);
        prepared
    }

    /// The run's token Secret (without its value: a dry run never prints secrets) and both pods
    /// as a YAML stream, for `--dry-run=client -o yaml`.
    pub fn dry_run_yaml(&self, plan: &ChildPlan) -> Result<String, KubeError> {
        let secret = self.dry_run_secret();
        let mut out = icb_kube::yaml::document("v1", "Secret", &secret)?;
        for template in self.claim_templates() {
            out.push_str(&icb_kube::yaml::document(
                "resource.k8s.io/v1",
                "ResourceClaimTemplate",
                &template,
            )?);
        }
        out.push_str(&self.with_plan(plan).to_yaml()?);
        Ok(out)
    }

    /// The ResourceClaimTemplates a real run creates (none unless a side claims DRA devices).
    fn claim_templates(&self) -> Vec<icb_kube::k8s_openapi::api::resource::v1::ResourceClaimTemplate> {
        [&self.prepared.server, &self.prepared.client]
            .into_iter()
            .filter_map(|p| p.claim_template())
            .collect()
    }

    fn dry_run_secret(&self) -> icb_kube::k8s_openapi::api::core::v1::Secret {
        icb_kube::secret::token_secret(&self.prepared.namespace, &self.plan.run_id, None, None)
    }

    /// Both pods as a `v1/List`, for `--dry-run=client -o json`.
    pub fn dry_run_json(&self, plan: &ChildPlan) -> serde_json::Value {
        let prepared = self.with_plan(plan);
        let typed = |value: Result<serde_json::Value, serde_json::Error>, api_version: &str, kind: &str| {
            value
                .map(|mut v| {
                    v["apiVersion"] = api_version.into();
                    v["kind"] = kind.into();
                    v
                })
                .unwrap_or_default()
        };
        let mut items = vec![typed(serde_json::to_value(self.dry_run_secret()), "v1", "Secret")];
        for template in self.claim_templates() {
            items.push(typed(
                serde_json::to_value(template),
                "resource.k8s.io/v1",
                "ResourceClaimTemplate",
            ));
        }
        items.push(serde_json::to_value(prepared.server_pod()).unwrap_or_default());
        items.push(serde_json::to_value(prepared.client_pod(podspec::SERVER_PLACEHOLDER)).unwrap_or_default());
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
    }

    fn until(&mut self) -> Instant {
        // A second over the pipeline's own deadline, so its message (which names the side and
        // its last words) is the one the user sees.
        *self
            .until
            .get_or_insert_with(|| Instant::now() + self.plan.timeout + Duration::from_secs(1))
    }

    /// Creates `pod` (less a knobs-off control's variables) and follows it; also returns the pod as
    /// the API server made it (its uid).
    async fn create(&mut self, mut pod: Pod) -> Result<(KubeSide, Pod), LaunchError> {
        without_env(&mut pod, &self.removed_env);
        let name = pod.metadata.name.clone().unwrap_or_default();
        let until = self.until();
        let created = lifecycle::create_pod_tracked(&self.cluster, &pod, &self.maybe_created)
            .await
            .map_err(launch_error)?;
        let server = pod_is_server(&pod);
        let resolved = if server {
            &self.prepared.decode
        } else {
            &self.prepared.prefill
        };
        let side = KubeSide {
            role: if server { "decode" } else { "prefill" },
            node: resolved.node.clone(),
            run: PodRun::follow(&self.cluster, &name, until),
            cluster: self.cluster.clone(),
        };
        Ok((side, created))
    }
}

/// The run id of the `n`th run after the first on one launcher: `<base>-c<n>`, the base cut so
/// that the whole stays within a run id's 40 characters.
pub fn rearmed_run_id(base: &str, n: u32) -> String {
    let suffix = format!("-c{n}");
    let keep = base.len().min(40usize.saturating_sub(suffix.len()));
    format!("{}{suffix}", base[..keep].trim_end_matches('-'))
}

impl KubeLauncher {
    fn server_ip(&self) -> Option<String> {
        let pod = self.server.as_ref()?.1.last_pod()?;
        pod.status?.pod_ip.filter(|ip| !ip.is_empty())
    }
}

/// A Kubernetes error as a launch failure, by its type.
fn launch_error(e: KubeError) -> LaunchError {
    let kind = match &e {
        e if e.cluster_level() => LaunchFailure::Cluster,
        // The namespace refuses every bench pod: no pair can run there (a sweep stops).
        KubeError::Refused(_) => LaunchFailure::Cluster,
        KubeError::Deadline { .. } => LaunchFailure::Deadline,
        _ => LaunchFailure::Other,
    };
    LaunchError::of(kind, e.to_string())
}

/// Why a bench pod did not do its part, read from its status: not placed (`PodScheduled=False`,
/// reason `Unschedulable`; the node it was pinned to, else `node`), an image that cannot be
/// pulled (the container's waiting reason), or the bench container's exit code.
pub fn pod_failure(pod: &Pod, node: &str) -> Option<LaunchFailure> {
    if lifecycle::unschedulable(pod) {
        return Some(LaunchFailure::Unschedulable {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            node: podspec::pinned_node(pod).or_else(|| Some(node.to_string()).filter(|n| !n.is_empty())),
        });
    }
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let states = statuses.iter().filter_map(|c| c.state.as_ref());
    for state in states {
        let waiting = state.waiting.as_ref().and_then(|w| w.reason.as_deref());
        if matches!(waiting, Some("ErrImagePull" | "ImagePullBackOff" | "InvalidImageName")) {
            return Some(LaunchFailure::ImagePull);
        }
        if icb_kube::killed::killed(pod) {
            return Some(LaunchFailure::SideKilled);
        }
        if let Some(t) = &state.terminated {
            return Some(LaunchFailure::SideExited {
                code: Some(t.exit_code),
            });
        }
    }
    None
}

fn pod_is_server(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(podspec::LABEL_COMPONENT))
        .is_some_and(|c| c == podspec::Role::Server.as_str())
}

impl Launcher for KubeLauncher {
    type Side = KubeSide;

    fn locality(&self) -> Locality {
        Locality::of_same_host(self.prepared.decode.node == self.prepared.prefill.node)
    }

    fn mode(&self) -> String {
        "kubernetes".into()
    }

    async fn start_decode(&mut self) -> Result<KubeSide, LaunchError> {
        let pod = self.prepared.server_pod();
        self.create_claim_template(podspec::Role::Server).await?;
        let (side, created) = self.create(pod).await?;
        // The run's token Secret, which both pods read, owned by the server pod so Kubernetes
        // collects it with that pod however this run ends (`icb_kube::secret`); it can only be
        // made once the pod has a uid. Cleanup also deletes it by name.
        icb_kube::secret::create(&self.cluster, &self.plan.run_id, &created)
            .await
            .map_err(launch_error)?;
        self.server = Some((side.run.name().to_string(), side.run.observer()));
        Ok(side)
    }

    async fn start_prefill(&mut self, server: &Listening, plan: &ChildPlan) -> Result<KubeSide, LaunchError> {
        let port = server
            .socket_addr()
            .map_err(|e| LaunchError::new(e.to_string()))?
            .port();
        let ip = self
            .server_ip()
            .ok_or_else(|| LaunchError::new("the server pod announced its port before it had an IP"))?;
        let address = join_host_port(&ip, port);
        let pod = self.with_plan(plan).client_pod(&address);
        self.create_claim_template(podspec::Role::Client).await?;
        let (side, _) = self.create(pod).await?;
        self.client = Some((side.run.name().to_string(), side.run.observer()));
        Ok(side)
    }

    fn set_removed_env(&mut self, vars: &[String]) -> Result<(), LaunchError> {
        self.removed_env = vars.to_vec();
        Ok(())
    }

    /// The next run (a control) is a run of its own: its own run id, so its own pod names, token
    /// Secret and run label, and its own deadline. With the same names its creates would meet
    /// the run before's pods and Secret while a real API server still deletes them (409), and a
    /// retried create takes a 409 for its own earlier attempt.
    fn rearm(&mut self) -> Result<(), LaunchError> {
        self.rearms += 1;
        let run_id = rearmed_run_id(&self.base_run_id, self.rearms);
        podspec::check_run_id(&run_id).map_err(LaunchError::new)?;
        let token = icb_kube::secret::token_env(&run_id);
        for pod in [&mut self.prepared.server, &mut self.prepared.client] {
            pod.run_id = run_id.clone();
            pod.env.retain(|e| e.name != token.name);
            pod.env.push(token.clone());
        }
        self.plan.run_id = run_id;
        self.maybe_created = AtomicBool::new(false);
        self.until = None;
        self.server = None;
        self.client = None;
        Ok(())
    }

    fn placement(&self, server: &Listening, _report: &PairReport) -> Placement {
        let port = server.socket_addr().map(|a| a.port()).unwrap_or_default();
        let endpoint = |seen: &Option<(String, PodObserver)>, resolved: &target::Resolved, address: Option<String>| {
            let pod = seen.as_ref().and_then(|(_, o)| o.last_pod());
            Endpoint {
                host: pod
                    .as_ref()
                    .and_then(target::node_of)
                    .unwrap_or_else(|| resolved.node.clone()),
                pod: seen.as_ref().map(|(n, _)| n.clone()),
                namespace: Some(self.prepared.namespace.clone()),
                address: address.or_else(|| pod.as_ref().and_then(|p| p.status.as_ref()?.pod_ip.clone())),
                modelled_on: resolved.modelled_on.clone(),
            }
        };
        let prefill = endpoint(&self.client, &self.prepared.prefill, None);
        let decode = endpoint(
            &self.server,
            &self.prepared.decode,
            self.server_ip().map(|ip| join_host_port(&ip, port)),
        );
        Placement {
            locality: Locality::of_same_host(prefill.host == decode.host),
            mode: self.mode(),
            prefill,
            decode,
        }
    }

    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        if !self.maybe_created.load(Ordering::SeqCst) {
            return Ok(String::new());
        }
        let pods = lifecycle::delete_run(&self.cluster, &self.plan.run_id, self.plan.cleanup_timeout)
            .await
            .map_err(launch_error)?;
        if !self.claims_devices() {
            return Ok(pods);
        }
        // The templates the run's claims were made from (the claims went with their pods).
        let templates = icb_kube::dra::delete_run(&self.cluster, &self.plan.run_id)
            .await
            .map_err(|e| {
                LaunchError::new(format!(
                    "cleanup of the resource claim templates of run {} failed: {e}; run `ic-bench gc`",
                    self.plan.run_id
                ))
            })?;
        Ok(format!("{pods} and {templates} resource claim template(s)"))
    }
}

impl KubeLauncher {
    /// Whether either bench pod claims devices through DRA (its run then has templates).
    fn claims_devices(&self) -> bool {
        self.prepared.server.devices.claim.is_some() || self.prepared.client.devices.claim.is_some()
    }

    /// Creates the ResourceClaimTemplate of the `role` pod, when it claims DRA devices, before
    /// the pod (which the scheduler holds until its claim exists); cleanup deletes it by name.
    async fn create_claim_template(&mut self, role: podspec::Role) -> Result<(), LaunchError> {
        let bench = match role {
            podspec::Role::Server => &self.prepared.server,
            podspec::Role::Client => &self.prepared.client,
        };
        let Some(template) = bench.claim_template() else {
            return Ok(());
        };
        // From here on cleanup has something to delete, even if the pod is never created.
        self.maybe_created.store(true, Ordering::SeqCst);
        icb_kube::dra::create_template(&self.cluster, &template)
            .await
            .map_err(launch_error)
    }
}

/// One bench pod being followed.
pub struct KubeSide {
    role: &'static str,
    /// The node this side was planned on.
    node: String,
    run: PodRun,
    cluster: Cluster,
}

/// How long the kubelet lets an interrupted bench container write its partial report before it
/// kills it (the pipeline itself waits at most its own partial-report grace).
const INTERRUPT_GRACE_S: u32 = 10;

impl Side for KubeSide {
    fn name(&self) -> String {
        format!("the {} side (pod {})", self.role, self.run.name())
    }

    async fn next_line(&mut self) -> Option<String> {
        self.run.next_line().await
    }

    async fn exit_note(&mut self) -> Option<String> {
        self.run.exit_note().await
    }

    fn last_words(&self) -> String {
        self.run.last_words()
    }

    fn failure(&self) -> Option<LaunchFailure> {
        pod_failure(&self.run.last_pod()?, &self.node)
    }

    async fn interrupt(&mut self) {
        // Deleting the pod with a grace period is how Kubernetes sends SIGTERM: `connect` writes
        // the cases it measured as a partial report to its log, which the log follow still reads.
        let dp = icb_kube::kube::api::DeleteParams {
            grace_period_seconds: Some(INTERRUPT_GRACE_S),
            ..Default::default()
        };
        let name = self.run.name().to_string();
        let pods = self.cluster.pods();
        if let Err(e) = self
            .cluster
            .call(&format!("delete pod {name} (SIGTERM)"), || pods.delete(&name, &dp))
            .await
        {
            tracing::debug!("interrupting pod {name}: {e}");
        }
    }

    async fn stop(&mut self, _grace: Duration) {
        // The pods are deleted by the launcher's cleanup; only the log follow ends here.
        self.run.stop();
    }
}

/// `pod` with `vars` left out of its containers' env (a knobs-off control: the bench pod modelled
/// on the recipe, less the recipe's knobs).
fn without_env(pod: &mut Pod, vars: &[String]) {
    if vars.is_empty() {
        return;
    }
    let containers = pod.spec.iter_mut().flat_map(|s| s.containers.iter_mut());
    for env in containers.filter_map(|c| c.env.as_mut()) {
        env.retain(|e| !vars.contains(&e.name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control's run id is the run's own, marked, and still a valid run id at any length.
    #[test]
    fn a_rearmed_run_id_is_marked_and_stays_within_40_characters() {
        assert_eq!(rearmed_run_id("sw0a89eb-p2r0x0", 1), "sw0a89eb-p2r0x0-c1");
        let long = "a".repeat(38) + "-b";
        let id = rearmed_run_id(&long, 12);
        assert_eq!(id.len(), 40, "{id}");
        assert!(id.ends_with("-c12"), "{id}");
        assert!(podspec::check_run_id(&id).is_ok(), "{id}");
        // A cut that would leave a '-' before the suffix drops it.
        let id = rearmed_run_id(&("a".repeat(36) + "-bcd"), 2);
        assert_eq!(id, "a".repeat(36) + "-c2");
        assert!(podspec::check_run_id(&id).is_ok(), "{id}");
    }

    /// Issue 35 item 4: a knobs-off control's pods carry every env entry but the recipe's knobs.
    #[test]
    fn without_env_leaves_the_removed_variables_out_of_every_container() {
        use icb_kube::k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};
        let var = |name: &str| EnvVar {
            name: name.into(),
            value: Some("v".into()),
            ..Default::default()
        };
        let container = Container {
            env: Some(vec![var("UCX_TLS"), var("IC_BENCH_TOKEN"), var("UCX_RNDV_THRESH")]),
            ..Default::default()
        };
        let mut pod = Pod {
            spec: Some(PodSpec {
                containers: vec![container.clone(), container],
                ..Default::default()
            }),
            ..Default::default()
        };
        without_env(&mut pod, &["UCX_TLS".into(), "UCX_RNDV_THRESH".into()]);
        for c in &pod.spec.as_ref().unwrap().containers {
            let names: Vec<&str> = c.env.iter().flatten().map(|e| e.name.as_str()).collect();
            assert_eq!(names, ["IC_BENCH_TOKEN"]);
        }
    }

    fn pod(node: Option<&str>, status: serde_json::Value) -> Pod {
        let mut v = serde_json::json!({
            "metadata": {"name": "ic-bench-x-server"},
            "spec": {"containers": []},
            "status": status,
        });
        if let Some(n) = node {
            v["spec"]["nodeName"] = n.into();
        }
        serde_json::from_value(v).unwrap()
    }

    fn scheduled(status: &str, reason: &str) -> serde_json::Value {
        serde_json::json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": status, "reason": reason}]})
    }

    fn container(state: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"phase": "Pending", "containerStatuses": [
            {"name": "bench", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state}
        ]})
    }

    #[test]
    fn a_pods_failure_is_read_from_its_status_fields() {
        let stuck = scheduled("False", "Unschedulable");
        let unschedulable = |node: &str| LaunchFailure::Unschedulable {
            pod: "ic-bench-x-server".into(),
            node: Some(node.into()),
        };
        assert_eq!(
            pod_failure(&pod(None, stuck.clone()), "node-2"),
            Some(unschedulable("node-2"))
        );
        assert_eq!(
            pod_failure(&pod(Some("node-9"), stuck), "node-2"),
            Some(unschedulable("node-9")),
            "the node it was pinned to first"
        );
        assert_eq!(pod_failure(&pod(None, scheduled("True", "")), "node-2"), None);
        let pull = container(serde_json::json!({"waiting": {"reason": "ImagePullBackOff", "message": "whatever"}}));
        assert_eq!(pod_failure(&pod(None, pull), "n"), Some(LaunchFailure::ImagePull));
        let exited = container(serde_json::json!({"terminated": {"exitCode": 3}}));
        assert_eq!(
            pod_failure(&pod(None, exited), "n"),
            Some(LaunchFailure::SideExited { code: Some(3) })
        );
        let killed = container(serde_json::json!({"terminated": {"exitCode": 137}}));
        assert_eq!(pod_failure(&pod(None, killed), "n"), Some(LaunchFailure::SideKilled));
        let creating = container(serde_json::json!({"waiting": {"reason": "ContainerCreating"}}));
        assert_eq!(pod_failure(&pod(None, creating), "n"), None);
    }

    #[test]
    fn kube_errors_become_launch_failures_by_their_type() {
        let timeout = KubeError::Timeout {
            what: "create pod".into(),
            timeout: Duration::from_secs(5),
        };
        assert_eq!(launch_error(timeout).kind, LaunchFailure::Cluster);
        let api = |code| KubeError::Api {
            what: "create pod".into(),
            code,
            reason: "r".into(),
            message: "m".into(),
        };
        assert_eq!(launch_error(api(503)).kind, LaunchFailure::Cluster);
        assert_eq!(launch_error(api(403)).kind, LaunchFailure::Other);
        let deadline = KubeError::Deadline {
            pod: "p".into(),
            last_seen: "Pending".into(),
        };
        assert_eq!(launch_error(deadline).kind, LaunchFailure::Deadline);
    }
}
