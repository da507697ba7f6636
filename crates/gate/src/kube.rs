//! The gate's steps on Kubernetes: the recipe read locally, bench pods and probe pods in the
//! cluster. [`crate::run_gate`] owns the order, the budget and the verdict; this is the
//! implementation of [`GateSteps`] that `ic-bench gate` hands it (the tests script their own).

use crate::findings::{self, NodeProbe};
use crate::rails::GateRails;
use crate::{GateSteps, PairEnd, Prepared, StepError};
use icb_core::model::{ControlKind, Finding};
use icb_core::protocol::SideErrorKind;
use icb_kube::PodOptions;
use icb_kube::devices::DeviceRequest;
use icb_kube::pair::{BenchPodsPlan, SideTemplates};
use icb_kube::target::Target;
use icb_pair::kube::KubeLauncher;
use icb_pair::{CancellationToken, ExpectationInput, PairError, PairPlan};
use icb_probe::{GatherOptions, NodeExpectations, TransportEnv};
use std::time::Duration;
use tokio::time::Instant;

/// What the Kubernetes gate runs with, read from the flags once.
#[derive(Debug, Clone)]
pub struct KubeGateInput {
    pub cluster: icb_kube::ClusterOptions,
    /// `--recipe` paths (anything `probe env` reads); none: the bench pods are not modelled.
    pub recipe: Vec<String>,
    /// `--role`: the recipe role both bench pods are modelled on.
    pub role: Option<String>,
    pub settings: icb_core::RunSettings,
    pub targets: (Target, Target),
    pub expectation: ExpectationInput,
    pub image: String,
    /// `--engine`/`--ucx-profile` for both sides.
    pub side_flags: Vec<String>,
    pub devices: DeviceRequest,
    /// `--rails`: the pair step is a whole-node rails run.
    pub rails: Option<GateRails>,
    /// `--kv-shape`: the pair step is the deployment's own KV transfer.
    pub kv: Option<crate::kv::GateKv>,
    /// The negative controls the plain pair step runs after its main run (`tcp` by default,
    /// none with `--no-controls`): a gate's PASS rests on a detector shown to work here. With
    /// `--kv-shape`, `tcp` is the KV transfer's own TCP control (`icb_kv_transfer::control`).
    pub controls: Vec<icb_core::model::ControlKind>,
    /// `--control knobs-off` given: it runs (or says why it could not) even when the recipe sets
    /// no knob; by default it runs only when the recipe sets `UCX_*`/`NIXL_*` variables.
    pub knobs_off_asked: bool,
    /// `--cuda-alloc` given: the pair step allocates as told. Otherwise it allocates as the
    /// recipe's engines do (`vmm` where their PyTorch allocator sets expandable segments).
    pub cuda_alloc_given: bool,
    /// `--node-conditions`: the access to write them is checked before any pod, and
    /// [`KubeGate::write_conditions`] writes them after the verdict.
    pub node_conditions: bool,
}

impl KubeGateInput {
    /// The bench pods' options: the image, the sides' engine flags and the device flags; the
    /// gate asks for no privilege or host namespace (the modelled pods bring their own).
    pub fn pod_options(&self) -> PodOptions {
        PodOptions {
            devices: self.devices.clone(),
            ..PodOptions::new(self.image.clone(), self.side_flags.clone())
        }
    }
}

/// The transport env each side's node is probed against, and whether it names RDMA devices.
struct SideEnvs {
    prefill: (TransportEnv, bool),
    decode: (TransportEnv, bool),
}

/// What a node is probed against for a recipe role: its transport env, and whether it names
/// RDMA devices (then the node must have them).
pub fn node_env(role: &icb_recipe::EngineRole) -> (TransportEnv, bool) {
    let t = &role.transport;
    let env = TransportEnv::new(format!("recipe {}", t.scope), t.vars.clone());
    (env, t.ucx_net_devices.is_some() || t.nccl_ib_hca.is_some())
}

/// [`GateSteps`] on Kubernetes.
pub struct KubeGate {
    input: KubeGateInput,
    /// Taken by the pair step (each is used once).
    settings: Option<icb_core::RunSettings>,
    targets: Option<(Target, Target)>,
    expectation: Option<ExpectationInput>,
    side_envs: Option<SideEnvs>,
    templates: SideTemplates,
    cluster: Option<icb_kube::Cluster>,
    launcher: Option<KubeLauncher>,
    /// The recipe's prefill and decode engine arguments (for `--kv-shape`).
    engines: Option<crate::kv::RecipeEngines>,
    /// The bench pods the gate prepared, for `--kv-shape` (its sweep's pods, and on worker
    /// targets the model of its ranks' pods).
    pods: Option<BenchPodsPlan>,
    /// The nodes the bench pods were placed on (prefill's first), once prepared.
    measured: Vec<String>,
}

