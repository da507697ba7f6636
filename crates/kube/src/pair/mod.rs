//! The two bench pods of a pair on Kubernetes: resolve both targets and decide both pods (what
//! `--dry-run` prints and a real run creates). Running them is the pair pipeline's job
//! (`icb_pair::kube`), which creates them, follows them with [`crate::podrun::PodRun`] and deletes
//! them by label on every path.

use crate::access::Cluster;
use crate::devices::{self, DeviceChoice, DeviceRequest};
use crate::error::KubeError;
use crate::hardening::{self, BenchResources};
use crate::pod_options::PodOptions;
use crate::podspec::{self, BenchPod, Role, SERVER_ENV, SERVER_PLACEHOLDER};
use crate::spec::TransportSpec;
use crate::target::{self, Resolved, Target};
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use std::time::Duration;

mod dra_sides;
mod notes;
use dra_sides::{claim_dra_devices, dra_offer};
pub use notes::{Note, NoteKind, report_warnings};

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct BenchPodsPlan {
    pub prefill: Target,
    pub decode: Target,
    pub run_id: String,
    pub image: String,
    pub image_pull_policy: Option<String>,
    /// Flags after `ic-bench serve --listen 0.0.0.0:0 --once`.
    pub serve_args: Vec<String>,
    /// Flags after `ic-bench connect $(IC_BENCH_SERVER)` (the pipeline adds `--plan`).
    pub connect_args: Vec<String>,
    pub privileged: bool,
    pub host_ipc: bool,
    pub host_pid: bool,
    pub service_account: Option<String>,
    /// `--gpus`, `--rdma`, `--resource` (defaults from the node for node targets).
    pub devices: DeviceRequest,
    /// Environment for both bench pods on top of the modelled pods' (a recipe's transport env).
    /// Labels on the bench pods besides the standard ones (e.g. `ic-bench.dev/sweep-id`).
    pub labels: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    /// A dry run: an API server that cannot be reached leaves a note (node targets need it only
    /// for device defaults) instead of stopping the run.
    pub dry_run: bool,
    /// Skip reading the nodes for device defaults (a sweep read them already and passes flags).
    pub read_nodes: bool,
    /// Deadline for the whole run (scheduling, start, transfer); cleanup has its own.
    pub timeout: Duration,
    /// Deadline for deleting the pods afterwards.
    pub cleanup_timeout: Duration,
    /// cpu/memory of each bench pod; [`BenchResources::for_settings`] sizes it from the run.
    pub resources: BenchResources,
    /// `--memlock-unlimited`: RDMA bench pods stay non-root without IPC_LOCK.
    pub memlock_unlimited: bool,
}

/// How long deleting the pods (or an in-place run's copies) may take: the API's own request
/// deadline, and never under 30 s. The one cleanup rule of pair, sweep and gate.
pub fn cleanup_timeout(request_timeout: Duration) -> Duration {
    Duration::from_secs(30).max(request_timeout)
}

impl BenchPodsPlan {
    /// Two bench pods as the command's [`PodOptions`] say (image, privileges, devices; both
    /// sides get its engine flags), with the rules pair, sweep and gate share: the server stops
    /// after `timeout` idle (`serve --idle-timeout`), cleanup within [`cleanup_timeout`] of
    /// `request_timeout`.
    pub fn new(
        (prefill, decode): (Target, Target),
        run_id: String,
        options: &PodOptions,
        timeout: Duration,
        request_timeout: Duration,
    ) -> BenchPodsPlan {
        let idle = format!("{}s", timeout.as_secs().max(1));
        BenchPodsPlan {
            prefill,
            decode,
            run_id,
            image: options.image.clone(),
            image_pull_policy: options.image_pull_policy.clone(),
            serve_args: [vec!["--idle-timeout".into(), idle], options.side_flags.clone()].concat(),
            connect_args: options.side_flags.clone(),
            privileged: options.privileged,
            host_ipc: options.host_ipc,
            host_pid: options.host_pid,
            service_account: options.service_account.clone(),
            devices: options.devices.clone(),
            labels: vec![],
            env: vec![],
            dry_run: false,
            read_nodes: true,
            timeout,
            cleanup_timeout: cleanup_timeout(request_timeout),
            resources: BenchResources::default(),
            memlock_unlimited: options.memlock_unlimited,
        }
    }

