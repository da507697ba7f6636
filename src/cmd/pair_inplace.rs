//! `ic-bench pair --in-place --prefill pod/A --decode pod/B`: the pair pipeline with the in-place
//! launcher (`icb_pair::inplace`): this binary runs inside the two workers' own containers.
//!
//! Bounded for production pods: each side gets at most `--side-timeout` (15 s by default) of
//! transfers, the cases are fitted into it, and buffers stay at or under 256 MiB.

use super::interrupt::Interrupt;
use anyhow::Context as _;
use icb_kube::target::Target;
use icb_pair::inplace::{InPlaceLauncher, InPlacePlan};
use icb_pair::{PairError, PairPlan, run_pair};
use std::path::PathBuf;
use std::time::Duration;

/// The largest buffer an in-place run registers (per side, per case).
const MAX_BUFFER: u64 = 256 * 1024 * 1024;
/// Sizes when `--sizes` is not given: enough to see latency and bandwidth, little time and memory.
const DEFAULT_SIZES: &[u64] = &[8, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024];
/// The share of `--side-timeout` the cases may use (the rest: UCX start-up and wire-up).
const MEASURE_SHARE: f64 = 0.7;
/// Below this per-case time a measurement means nothing.
const MIN_CASE_TIME_S: f64 = 0.02;

#[derive(clap::Args, Debug, Clone)]
pub struct InPlaceArgs {
    /// Run inside the two workers' own containers (copies this binary in through pods/exec, removes it after)
    #[arg(long, requires_all = ["prefill", "decode"], conflicts_with_all = ["local", "dry_run"])]
    pub in_place: bool,

    /// Container to run in, for --in-place (default: the pod's only or default container)
    #[arg(short = 'c', long, value_name = "NAME", requires = "in_place")]
    pub container: Option<String>,

    /// Ports the decode side may listen on, for --in-place, e.g. 45100-45199
    #[arg(long, value_name = "LO-HI", default_value = "45100-45199", value_parser = parse_port_range)]
    pub port_range: (u16, u16),

    /// Upper bound on each side's run, for --in-place (the cases are fitted into it)
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = super::common::parse_duration)]
    pub side_timeout: Duration,

    /// The binary to copy, for --in-place (e.g. the portable or aarch64 build from scripts/release) [default: this one]
    #[arg(long, value_name = "FILE", requires = "in_place")]
    pub in_place_binary: Option<PathBuf>,
}

fn parse_port_range(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("'{s}' is not a port range: use LO-HI, e.g. 45100-45199");
    let (lo, hi) = s.split_once('-').ok_or_else(bad)?;
    let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
    let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// Fits the plan's settings into the side budget and the buffer bound; the notes say what changed.
fn bound_settings(
    settings: &mut icb_core::RunSettings,
    sizes_given: bool,
    side_timeout: Duration,
) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    if !sizes_given {
        // In-place mode's own small curve instead of the profile's cases.
        settings.plan.clear();
        settings.sizes = DEFAULT_SIZES.to_vec();
    }
    let shapes = settings.case_list();
    if let Some((big, _)) = shapes
        .iter()
        .find(|(c, _)| c.size.saturating_mul(u64::from(c.blocks.unwrap_or(1))) > MAX_BUFFER)
    {
        anyhow::bail!(
            "--sizes: {} bytes is over in-place mode's 256 MiB buffer bound: use sizes up to 256MiB",
            big.size
        );
    }
    let cases = shapes.len() as f64;
    let per_case = side_timeout.as_secs_f64() * MEASURE_SHARE / cases;
    if per_case < MIN_CASE_TIME_S {
        anyhow::bail!(
            "{cases} cases do not fit in --side-timeout {}s: give fewer --tests/--sizes/--memory or raise --side-timeout",
            side_timeout.as_secs()
        );
    }
    if settings.max_time_s > per_case {
        settings.max_time_s = per_case;
        settings.min_time_s = settings.min_time_s.min(per_case);
        notes.push(format!(
            "in-place: {cases} cases fitted into --side-timeout {}s: at most {per_case:.2}s each",
            side_timeout.as_secs()
        ));
    }
    Ok(notes)
}

