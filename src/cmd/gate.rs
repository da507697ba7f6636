//! `ic-bench gate`: the pre-benchmark gate. `probe env` on the recipe, `probe node` on both
//! nodes (short-lived probe pods, each against its side's transport env), then the pair with
//! bench pods modelled on the recipe's prefill/decode pod templates where the workers are not
//! running yet (node targets), or on the running pods, all under one `--budget`; ONE verdict with
//! every finding. Exit 0 pass, 1 fail, 2 setup or over budget (naming what still ran), 130
//! interrupted.

use super::interrupt::Interrupt;
use super::kube_args::ClusterArgs;
use icb_core::model::{Finding, GateVerdict};
use icb_core::protocol::SideErrorKind;
use icb_gate::findings::NodeProbe;
use icb_gate::{PairEnd, Prepared, StepError};
use icb_kube::pair::{BenchPodsPlan, SideTemplates};
use icb_kube::target::Target;
use icb_pair::kube::KubeLauncher;
use icb_pair::{PairError, PairPlan, run_pair};
use icb_probe::{GatherOptions, NodeExpectations, TransportEnv};
use std::time::Duration;
use tokio::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub devices: super::devices::DeviceArgs,

    /// The serving recipe (anything `probe env` reads); on node targets the bench pods are cloned from its prefill/decode pod templates
    #[arg(long, value_name = "PATH")]
    pub recipe: Vec<String>,

    /// Recipe role to model both bench pods on (default: prefill for --prefill, decode for --decode)
    #[arg(long, value_name = "ROLE")]
    pub role: Option<String>,

    /// Prefill side: node/NAME, pod/NAME, deployment/NAME, statefulset/NAME, lws/NAME, dgd/NAME/COMPONENT or a selector
    #[arg(long, allow_hyphen_values = true)]
    pub prefill: String,

    /// Decode side (same forms)
    #[arg(long, allow_hyphen_values = true)]
    pub decode: String,

    /// Bound on the whole gate (probes + pair)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::common::parse_duration)]
    pub budget: Duration,

    /// Skip the node probes (when probe pods are not allowed)
    #[arg(long)]
    pub no_node_probe: bool,

    /// Bench and probe image [default: ghcr.io/ic-bench/ic-bench:<this version>]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// Tests of the pair (short: RMA put/get + tag latency)
    #[arg(long, value_delimiter = ',', default_value = "put_bw,get_bw,tag_lat")]
    pub tests: Vec<icb_core::TestKind>,

    /// Sizes of the pair: sizes or power-of-two ranges (8..64MiB), comma separated
    #[arg(long, value_delimiter = ',', default_value = "64KiB,1MiB", value_parser = super::common::parse_sizes_arg)]
    pub sizes: Vec<super::common::SizeList>,

    /// Memory pairs of the pair
    #[arg(long, value_delimiter = ',', default_value = "host-host")]
    pub memory: Vec<icb_core::MemoryPair>,

    #[command(flatten)]
    pub expect: super::common::ExpectArgs,

    /// What stdout shows: the verdict and findings (table; wide does not wrap), json or junit
    #[arg(short = 'o', long = "output", value_enum, default_value_t = GateOutput::Table)]
    pub output: GateOutput,

    #[command(flatten)]
    pub exports: super::export_args::ExportArgs,

    #[command(flatten)]
    pub engine: super::common::EngineArgs,

    /// Whole nodes: the pair step runs every rail of the two nodes at once (`auto`, or
    /// `gpu0=mlx5_0,…`), each rank under the recipe's transport env and its UCX_NET_DEVICES, so a
    /// per-rank NIC mapping that does not follow the nodes' rail maps is measured in the NICs'
    /// own counters
    #[arg(long, value_name = "auto|gpuN=NIC,…")]
    pub rails: Option<String>,

    /// With --rails: a rail more than this far below the median of the rails fails (e.g. 20%)
    #[arg(long, value_name = "PERCENT", default_value = "20%", value_parser = super::pair_rails::parse_percent, requires = "rails")]
    pub rail_margin: f64,

    #[command(flatten)]
    pub history: super::history_args::HistoryArgs,
}

/// The formats that can show a gate report.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateOutput {
    Table,
    Wide,
    Json,
    Junit,
}

impl GateOutput {
    fn format(self) -> icb_report::Format {
        match self {
            GateOutput::Table => icb_report::Format::Table,
            GateOutput::Wide => icb_report::Format::Wide,
            GateOutput::Json => icb_report::Format::Json,
            GateOutput::Junit => icb_report::Format::Junit,
        }
    }
}