impl KubeGate {
    pub fn new(input: KubeGateInput) -> Self {
        KubeGate {
            settings: Some(input.settings.clone()),
            targets: Some(input.targets.clone()),
            expectation: Some(input.expectation.clone()),
            input,
            side_envs: None,
            templates: SideTemplates::default(),
            cluster: None,
            launcher: None,
            engines: None,
            pods: None,
            measured: Vec::new(),
        }
    }

    /// `--node-conditions`, after the verdict: the gate's verdict as the `ICBenchFabric`
    /// condition of the nodes it measured ([`crate::conditions`]); the line that says what was
    /// written, or why nothing was.
    pub async fn write_conditions(
        &self,
        report: &icb_core::model::GateReport,
    ) -> Result<String, icb_kube::node_conditions::ConditionError> {
        use crate::conditions::{self, Plan};
        match (conditions::plan(report, &self.measured), &self.cluster) {
            (Plan::Write(marks), Some(cluster)) => {
                conditions::apply(cluster, &marks, &jiff::Timestamp::now().to_string()).await
            }
            (Plan::Skip(why), _) => Ok(why),
            // Nodes are known only once connected; said rather than assumed.
            (Plan::Write(_), None) => Ok(format!(
                "condition {} not written: no connection to the cluster",
                icb_kube::node_conditions::CONDITION_TYPE
            )),
        }
    }
}

impl KubeGate {
    /// With `--kv-shape` on two nodes: the transfer's ranks run in their own whole-node pods,
    /// not in the bench pods modelled above (those run only the descriptor sweep).
    fn kv_note(&self, pods: &BenchPodsPlan) -> Option<String> {
        self.input.kv.as_ref()?;
        match (&pods.prefill, &pods.decode) {
            (Target::Node(p), Target::Node(d)) if p != d => Some(format!(
                "--kv-shape: one process per TP rank in two whole-node bench pods on {p} and {d}, each rank under its side's recipe transport env (the modelled bench pods run only the descriptor sweep, when asked)"
            )),
            (Target::Node(n), Target::Node(_)) => Some(format!(
                "--kv-shape: one process per TP rank in two bench pods on {n}, each rank under its side's recipe transport env (the modelled bench pods run only the descriptor sweep, when asked)"
            )),
            _ => Some("--kv-shape: one process per TP rank in the two bench pods modelled on the workers".into()),
        }
    }
}

/// The allocation the pair step measures for a recipe: the first side (prefill, whose memory a
/// READ maps, then decode) whose engine does not use `cudaMalloc` memory.
pub fn recipe_cuda_alloc(prefill: &icb_recipe::RoleEnv, decode: &icb_recipe::RoleEnv) -> icb_core::CudaAllocMode {
    [prefill, decode]
        .into_iter()
        .map(icb_recipe::role_cuda_alloc)
        .find(|m| !m.is_legacy())
        .unwrap_or_default()
}

fn setup(e: impl std::fmt::Display) -> StepError {
    StepError::Setup(e.to_string())
}