    /// Pods outlive a killed ic-bench by at most this much (activeDeadlineSeconds).
    pub fn active_deadline_s(&self) -> i64 {
        (self.timeout.as_secs() + 60) as i64
    }
}

/// Pod templates to model a side on when its target has no running pod (a node target): the
/// recipe's prefill/decode workers before they run. A side resolved to a running pod is modelled
/// on that pod, and a note says its template was not used.
#[derive(Debug, Clone, Default)]
pub struct SideTemplates {
    pub prefill: Option<TransportSpec>,
    pub decode: Option<TransportSpec>,
}

impl SideTemplates {
    /// The templates' node selectors (`prefill: k=v; decode: k=v`), when one has any: why a
    /// bench pod modelled on them may find no node.
    pub fn selectors(&self) -> Option<String> {
        let mut out = Vec::new();
        for (side, spec) in [("prefill", &self.prefill), ("decode", &self.decode)] {
            if let Some(s) = spec.as_ref().filter(|s| !s.node_selector.is_empty()) {
                let kv: Vec<String> = s.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push(format!("{side}: {}", kv.join(",")));
            }
        }
        (!out.is_empty()).then(|| out.join("; "))
    }

    /// The two sides' templates exchanged (for a run whose client runs on the decode node).
    pub fn swapped(&self) -> SideTemplates {
        SideTemplates {
            prefill: self.decode.clone(),
            decode: self.prefill.clone(),
        }
    }
}

/// Targets resolved and both pods decided; what `--dry-run` prints and a real run creates.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub namespace: String,
    pub decode: Resolved,
    pub prefill: Resolved,
    pub server: BenchPod,
    pub client: BenchPod,
    /// What was not copied from the reference pods, which pod a selector picked, which devices
    /// were requested by default.
    pub notes: Vec<Note>,
}

impl Prepared {
    /// The notes a pair report keeps as warnings (`NoteKind::in_report`), prefixed as the
    /// report shows them.
    pub fn report_warnings(&self) -> Vec<String> {
        report_warnings(&self.notes)
    }

    pub fn server_pod(&self) -> Pod {
        self.server.build()
    }

    /// The client pod for a server address (`SERVER_PLACEHOLDER` in a dry run).
    pub fn client_pod(&self, server_address: &str) -> Pod {
        let mut c = self.client.clone();
        c.env.push(EnvVar {
            name: SERVER_ENV.into(),
            value: Some(server_address.into()),
            ..Default::default()
        });
        c.build()
    }

    /// Both objects as a multi-document YAML stream, exactly what a real run creates (the client's
    /// server address aside, which exists only once the server runs).
    pub fn to_yaml(&self) -> Result<String, KubeError> {
        let mut out = String::new();
        for pod in [self.server_pod(), self.client_pod(SERVER_PLACEHOLDER)] {
            let value = serde_json::to_value(&pod).map_err(|e| KubeError::Output(format!("cannot render pod: {e}")))?;
            out.push_str(&crate::yaml::value_document("v1", "Pod", value)?);
        }
        Ok(out)
    }
}

/// Resolves the targets and decides both pods (reads the reference pods; creates nothing).
pub async fn prepare(cluster: &Cluster, plan: &BenchPodsPlan) -> Result<Prepared, KubeError> {
    prepare_with_templates(cluster, plan, &SideTemplates::default()).await
}