/// The transport env each side's node is probed against.
struct SideEnvs {
    prefill: (TransportEnv, bool),
    decode: (TransportEnv, bool),
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let settings = icb_core::RunSettings::qualification(
        args.tests.clone(),
        super::common::SizeList::all(&args.sizes),
        args.memory.clone(),
        1.0,
    );
    icb_engine::validate_settings(&settings)?;
    let (settings, engine_note) = args.engine.qualification(settings)?;
    if let Some(note) = engine_note {
        eprintln!("ic-bench: {note}");
    }
    let prefill: Target = args.prefill.parse().map_err(|e| anyhow::anyhow!("--prefill: {e}"))?;
    let decode: Target = args.decode.parse().map_err(|e| anyhow::anyhow!("--decode: {e}"))?;
    let expectation = args.expect.input()?;
    let rails = super::gate_rails::read(args.rails.as_deref(), args.rail_margin, &args.prefill, &args.decode)?;
    let format = args.output.format();
    // Refused now, before anything runs: a format that cannot show a gate report.
    let exports = args.exports.exports(icb_report::ReportKind::Gate)?;
    let history = args.history.prepare()?;
    // Claimed before the first step: from here on a signal ends in the report, exit 130.
    let interrupt = Interrupt::install()?;
    let plan = icb_gate::GatePlan {
        budget: args.budget,
        probe_nodes: !args.no_node_probe,
        signal_name: super::interrupt::signal_name,
        criteria: Some(criteria(&args, &settings)),
    };
    let mut steps = KubeGate {
        args: &args,
        settings: Some(settings),
        targets: Some((prefill, decode)),
        expectation: Some(expectation),
        image: args.image.clone().unwrap_or_else(icb_kube::podspec::default_image),
        side_envs: None,
        templates: SideTemplates::default(),
        cluster: None,
        launcher: None,
        rails,
    };
    let rt = super::common::runtime()?;
    let mut report = rt.block_on(icb_gate::run_gate(&plan, &mut steps, interrupt.token()));
    let history_error = history.as_ref().and_then(|h| h.gate(&mut report));
    let view = icb_report::View {
        width: super::output::width(false),
        wide: false,
    };
    print!("{}", icb_report::render_gate_in(&report, format, view)?);
    // The export files, on every path (a CI job reads them whatever happened).
    exports.write(icb_report::Report::Gate(&report))?;
    match report.verdict {
        GateVerdict::Interrupted => {
            Ok(interrupt.report("gate stopped, no verdict (the report says what it found so far)"))
        }
        GateVerdict::Error => {
            eprintln!("ic-bench: error: gate: {}", report.reason);
            Ok(report.verdict.exit_code())
        }
        GateVerdict::Pass | GateVerdict::Fail => match (history_error, &history) {
            (Some(e), _) => Err(e),
            (None, Some(h)) => Ok(h.exit_code(
                report.verdict.exit_code(),
                report.pair.as_ref().and_then(|p| p.baseline.as_deref()),
            )),
            (None, None) => Ok(report.verdict.exit_code()),
        },
    }
}

/// What this gate judges against, as its report states it.
fn criteria(args: &Args, settings: &icb_core::RunSettings) -> icb_core::model::Criteria {
    let e = &args.expect;
    let flags = icb_core::model::CriteriaFlags {
        tests: settings.tests.clone(),
        sizes: settings.sizes.clone(),
        memory: settings.memory.clone(),
        max_time_s: settings.max_time_s,
        min_host_bw_gbps: e.min_host_bw,
        min_cuda_bw_gbps: e.min_cuda_bw,
        min_bw_size: e.min_bw_size,
        allow_tcp: e.allow_tcp,
        expect_config: e.expect_config.as_ref().map(|p| p.display().to_string()),
        engine: args.engine.engine,
        ucx_profile: args.engine.ucx_profile_named(),
        host_ipc: false,
        rails: args.rails.clone(),
        rail_margin: args.rail_margin,
    };
    icb_core::model::Criteria::from_flags("gate", &flags)
}

/// The gate's steps on Kubernetes: the recipe read locally, bench pods and probe pods in the
/// cluster (wiring for `icb_gate::run_gate`, which owns the order, the budget and the verdict).
struct KubeGate<'a> {
    args: &'a Args,
    /// Taken by the pair step (each is used once).
    settings: Option<icb_core::RunSettings>,
    targets: Option<(Target, Target)>,
    expectation: Option<icb_pair::ExpectationInput>,
    image: String,
    side_envs: Option<SideEnvs>,
    templates: SideTemplates,
    cluster: Option<icb_kube::Cluster>,
    launcher: Option<KubeLauncher>,
    /// `--rails`: the pair step is a whole-node rails run.
    rails: Option<super::gate_rails::GateRails>,
}

fn setup(e: impl std::fmt::Display) -> StepError {
    StepError::Setup(e.to_string())
}