impl GateSteps for KubeGate {
    fn probe_env(&mut self) -> Result<Option<Vec<Finding>>, StepError> {
        let input = &self.input;
        if input.recipe.is_empty() {
            return Ok(None);
        }
        let inputs: Vec<icb_recipe::Input> = input.recipe.iter().map(|p| icb_recipe::Input::from_arg(p)).collect();
        // Read once: the findings, and the roles both sides are modelled on (one rule for the
        // node probes and the bench pod templates).
        let (env_report, roles) =
            icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default()).map_err(setup)?;
        let role = input.role.as_deref();
        let prefill = roles.for_side(icb_recipe::Role::Prefill, role).map_err(setup)?;
        let decode = roles.for_side(icb_recipe::Role::Decode, role).map_err(setup)?;
        self.side_envs = Some(SideEnvs {
            prefill: node_env(prefill),
            decode: node_env(decode),
        });
        // The recipe's prefill/decode pod templates model the bench pods of sides whose workers
        // are not running yet.
        self.templates = icb_kube::template::side_templates(&prefill.env, &decode.env);
        self.engines = Some((prefill.env.engine.clone(), decode.env.engine.clone()));
        if !input.cuda_alloc_given
            && let Some(settings) = self.settings.as_mut()
        {
            settings.cuda_alloc = recipe_cuda_alloc(&prefill.env, &decode.env);
        }
        Ok(Some(findings::of_report("probe env", &env_report)))
    }

    async fn prepare(&mut self, deadline: Instant) -> Result<Prepared, StepError> {
        let cluster = icb_kube::connect(&self.input.cluster)
            .await
            .map_err(|e| setup(icb_core::error_line::one_line(&e)))?;
        let (prefill, decode) = self.targets.take().ok_or_else(|| setup("the gate prepared twice"))?;
        // The transport env comes with the model: the recipe's template, or the running pod.
        let mut pods = BenchPodsPlan::new(
            (prefill, decode),
            icb_kube::podspec::new_run_id(),
            &self.input.pod_options(),
            deadline.saturating_duration_since(Instant::now()),
            cluster.request_timeout(),
        );
        pods.resources = icb_kube::hardening::BenchResources::for_settings(&self.input.settings);
        self.pods = Some(pods.clone());
        let pods_plan = pods.clone();
        let launcher = KubeLauncher::prepare_with_templates(cluster.clone(), pods, &self.templates)
            .await
            .map_err(setup)?;
        let prepared = launcher.prepared();
        let mut nodes = vec![prepared.prefill.node.clone(), prepared.decode.node.clone()];
        nodes.dedup();
        if self.input.node_conditions {
            // A missing ClusterRole stops the gate here, before any pod, not after its pair.
            icb_kube::node_conditions::check_access(&cluster, &nodes[0])
                .await
                .map_err(setup)?;
        }
        self.measured = nodes.clone();
        let out = Prepared {
            nodes,
            modelled_on: [("prefill", &prepared.client), ("decode", &prepared.server)]
                .into_iter()
                .filter_map(|(side, pod)| pod.model.as_ref().map(|m| (side.to_string(), m.source.clone())))
                .collect(),
            notes: prepared
                .notes
                .iter()
                .map(ToString::to_string)
                .chain(self.kv_note(&pods_plan))
                .collect(),
        };
        self.cluster = Some(cluster);
        self.launcher = Some(launcher);
        Ok(out)
    }

    async fn probe_nodes(
        &mut self,
        nodes: &[String],
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Vec<Finding>, StepError> {
        let cluster = self.cluster.clone().ok_or_else(|| setup("probe before prepare"))?;
        // Each node is probed against the transport env of the side that runs there.
        let envs = self.side_envs.as_ref();
        let with_env: Vec<(String, Option<(TransportEnv, bool)>)> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let env = envs.map(|e| if i == 0 { e.prefill.clone() } else { e.decode.clone() });
                (n.clone(), env)
            })
            .collect();
        probe_nodes(&cluster, &with_env, &self.input.image, deadline, cancel).await
    }

    async fn pair(&mut self, deadline: Instant, cancel: &CancellationToken) -> Result<PairEnd, StepError> {
        let launcher = self.launcher.as_mut().ok_or_else(|| setup("pair before prepare"))?;
        let settings = self.settings.take().ok_or_else(|| setup("the pair ran twice"))?;
        let expectation = self.expectation.take().ok_or_else(|| setup("the pair ran twice"))?;
        let left = deadline.saturating_duration_since(Instant::now());
        let mut plan = PairPlan::new(settings, expectation);
        plan.set_deadlines(icb_pair::Deadlines::budget(left, "--budget"));
        if let Some(kv) = &self.input.kv {
            let env = |e: &(TransportEnv, bool)| e.0.vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let envs = self.side_envs.as_ref().map(|e| (env(&e.prefill), env(&e.decode)));
            let site = crate::kv::KvSite {
                cluster: self.cluster.clone().ok_or_else(|| setup("pair before prepare"))?,
                pods: self.pods.as_ref().ok_or_else(|| setup("pair before prepare"))?,
                templates: &self.templates,
                envs: envs.unwrap_or_default(),
                options: self.input.pod_options(),
                deadline,
                prepared: launcher.prepared(),
            };
            return crate::kv::pair(kv, self.engines.as_ref(), plan, site, &self.input.controls, cancel).await;
        }
        if let Some(rails) = &self.input.rails {
            let cluster = self.cluster.clone().ok_or_else(|| setup("pair before prepare"))?;
            let envs = self.side_envs.as_ref().map(|e| (&e.prefill.0, &e.decode.0));
            let envs = (envs.map(|e| e.0), envs.map(|e| e.1));
            let options = self.input.pod_options();
            return crate::rails::pair(cluster, rails, plan, &options, envs, deadline, cancel).await;
        }
        let mut progress = |_: &icb_core::protocol::CaseProgress| {};
        plan.knob_vars = self.side_envs.as_ref().map_or_else(Vec::new, |e| {
            let vars = |e: &(TransportEnv, bool)| e.0.vars.clone().into_iter().collect();
            icb_pair::controls::knob_vars(&icb_pair::local::RecipeEnv {
                prefill: vars(&e.prefill),
                decode: vars(&e.decode),
            })
        });
        // knobs-off by default only where the recipe sets knobs; asked for, it says why not.
        let controls: Vec<_> = self
            .input
            .controls
            .iter()
            .copied()
            .filter(|k| *k != ControlKind::KnobsOff || !plan.knob_vars.is_empty() || self.input.knobs_off_asked)
            .collect();
        let controls = &controls;
        match icb_pair::controls::run_pair_with_controls(controls, &plan, launcher, cancel, &mut progress).await {
            Ok(o) => Ok(PairEnd::Judged(Box::new(o.report))),
            Err(PairError::Interrupted(i)) => Ok(PairEnd::Interrupted {
                cleanup: i.cleanup_text(),
                partial: i.partial,
            }),
            // UCX refused the environment the bench pods were modelled on: with a recipe, that is
            // the recipe's fault, which is what the gate is for.
            Err(PairError::SideFailed {
                kind: SideErrorKind::UcxInit { variable },
                message,
                side,
            }) if !self.input.recipe.is_empty() => Ok(PairEnd::Finding(findings::ucx_refused_recipe(
                &message,
                side,
                variable.as_deref(),
            ))),
            Err(e) => {
                // Decided on the pods' own status (PodScheduled=False, Unschedulable), not on the
                // scheduler's words: with a recipe node selector, that is why.
                let unschedulable = launcher.last_pods().iter().any(icb_kube::lifecycle::unschedulable);
                Err(setup(match self.templates.selectors() {
                    Some(wanted) if unschedulable => {
                        format!("{e}; the recipe's workers select nodes {wanted}: gate nodes they would run on")
                    }
                    _ => e.to_string(),
                }))
            }
        }
    }
}

