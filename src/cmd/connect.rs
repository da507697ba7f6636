//! `ic-bench connect HOST:PORT`: the prefill side; runs every case against `ic-bench serve`.
//!
//! Run by hand it takes its settings from flags and prints a report. Run by a launcher of the pair
//! pipeline it gets one `--plan` document instead (settings and the resolved expectation) and
//! prints the typed protocol lines (`icb_core::protocol`): one per case, then the report.

use super::common::{EngineArgs, ExpectArgs, TestArgs, UcxArgs, parse_duration};
use super::output::OutputArgs;
use anyhow::Context as _;
use icb_core::protocol::{ChildPlan, SideWriter};
use icb_core::{CaseResult, Locality, ToolInfo};
use icb_engine::OnCase;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The flags `--plan` decides (settings, expectation, placement, output): refused beside it.
const PLAN_DECIDES: [&str; 28] = [
    "profile",
    "tests",
    "sizes",
    "blocks",
    "batches",
    "memory",
    "warmup",
    "min_iterations",
    "min_time",
    "max_time",
    "window",
    "unit",
    "require_cuda",
    "cuda_optional",
    "min_host_bw",
    "min_cuda_bw",
    "min_bw_size",
    "allow_tcp",
    "expect_config",
    "json_line",
    "ucx_peer_errors",
    "placement",
    "connect_timeout",
    "format",
    "output_file",
    "export_json",
    "export_junit",
    "export_prometheus",
];

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Address of `ic-bench serve`, HOST:PORT
    #[arg(value_name = "HOST:PORT")]
    pub server: String,

    #[command(flatten)]
    pub token: super::common::TokenArgs,

    #[command(flatten)]
    pub test: TestArgs,

    #[command(flatten)]
    pub expect: ExpectArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub ucx: UcxArgs,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Where the two sides run: auto (compares the kernels' boot ids), same-host, different-hosts
    #[arg(long, value_name = "WHERE", default_value = "auto", value_parser = parse_placement)]
    pub placement: PlacementChoice,

    /// Print exactly one compact JSON line (the report) on stdout; human output goes to stderr
    #[arg(long)]
    pub json_line: bool,

    /// Give up connecting to the server after this long
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// Preflight (an init container before the serving engine starts; docs/kubernetes.md): the whole run, from the first connection attempt to the verdict, within this long, e.g. 10s. The server is waited for within 30 % of it and the cases are fitted into it; a run the deadline cuts short exits 2 (not known), never 0
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "plan")]
    pub within: Option<Duration>,

    /// Use UCX peer error handling on the endpoints (as NIXL does; UCX then skips sysv/posix)
    #[arg(long)]
    pub ucx_peer_errors: bool,

    /// The whole run as one document from the pair pipeline (icb_core::protocol::ChildPlan, JSON);
    /// prints protocol lines instead of a report. For launchers, not for people. Every flag the
    /// plan decides instead is refused beside it.
    #[arg(long, value_name = "JSON", hide = true, conflicts_with_all = PLAN_DECIDES)]
    pub plan: Option<String>,

    #[command(flatten)]
    pub rails: super::pair_rails::RailArgs,
}

/// `--placement`: a forced locality, or `None` for auto.
#[derive(Debug, Clone, Copy)]
pub struct PlacementChoice(Option<Locality>);

impl PlacementChoice {
    /// The forced locality; `None` for auto.
    pub fn locality(&self) -> Option<Locality> {
        self.0
    }
}

fn parse_placement(s: &str) -> Result<PlacementChoice, String> {
    match s {
        "auto" => Ok(PlacementChoice(None)),
        "same-host" => Ok(PlacementChoice(Some(Locality::SameHost))),
        "different-hosts" => Ok(PlacementChoice(Some(Locality::DifferentHosts))),
        _ => Err(format!(
            "'{s}' is not a placement: use auto, same-host or different-hosts"
        )),
    }
}

/// What goes into every report's `tool` field.
pub fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "ic-bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("IC_BENCH_GIT_COMMIT").into(),
        ucx_headers: env!("IC_BENCH_UCX_HEADERS").into(),
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(flag) = args.rails.stray_flag() {
        anyhow::bail!("{flag} needs --rails or --rail-devices");
    }
    if args.rails.wanted() {
        if args.within.is_some() {
            anyhow::bail!("--within bounds one pair's preflight, not a rails run: drop --within or --rails");
        }
        return super::connect_rails::run(args);
    }
    if let Some(plan) = &args.plan {
        let plan = ChildPlan::from_json(plan).context("--plan")?;
        return run_planned(&args, plan);
    }
    run_human(&args)
}

/// Prints each case as it arrives: a log line, and the live progress bar.
fn on_case(live: Arc<Mutex<icb_report::live::CaseProgress>>, unit: icb_core::BandwidthUnit, total: usize) -> OnCase {
    let mut index = 0;
    Box::new(move |c: &CaseResult| {
        index += 1;
        tracing::info!("{}", icb_report::text::case_line(c, unit));
        if let Ok(mut live) = live.lock() {
            live.case(index, total, c);
        }
    })
}