/// [`prepare`], modelling a side without a running pod on its template.
pub async fn prepare_with_templates(
    cluster: &Cluster,
    plan: &BenchPodsPlan,
    templates: &SideTemplates,
) -> Result<Prepared, KubeError> {
    podspec::check_run_id(&plan.run_id).map_err(|e| KubeError::Target(e.to_string()))?;
    let decode = target::resolve(cluster, &plan.decode).await?;
    let prefill = target::resolve(cluster, &plan.prefill).await?;
    let mut notes = Vec::new();
    let mut model = |r: &Resolved, template: Option<&TransportSpec>, side: &str| -> Option<TransportSpec> {
        if let Some(n) = &r.note {
            notes.push(Note {
                kind: NoteKind::PodPicked,
                text: format!("{side}: {n}"),
            });
        }
        let spec = match (&r.reference, template) {
            (Some(p), Some(t)) => {
                notes.push(Note::other(format!(
                    "{side}: modelled on the running pod/{}, not on {}",
                    p.metadata.name.as_deref().unwrap_or_default(),
                    t.source
                )));
                TransportSpec::from_pod(p)
            }
            (Some(p), None) => TransportSpec::from_pod(p),
            (None, Some(t)) => t.clone(),
            (None, None) => return None,
        };
        notes.extend(spec.not_copied.iter().map(|n| Note::other(format!("{side}: {n}"))));
        if let Some(copied) = spec.claims_note() {
            notes.push(Note::other(format!("{side}: {copied}")));
        }
        Some(spec)
    };
    let server_model = model(&decode, templates.decode.as_ref(), "decode");
    let client_model = model(&prefill, templates.prefill.as_ref(), "prefill");
    // The report's `modelled_on` names a template as it names a running pod.
    let (mut decode, mut prefill) = (decode, prefill);
    for (side, m) in [(&mut decode, &server_model), (&mut prefill, &client_model)] {
        if side.modelled_on.is_none() {
            side.modelled_on = m.as_ref().map(|m| m.source.clone());
        }
    }
    // Both nodes at once: an unreachable API server costs one retry window, not two.
    let (server_nodes, client_nodes) =
        tokio::try_join!(advertised(cluster, plan, &decode), advertised(cluster, plan, &prefill))?;
    let (server_tolerations, server_nodes) = split_node(server_nodes, server_model.is_some(), plan);
    let (client_tolerations, client_nodes) = split_node(client_nodes, client_model.is_some(), plan);
    let (server_dra, client_dra) = tokio::try_join!(
        dra_offer(cluster, plan, &decode, server_nodes.as_ref()),
        dra_offer(cluster, plan, &prefill, client_nodes.as_ref())
    )?;
    let mut server_devices = choose_devices(
        plan,
        &decode,
        server_model.is_some(),
        server_nodes,
        &mut notes,
        "decode",
    );
    let mut client_devices = choose_devices(
        plan,
        &prefill,
        client_model.is_some(),
        client_nodes,
        &mut notes,
        "prefill",
    );
    for (choice, offer, side, name) in [
        (&mut server_devices, server_dra, &decode, "decode"),
        (&mut client_devices, client_dra, &prefill, "prefill"),
    ] {
        claim_dra_devices(plan, choice, offer, side, name, &mut notes)?;
    }
    let base = |role: Role,
                node: &str,
                args: Vec<String>,
                model: Option<TransportSpec>,
                devices: DeviceChoice,
                tolerations: Vec<k8s_openapi::api::core::v1::Toleration>| BenchPod {
        run_id: plan.run_id.clone(),
        role,
        namespace: cluster.namespace().to_string(),
        node: node.to_string(),
        image: plan.image.clone(),
        image_pull_policy: plan.image_pull_policy.clone(),
        args,
        // Both sides admit each other by the run's token, from its Secret (`crate::secret`).
        env: vec![crate::secret::token_env(&plan.run_id)],
        model,
        devices,
        active_deadline_s: plan.active_deadline_s(),
        privileged: plan.privileged,
        host_ipc: plan.host_ipc,
        host_pid: plan.host_pid,
        service_account: plan.service_account.clone(),
        extra_labels: plan.labels.iter().cloned().collect(),
        tolerations,
        resources: plan.resources.clone(),
        memlock_unlimited: plan.memlock_unlimited,
    };
    let mut serve_args: Vec<String> = ["serve", "--listen", "0.0.0.0:0", "--once", "--side-events"]
        .map(String::from)
        .to_vec();
    serve_args.extend(plan.serve_args.iter().cloned());
    let mut connect_args = vec!["connect".to_string(), format!("$({SERVER_ENV})")];
    connect_args.extend(plan.connect_args.iter().cloned());
    Ok(Prepared {
        namespace: cluster.namespace().to_string(),
        server: base(
            Role::Server,
            &decode.node,
            serve_args,
            server_model,
            server_devices,
            server_tolerations,
        ),
        client: base(
            Role::Client,
            &prefill.node,
            connect_args,
            client_model,
            client_devices,
            client_tolerations,
        ),
        decode,
        prefill,
        notes,
    })
}

