//! `sweep --resume FILE`: the missing pairs measured as the first run measured the others. What
//! the command line gave is read into an `icb_sweep::resume::Given`, which decides (the file's
//! criteria, a differing flag refused in one line, exit 2); the merged values are written back
//! into the arguments. The bench pods a killed run left behind are deleted before anything new
//! starts (`icb_kube::gc::clean_sweep_leftovers`).

use super::common::SizeList;
use super::sweep::Args;
use icb_sweep::resume::{Given, PlanGiven};
use icb_sweep::{Criteria, SweepResults};

/// What this command line gave, as flags left out or given.
fn given(args: &Args) -> Given {
    let e = &args.expect;
    Given {
        tests: args.tests.clone(),
        sizes: SizeList::all(&args.sizes),
        memory: args.memory.clone(),
        max_time_s: args.max_time,
        min_host_bw_gbps: e.min_host_bw,
        min_cuda_bw_gbps: e.min_cuda_bw,
        min_bw_size: e.min_bw_size,
        allow_tcp: e.allow_tcp,
        expect_config: e.expect_config.as_ref().map(|p| p.display().to_string()),
        engine: args.engine.engine,
        ucx_profile: args.engine.ucx_profile_named(),
        host_ipc: args.host_ipc,
        memlock_unlimited: args.memlock_unlimited,
        rails: args.rails.clone(),
        rail_margin: args.rail_margin,
        plan: PlanGiven {
            nodes: !args.nodes.is_empty(),
            selector: args.selector.is_some(),
            prefill_pool: args.prefill_pool.is_some(),
            schedule: args.schedule.is_some(),
        },
    }
}

/// What this command line asks for, defaults filled in.
pub fn criteria(args: &Args) -> Criteria {
    given(args).criteria()
}

/// Takes the resumed file's criteria into `args`; refuses a flag given now that differs.
pub fn apply(args: &mut Args, file: &SweepResults) -> anyhow::Result<()> {
    let path = args
        .resume
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let merged = icb_sweep::resume::merge(&given(args), &path, file.criteria.as_ref())?;
    set(args, merged)
}

/// Writes the merged values back into the arguments the sweep runs with.
fn set(args: &mut Args, g: Given) -> anyhow::Result<()> {
    args.tests = g.tests;
    args.sizes = vec![SizeList(g.sizes)];
    args.memory = g.memory;
    args.max_time = g.max_time_s;
    args.expect.min_host_bw = g.min_host_bw_gbps;
    args.expect.min_cuda_bw = g.min_cuda_bw_gbps;
    args.expect.min_bw_size = g.min_bw_size;
    args.expect.allow_tcp = g.allow_tcp;
    args.expect.expect_config = g.expect_config.map(std::path::PathBuf::from);
    args.host_ipc = g.host_ipc;
    args.memlock_unlimited = g.memlock_unlimited;
    args.rails = g.rails;
    args.rail_margin = g.rail_margin;
    args.engine.engine = g.engine;
    if let Some(profile) = &g.ucx_profile {
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
    fn the_files_criteria_are_written_back_into_the_arguments() {
        let mut was = criteria(&args(&[
            "--ucx-profile",
            "nixl",
            "--rails",
            "auto",
            "--rail-margin",
            "15%",
        ]));
        was.allow_tcp = true;
        was.sizes = vec![1 << 20];
        was.min_host_bw_bps = Some(1e6);
        was.expect_config = Some("e.yaml".into());
        let mut a = args(&[]);
        apply(&mut a, &file(was.clone())).unwrap();
        assert_eq!(criteria(&a), was);
        assert_eq!(a.engine.ucx_profile, icb_engine::UcxProfile::Nixl);
    }

    #[test]
    fn memlock_unlimited_comes_back_from_the_file_into_the_pods_arguments() {
        let was = criteria(&args(&["--memlock-unlimited"]));
        assert!(was.memlock_unlimited);
        // Through the file as written: a resumed sweep's bench pods are specified as before.
        let text = serde_json::to_string(&file(was)).unwrap();
        let read: SweepResults = serde_json::from_str(&text).unwrap();
        let mut a = args(&[]);
        assert!(!a.memlock_unlimited);
        apply(&mut a, &read).unwrap();
        assert!(a.memlock_unlimited);
        let e = apply(&mut args(&["--memlock-unlimited"]), &file(criteria(&args(&[])))).unwrap_err();
        assert!(e.to_string().contains("--memlock-unlimited differs"), "{e}");
    }

    #[test]
    fn the_flags_given_reach_the_decision_with_the_file_named() {
        let was = criteria(&args(&[]));
        let e = apply(&mut args(&["--allow-tcp"]), &file(was.clone())).unwrap_err();
        assert!(e.to_string().starts_with("--resume s.json: --allow-tcp differs"), "{e}");
        let e = apply(&mut args(&["--schedule", "ring"]), &file(was)).unwrap_err();
        assert_eq!(
            e.downcast_ref::<icb_sweep::resume::ResumeError>(),
            Some(&icb_sweep::resume::ResumeError::PlanFlag("--schedule"))
        );
    }
}