pub fn run_in_place(args: &super::pair::Args, mut plan: PairPlan) -> anyhow::Result<i32> {
    let (Some(prefill), Some(decode)) = (&args.prefill, &args.decode) else {
        anyhow::bail!("give both --prefill TARGET and --decode TARGET (e.g. pod/prefill-0)");
    };
    let prefill: Target = prefill.parse().context("--prefill")?;
    let decode: Target = decode.parse().context("--decode")?;
    let opts = &args.in_place;
    // The NIXL engine's own plan already stays within the buffer bound (64 MiB per request).
    let keep_cases = args.test.sizes.is_some() || args.engine.engine == icb_core::EngineKind::Nixl;
    let notes = bound_settings(&mut plan.settings, keep_cases, opts.side_timeout)?;
    // Held until the run ends: dropping it removes the stripped copy.
    let (binary, _stripped) = match &opts.in_place_binary {
        Some(b) => (b.clone(), None),
        None => stripped_self()?,
    };
    let copy_timeout = Duration::from_secs(120).max(args.kube.cluster.request_timeout);
    let run_id = match &args.kube.run_id {
        Some(id) => {
            icb_kube::podspec::check_run_id(id).map_err(anyhow::Error::msg)?;
            id.clone()
        }
        None => icb_kube::podspec::new_run_id(),
    };
    let inplace = InPlacePlan {
        prefill,
        decode,
        container: opts.container.clone(),
        binary,
        ports: opts.port_range,
        side_timeout: opts.side_timeout,
        copy_timeout,
        cleanup_timeout: Duration::from_secs(30).max(args.kube.cluster.request_timeout),
        run_id,
        side_args: args.engine.side_flags(),
    };
    // Copying counts as start-up; each side then has its bound.
    plan.startup_timeout = copy_timeout + opts.side_timeout;
    plan.startup_flag = "--side-timeout";
    plan.deadline = 2 * copy_timeout + 2 * opts.side_timeout;
    plan.connect_timeout = opts.side_timeout;
    plan.exit_grace = Duration::from_secs(5);
    let interrupt = Interrupt::install()?;
    let rt = super::common::runtime()?;
    rt.block_on(async {
        let prepare = async {
            let cluster = args.kube.cluster.connect().await?;
            Ok::<_, anyhow::Error>(InPlaceLauncher::prepare(cluster, inplace).await?)
        };
        let mut launcher = tokio::select! {
            l = prepare => l?,
            _ = interrupt.token().cancelled() => return Ok(interrupt.report("nothing was left to clean up")),
        };
        for line in notes.iter().chain(launcher.describe().iter()) {
            eprintln!("ic-bench: {line}");
        }
        let mut progress = |p: &icb_core::protocol::CaseProgress| tracing::debug!("case {}/{}", p.index, p.total);
        match run_pair(&plan, &mut launcher, interrupt.token(), &mut progress).await {
            Ok(outcome) => {
                let r = &outcome.report;
                let (s, c) = (&r.server, &r.client);
                if (&s.ucx_version, &s.ucx_library) == (&c.ucx_version, &c.ucx_library) {
                    // Identical lines for the two sides read as one.
                    eprintln!(
                        "ic-bench: in-place: both sides loaded UCX {} from {}",
                        s.ucx_version, s.ucx_library
                    );
                } else {
                    for (side, peer) in [("decode", s), ("prefill", c)] {
                        eprintln!(
                            "ic-bench: in-place: the {side} side loaded UCX {} from {}",
                            peer.ucx_version, peer.ucx_library
                        );
                    }
                }
                tracing::info!("{}", outcome.cleanup);
                super::common::emit_pair(&outcome.report, &args.output)
            }
            Err(PairError::Interrupted(i)) => super::common::emit_interrupted(&i, &args.output, &interrupt),
            Err(e) => Err(e.into()),
        }
    })
}

/// Stripped copies live in `$TMPDIR/ic-bench-strip-<pid>-XXXXXX/`.
const STRIP_PREFIX: &str = "ic-bench-strip-";

