//! `ic-bench pair`: one front door for local processes (`--local`) and Kubernetes pods
//! (`--prefill X --decode Y`), or inside two running workers (`--in-place`). All end in the same
//! report and verdict.
//!
//! The flags are read once, by [`PairCommand::from_args`] (ripgrep's LowArgs → HiArgs step): it
//! checks everything that can be checked without the peers and decides the plan (settings,
//! expectation, the launcher's deadlines), the target (which launcher, with its options) and
//! the output. Nothing after it reads a flag. A new way of running a pair is a new
//! `icb_target::PairTarget` variant, decided in `from_args`, driven by
//! `PairTarget::run` and emitted once in [`run`].

use super::interrupt::Interrupt;
use icb_flags::common::{EngineArgs, ExpectArgs, TestArgs, UcxArgs};
use icb_flags::output::{Output, PairFormat, PairOutputArgs};
use icb_pair::PairPlan;
use icb_target::PairEnd;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Run the server and client as local processes (no Kubernetes)
    #[arg(long, conflicts_with_all = ["prefill", "decode"])]
    pub local: bool,

    #[command(flatten)]
    pub local_opts: super::pair_local::LocalArgs,

    /// Prefill (client) side: node/NAME, pod/NAME, deployment/NAME, statefulset/NAME, lws/NAME, dgd/NAME/COMPONENT, or a label selector (app=prefill)
    #[arg(long, requires = "decode", allow_hyphen_values = true)]
    pub prefill: Option<String>,

    /// Decode (server) side: node/NAME, pod/NAME, deployment/NAME, statefulset/NAME, lws/NAME, dgd/NAME/COMPONENT, or a label selector (app=decode)
    #[arg(long, requires = "prefill", allow_hyphen_values = true)]
    pub decode: Option<String>,

    #[command(flatten)]
    pub kube: super::pair_kube::KubePairArgs,

    #[command(flatten)]
    pub in_place: super::pair_inplace::InPlaceArgs,

    #[command(flatten)]
    pub test: TestArgs,

    #[command(flatten)]
    pub expect: ExpectArgs,

    #[command(flatten)]
    pub output: PairOutputArgs,

    #[command(flatten)]
    pub ucx: UcxArgs,

    #[command(flatten)]
    pub engine: EngineArgs,

    #[command(flatten)]
    pub rails: icb_flags::rails::RailArgs,

    #[command(flatten)]
    pub emulated_rails: icb_flags::rails::EmulatedRailArgs,

    #[command(flatten)]
    pub kv: icb_flags::kv::KvArgs,

    #[command(flatten)]
    pub history: icb_flags::history::HistoryArgs,

    /// Negative controls after the main run, comma separated or repeated: tcp (the same pair with
    /// UCX forced to TCP: it must be classified TCP, or the run is inconclusive; the main path
    /// must beat it; with --rails on one rail pair; with --kv-shape every rank again, a few
    /// requests, whose rate the "over TCP" estimate then uses), wrong-nic (--rails: one rail pair pinned to
    /// another rail's NIC: the counters must say wrong_nic, or no attribution is trusted),
    /// knobs-off (with --recipe: the same pair without the recipe's UCX_*/NIXL_* variables; warns
    /// when the recipe's env is slower than UCX's defaults)
    #[arg(long = "control", value_name = "KIND", value_delimiter = ',')]
    pub controls: Vec<icb_core::model::ControlKind>,

    /// With --local: run both sides under this serving recipe's transport env (anything `probe
    /// env` reads; each side its role's), e.g. to see with --control knobs-off what its UCX knobs do;
    /// with --kv-shape (--local or on Kubernetes): whose KV connector's operation (read or write)
    /// the output marks
    #[arg(long, value_name = "PATH")]
    pub recipe: Vec<String>,

    /// Recipe role to take both sides' env from (default: prefill for the prefill side, decode for
    /// the decode side)
    #[arg(long, value_name = "ROLE", requires = "recipe")]
    pub role: Option<String>,
}

/// A pair run, decided: nothing after [`PairCommand::from_args`] reads a flag.
pub struct PairCommand {
    /// Settings, expectation and the target launcher's deadlines.
    pub plan: PairPlan,
    pub target: PairTarget,
    pub output: Output,
    /// `--history`/`--baseline`: compares and records the report before it is written.
    pub history: Option<icb_flags::history::RunHistory>,
    /// `--control`: the negative controls to run after the main run (deduplicated, in order).
    pub controls: Vec<icb_core::model::ControlKind>,
}

pub use icb_target::{PairTarget, PodsFormat};

