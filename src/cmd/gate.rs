//! `ic-bench gate`: the pre-benchmark gate. `probe env` on the recipe, `probe node` on both
//! nodes (short-lived probe pods, each against its side's transport env), then the pair with
//! bench pods modelled on the recipe's prefill/decode pod templates where the workers are not
//! running yet (node targets), or on the running pods, all under one `--budget`; ONE verdict with
//! every finding. Exit 0 pass, 1 fail, 2 setup or over budget (naming what still ran), 130
//! interrupted.

use super::interrupt::Interrupt;
use super::kube_args::ClusterArgs;
use icb_core::Status;
use icb_core::checks::ProbeReport;
use icb_kube::pair::{BenchPodsPlan, SideTemplates};
use icb_kube::target::Target;
use icb_pair::kube::KubeLauncher;
use icb_pair::{PairError, PairPlan, run_pair};
use icb_probe::{GatherOptions, NodeExpectations, TransportEnv};
use serde::Serialize;
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

    /// Sizes of the pair
    #[arg(long, value_delimiter = ',', default_value = "64KiB,1MiB", value_parser = super::common::parse_size_arg)]
    pub sizes: Vec<u64>,

    /// Memory pairs of the pair
    #[arg(long, value_delimiter = ',', default_value = "host-host")]
    pub memory: Vec<icb_core::MemoryPair>,

    #[command(flatten)]
    pub expect: super::common::ExpectArgs,

    /// table, json or junit
    #[arg(short = 'o', long = "output", default_value = "table", value_parser = ["table", "json", "junit"])]
    pub output: String,
}