/// Probe pods on `nodes`, concurrently, each against its side's transport env; findings, or why
/// the step stopped.
async fn probe_nodes(
    cluster: &icb_kube::Cluster,
    nodes: &[(String, Option<(TransportEnv, bool)>)],
    image: &str,
    deadline: Instant,
    token: &CancellationToken,
) -> Result<Vec<Finding>, StepError> {
    let probes = nodes
        .iter()
        .map(|(node, env)| probe_node(cluster.clone(), node.clone(), env.clone(), image, deadline, token));
    let mut found = Vec::new();
    let mut read = Vec::new();
    for (node, probe) in futures::future::join_all(probes).await {
        let probe = probe?;
        if let NodeProbe::Report(report) = &probe {
            read.push((node.clone(), report.readiness.clone()));
        }
        found.extend(findings::of_node(&node, probe));
    }
    // Two nodes (prefill's first), both probed: what they disagree on before the transfer.
    if let [(a, ra), (b, rb)] = &read[..]
        && nodes.len() == 2
    {
        let (a, b) = (format!("prefill {a}"), format!("decode {b}"));
        found.extend(findings::readiness_mismatches((&a, ra.as_ref()), (&b, rb.as_ref())));
    }
    Ok(found)
}

/// One probe pod on `node`, its output judged as the node's report against `env`.
async fn probe_node(
    cluster: icb_kube::Cluster,
    node: String,
    env: Option<(TransportEnv, bool)>,
    image: &str,
    deadline: Instant,
    token: &CancellationToken,
) -> (String, Result<NodeProbe, StepError>) {
    let opts = icb_kube::probe_pod::ProbePodOptions {
        image: image.to_string(),
        image_pull_policy: None,
        run_id: icb_kube::podspec::new_run_id(),
        deadline: deadline.saturating_duration_since(Instant::now()),
    };
    let script = icb_probe::remote::node_script(0, 5);
    let text = icb_kube::probe_pod::run_probe_pod(&cluster, &node, &script, &opts, token.cancelled()).await;
    let probe = match text {
        Ok(t) => {
            let (env, rdma) = env.unwrap_or_default();
            let expect = NodeExpectations {
                env,
                rdma_required: rdma,
            };
            let gather = GatherOptions {
                tool_timeout: Duration::from_secs(5),
                counter_interval: Duration::ZERO,
            };
            Ok(
                match icb_probe::vantage::probe_pod_report(&node, &t, &gather, &expect) {
                    Ok(report) => NodeProbe::Report(Box::new(report)),
                    Err(e) => NodeProbe::Unreadable(e.to_string()),
                },
            )
        }
        Err(icb_kube::KubeError::Interrupted(what)) => Err(StepError::Interrupted(what)),
        Err(e) => Ok(NodeProbe::PodFailed(e.to_string())),
    };
    (node, probe)
}