impl PairCommand {
    /// The one place that reads the pair flags. Everything that can be checked without the
    /// peers is checked here: a typo in a flag or a file must not cost a whole benchmark run.
    pub fn from_args(args: Args) -> anyhow::Result<PairCommand> {
        let dry_run = args.kube.dry_run == Some(super::pair_kube::DryRun::Client);
        if args.local && dry_run {
            anyhow::bail!("--dry-run prints the pods of a Kubernetes run: use it with --prefill/--decode, not --local");
        }
        args.engine.check()?;
        let settings = args.test.settings_for(args.engine.engine)?;
        let (format, pods_format) = formats(args.output.format, dry_run)?;
        let output = args.output.dest.resolve(format, icb_report::ReportKind::Pair)?;
        // The expectations file is read once, here; the pipeline resolves it for the placement.
        let mut plan = PairPlan::new(settings, args.expect.input()?);
        plan.ucx_profile = args.engine.ucx_profile;
        refuse(&args)?;
        let mut controls = args.controls.clone();
        controls.sort();
        controls.dedup();
        let recipe_env = recipe_knobs(&args, &controls, &mut plan)?;
        let pods = args.kube.pod_options(args.engine.side_flags());
        let target = target(&args, &pods, &mut plan, pods_format, recipe_env)?;
        // Last: every flag is checked before the history file is opened (created).
        let history = if dry_run { None } else { args.history.prepare()? };
        Ok(PairCommand {
            plan,
            target,
            output,
            history,
            controls,
        })
    }
}

/// The flags that contradict each other or the kind of run (each refusal one line, exit 2).
fn refuse(args: &Args) -> anyhow::Result<()> {
    if args.local
        && let Some(flag) = super::pair_kube::kubernetes_only_flag(&args.kube)
    {
        anyhow::bail!("{flag} applies to Kubernetes runs (--prefill/--decode), not --local: drop it");
    }
    if !args.local && args.local_opts.isolation != icb_isolate::Isolation::None {
        anyhow::bail!("--isolation applies to --local runs; on Kubernetes the pods' own spec decides (see --host-ipc)");
    }
    let emulated_stray = (!args.rails.wanted()).then(|| args.emulated_rails.given()).flatten();
    if let Some(flag) = args.rails.stray_flag().or(emulated_stray) {
        anyhow::bail!("{flag} needs --rails or --rail-devices");
    }
    if !args.recipe.is_empty() && !args.local && !args.kv.wanted() {
        anyhow::bail!("--recipe applies to --local runs and --kv-shape: add --local, or --kv-shape MODEL");
    }
    if args.rails.wanted() && args.in_place.in_place {
        anyhow::bail!("--rails runs bench pods on whole nodes, not --in-place: drop one");
    }
    if let Some(kind) = args.controls.iter().find(|k| **k != icb_core::model::ControlKind::Tcp)
        && args.kv.wanted()
    {
        anyhow::bail!("--control {kind} does not run with --kv-shape (its control is tcp): drop {kind}");
    }
    if let Some(kind) = args.controls.iter().find(|k| k.needs_rails())
        && !args.rails.wanted()
    {
        anyhow::bail!("--control {kind} pins a rail's ranks to another rail's NIC: it needs --rails");
    }
    Ok(())
}

/// Who starts the two sides, as the flags say; `pods`: the command's one reading of the pod
/// flags, which every pods plan takes.
fn target(
    args: &Args,
    pods: &icb_kube::PodOptions,
    plan: &mut PairPlan,
    pods_format: Option<PodsFormat>,
    recipe_env: icb_pair::local::RecipeEnv,
) -> anyhow::Result<PairTarget> {
    Ok(if args.kv.wanted() {
        let mut kv = super::pair_kv::target(args, pods, plan)?;
        kv.read_recipe_connector(&args.recipe, args.role.as_deref())?;
        PairTarget::Kv(Box::new(kv))
    } else if args.rails.wanted() && !args.local {
        PairTarget::KubeRails(Box::new(super::pair_rails_kube::target(args, pods, plan)?))
    } else if args.local && args.rails.wanted() {
        let opts = super::pair_local::options(args, plan)?;
        PairTarget::LocalRails(Box::new(super::pair_rails::target(
            &args.rails,
            &args.emulated_rails,
            opts,
        )?))
    } else if args.local {
        let mut opts = super::pair_local::options(args, plan)?;
        opts.recipe_env = recipe_env;
        PairTarget::Local(opts)
    } else if args.in_place.in_place {
        PairTarget::InPlace(super::pair_inplace::target(args, plan)?)
    } else if args.prefill.is_some() && args.decode.is_some() {
        PairTarget::Kube(super::pair_kube::target(args, pods, plan, pods_format)?)
    } else {
        anyhow::bail!("say where to run: --local, or --prefill TARGET --decode TARGET (e.g. node/gpu-1)")
    })
}