/// The human `connect`: one pair against `--server`, the report printed.
fn run_human(args: &Args) -> anyhow::Result<i32> {
    args.engine.check()?;
    let mut settings = args.test.settings_for(args.engine.engine)?;
    if let Some(within) = args.within {
        let note = icb_engine::preflight::fit(&mut settings, within).map_err(anyhow::Error::msg)?;
        note.into_iter().for_each(|n| eprintln!("ic-bench: {n}"));
    }
    // Resolved before stdout is set aside: the width of the terminal the report goes to.
    let output = args.output.resolve(icb_report::ReportKind::Pair)?;
    let mut out = super::report_out::reserve()?;
    let interrupt = super::interrupt::Interrupt::install()?;
    let expectation = args.expect.input()?;
    let unit = settings.unit;
    let total = icb_report::live::total_cases(&settings);
    let live = Arc::new(Mutex::new(icb_report::live::CaseProgress::start(total, unit)));
    let preflight = args
        .within
        .map(|within| icb_engine::preflight::Preflight::arm(within, interrupt.token()));
    let cancel = preflight.as_ref().map_or(interrupt.token(), |p| p.token()).clone();
    let token = args.token.resolve()?;
    let opts_for = |connect_timeout: Duration| icb_engine::ConnectOptions {
        server: args.server.clone(),
        settings: settings.clone(),
        connect_timeout,
        locality: args.placement.0,
        expect_flags: expectation.flags.clone(),
        expect_config: expectation.config.clone(),
        expectation: None,
        ucx: ucx_options(args, args.ucx_peer_errors),
        tool: tool_info(),
        placement_mode: "manual".into(),
        on_case: Some(on_case(Arc::clone(&live), unit, total)),
        cancel: Some(cancel.clone()),
        token: token.clone(),
    };
    let result = match &preflight {
        // A sidecar still starting refuses: asked again within the budget's connect share.
        Some(p) => p.retry_refused(args.connect_timeout, |timeout| {
            engine_connect(opts_for(timeout), &args.engine)
        }),
        None => engine_connect(opts_for(args.connect_timeout), &args.engine),
    };
    if let Ok(live) = live.lock() {
        live.finish();
    }
    if let Some(p) = preflight.as_ref().filter(|p| p.cut(interrupt.token())) {
        return cut_short(p, &args.server, result, |report| {
            emit(report, args.json_line, &output, &mut out)
        });
    }
    let report = interrupted_or(result, &interrupt)?;
    emit(&report, args.json_line, &output, &mut out)?;
    Ok(exit_code(&report, &interrupt))
}

/// A preflight the deadline cut: what it measured is written (evidence), and it exits 2 with
/// one line saying so; not known, never a pass.
fn cut_short(
    p: &icb_engine::preflight::Preflight,
    server: &str,
    result: Result<icb_core::PairReport, icb_engine::EngineError>,
    emit: impl FnOnce(&icb_core::PairReport) -> anyhow::Result<()>,
) -> anyhow::Result<i32> {
    let budget = p.budget();
    match result {
        Ok(report) if report.partial.is_none() => {
            // Finished as the deadline fell: the verdict stands.
            emit(&report)?;
            Ok(icb_core::exit::for_report(&report))
        }
        Ok(report) => {
            emit(&report)?;
            let planned = report.partial.as_ref().map_or(0, |p| p.planned_cases);
            eprintln!(
                "ic-bench: error: preflight: only {} of {planned} cases measured within --within {budget}: not known, never a pass; give fewer --tests/--memory or a longer --within",
                report.cases.len()
            );
            Ok(icb_core::exit::USAGE_OR_SETUP)
        }
        Err(icb_engine::EngineError::Interrupted) => {
            eprintln!(
                "ic-bench: error: preflight: nothing measured within --within {budget}: ic-bench serve at {server} did not answer in time or the cases did not start: not known, never a pass"
            );
            Ok(icb_core::exit::USAGE_OR_SETUP)
        }
        Err(e) => Err(e.into()),
    }
}

/// The report on the reserved stdout: one JSON line (`--json-line`, the table on stderr) or as
/// `-o` asks; then the export files.
fn emit(
    report: &icb_core::PairReport,
    json_line: bool,
    output: &super::output::Output,
    out: &mut super::report_out::ReportOut,
) -> anyhow::Result<()> {
    let view = output.view();
    if json_line {
        let line = serde_json::to_string(report).context("cannot serialize the report")?;
        writeln!(out, "{line}")?;
        out.flush()?;
        if let Ok(table) = icb_report::render_pair_in(report, icb_report::Format::Table, view) {
            eprintln!("{table}");
        }
    } else {
        output.emit_to(&icb_report::render_pair_in(report, output.format, view)?, out)?;
    }
    output.write_exports(icb_report::Report::Pair(report))?;
    Ok(())
}