impl icb_gate::GateSteps for KubeGate<'_> {
    fn probe_env(&mut self) -> Result<Option<Vec<Finding>>, StepError> {
        let args = self.args;
        if args.recipe.is_empty() {
            return Ok(None);
        }
        let inputs: Vec<icb_recipe::Input> = args.recipe.iter().map(|p| icb_recipe::Input::from_arg(p)).collect();
        // Read once: the findings, and the roles both sides are modelled on (one rule for the
        // node probes and the bench pod templates).
        let (env_report, roles) =
            icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default()).map_err(setup)?;
        let role = args.role.as_deref();
        let prefill = roles.for_side(icb_recipe::Role::Prefill, role).map_err(setup)?;
        let decode = roles.for_side(icb_recipe::Role::Decode, role).map_err(setup)?;
        self.side_envs = Some(SideEnvs {
            prefill: super::probe::node_env(prefill),
            decode: super::probe::node_env(decode),
        });
        // The recipe's prefill/decode pod templates model the bench pods of sides whose workers
        // are not running yet.
        self.templates = icb_kube::template::side_templates(&prefill.env, &decode.env);
        Ok(Some(icb_gate::findings::of_report("probe env", &env_report)))
    }

    async fn prepare(&mut self, deadline: Instant) -> Result<Prepared, StepError> {
        let args = self.args;
        let cluster = args
            .cluster
            .connect()
            .await
            .map_err(|e| setup(crate::one_line_error(&e)))?;
        let (prefill, decode) = self.targets.take().ok_or_else(|| setup("the gate prepared twice"))?;
        let mut pods = BenchPodsPlan::new(
            prefill,
            decode,
            icb_kube::podspec::new_run_id(),
            self.image.clone(),
            deadline.saturating_duration_since(Instant::now()),
            cluster.request_timeout(),
            args.engine.side_flags(),
        );
        // The transport env comes with the model: the recipe's template, or the running pod.
        pods.devices = args.devices.request();
        let launcher = KubeLauncher::prepare_with_templates(cluster.clone(), pods, &self.templates)
            .await
            .map_err(setup)?;
        let prepared = launcher.prepared();
        let mut nodes = vec![prepared.prefill.node.clone(), prepared.decode.node.clone()];
        nodes.dedup();
        let out = Prepared {
            nodes,
            modelled_on: [("prefill", &prepared.client), ("decode", &prepared.server)]
                .into_iter()
                .filter_map(|(side, pod)| pod.model.as_ref().map(|m| (side.to_string(), m.source.clone())))
                .collect(),
            notes: prepared.notes.iter().map(ToString::to_string).collect(),
        };
        self.cluster = Some(cluster);
        self.launcher = Some(launcher);
        Ok(out)
    }

    async fn probe_nodes(
        &mut self,
        nodes: &[String],
        deadline: Instant,
        cancel: &icb_pair::CancellationToken,
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
        probe_nodes(&cluster, &with_env, &self.image, deadline, cancel).await
    }

    async fn pair(&mut self, deadline: Instant, cancel: &icb_pair::CancellationToken) -> Result<PairEnd, StepError> {
        let launcher = self.launcher.as_mut().ok_or_else(|| setup("pair before prepare"))?;
        let settings = self.settings.take().ok_or_else(|| setup("the pair ran twice"))?;
        let expectation = self.expectation.take().ok_or_else(|| setup("the pair ran twice"))?;
        let left = deadline.saturating_duration_since(Instant::now());
        let mut plan = PairPlan::new(settings, expectation);
        plan.set_deadlines(icb_pair::Deadlines::budget(left, "--budget"));
        if let Some(rails) = &self.rails {
            let cluster = self.cluster.clone().ok_or_else(|| setup("pair before prepare"))?;
            let envs = self.side_envs.as_ref().map(|e| (&e.prefill.0, &e.decode.0));
            let envs = (envs.map(|e| e.0), envs.map(|e| e.1));
            return super::gate_rails::pair(cluster, rails, plan, self.image.clone(), envs, deadline, cancel).await;
        }
        let mut progress = |_: &icb_core::protocol::CaseProgress| {};
        match run_pair(&plan, launcher, cancel, &mut progress).await {
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
            }) if !self.args.recipe.is_empty() => Ok(PairEnd::Finding(icb_gate::findings::ucx_refused_recipe(
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
    token: &icb_pair::CancellationToken,
) -> Result<Vec<Finding>, StepError> {
    let remaining = || deadline.saturating_duration_since(Instant::now());
    let probes = nodes.iter().map(|(node, env)| {
        let cluster = cluster.clone();
        let token = token.clone();
        let image = image.to_string();
        let env = env.clone();
        async move {
            let opts = icb_kube::probe_pod::ProbePodOptions {
                image,
                image_pull_policy: None,
                run_id: icb_kube::podspec::new_run_id(),
                deadline: remaining(),
            };
            let script = icb_probe::remote::node_script(0, 5);
            let text = icb_kube::probe_pod::run_probe_pod(&cluster, node, &script, &opts, token.cancelled()).await;
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
                    Ok(match icb_probe::vantage::probe_pod_report(node, &t, &gather, &expect) {
                        Ok(report) => NodeProbe::Report(Box::new(report)),
                        Err(e) => NodeProbe::Unreadable(e.to_string()),
                    })
                }
                Err(icb_kube::KubeError::Interrupted(what)) => Err(StepError::Interrupted(what)),
                Err(e) => Ok(NodeProbe::PodFailed(e.to_string())),
            };
            (node.clone(), probe)
        }
    });
    let mut findings = Vec::new();
    for (node, probe) in futures::future::join_all(probes).await {
        findings.extend(icb_gate::findings::of_node(&node, probe?));
    }
    Ok(findings)
}