/// The node a side runs on (its taints decide the tolerations; a node target's advertised
/// devices the device defaults): `None` when not read, `Some(Err(why))` when it could not be
/// read for a reason that does not stop the run (no RBAC for nodes: only the explicit flags
/// apply, no taint is tolerated). An unreachable API server stops the run here.
async fn advertised(cluster: &Cluster, plan: &BenchPodsPlan, side: &Resolved) -> Result<Option<NodeRead>, KubeError> {
    if !plan.read_nodes {
        return Ok(None);
    }
    let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(cluster.client().clone());
    let what = format!("get node {}", side.node);
    match cluster.call(&what, || api.get(&side.node)).await {
        Ok(r) => Ok(Some(Ok(r))),
        Err(e) if e.is_unreachable() && !plan.dry_run => Err(e),
        // A missing node: the scheduler names it when the pod cannot be placed.
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Ok(Some(Err(format!(
            "cannot read node {} ({e}); pass --gpus/--rdma to request devices explicitly (none of its taints is tolerated)",
            side.node
        )))),
    }
}

type NodeRead = Result<k8s_openapi::api::core::v1::Node, String>;
type NodeResources =
    Result<std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>, String>;

/// The tolerations from a node read, and its advertised devices when they decide the device
/// defaults (a node target without explicit `--gpus`/`--rdma`).
fn split_node(
    read: Option<NodeRead>,
    modelled: bool,
    plan: &BenchPodsPlan,
) -> (Vec<k8s_openapi::api::core::v1::Toleration>, Option<NodeResources>) {
    let needs_devices = !modelled && (plan.devices.gpus.is_none() || plan.devices.rdma.is_none());
    match read {
        None => (Vec::new(), None),
        Some(Err(why)) => (Vec::new(), needs_devices.then_some(Err(why))),
        Some(Ok(node)) => {
            let tolerations = hardening::tolerations_for(&node);
            let status = node.status.unwrap_or_default();
            let advertised = status.allocatable.or(status.capacity).unwrap_or_default();
            (tolerations, needs_devices.then_some(Ok(advertised)))
        }
    }
}

/// The devices of one side: defaults from the node's advertised resources for node targets
/// (a node that cannot be read gets only the explicit flags, with a note saying so); a side
/// modelled on a pod or a template gets the model's devices, not the node's defaults.
fn choose_devices(
    plan: &BenchPodsPlan,
    side: &Resolved,
    modelled: bool,
    advertised: Option<NodeResources>,
    notes: &mut Vec<Note>,
    name: &str,
) -> DeviceChoice {
    let advertised = match advertised {
        Some(Ok(r)) => Some(r),
        Some(Err(why)) => {
            notes.push(Note::other(format!("{name}: {why}")));
            None
        }
        None => None,
    };
    let choice = devices::decide(&plan.devices, advertised.as_ref(), modelled);
    notes.extend(choice.notes.iter().map(|n| Note {
        kind: NoteKind::DeviceDefault,
        text: format!("{name}: node {}: {n}", side.node),
    }));
    choice
}

