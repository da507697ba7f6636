//! `sweep --resume FILE`: the missing pairs measured as the first run measured the others. The
//! file's criteria (tests, sizes, floors, allow-tcp …) are used; a flag given now that says
//! otherwise is refused (one line naming it, exit 2) instead of silently mixing two sweeps. The
//! bench pods a killed run left behind are deleted before anything new starts
//! (`icb_kube::gc::clean_sweep_leftovers`).

use super::common::SizeList;
use super::sweep::Args;
use icb_core::model::{MemoryPair, TestKind};
use icb_sweep::{Criteria, SweepResults};

pub const DEFAULT_TESTS: &str = "put_bw,get_bw,tag_lat";
pub const DEFAULT_SIZES: [u64; 2] = [64 << 10, 1 << 20];
pub const DEFAULT_MEMORY: &str = "host-host";
pub const DEFAULT_MAX_TIME_S: f64 = 1.0;
/// The name of the sweep's short per-pair profile (the engine is `--engine`, recorded as given).
pub const PROFILE: &str = "sweep";

/// A flag given on a `--resume` command line that differs from the file's criteria.
#[derive(Debug)]
pub struct DifferingFlag {
    pub file: String,
    pub flag: &'static str,
    pub was: String,
}

impl std::fmt::Display for DifferingFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (file, flag, was) = (&self.file, self.flag, &self.was);
        write!(
            f,
            "--resume {file}: {flag} differs from the sweep being resumed (it ran with {was}); drop {flag} to continue it as it started, or start a new sweep"
        )
    }
}

impl std::error::Error for DifferingFlag {}

fn memory_name(m: &MemoryPair) -> String {
    format!("{}-{}", m.initiator, m.target)
}

/// What this command line asks for, defaults filled in.
pub fn criteria(args: &Args) -> Criteria {
    let tests = if args.tests.is_empty() {
        DEFAULT_TESTS.split(',').map(String::from).collect()
    } else {
        args.tests.iter().map(|t| t.as_str().to_string()).collect()
    };
    Criteria {
        tests,
        sizes: if args.sizes.is_empty() {
            DEFAULT_SIZES.to_vec()
        } else {
            SizeList::all(&args.sizes)
        },
        memory: if args.memory.is_empty() {
            vec![DEFAULT_MEMORY.to_string()]
        } else {
            args.memory.iter().map(memory_name).collect()
        },
        max_time_s: args.max_time.unwrap_or(DEFAULT_MAX_TIME_S),
        min_host_bw_bps: args.expect.min_host_bw.map(|g| g * 1e9),
        min_cuda_bw_bps: args.expect.min_cuda_bw.map(|g| g * 1e9),
        min_bw_size: args.expect.min_bw_size,
        allow_tcp: args.expect.allow_tcp,
        expect_config: args.expect.expect_config.as_ref().map(|p| p.display().to_string()),
        engine: args.engine.engine.to_string(),
        profile: PROFILE.into(),
        ucx_profile: (args.engine.ucx_profile != icb_engine::UcxProfile::Default)
            .then(|| args.engine.ucx_profile.as_str().to_string()),
        host_ipc: args.host_ipc,
        rails: args.rails.clone(),
        rail_margin: args.rails.as_ref().map(|_| args.rail_margin.unwrap_or(0.2)),
    }
}

/// The flags this command line gave explicitly (a flag left out takes the file's value).
fn given(args: &Args) -> Vec<&'static str> {
    let e = &args.expect;
    [
        ("--tests", !args.tests.is_empty()),
        ("--sizes", !args.sizes.is_empty()),
        ("--memory", !args.memory.is_empty()),
        ("--max-time", args.max_time.is_some()),
        ("--min-host-bw", e.min_host_bw.is_some()),
        ("--min-cuda-bw", e.min_cuda_bw.is_some()),
        ("--min-bw-size", e.min_bw_size.is_some()),
        ("--allow-tcp", e.allow_tcp),
        ("--expect-config", e.expect_config.is_some()),
        ("--host-ipc", args.host_ipc),
        ("--rails", args.rails.is_some()),
        ("--rail-margin", args.rail_margin.is_some()),
        // Their defaults cannot be told from a flag left out: a non-default value was given.
        ("--engine", args.engine.engine != icb_core::EngineKind::Ucx),
        (
            "--ucx-profile",
            args.engine.ucx_profile != icb_engine::UcxProfile::Default,
        ),
    ]
    .into_iter()
    .filter_map(|(flag, set)| set.then_some(flag))
    .collect()
}

/// Flags that choose the nodes and the plan: a resumed sweep's are in its file, so giving one
/// now would be silently ignored; it is refused instead.
fn plan_flags(args: &Args) -> Option<&'static str> {
    [
        ("--nodes", !args.nodes.is_empty()),
        ("--selector", args.selector.is_some()),
        ("--prefill-pool", args.prefill_pool.is_some()),
        ("--schedule", args.schedule.is_some()),
    ]
    .into_iter()
    .find_map(|(flag, given)| given.then_some(flag))
}

