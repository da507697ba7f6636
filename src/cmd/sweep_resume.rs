//! `sweep --resume FILE`: the missing pairs measured as the first run measured the others. What
//! the command line gave is read into an `icb_sweep::resume::Given`, which decides (the file's
//! criteria, a differing flag refused in one line, exit 2); the sweep runs with the merged
//! `Given` (its engine, floors, pods and rails), not with the arguments. The bench pods a killed
//! run left behind are deleted before anything new starts (`icb_kube::gc::clean_sweep_leftovers`).

use super::sweep::Args;
use icb_flags::common::SizeList;
use icb_sweep::resume::{Given, PlanGiven};

/// What this command line gave, as flags left out or given.
pub fn given(args: &Args) -> Given {
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
        ucx_profile: args.engine.choice().ucx_profile_named(),
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

/// The engine the sweep runs: the criteria's engine and `--ucx-profile`, `--nixl-lib` as given.
pub fn engine(args: &Args, g: &Given) -> anyhow::Result<icb_nixl_engine::EngineChoice> {
    Ok(icb_nixl_engine::EngineChoice {
        engine: g.engine,
        nixl_lib: args.engine.nixl_lib.clone(),
        ucx_profile: g.ucx_profile()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_sweep::resume::ResumeError;
    use icb_sweep::{Criteria, SweepResults};
    use icb_sweep_kube::resume::Resumed;

    /// The merged flags, as `Resumed::read` makes them from a file holding `file`.
    fn resolve(args: &Args, file: Option<&SweepResults>) -> Result<Given, ResumeError> {
        match file {
            None => Ok(given(args)),
            Some(f) => icb_sweep::resume::merge(&given(args), "s.json", f.criteria.as_ref()),
        }
    }

    /// What this command line asks for, defaults filled in.
    fn criteria(args: &Args) -> Criteria {
        given(args).criteria()
    }
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
    fn a_resumed_sweep_runs_with_the_files_criteria() {
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
        let a = args(&[]);
        let g = resolve(&a, Some(&file(was.clone()))).unwrap();
        assert_eq!(g.criteria(), was);
        assert_eq!(engine(&a, &g).unwrap().ucx_profile, icb_engine::UcxProfile::Nixl);
        let e = Resumed {
            file: None,
            given: g.clone(),
        }
        .expectation();
        assert_eq!((e.min_host_gbps, e.allow_tcp), (Some(1e-3), true));
        assert_eq!(e.config, Some(std::path::PathBuf::from("e.yaml")));
        assert_eq!(resolve(&a, None).unwrap().criteria(), criteria(&a));
    }

    #[test]
    fn memlock_unlimited_comes_back_from_the_file_for_the_pods() {
        let was = criteria(&args(&["--memlock-unlimited"]));
        assert!(was.memlock_unlimited);
        // Through the file as written: a resumed sweep's bench pods are specified as before.
        let text = serde_json::to_string(&file(was)).unwrap();
        let read: SweepResults = serde_json::from_str(&text).unwrap();
        let a = args(&[]);
        assert!(!a.memlock_unlimited);
        assert!(resolve(&a, Some(&read)).unwrap().memlock_unlimited);
        let e = resolve(&args(&["--memlock-unlimited"]), Some(&file(criteria(&args(&[]))))).unwrap_err();
        assert!(e.to_string().contains("--memlock-unlimited differs"), "{e}");
    }

    #[test]
    fn the_flags_given_reach_the_decision_with_the_file_named() {
        let was = criteria(&args(&[]));
        let e = resolve(&args(&["--allow-tcp"]), Some(&file(was.clone()))).unwrap_err();
        assert!(e.to_string().starts_with("--resume s.json: --allow-tcp differs"), "{e}");
        let e = resolve(&args(&["--schedule", "ring"]), Some(&file(was))).unwrap_err();
        assert_eq!(e, ResumeError::PlanFlag("--schedule"));
    }
}