/// `--recipe`: each side's transport env, its `UCX_*`/`NIXL_*` names on the plan for a knobs-off
/// control, which without them is refused here (before anything runs).
fn recipe_knobs(
    args: &Args,
    controls: &[icb_core::model::ControlKind],
    plan: &mut PairPlan,
) -> anyhow::Result<icb_pair::local::RecipeEnv> {
    if !args.recipe.is_empty() && args.rails.wanted() {
        anyhow::bail!("--recipe applies to a plain --local pair or --kv-shape; drop --rails");
    }
    let knobs_off = controls.contains(&icb_core::model::ControlKind::KnobsOff);
    let (recipe_env, knobs) = icb_gate::pair_env::pair_env(&args.recipe, args.role.as_deref(), knobs_off)?;
    plan.knob_vars = knobs;
    Ok(recipe_env)
}

/// `-o`: the report's format, or with `--dry-run` what the pods are printed as (yaml, also
/// for the default `-o table`, or json).
fn formats(format: PairFormat, dry_run: bool) -> anyhow::Result<(icb_report::Format, Option<PodsFormat>)> {
    use icb_report::Format;
    let report = match (format, dry_run) {
        (PairFormat::Table | PairFormat::Yaml, true) => return Ok((Format::Table, Some(PodsFormat::Yaml))),
        (PairFormat::Json, true) => return Ok((Format::Json, Some(PodsFormat::Json))),
        (other, true) => anyhow::bail!("-o {} with --dry-run: use -o yaml or -o json", name(other)),
        (PairFormat::Yaml, false) => anyhow::bail!(
            "-o yaml prints the pods of --dry-run: add --dry-run or use -o table, wide, json, junit, prometheus, svg or collectivex"
        ),
        (PairFormat::Table, false) => Format::Table,
        (PairFormat::Wide, false) => Format::Wide,
        (PairFormat::Json, false) => Format::Json,
        (PairFormat::Junit, false) => Format::Junit,
        (PairFormat::Prometheus, false) => Format::Prometheus,
        (PairFormat::Svg, false) => Format::Svg,
        (PairFormat::Collectivex, false) => Format::Collectivex,
    };
    Ok((report, None))
}

/// A value's name as the flag spells it.
fn name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

