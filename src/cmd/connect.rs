//! `ic-bench connect HOST:PORT`: the prefill side; runs every case against `ic-bench serve`.

use super::common::{ExpectArgs, OutputArgs, TestArgs, UcxArgs};
use anyhow::Context as _;
use icb_core::verdict::{ExpectationOverrides, parse_expectation_config};
use icb_core::{CaseResult, CaseStatus, Locality, ToolInfo};
use std::io::Write as _;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Address of `ic-bench serve`, HOST:PORT
    #[arg(value_name = "HOST:PORT")]
    pub server: String,

    #[command(flatten)]
    pub test: TestArgs,

    #[command(flatten)]
    pub expect: ExpectArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub ucx: UcxArgs,

    /// Where the two sides run: auto compares the kernels' boot ids
    #[arg(long, value_enum, default_value = "auto")]
    pub placement: PlacementArg,

    /// Print exactly one compact JSON line (the report) on stdout; human output goes to stderr
    #[arg(long)]
    pub json_line: bool,

    /// Give up connecting to the server after this long
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// Use UCX peer error handling on the endpoints (as NIXL does; UCX then skips sysv/posix)
    #[arg(long)]
    pub ucx_peer_errors: bool,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementArg {
    Auto,
    SameHost,
    DifferentHosts,
}

/// Parses `10s`, `1m30s`, `500ms`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.trim().parse::<f64>() {
        if secs.is_finite() && secs > 0.0 {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err(format!("'{s}' is not a positive duration"));
    }
    match humantime::parse_duration(s.trim()) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("'{s}' is not a duration: use e.g. 10s, 2m, 500ms")),
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

fn progress_line(c: &CaseResult) -> String {
    let head = format!("{} {} {}", c.test, icb_core::units::format_size(c.size), c.memory);
    match (c.status, &c.measurement) {
        (CaseStatus::Measured, Some(m)) => {
            let value = match (m.bandwidth_bps, &m.latency_us) {
                (Some(bps), _) => format!("{:.2} GB/s", bps / 1e9),
                (None, Some(l)) => format!("p50 {:.2} us", l.p50),
                _ => String::new(),
            };
            let path = c
                .transport
                .as_ref()
                .map(|t| t.data_path.class.to_string())
                .unwrap_or_default();
            format!("{head}: {value} over {path}")
        }
        (status, _) => format!("{head}: {status:?} ({})", c.reason.as_deref().unwrap_or("")),
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let settings = args.test.settings()?;
    args.output.check()?;
    let mut out = super::report_out::reserve()?;
    let format: icb_report::Format = args.output.format.parse()?;
    let expect_flags = ExpectationOverrides::from_flags(
        args.expect.min_host_bw,
        args.expect.min_cuda_bw,
        args.expect.min_bw_size,
        args.expect.allow_tcp,
    )?;
    let expect_config = match &args.expect.expect_config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --expect-config {}", path.display()))?;
            let cfg = parse_expectation_config(&text).with_context(|| format!("in {}", path.display()))?;
            Some((cfg, path.display().to_string()))
        }
        None => None,
    };
    let opts = icb_engine::ConnectOptions {
        server: args.server.clone(),
        settings,
        connect_timeout: args.connect_timeout,
        locality: match args.placement {
            PlacementArg::Auto => None,
            PlacementArg::SameHost => Some(Locality::SameHost),
            PlacementArg::DifferentHosts => Some(Locality::DifferentHosts),
        },
        expect_flags,
        expect_config,
        ucx: icb_engine::UcxOptions {
            library_dir: args.ucx.ucx_lib.clone(),
            peer_failure: if args.ucx_peer_errors {
                icb_engine::PeerFailureMode::UcxPeer
            } else {
                icb_engine::PeerFailureMode::ControlChannel
            },
            ..Default::default()
        },
        tool: tool_info(),
        placement_mode: "manual".into(),
        on_case: Some(Box::new(|c: &CaseResult| tracing::info!("{}", progress_line(c)))),
    };
    let report = icb_engine::connect(opts)?;
    if args.json_line {
        let line = serde_json::to_string(&report).context("cannot serialize the report")?;
        writeln!(out, "{line}")?;
        out.flush()?;
        if let Ok(table) = icb_report::render_pair(&report, icb_report::Format::Table) {
            eprintln!("{table}");
        }
    } else {
        args.output
            .emit_to(&icb_report::render_pair(&report, format)?, &mut out)?;
    }
    Ok(report.verdict.status.exit_code())
}