/// Takes the resumed file's criteria into `args`; refuses a flag given now that differs.
pub fn apply(args: &mut Args, file: &SweepResults) -> anyhow::Result<()> {
    if let Some(flag) = plan_flags(args) {
        anyhow::bail!(
            "--resume: {flag} cannot change a sweep being resumed (its nodes and plan are in the file); drop {flag}, or start a new sweep"
        );
    }
    let Some(was) = &file.criteria else {
        // Written before criteria were kept: this command line's are all there is.
        return Ok(());
    };
    let now = criteria(args);
    let explicit = given(args);
    for flag in explicit {
        if was.field_differs(&now, flag) {
            return Err(DifferingFlag {
                file: args
                    .resume
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                flag,
                was: was.value_of(flag),
            }
            .into());
        }
    }
    // No flag said otherwise: the file's criteria, all of them.
    args.tests = was
        .tests
        .iter()
        .map(|t| t.parse::<TestKind>())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--resume: the file's criteria name an unknown test ({e})"))?;
    args.sizes = vec![SizeList(was.sizes.clone())];
    args.memory = was
        .memory
        .iter()
        .map(|m| m.parse::<MemoryPair>())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--resume: the file's criteria name an unknown memory pair ({e})"))?;
    args.max_time = Some(was.max_time_s);
    args.expect.min_host_bw = was.min_host_bw_bps.map(|b| b / 1e9);
    args.expect.min_cuda_bw = was.min_cuda_bw_bps.map(|b| b / 1e9);
    args.expect.min_bw_size = was.min_bw_size;
    args.expect.allow_tcp = was.allow_tcp;
    args.expect.expect_config = was.expect_config.as_ref().map(std::path::PathBuf::from);
    args.host_ipc = was.host_ipc;
    // A resumed rails sweep measures its missing pairs as rails too.
    args.rails = was.rails.clone();
    args.rail_margin = was.rail_margin;
    args.engine.engine = was
        .engine
        .parse()
        .map_err(|e| anyhow::anyhow!("--resume: the file's criteria name an unknown engine ({e})"))?;
    if let Some(profile) = &was.ucx_profile {
        args.engine.ucx_profile = profile
            .parse()
            .map_err(|e| anyhow::anyhow!("--resume: the file's criteria name an unknown --ucx-profile ({e})"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["sweep", "--resume", "s.json"];
        argv.extend(extra);
        Cli::try_parse_from(argv).unwrap().args
    }

    fn file(criteria: Criteria) -> SweepResults {
        let mut r = SweepResults::new("sw1".into(), icb_sweep::Schedule::Ring, vec![], 1.0, vec![]);
        r.criteria = Some(criteria);
        r
    }

    #[test]
    fn resume_takes_the_files_criteria_when_no_flag_says_otherwise() {
        let mut was = criteria(&args(&[]));
        was.allow_tcp = true;
        was.sizes = vec![1 << 20];
        was.min_host_bw_bps = Some(1e6);
        let mut a = args(&[]);
        apply(&mut a, &file(was.clone())).unwrap();
        assert_eq!(criteria(&a), was);
    }

    #[test]
    fn resume_refuses_a_flag_that_differs_and_names_it() {
        let was = criteria(&args(&[]));
        let mut a = args(&["--allow-tcp"]);
        let e = apply(&mut a, &file(was.clone())).unwrap_err();
        let text = e.to_string();
        assert!(
            e.downcast_ref::<DifferingFlag>()
                .is_some_and(|d| d.flag == "--allow-tcp"),
            "{text}"
        );
        assert!(text.starts_with("--resume s.json: --allow-tcp differs"), "{text}");
        assert!(!text.contains('\n'));
        let mut a = args(&["--sizes", "4KiB"]);
        let e = apply(&mut a, &file(was.clone())).unwrap_err();
        assert_eq!(e.downcast_ref::<DifferingFlag>().map(|d| d.flag), Some("--sizes"));
        // The same value given again is no difference.
        let mut a = args(&["--tests", DEFAULT_TESTS]);
        apply(&mut a, &file(was.clone())).unwrap();
        // The nodes and the plan are the file's: a flag choosing them is refused, not ignored.
        let mut a = args(&["--nodes", "x,y"]);
        let e = apply(&mut a, &file(was)).unwrap_err().to_string();
        assert!(
            e.starts_with("--resume: --nodes cannot change a sweep being resumed"),
            "{e}"
        );
    }

    #[test]
    fn the_engine_and_ucx_profile_are_criteria_resume_keeps() {
        let was = criteria(&args(&["--ucx-profile", "nixl"]));
        assert_eq!(was.ucx_profile.as_deref(), Some("nixl"));
        assert_eq!(was.engine, "ucx");
        // Left out now: the file's profile is taken.
        let mut a = args(&[]);
        apply(&mut a, &file(was.clone())).unwrap();
        assert_eq!(a.engine.ucx_profile, icb_engine::UcxProfile::Nixl);
        // Another engine given now: refused, naming the flag.
        let mut a = args(&["--engine", "nixl"]);
        let e = apply(&mut a, &file(was)).unwrap_err();
        assert_eq!(e.downcast_ref::<DifferingFlag>().map(|d| d.flag), Some("--engine"));
    }

    #[test]
    fn a_resumed_rails_sweep_stays_a_rails_sweep() {
        let was = criteria(&args(&["--rails", "auto", "--rail-margin", "15%"]));
        assert_eq!((was.rails.as_deref(), was.rail_margin), (Some("auto"), Some(0.15)));
        let mut a = args(&[]);
        apply(&mut a, &file(was.clone())).unwrap();
        assert_eq!((a.rails.as_deref(), a.rail_margin), (Some("auto"), Some(0.15)));
        // A plain sweep's file refuses --rails now: the pairs measured so far were not rails.
        let plain = criteria(&args(&[]));
        let mut a = args(&["--rails", "auto"]);
        let e = apply(&mut a, &file(plain)).unwrap_err();
        assert_eq!(e.downcast_ref::<DifferingFlag>().map(|d| d.flag), Some("--rails"));
    }
}