/// One finding of the gate.
#[derive(Debug, Clone, Serialize)]
struct Finding {
    step: String,
    status: String,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

#[derive(Debug, Serialize)]
struct GateReport {
    schema: &'static str,
    verdict: String,
    reason: String,
    wall_s: f64,
    steps: Vec<(String, f64)>,
    findings: Vec<Finding>,
    /// What each side's bench pod was modelled on: `(side, source)` (the recipe's template when
    /// the workers are not running yet, or the running pod).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    modelled_on: Vec<(String, String)>,
    /// What was not copied into the bench pods, and other notes of the preparation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pair: Option<icb_core::PairReport>,
}

/// The recipe's node selectors (`prefill: k=v; decode: k=v`), when a template has one.
fn selectors(t: &SideTemplates) -> Option<String> {
    let mut out = Vec::new();
    for (side, spec) in [("prefill", &t.prefill), ("decode", &t.decode)] {
        if let Some(s) = spec.as_ref().filter(|s| !s.node_selector.is_empty()) {
            let kv: Vec<String> = s.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push(format!("{side}: {}", kv.join(",")));
        }
    }
    (!out.is_empty()).then(|| out.join("; "))
}

/// The transport env each side's node is probed against.
struct SideEnvs {
    prefill: (TransportEnv, bool),
    decode: (TransportEnv, bool),
}

/// The recipe role's transport env for `side`: `--role` when given, else the side's own role, a
/// worker role, or the one all roles share.
fn side_env(args: &Args, side: &str) -> anyhow::Result<(TransportEnv, bool)> {
    if let Some(role) = args.role.as_deref() {
        return super::probe::recipe_env(&args.recipe, Some(role));
    }
    super::probe::recipe_env(&args.recipe, Some(side))
        .or_else(|_| super::probe::recipe_env(&args.recipe, Some("worker")))
        .or_else(|_| super::probe::recipe_env(&args.recipe, None))
}

fn findings_of(step: &str, report: &ProbeReport) -> Vec<Finding> {
    report
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
        .map(|c| Finding {
            step: step.to_string(),
            status: c.status.as_str().to_string(),
            detail: format!("{}: {}", c.id, c.detail),
            hint: c.hint.clone(),
        })
        .collect()
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let started = Instant::now();
    let deadline = started + args.budget;
    let settings = icb_core::RunSettings {
        tests: args.tests.clone(),
        sizes: args.sizes.clone(),
        memory: args.memory.clone(),
        warmup_iterations: 4,
        min_iterations: 8,
        min_time_s: 0.05,
        max_time_s: 1.0,
        window: 16,
        unit: icb_core::BandwidthUnit::GBps,
        require_cuda: false,
        stop: Some(icb_core::StopRule::DEFAULT),
        plan: Vec::new(),
        blocks: None,
        window_candidates: Vec::new(),
        untouched_buffers: false,
    };
    icb_engine::validate_settings(&settings)?;
    let prefill: Target = args.prefill.parse().map_err(|e| anyhow::anyhow!("--prefill: {e}"))?;
    let decode: Target = args.decode.parse().map_err(|e| anyhow::anyhow!("--decode: {e}"))?;
    let expectation = args.expect.input()?;
    let mut findings = Vec::new();
    let mut steps = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut modelled_on: Vec<(String, String)> = Vec::new();

    // 1. probe env on the recipe (local, read-only); the recipe's prefill/decode pod templates
    // model the bench pods of sides whose workers are not running yet.
    let mut side_envs: Option<SideEnvs> = None;
    let mut templates = SideTemplates::default();
    if !args.recipe.is_empty() {
        let t = Instant::now();
        let inputs: Vec<icb_recipe::Input> = args.recipe.iter().map(|p| icb_recipe::Input::from_arg(p)).collect();
        let report = icb_recipe::probe_env_with(&inputs, &icb_recipe::EnvOptions::default())?;
        findings.extend(findings_of("probe env", &report));
        side_envs = Some(SideEnvs {
            prefill: side_env(&args, "prefill")?,
            decode: side_env(&args, "decode")?,
        });
        templates = super::recipe_template::side_templates(&args.recipe, args.role.as_deref())?;
        steps.push(("probe env".to_string(), t.elapsed().as_secs_f64()));
    }
    let interrupt = Interrupt::install()?;
    let rt = super::common::runtime()?;
    let image = args.image.clone().unwrap_or_else(icb_kube::podspec::default_image);
    let outcome: anyhow::Result<Result<Option<icb_core::PairReport>, i32>> = rt.block_on(async {
        let cluster = args.cluster.connect().await?;
        let token = interrupt.token().clone();
        let remaining = || deadline.saturating_duration_since(Instant::now());
        let pods = BenchPodsPlan {
            prefill,
            decode,
            run_id: icb_kube::podspec::new_run_id(),
            image: image.clone(),
            image_pull_policy: None,
            serve_args: vec!["--idle-timeout".into(), format!("{}s", args.budget.as_secs().max(1))],
            connect_args: vec![],
            privileged: false,
            host_ipc: false,
            host_pid: false,
            service_account: None,
            devices: args.devices.request(),
            // The transport env comes with the model: the recipe's template, or the running pod.
            env: vec![],
            dry_run: false,
            read_nodes: true,
            labels: vec![],
            timeout: remaining(),
            cleanup_timeout: Duration::from_secs(30),
        };
        let mut launcher = KubeLauncher::prepare_with_templates(cluster.clone(), pods, &templates).await?;
        let prepared = launcher.prepared();
        notes.extend(prepared.notes.iter().cloned());
        modelled_on.extend(
            [("prefill", &prepared.client), ("decode", &prepared.server)]
                .into_iter()
                .filter_map(|(side, pod)| pod.model.as_ref().map(|m| (side.to_string(), m.source.clone()))),
        );
        // Each node is probed against the transport env of the side that runs there.
        let nodes: Vec<(String, Option<(TransportEnv, bool)>)> = {
            let envs = side_envs.as_ref();
            let mut n = vec![
                (prepared.prefill.node.clone(), envs.map(|e| e.prefill.clone())),
                (prepared.decode.node.clone(), envs.map(|e| e.decode.clone())),
            ];
            n.dedup_by(|a, b| a.0 == b.0);
            n
        };
        // 2. probe node on both nodes, concurrently.
        if !args.no_node_probe {
            let t = Instant::now();
            let probes = nodes.iter().map(|(node, env)| {
                let cluster = cluster.clone();
                let token = token.clone();
                let image = image.clone();
                let env = env.clone();
                async move {
                    let opts = icb_kube::probe_pod::ProbePodOptions {
                        image,
                        image_pull_policy: None,
                        run_id: icb_kube::podspec::new_run_id(),
                        deadline: remaining(),
                    };
                    let script = icb_probe::remote::node_script(0, 5);
                    let target = format!("node/{node}");
                    let text =
                        icb_kube::probe_pod::run_probe_pod(&cluster, node, &script, &opts, token.cancelled()).await;
                    (
                        node.clone(),
                        text.map(|t| {
                            icb_probe::remote::parse_snapshot(&target, &t).map(|snap| {
                                let (env, rdma) = env.unwrap_or_default();
                                let expect = NodeExpectations {
                                    env,
                                    rdma_required: rdma,
                                };
                                let gather = GatherOptions {
                                    tool_timeout: Duration::from_secs(5),
                                    counter_interval: Duration::ZERO,
                                };
                                icb_probe::probe_node(&snap, &gather, &expect).0
                            })
                        }),
                    )
                }
            });
            let results = tokio::time::timeout_at(deadline, futures::future::join_all(probes)).await;
            let Ok(results) = results else {
                let names: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
                return Ok(Err(over_budget(
                    &args,
                    "probe node on ".to_string() + &names.join(", "),
                )));
            };
            for (node, r) in results {
                match r {
                    Ok(Ok(report)) => {
                        let mut f = findings_of(&format!("probe node/{node}"), &report);
                        // The probe pod's own memlock says nothing about the workers'.
                        f.retain(|x| !x.detail.starts_with("node.memlock"));
                        findings.extend(f);
                    }
                    Ok(Err(e)) => findings.push(Finding {
                        step: format!("probe node/{node}"),
                        status: "warn".into(),
                        detail: e.to_string(),
                        hint: None,
                    }),
                    Err(icb_kube::KubeError::Interrupted(what)) => return Ok(Err(interrupt.report(&what))),
                    Err(e) => findings.push(Finding {
                        step: format!("probe node/{node}"),
                        status: "warn".into(),
                        detail: e.to_string(),
                        hint: Some("pass --no-node-probe where probe pods are not allowed".into()),
                    }),
                }
            }
            steps.push(("probe node".to_string(), t.elapsed().as_secs_f64()));
        }
        // 3. the pair, with what is left of the budget.
        let t = Instant::now();
        let left = remaining();
        if left.is_zero() {
            return Ok(Err(over_budget(
                &args,
                "nothing of the pair (the probes used the budget)".into(),
            )));
        }
        let mut plan = PairPlan::new(settings, expectation);
        plan.startup_timeout = left;
        plan.deadline = left;
        plan.startup_flag = "--budget";
        let mut progress = |_: &icb_core::protocol::CaseProgress| {};
        let r = run_pair(&plan, &mut launcher, &token, &mut progress).await;
        steps.push(("pair".to_string(), t.elapsed().as_secs_f64()));
        match r {
            Ok(o) => Ok(Ok(Some(o.report))),
            Err(PairError::Interrupted(what)) => Ok(Err(interrupt.report(&what))),
            Err(e) if Instant::now() >= deadline => Ok(Err(over_budget(
                &args,
                format!("the pair {} → {} ({e})", args.prefill, args.decode),
            ))),
            Err(e) => match selectors(&templates) {
                Some(wanted) if e.to_string().contains("node affinity/selector") => Err(anyhow::anyhow!(
                    "{e}; the recipe's workers select nodes {wanted}: gate nodes they would run on"
                )),
                _ => Err(e.into()),
            },
        }
    });
    let pair = match outcome? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    if let Some(p) = &pair {
        for c in p
            .cases
            .iter()
            .filter(|c| c.verdict.as_ref().is_some_and(|v| v.status == Status::Fail))
        {
            let v = c.verdict.as_ref().map(|v| v.reason.clone()).unwrap_or_default();
            findings.push(Finding {
                step: "pair".into(),
                status: "fail".into(),
                detail: format!("{} {} B {}: {v}", c.test.as_str(), c.size, c.memory),
                hint: None,
            });
        }
        if p.verdict.status == icb_core::VerdictStatus::Fail {
            findings.push(Finding {
                step: "pair".into(),
                status: "fail".into(),
                detail: format!(
                    "{} (data paths: {})",
                    p.verdict.reason,
                    p.verdict
                        .data_paths
                        .iter()
                        .map(|d| d.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                hint: p.verdict.hint.clone(),
            });
        }
    }
    let failed = findings.iter().any(|f| f.status == "fail");
    let measured = pair
        .as_ref()
        .map(|p| {
            let paths: Vec<&str> = p.verdict.data_paths.iter().map(|d| d.as_str()).collect();
            format!("; measured data paths: {}", paths.join(", "))
        })
        .unwrap_or_default();
    let report = GateReport {
        schema: "ic-bench.gate/v1",
        verdict: if failed { "fail" } else { "pass" }.into(),
        reason: if failed {
            findings
                .iter()
                .filter(|f| f.status == "fail")
                .map(|f| format!("{}: {}", f.step, f.detail))
                .collect::<Vec<_>>()
                .join("; ")
                + &measured
        } else {
            "the recipe's transport and the measured pair are fit for benchmarking".into()
        },
        wall_s: started.elapsed().as_secs_f64(),
        steps,
        findings,
        modelled_on,
        notes,
        pair,
    };
    print!("{}", render(&report, &args.output)?);
    Ok(if failed {
        icb_core::exit::VERDICT_FAILED
    } else {
        icb_core::exit::OK
    })
}

fn over_budget(args: &Args, running: String) -> i32 {
    eprintln!(
        "ic-bench: gate: over the --budget of {}s while {running} still ran; raise --budget",
        args.budget.as_secs()
    );
    icb_core::exit::USAGE_OR_SETUP
}

fn render(r: &GateReport, format: &str) -> anyhow::Result<String> {
    Ok(match format {
        "json" => serde_json::to_string_pretty(r)? + "\n",
        "junit" => {
            use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
            let mut report = Report::new("ic-bench gate");
            let mut suite = TestSuite::new("gate");
            let mut case = if r.verdict == "pass" {
                TestCase::new("gate", TestCaseStatus::success())
            } else {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(r.reason.clone());
                TestCase::new("gate", s)
            };
            case.set_time(Duration::from_secs_f64(r.wall_s));
            suite.add_test_case(case);
            report.add_test_suite(suite);
            report.to_string()? + "\n"
        }
        _ => {
            let mut out = format!("{}: {} ({:.1}s)\n", r.verdict.to_uppercase(), r.reason, r.wall_s);
            for f in &r.findings {
                out.push_str(&format!("  [{}] {}: {}\n", f.status, f.step, f.detail));
                if let Some(h) = &f.hint {
                    out.push_str(&format!("      fix: {h}\n"));
                }
            }
            for (side, source) in &r.modelled_on {
                out.push_str(&format!("  {side} bench pod modelled on {source}\n"));
            }
            let steps: Vec<String> = r.steps.iter().map(|(s, t)| format!("{s} {t:.1}s")).collect();
            out.push_str(&format!("  time: {}\n", steps.join(", ")));
            out
        }
    })
}