/// The one drive and the one emit of every pair target.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let cmd = PairCommand::from_args(args)?;
    // Installed before anything is started, so a signal at any point reaches the cleanup.
    let interrupt = Interrupt::install()?;
    let runtime = super::runtime()?;
    let gpus = || icb_engine::local::cuda_info().devices;
    let host = icb_kv_transfer::KvHost {
        tool: super::connect::tool_info(),
        gpus: &gpus,
    };
    let mut view = icb_target::view::TerminalView::of(&cmd.target, &cmd.plan.settings);
    let run = (&cmd.plan, &cmd.controls[..]);
    let end = cmd.target.run(run, runtime, interrupt.token(), &host, &mut view);
    // The bar is cleared before the report.
    drop(view);
    match end? {
        PairEnd::NotStarted => Ok(interrupt.report("nothing was left to clean up")),
        PairEnd::Pods(text) => {
            cmd.output.emit(&text)?;
            Ok(icb_core::exit::OK)
        }
        PairEnd::Ran(result) => Ok(icb_target::emit::emit_outcome(
            *result,
            &cmd.output,
            &interrupt,
            cmd.history.as_ref(),
        )?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;
    use std::time::Duration;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn command(argv: &[&str]) -> anyhow::Result<PairCommand> {
        let argv = std::iter::once("pair").chain(argv.iter().copied());
        PairCommand::from_args(Cli::try_parse_from(argv)?.args)
    }

    #[test]
    fn kubernetes_runs_get_one_budget_for_the_pods_and_the_plan() {
        let cmd = command(&["--prefill", "node/a", "--decode", "node/b", "--timeout", "100s"]).unwrap();
        let PairTarget::Kube(k) = &cmd.target else {
            panic!("not a Kubernetes target")
        };
        assert_eq!(
            (cmd.plan.deadline, cmd.plan.startup_flag),
            (Duration::from_secs(100), "--timeout")
        );
        assert_eq!(k.pods.timeout, Duration::from_secs(100));
        assert_eq!(k.pods.serve_args[..2], ["--idle-timeout", "100s"]);
        assert_eq!(k.dry_run, None);
        // Without --timeout: the run's own deadline plus a minute for scheduling and image pulls.
        let cmd = command(&["--prefill", "node/a", "--decode", "node/b"]).unwrap();
        let PairTarget::Kube(k) = &cmd.target else {
            panic!("not a Kubernetes target")
        };
        assert_eq!(k.pods.timeout, icb_pair::Deadlines::pods_default(&cmd.plan.settings));
    }

    /// Issue 35: `--kv-shape` runs its own TCP control; knobs-off and wrong-nic are refused in
    /// one line before anything runs (they were all refused before).
    #[test]
    fn kv_shape_runs_the_tcp_control_only() {
        let base = ["--local", "--kv-shape", "llama-3.1-8b", "--isl", "16"];
        let cmd = command(&[&base[..], &["--control", "tcp"]].concat()).unwrap();
        assert_eq!(cmd.controls, [icb_core::model::ControlKind::Tcp]);
        assert!(matches!(cmd.target, PairTarget::Kv(_)));
        for kind in ["knobs-off", "wrong-nic"] {
            let e = command(&[&base[..], &["--control", kind]].concat()).err().unwrap();
            assert_eq!(
                e.to_string(),
                format!("--control {kind} does not run with --kv-shape (its control is tcp): drop {kind}")
            );
        }
    }

    /// The pod flags are read once (`KubePairArgs::pod_options`): a KV run's bench pods (its
    /// descriptor sweep's) and its ranks' node pods get the same image, privileges and engine
    /// flags.
    #[test]
    fn one_reading_of_the_pod_flags_shapes_every_pod() {
        let argv = [
            "--prefill",
            "node/a",
            "--decode",
            "node/b",
            "--kv-shape",
            "llama-3.1-8b",
            "--image",
            "img:1",
            "--image-pull-policy",
            "Never",
            "--privileged",
            "--service-account",
            "sa",
            "--memlock-unlimited",
        ];
        let cmd = command(&argv).unwrap();
        let PairTarget::Kv(kv) = &cmd.target else {
            panic!("not a KV target")
        };
        let icb_kv_transfer::KvPlace::Kube(kube) = &kv.place else {
            panic!("not on Kubernetes")
        };
        let (bench, ranks) = (&kube.bench, &kube.ranks);
        for (image, policy, sa) in [
            (&bench.image, &bench.image_pull_policy, &bench.service_account),
            (&ranks.image, &ranks.image_pull_policy, &ranks.service_account),
        ] {
            assert_eq!(
                (image.as_str(), policy.as_deref(), sa.as_deref()),
                ("img:1", Some("Never"), Some("sa"))
            );
        }
        assert!(bench.privileged && ranks.privileged && bench.memlock_unlimited && ranks.memlock_unlimited);
        assert_eq!(bench.connect_args, ranks.side_args);
        assert_eq!(ranks.run_id, format!("{}-kr", bench.run_id));
    }

    #[test]
    fn local_runs_keep_the_local_deadlines() {
        let cmd = command(&["--local", "--startup-timeout", "7s"]).unwrap();
        assert!(matches!(cmd.target, PairTarget::Local(_)));
        let want = icb_pair::Deadlines::local(&cmd.plan.settings, Duration::from_secs(7));
        assert_eq!(cmd.plan.deadlines(), want);
    }

    #[test]
    fn in_place_runs_fit_the_cases_into_the_side_budget() {
        let argv = [
            "--in-place",
            "--prefill",
            "pod/a",
            "--decode",
            "pod/b",
            "--in-place-binary",
            "/bin/true",
        ];
        let cmd = command(&argv).unwrap();
        let PairTarget::InPlace(t) = &cmd.target else {
            panic!("not an in-place target")
        };
        assert_eq!(cmd.plan.settings.sizes, icb_pair::inplace::fit::DEFAULT_SIZES);
        assert_eq!(cmd.plan.startup_flag, "--side-timeout");
        assert_eq!(t.plan.side_timeout, Duration::from_secs(15));
    }

    #[test]
    fn dry_run_prints_yaml_or_json_and_yaml_needs_dry_run() {
        let pods = |argv: &[&str]| match command(argv).map(|c| c.target) {
            Ok(PairTarget::Kube(k)) => Ok(k.dry_run),
            Ok(_) => panic!("not a Kubernetes target"),
            Err(e) => Err(e.to_string()),
        };
        let base = ["--prefill", "node/a", "--decode", "node/b", "--dry-run"];
        assert_eq!(pods(&base), Ok(Some(PodsFormat::Yaml)));
        assert_eq!(pods(&[&base[..], &["-o", "yaml"]].concat()), Ok(Some(PodsFormat::Yaml)));
        assert_eq!(pods(&[&base[..], &["-o", "json"]].concat()), Ok(Some(PodsFormat::Json)));
        let e = pods(&[&base[..], &["-o", "junit"]].concat()).unwrap_err();
        assert_eq!(e, "-o junit with --dry-run: use -o yaml or -o json");
        let e = pods(&["--prefill", "node/a", "--decode", "node/b", "-o", "yaml"]).unwrap_err();
        assert!(e.starts_with("-o yaml prints the pods of --dry-run"), "{e}");
    }
}