/// Removes the stripped copies of runs whose process is gone (killed with SIGKILL, which no
/// guard survives), so they do not pile up in the temporary directory.
fn remove_stale_strips(tmp: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(STRIP_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How long `strip` may take on this binary (a debug build is ~300 MiB).
const STRIP_DEADLINE: Duration = Duration::from_secs(60);

/// This binary as it is streamed into the workers: without its debug info (a debug build is
/// ~290 MiB, six times its stripped size, and every byte goes through the API server's exec
/// stream), as a copy in a temporary directory that is removed when the returned guard drops.
/// Where `strip` is missing or fails, this binary as it is, said at -v.
fn stripped_self() -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    let exe = std::env::current_exe().context("cannot find this binary to copy; pass --in-place-binary")?;
    remove_stale_strips(&std::env::temp_dir());
    let dir = tempfile::Builder::new()
        .prefix(&format!("{STRIP_PREFIX}{}-", std::process::id()))
        .tempdir()
        .context("cannot create a temporary directory for the stripped copy of ic-bench")?;
    let out = dir.path().join("ic-bench");
    let mut cmd = std::process::Command::new("strip");
    // Everything, symbols included: the copy only has to run (a debug build: 290 → 45 MiB).
    cmd.arg("-o").arg(&out).arg(&exe);
    match icb_proc::run(&mut cmd, STRIP_DEADLINE) {
        Ok(o) if o.status.success() => Ok((out, Some(dir))),
        Ok(o) => {
            tracing::info!("strip failed ({}): copying {} as it is", o.stderr_line(), exe.display());
            Ok((exe, None))
        }
        Err(e) => {
            tracing::info!("cannot strip ({e}): copying {} as it is", exe.display());
            Ok((exe, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripped_copies_of_dead_runs_are_removed_and_live_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dead = tmp.path().join(format!("{STRIP_PREFIX}4000000000-abc"));
        let live = tmp.path().join(format!("{STRIP_PREFIX}{}-def", std::process::id()));
        let other = tmp.path().join("ic-bench-inplace-x");
        for d in [&dead, &live, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("ic-bench"), b"x").unwrap();
        }
        remove_stale_strips(tmp.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }
    use icb_core::{BandwidthUnit, MemoryPair, RunSettings, TestKind};

    fn settings() -> RunSettings {
        RunSettings {
            tests: vec![TestKind::TagBw, TestKind::TagLat],
            sizes: vec![8],
            memory: vec![MemoryPair::HOST_HOST],
            warmup_iterations: 1,
            min_iterations: 1,
            min_time_s: 0.2,
            max_time_s: 5.0,
            window: 1,
            unit: BandwidthUnit::GBps,
            require_cuda: false,
            stop: None,
            plan: Vec::new(),
            blocks: None,
            window_candidates: Vec::new(),
            untouched_buffers: false,
        }
    }

    #[test]
    fn port_ranges() {
        assert_eq!(parse_port_range("45100-45199"), Ok((45100, 45199)));
        assert_eq!(parse_port_range("80-80"), Ok((80, 80)));
        for bad in ["", "1", "0-5", "9-3", "a-b", "1-70000"] {
            assert!(parse_port_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_are_fitted_into_the_side_budget() {
        let mut s = settings();
        let notes = bound_settings(&mut s, false, Duration::from_secs(15)).unwrap();
        assert_eq!(s.sizes, DEFAULT_SIZES);
        // 2 tests × 4 sizes: 15 s × 0.7 / 8 per case.
        assert!((s.max_time_s - 15.0 * 0.7 / 8.0).abs() < 1e-9, "{}", s.max_time_s);
        assert!(s.min_time_s <= s.max_time_s);
        assert_eq!(notes.len(), 1);
        let mut big = settings();
        big.sizes = vec![512 * 1024 * 1024];
        assert!(bound_settings(&mut big, true, Duration::from_secs(15)).is_err());
        let mut many = settings();
        many.sizes = (0..1000).collect();
        let err = bound_settings(&mut many, true, Duration::from_secs(15)).unwrap_err();
        assert!(err.to_string().contains("--side-timeout"), "{err}");
    }
}