/// `icb_engine::connect` with the signal handler's token: an interruption before the server's
/// hello is an error that already says so; after it, the report of the cases measured so far
/// comes back marked partial, with the signal named.
fn connect_or_interrupted(
    opts: icb_engine::ConnectOptions,
    engine: &EngineArgs,
    interrupt: &super::interrupt::Interrupt,
) -> anyhow::Result<icb_core::PairReport> {
    interrupted_or(engine_connect(opts, engine), interrupt)
}

/// The prefill side through the chosen engine.
fn engine_connect(
    opts: icb_engine::ConnectOptions,
    engine: &EngineArgs,
) -> Result<icb_core::PairReport, icb_engine::EngineError> {
    match engine.engine {
        icb_core::EngineKind::Ucx => icb_engine::connect(opts),
        icb_core::EngineKind::Nixl => icb_nixl_engine::connect(opts, engine.nixl_options())
            .map_err(icb_nixl_engine::NixlEngineError::into_engine_error),
    }
}

/// The engine's result, with a signal named: before the server's hello an error that already
/// says so; after it the partial report, its reason the signal.
fn interrupted_or(
    result: Result<icb_core::PairReport, icb_engine::EngineError>,
    interrupt: &super::interrupt::Interrupt,
) -> anyhow::Result<icb_core::PairReport> {
    match result {
        Ok(mut report) => {
            if let Some(partial) = report.partial.as_mut() {
                partial.reason = format!("interrupted by {}", interrupt.signal());
            }
            Ok(report)
        }
        Err(icb_engine::EngineError::Interrupted) => {
            let code = interrupt.report("nothing was measured yet");
            Err(super::interrupt::Interrupted(code).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// The verdict's exit code, or 130 (with the one line) when the report is partial.
fn exit_code(report: &icb_core::PairReport, interrupt: &super::interrupt::Interrupt) -> i32 {
    match &report.partial {
        Some(p) => interrupt.report(&format!(
            "wrote the {} of {} cases measured before it (marked partial)",
            report.cases.len(),
            p.planned_cases
        )),
        None => {
            if let Some(problem) = icb_core::exit::setup_problem(report) {
                eprintln!("ic-bench: error: {problem}");
            }
            icb_core::exit::for_report(report)
        }
    }
}

fn ucx_options(args: &Args, peer_errors: bool) -> icb_engine::UcxOptions {
    icb_engine::UcxOptions {
        library_dir: args.ucx.ucx_lib.clone(),
        peer_failure: if peer_errors {
            icb_engine::PeerFailureMode::UcxPeer
        } else {
            icb_engine::PeerFailureMode::ControlChannel
        },
        ..Default::default()
    }
    .with_profile(args.engine.ucx_profile)
}

/// `connect --plan`: the prefill side of a pipeline run. Prints one protocol line per case and
/// then the report; the parent renders and judges.
fn run_planned(args: &Args, plan: ChildPlan) -> anyhow::Result<i32> {
    args.engine.check()?;
    let out = Arc::new(SideWriter::new(super::report_out::reserve()?));
    let interrupt = super::interrupt::Interrupt::install()?;
    let total = plan.settings.case_list().len();
    let unit = plan.settings.unit;
    let mut index = 0;
    let progress_out = Arc::clone(&out);
    let opts = icb_engine::ConnectOptions {
        server: args.server.clone(),
        settings: plan.settings.clone(),
        connect_timeout: Duration::from_secs_f64(plan.connect_timeout_s.max(0.001)),
        locality: Some(plan.expectation.locality),
        expect_flags: Default::default(),
        expect_config: None,
        expectation: Some(plan.expectation.clone()),
        ucx: {
            let mut ucx = match plan.ucx_profile {
                Some(profile) => ucx_options(args, plan.ucx_peer_errors).with_profile(profile),
                None => ucx_options(args, plan.ucx_peer_errors),
            };
            ucx.config.extend(plan.ucx_config.iter().cloned());
            ucx
        },
        tool: tool_info(),
        placement_mode: plan.placement_mode.clone(),
        on_case: Some(Box::new(move |c: &CaseResult| {
            index += 1;
            tracing::info!("{}", icb_report::text::case_line(c, unit));
            // A closed channel is the parent gone: the run ends on its own, nothing to add.
            let _ = progress_out.case(index, total, c);
        })),
        cancel: Some(interrupt.token().clone()),
        token: args.token.resolve()?,
    };
    let report = connect_or_interrupted(opts, &args.engine, &interrupt).inspect_err(|e| {
        if let Some(e) = e.downcast_ref::<icb_engine::EngineError>() {
            let _ = out.failed(e.side_failure());
        }
    })?;
    // The parent judges and decides the exit code; the child only says when it was interrupted.
    let code = match report.partial {
        Some(_) => exit_code(&report, &interrupt),
        None => report.verdict.status.exit_code(),
    };
    out.report(report)?;
    Ok(code)
}