/// `ip:port`, bracketing an IPv6 address.
pub fn join_host_port(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_defaults_and_unreadable_nodes_are_told_apart_by_kind() {
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let plan = BenchPodsPlan::new(
            (Target::Node("n1".into()), Target::Node("n2".into())),
            "r1".into(),
            &PodOptions::new("img".into(), vec![]),
            Duration::from_secs(60),
            Duration::from_secs(30),
        );
        let side = Resolved {
            target: Target::Node("n1".into()),
            node: "n1".into(),
            reference: None,
            modelled_on: None,
            note: None,
        };
        let gpus = std::collections::BTreeMap::from([(devices::NVIDIA_GPU.to_string(), Quantity("8".into()))]);
        let mut notes = Vec::new();
        choose_devices(&plan, &side, false, Some(Ok(gpus)), &mut notes, "server");
        choose_devices(
            &plan,
            &side,
            false,
            Some(Err("cannot read node n1".into())),
            &mut notes,
            "client",
        );
        let kinds: Vec<NoteKind> = notes.iter().map(|n| n.kind).collect();
        assert_eq!(kinds, [NoteKind::DeviceDefault, NoteKind::Other]);
        assert_eq!(notes[1].to_string(), "client: cannot read node n1");
    }

    #[test]
    fn only_notes_about_the_run_reach_the_report_and_device_defaults_stay_off_stderr() {
        let note = |kind, text: &str| Note {
            kind,
            text: text.into(),
        };
        let kinds = [NoteKind::PodPicked, NoteKind::DeviceDefault, NoteKind::Other];
        let shown: Vec<bool> = kinds.iter().map(|k| k.on_stderr()).collect();
        assert_eq!(shown, [true, false, true]);
        let notes = [
            note(NoteKind::PodPicked, "picked pod a of 2"),
            note(NoteKind::DeviceDefault, "requesting 8 GPUs"),
            note(NoteKind::Other, "the model's sidecar is not copied"),
        ];
        assert_eq!(
            report_warnings(&notes),
            ["kubernetes: the model's sidecar is not copied"]
        );
    }

    #[test]
    fn ipv6_addresses_are_bracketed() {
        assert_eq!(join_host_port("fd00::1", 5), "[fd00::1]:5");
        assert_eq!(join_host_port("10.0.0.1", 5), "10.0.0.1:5");
    }
}

#[cfg(test)]
mod dry_run_tests {
    use super::*;
    use crate::target::Resolved;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn yaml_round_trips_into_the_same_pods() {
        let mut model = TransportSpec {
            source: "pod/ref".into(),
            container: "main".into(),
            host_ipc: true,
            shm: Some(Some(Quantity("8Gi".into()))),
            ..Default::default()
        };
        model.devices.insert("nvidia.com/gpu".into(), Quantity("2".into()));
        model.devices.insert("rdma/ib".into(), Quantity("1".into()));
        model.env.push(EnvVar {
            name: "UCX_TLS".into(),
            value: Some("rc,cuda_ipc,cuda_copy".into()),
            ..Default::default()
        });
        let resolved = |node: &str| Resolved {
            target: Target::Node(node.into()),
            node: node.into(),
            reference: None,
            modelled_on: None,
            note: None,
        };
        let pod = |role, args: &[&str], model| BenchPod {
            run_id: "r1".into(),
            role,
            namespace: "ns".into(),
            node: "gpu-1".into(),
            image: "img:1".into(),
            image_pull_policy: Some("IfNotPresent".into()),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec![],
            model,
            devices: DeviceChoice::default(),
            active_deadline_s: 300,
            privileged: false,
            host_ipc: false,
            host_pid: false,
            service_account: None,
            extra_labels: Default::default(),
            tolerations: Vec::new(),
            resources: BenchResources::default(),
            memlock_unlimited: false,
        };
        let prepared = Prepared {
            namespace: "ns".into(),
            decode: resolved("gpu-1"),
            prefill: resolved("gpu-1"),
            server: pod(Role::Server, &["serve", "--once"], Some(model)),
            client: pod(
                Role::Client,
                &["connect", "$(IC_BENCH_SERVER)", "--sizes", "8,1024"],
                None,
            ),
            notes: vec![],
        };
        let text = prepared.to_yaml().unwrap();
        let back = crate::yaml::pods(&text).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], prepared.server_pod(), "{text}");
        assert_eq!(back[1], prepared.client_pod(SERVER_PLACEHOLDER), "{text}");
        assert!(text.starts_with("---\napiVersion: v1\nkind: Pod\n"), "{text}");
    }
}
