//! `sweep --resume FILE`: the missing pairs measured as the first run measured the others. The
//! file's criteria (tests, sizes, floors, allow-tcp …) are used; a flag given now that says
//! otherwise is refused (one line naming it, exit 2) instead of silently mixing two sweeps, and
//! so is a flag choosing the nodes or the plan (those are in the file too). This is the pure
//! part: what the command line gave ([`Given`], filled from the CLI's arguments by the CLI),
//! which given flag differs from the file, and the merged values the resumed sweep runs with.

use icb_core::model::{Criteria, CriteriaFlags, MemoryPair, TestKind};
use icb_core::{EngineKind, UcxProfile};

pub const DEFAULT_TESTS: [TestKind; 3] = [TestKind::PutBw, TestKind::GetBw, TestKind::TagLat];
pub const DEFAULT_SIZES: [u64; 2] = [64 << 10, 1 << 20];
pub const DEFAULT_MAX_TIME_S: f64 = 1.0;
pub const DEFAULT_RAIL_MARGIN: f64 = 0.2;
/// The name of the sweep's short per-pair profile (the engine is `--engine`, recorded as given).
pub const PROFILE: &str = "sweep";

/// What a `sweep` command line gave for its criteria and plan: an empty list, `None` or `false`
/// is a flag left out (it takes the file's value on `--resume`, the default otherwise).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Given {
    pub tests: Vec<TestKind>,
    pub sizes: Vec<u64>,
    pub memory: Vec<MemoryPair>,
    pub max_time_s: Option<f64>,
    pub min_host_bw_gbps: Option<f64>,
    pub min_cuda_bw_gbps: Option<f64>,
    pub min_bw_size: Option<u64>,
    pub allow_tcp: bool,
    pub expect_config: Option<String>,
    /// `--engine`; its default cannot be told from the flag left out.
    pub engine: EngineKind,
    /// `--ucx-profile` when not the default.
    pub ucx_profile: Option<String>,
    pub host_ipc: bool,
    /// `--memlock-unlimited`.
    pub memlock_unlimited: bool,
    pub rails: Option<String>,
    pub rail_margin: Option<f64>,
    /// The flags choosing the nodes and the plan: `--nodes`, `--selector`, `--prefill-pool`,
    /// `--schedule`, each whether it was given.
    pub plan: PlanGiven,
}

/// Whether each flag choosing a sweep's nodes and plan was given.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PlanGiven {
    pub nodes: bool,
    pub selector: bool,
    pub prefill_pool: bool,
    pub schedule: bool,
}

/// Why a `--resume` command line is refused (each exit 2, one line).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ResumeError {
    /// A flag choosing the nodes or the plan: the file's would be silently ignored.
    #[error(
        "--resume: {0} cannot change a sweep being resumed (its nodes and plan are in the file); drop {0}, or start a new sweep"
    )]
    PlanFlag(&'static str),
    /// A criteria flag given now that differs from the file's.
    #[error(
        "--resume {file}: {flag} differs from the sweep being resumed (it ran with {was}); drop {flag} to continue it as it started, or start a new sweep"
    )]
    Differs {
        file: String,
        flag: &'static str,
        was: String,
    },
    /// The file's criteria name something this build does not know.
    #[error("--resume: the file's criteria name an unknown {what} ({error})")]
    Unknown { what: &'static str, error: String },
}

impl Given {
    /// The criteria flags, defaults filled in.
    pub fn flags(&self) -> CriteriaFlags {
        CriteriaFlags {
            tests: if self.tests.is_empty() {
                DEFAULT_TESTS.to_vec()
            } else {
                self.tests.clone()
            },
            sizes: if self.sizes.is_empty() {
                DEFAULT_SIZES.to_vec()
            } else {
                self.sizes.clone()
            },
            memory: if self.memory.is_empty() {
                vec![MemoryPair::HOST_HOST]
            } else {
                self.memory.clone()
            },
            max_time_s: self.max_time_s.unwrap_or(DEFAULT_MAX_TIME_S),
            min_host_bw_gbps: self.min_host_bw_gbps,
            min_cuda_bw_gbps: self.min_cuda_bw_gbps,
            min_bw_size: self.min_bw_size,
            allow_tcp: self.allow_tcp,
            expect_config: self.expect_config.clone(),
            engine: self.engine,
            ucx_profile: self.ucx_profile.clone(),
            host_ipc: self.host_ipc,
            memlock_unlimited: self.memlock_unlimited,
            rails: self.rails.clone(),
            rail_margin: self.rail_margin.unwrap_or(DEFAULT_RAIL_MARGIN),
        }
    }

    /// `--ucx-profile` as the sweep runs it (none: the default profile); a name from a resumed
    /// file that this build does not know is refused.
    pub fn ucx_profile(&self) -> Result<UcxProfile, ResumeError> {
        match &self.ucx_profile {
            None => Ok(UcxProfile::Default),
            Some(name) => name.parse().map_err(|error| ResumeError::Unknown {
                what: "--ucx-profile",
                error,
            }),
        }
    }

    /// What this command line asks for, defaults filled in.
    pub fn criteria(&self) -> Criteria {
        Criteria::from_flags(PROFILE, &self.flags())
    }

    /// The criteria flags this command line gave explicitly (one left out takes the file's value).
    pub fn explicit(&self) -> Vec<&'static str> {
        [
            ("--tests", !self.tests.is_empty()),
            ("--sizes", !self.sizes.is_empty()),
            ("--memory", !self.memory.is_empty()),
            ("--max-time", self.max_time_s.is_some()),
            ("--min-host-bw", self.min_host_bw_gbps.is_some()),
            ("--min-cuda-bw", self.min_cuda_bw_gbps.is_some()),
            ("--min-bw-size", self.min_bw_size.is_some()),
            ("--allow-tcp", self.allow_tcp),
            ("--expect-config", self.expect_config.is_some()),
            ("--host-ipc", self.host_ipc),
            ("--memlock-unlimited", self.memlock_unlimited),
            ("--rails", self.rails.is_some()),
            ("--rail-margin", self.rail_margin.is_some()),
            // Their defaults cannot be told from a flag left out: a non-default value was given.
            ("--engine", !self.engine.is_default()),
            ("--ucx-profile", self.ucx_profile.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect()
    }

    /// The first flag given that chooses the nodes or the plan.
    pub fn plan_flag(&self) -> Option<&'static str> {
        let p = self.plan;
        [
            ("--nodes", p.nodes),
            ("--selector", p.selector),
            ("--prefill-pool", p.prefill_pool),
            ("--schedule", p.schedule),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }
}

/// The values a sweep resumed from `file` (its criteria `was`) runs with: the file's, all of
/// them; refused when a flag given now differs from them or chooses the nodes or the plan. A
/// file written before criteria were kept (`was` is `None`) runs with this command line's.
pub fn merge(given: &Given, file: &str, was: Option<&Criteria>) -> Result<Given, ResumeError> {
    if let Some(flag) = given.plan_flag() {
        return Err(ResumeError::PlanFlag(flag));
    }
    let Some(was) = was else {
        return Ok(given.clone());
    };
    let now = given.criteria();
    if let Some(flag) = given.explicit().into_iter().find(|f| was.field_differs(&now, f)) {
        return Err(ResumeError::Differs {
            file: file.to_string(),
            flag,
            was: was.value_of(flag),
        });
    }
    from_file(was, given.plan)
}

/// The file's criteria as the flags that would give them.
fn from_file(was: &Criteria, plan: PlanGiven) -> Result<Given, ResumeError> {
    fn parse<T: std::str::FromStr>(what: &'static str, s: &str) -> Result<T, ResumeError>
    where
        T::Err: std::fmt::Display,
    {
        s.parse().map_err(|e: T::Err| ResumeError::Unknown {
            what,
            // The file is outside input: what the error quotes from it stays one line.
            error: icb_core::error_line::quote_outside(&e.to_string()),
        })
    }
    Ok(Given {
        tests: was.tests.iter().map(|t| parse("test", t)).collect::<Result<_, _>>()?,
        sizes: was.sizes.clone(),
        memory: was
            .memory
            .iter()
            .map(|m| parse("memory pair", m))
            .collect::<Result<_, _>>()?,
        max_time_s: Some(was.max_time_s),
        min_host_bw_gbps: was.min_host_bw_bps.map(|b| b / 1e9),
        min_cuda_bw_gbps: was.min_cuda_bw_bps.map(|b| b / 1e9),
        min_bw_size: was.min_bw_size,
        allow_tcp: was.allow_tcp,
        expect_config: was.expect_config.clone(),
        engine: parse("engine", &was.engine)?,
        ucx_profile: was.ucx_profile.clone(),
        host_ipc: was.host_ipc,
        memlock_unlimited: was.memlock_unlimited,
        // A resumed rails sweep measures its missing pairs as rails too.
        rails: was.rails.clone(),
        rail_margin: was.rail_margin,
        plan,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_ucx_profile_of_a_resumed_file_is_read_back_or_refused() {
        use super::{Given, ResumeError, UcxProfile};
        let named = |p: Option<&str>| Given {
            ucx_profile: p.map(String::from),
            ..Given::default()
        };
        assert_eq!(named(None).ucx_profile().unwrap(), UcxProfile::Default);
        assert_eq!(named(Some("nixl")).ucx_profile().unwrap(), UcxProfile::Nixl);
        let e = named(Some("fast")).ucx_profile().unwrap_err();
        assert!(
            matches!(
                e,
                ResumeError::Unknown {
                    what: "--ucx-profile",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("--resume: the file's criteria name an unknown --ucx-profile ("),
            "{e}"
        );
    }

    use super::*;

    fn resume(given: &Given, was: &Criteria) -> Result<Given, ResumeError> {
        merge(given, "s.json", Some(was))
    }

    fn differs(e: Result<Given, ResumeError>) -> Option<&'static str> {
        match e {
            Err(ResumeError::Differs { flag, .. }) => Some(flag),
            _ => None,
        }
    }

    #[test]
    fn resume_takes_the_files_criteria_when_no_flag_says_otherwise() {
        let mut was = Given::default().criteria();
        was.allow_tcp = true;
        was.sizes = vec![1 << 20];
        was.min_host_bw_bps = Some(1e6);
        let merged = resume(&Given::default(), &was).unwrap();
        assert_eq!(merged.criteria(), was);
        // A file from before criteria were kept: this command line's values.
        let given = Given {
            allow_tcp: true,
            ..Given::default()
        };
        assert_eq!(merge(&given, "s.json", None), Ok(given));
    }

    #[test]
    fn resume_refuses_a_flag_that_differs_and_names_it() {
        let was = Given::default().criteria();
        let allow_tcp = Given {
            allow_tcp: true,
            ..Given::default()
        };
        let e = resume(&allow_tcp, &was).unwrap_err();
        assert!(
            matches!(
                e,
                ResumeError::Differs {
                    flag: "--allow-tcp",
                    ..
                }
            ),
            "{e}"
        );
        let text = e.to_string();
        assert!(text.starts_with("--resume s.json: --allow-tcp differs"), "{text}");
        assert!(!text.contains('\n'));
        let sizes = Given {
            sizes: vec![4 << 10],
            ..Given::default()
        };
        assert_eq!(differs(resume(&sizes, &was)), Some("--sizes"));
        // The same value given again is no difference.
        let tests = Given {
            tests: DEFAULT_TESTS.to_vec(),
            ..Given::default()
        };
        assert_eq!(resume(&tests, &was).map(|g| g.criteria()), Ok(was.clone()));
        // The nodes and the plan are the file's: a flag choosing them is refused, not ignored.
        let nodes = Given {
            plan: PlanGiven {
                nodes: true,
                ..PlanGiven::default()
            },
            ..Given::default()
        };
        let e = resume(&nodes, &was).unwrap_err();
        assert_eq!(e, ResumeError::PlanFlag("--nodes"));
        assert!(
            e.to_string()
                .starts_with("--resume: --nodes cannot change a sweep being resumed"),
            "{e}"
        );
    }

    #[test]
    fn the_engine_and_ucx_profile_are_criteria_resume_keeps() {
        let was = Given {
            ucx_profile: Some("nixl".into()),
            ..Given::default()
        }
        .criteria();
        assert_eq!(was.ucx_profile.as_deref(), Some("nixl"));
        assert_eq!(was.engine, "ucx");
        // Left out now: the file's profile is taken.
        let merged = resume(&Given::default(), &was).unwrap();
        assert_eq!(merged.ucx_profile.as_deref(), Some("nixl"));
        // Another engine given now: refused, naming the flag.
        let nixl = Given {
            engine: EngineKind::Nixl,
            ..Given::default()
        };
        assert_eq!(differs(resume(&nixl, &was)), Some("--engine"));
    }

    #[test]
    fn a_resumed_sweep_keeps_memlock_unlimited() {
        let memlock = Given {
            memlock_unlimited: true,
            ..Given::default()
        };
        let was = memlock.criteria();
        assert!(was.memlock_unlimited);
        // Left out on --resume: the file's value, so the resumed pods are specified as before.
        assert!(resume(&Given::default(), &was).unwrap().memlock_unlimited);
        // Given again: no difference.
        assert!(resume(&memlock, &was).unwrap().memlock_unlimited);
        // Given now for a sweep that ran without it: refused, naming the flag.
        let plain = Given::default().criteria();
        assert_eq!(differs(resume(&memlock, &plain)), Some("--memlock-unlimited"));
        assert!(!resume(&Given::default(), &plain).unwrap().memlock_unlimited);
    }

    #[test]
    fn a_resumed_rails_sweep_stays_a_rails_sweep() {
        let rails = Given {
            rails: Some("auto".into()),
            rail_margin: Some(0.15),
            ..Given::default()
        };
        let was = rails.criteria();
        assert_eq!((was.rails.as_deref(), was.rail_margin), (Some("auto"), Some(0.15)));
        let merged = resume(&Given::default(), &was).unwrap();
        assert_eq!(
            (merged.rails.as_deref(), merged.rail_margin),
            (Some("auto"), Some(0.15))
        );
        // A plain sweep's file refuses --rails now: the pairs measured so far were not rails.
        let plain = Given::default().criteria();
        let auto = Given {
            rails: Some("auto".into()),
            ..Given::default()
        };
        assert_eq!(differs(resume(&auto, &plain)), Some("--rails"));
    }

    #[test]
    fn an_unknown_name_in_the_file_is_refused_naming_what() {
        let mut was = Given::default().criteria();
        was.engine = "warp".into();
        let e = resume(&Given::default(), &was).unwrap_err();
        assert!(matches!(e, ResumeError::Unknown { what: "engine", .. }), "{e}");
        // What the file says is quoted escaped: the error stays one line.
        was.engine = "warp\n\u{1b}[2J".into();
        let e = resume(&Given::default(), &was).unwrap_err().to_string();
        assert!(
            !e.chars().any(char::is_control) && e.contains(r"warp\n\u{1b}[2J"),
            "{e}"
        );
    }
}
