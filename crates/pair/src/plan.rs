//! What a pair run is asked to do, decided once (by the CLI) before anything starts.

use icb_core::model::{Expectation, Locality, RunSettings};
use icb_core::protocol::{CHILD_PLAN_SCHEMA, ChildPlan};
use icb_core::verdict::{ExpectationConfig, ExpectationOverrides};
use std::time::Duration;

/// Per-case allowance on top of `max_time`: warmup, buffer registration, payload verification.
const PER_CASE_MARGIN: Duration = Duration::from_secs(2);
/// Fixed allowance on top of the per-case budget: UCX setup on both sides, CUDA probing, wire-up.
const RUN_MARGIN: Duration = Duration::from_secs(60);
/// "No practical limit"; it also keeps an absurd `max_time` from overflowing.
const DEADLINE_CAP: Duration = Duration::from_secs(7 * 24 * 3600);

/// Scheduling, image pulls and pod start-up on top of a run's own deadline, for bench pods.
const POD_START_MARGIN: Duration = Duration::from_secs(60);

/// The deadlines of one run. Each way of starting the sides has its own policy, here in one
/// place: [`Deadlines::local`], [`Deadlines::budget`] (bench pods, a sweep's pair, the gate),
/// [`Deadlines::in_place`]; all derive from the one per-run formula
/// ([`PairPlan::deadline_for`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// How long the prefill side may try to reach the decode side.
    pub connect: Duration,
    /// From the start of the run until the decode side announces its address.
    pub startup: Duration,
    /// The flag that sets `startup`, for the message when it passes.
    pub startup_flag: &'static str,
    /// From the start of the run until the prefill side's report.
    pub run: Duration,
    /// How long each side may take to exit on its own after the report before it is stopped.
    pub exit_grace: Duration,
}

impl Deadlines {
    /// Two local processes: the decode side has `startup` (`--startup-timeout`) to listen, the
    /// run [`PairPlan::deadline_for`] its settings.
    pub fn local(settings: &RunSettings, startup: Duration) -> Deadlines {
        Deadlines {
            connect: Duration::from_secs(30),
            startup,
            startup_flag: "--startup-timeout",
            run: PairPlan::deadline_for(settings),
            exit_grace: Duration::from_secs(15),
        }
    }

    /// One budget, set by `flag`, covers everything: scheduling, image pulls, start-up and the
    /// transfer (bench pods: `pair --timeout`, a sweep's `--pair-timeout`, the gate's budget).
    pub fn budget(budget: Duration, flag: &'static str) -> Deadlines {
        Deadlines {
            connect: Duration::from_secs(30),
            startup: budget,
            startup_flag: flag,
            run: budget,
            exit_grace: Duration::from_secs(15),
        }
    }

    /// The budget of two bench pods when the user gives none: the run's own deadline plus
    /// scheduling and image pulls.
    pub fn pods_default(settings: &RunSettings) -> Duration {
        PairPlan::deadline_for(settings).saturating_add(POD_START_MARGIN)
    }

    /// Inside two running workers: copying the binary in counts as start-up, then each side has
    /// `side` (`--side-timeout`).
    pub fn in_place(copy: Duration, side: Duration) -> Deadlines {
        Deadlines {
            connect: side,
            startup: copy + side,
            startup_flag: "--side-timeout",
            run: 2 * copy + 2 * side,
            exit_grace: Duration::from_secs(5),
        }
    }
}

/// Where the expectation comes from: an expectations file (parsed once, with its path) and the
/// flags, which win. It is resolved once the launcher knows the placement.
#[derive(Debug, Clone, Default)]
pub struct ExpectationInput {
    pub config: Option<(ExpectationConfig, String)>,
    pub flags: ExpectationOverrides,
}

/// The expectation flags as given (bandwidth floors in GB/s), read by [`ExpectationInput::read`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExpectationFlags {
    pub min_host_gbps: Option<f64>,
    pub min_cuda_gbps: Option<f64>,
    pub min_size: Option<u64>,
    pub allow_tcp: bool,
    /// `--expect-config FILE`.
    pub config: Option<std::path::PathBuf>,
}

/// Expectation flags that cannot be used, naming the flag or the file to fix.
#[derive(Debug, thiserror::Error)]
pub enum ExpectationError {
    #[error("cannot read --expect-config {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("in {path}")]
    Config {
        path: String,
        #[source]
        source: icb_core::ParseError,
    },
    #[error(transparent)]
    Value(#[from] icb_core::ParseError),
}

impl ExpectationInput {
    /// The expectations file (read and parsed once, here) and the flags, to be resolved for the
    /// placement once it is known; refused now when wrong for either placement, not after a run.
    pub fn read(flags: &ExpectationFlags) -> Result<ExpectationInput, ExpectationError> {
        let overrides = ExpectationOverrides::from_flags(
            flags.min_host_gbps,
            flags.min_cuda_gbps,
            flags.min_size,
            flags.allow_tcp,
        )?;
        let config = match &flags.config {
            Some(path) => {
                let shown = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|source| ExpectationError::Read {
                    path: shown.clone(),
                    source,
                })?;
                let parsed =
                    icb_core::verdict::parse_expectation_config(&text).map_err(|source| ExpectationError::Config {
                        path: shown.clone(),
                        source,
                    })?;
                Some((parsed, shown))
            }
            None => None,
        };
        let input = ExpectationInput {
            config,
            flags: overrides,
        };
        for locality in [Locality::SameHost, Locality::DifferentHosts] {
            input.resolve(locality)?;
        }
        Ok(input)
    }

    pub fn resolve(&self, locality: Locality) -> Result<Expectation, icb_core::ParseError> {
        Expectation::resolve(
            locality,
            self.config.as_ref().map(|(c, p)| (c, p.as_str())),
            &self.flags,
        )
    }
}

/// One pair run, whoever starts the two sides.
#[derive(Debug, Clone)]
pub struct PairPlan {
    pub settings: RunSettings,
    pub expectation: ExpectationInput,
    /// UCX peer-failure error handling on the endpoints (as NIXL asks for).
    pub ucx_peer_errors: bool,
    /// `--ucx-profile` of both sides, carried in the child plan so the plan (and `--dry-run`)
    /// shows it and the prefill side records it in its report.
    pub ucx_profile: icb_core::UcxProfile,
    /// How long the prefill side may try to reach the decode side.
    pub connect_timeout: Duration,
    /// From the start of the run until the decode side announces its address.
    pub startup_timeout: Duration,
    /// The flag that sets `startup_timeout`, for the message when it passes.
    pub startup_flag: &'static str,
    /// From the start of the run until the prefill side's report.
    pub deadline: Duration,
    /// How long each side may take to exit on its own after the report before it is stopped.
    pub exit_grace: Duration,
    /// UCX settings the prefill side applies over its environment (a negative control's
    /// `TLS=tcp`); empty for every ordinary run.
    pub ucx_config: Vec<(String, String)>,
    /// The recipe's transport variables (`UCX_*`, `NIXL_*`) the sides start with: what a
    /// knobs-off control runs without. Empty: no recipe env applies.
    pub knob_vars: Vec<String>,
    /// Whether the two sides' RDMA readiness (each read where it runs, sent in its hello) is
    /// compared into the report and its verdict: false where the caller compares its own way
    /// (a rails row: each rail's two ports, not the whole nodes').
    pub compare_readiness: bool,
}

impl PairPlan {
    /// A plan with the local deadlines for these settings ([`Deadlines::local`], 30 s start-up);
    /// [`PairPlan::with_deadlines`] sets another launcher's.
    pub fn new(settings: RunSettings, expectation: ExpectationInput) -> PairPlan {
        let deadlines = Deadlines::local(&settings, Duration::from_secs(30));
        PairPlan {
            settings,
            expectation,
            ucx_peer_errors: false,
            ucx_profile: icb_core::UcxProfile::Default,
            connect_timeout: deadlines.connect,
            startup_timeout: deadlines.startup,
            startup_flag: deadlines.startup_flag,
            deadline: deadlines.run,
            exit_grace: deadlines.exit_grace,
            ucx_config: Vec::new(),
            knob_vars: Vec::new(),
            compare_readiness: true,
        }
    }

    /// Sets the deadlines (the launcher's policy), all at once.
    pub fn set_deadlines(&mut self, d: Deadlines) {
        self.connect_timeout = d.connect;
        self.startup_timeout = d.startup;
        self.startup_flag = d.startup_flag;
        self.deadline = d.run;
        self.exit_grace = d.exit_grace;
    }

    /// The deadlines this plan runs under.
    pub fn deadlines(&self) -> Deadlines {
        Deadlines {
            connect: self.connect_timeout,
            startup: self.startup_timeout,
            startup_flag: self.startup_flag,
            run: self.deadline,
            exit_grace: self.exit_grace,
        }
    }

    /// A deadline the run can always meet: every case may run up to `max_time` plus its setup,
    /// plus a fixed margin for both sides' start-up.
    pub fn deadline_for(settings: &RunSettings) -> Duration {
        let cases = settings.case_list().len() as f64;
        Duration::try_from_secs_f64(cases * (settings.max_time_s + PER_CASE_MARGIN.as_secs_f64()))
            .map_or(DEADLINE_CAP, |d| d.min(DEADLINE_CAP))
            .saturating_add(RUN_MARGIN)
    }

    /// The number of cases the prefill side will report.
    pub fn cases(&self) -> usize {
        self.settings.case_list().len()
    }

    /// The document the prefill side runs from, for a placement of this locality.
    pub fn child_plan(&self, locality: Locality, placement_mode: &str) -> Result<ChildPlan, icb_core::ParseError> {
        Ok(ChildPlan {
            schema: CHILD_PLAN_SCHEMA.into(),
            settings: self.settings.clone(),
            expectation: self.expectation.resolve(locality)?,
            placement_mode: placement_mode.into(),
            ucx_peer_errors: self.ucx_peer_errors,
            ucx_profile: (self.ucx_profile != icb_core::UcxProfile::Default).then_some(self.ucx_profile),
            connect_timeout_s: self.connect_timeout.as_secs_f64(),
            ucx_config: self.ucx_config.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::{BandwidthUnit, MemoryPair, TestKind};

    fn settings() -> RunSettings {
        RunSettings {
            tests: vec![TestKind::TagBw],
            sizes: vec![8],
            memory: vec![MemoryPair::HOST_HOST],
            warmup_iterations: 1,
            min_iterations: 1,
            min_time_s: 0.1,
            max_time_s: 5.0,
            window: 1,
            unit: BandwidthUnit::GBps,
            require_cuda: false,
            stop: None,
            plan: Vec::new(),
            blocks: None,
            window_candidates: Vec::new(),
            untouched_buffers: false,
            cuda_alloc: Default::default(),
        }
    }

    #[test]
    fn the_deadline_grows_with_the_cases_and_is_capped() {
        let mut s = settings();
        assert_eq!(PairPlan::deadline_for(&s), Duration::from_secs(67));
        s.sizes = vec![8, 16];
        assert_eq!(PairPlan::deadline_for(&s), Duration::from_secs(74));
        s.max_time_s = 1e300;
        assert_eq!(PairPlan::deadline_for(&s), Duration::from_secs(7 * 24 * 3600 + 60));
    }

    #[test]
    fn every_launcher_policy_derives_from_the_one_formula() {
        let s = settings();
        let local = Deadlines::local(&s, Duration::from_secs(30));
        assert_eq!(local.run, PairPlan::deadline_for(&s));
        assert_eq!(
            (local.startup, local.startup_flag),
            (Duration::from_secs(30), "--startup-timeout")
        );
        assert_eq!(PairPlan::new(s.clone(), ExpectationInput::default()).deadlines(), local);
        // Bench pods: the run's deadline plus a minute for scheduling and image pulls.
        assert_eq!(Deadlines::pods_default(&s), Duration::from_secs(67 + 60));
        let pods = Deadlines::budget(Duration::from_secs(200), "--timeout");
        assert_eq!(
            (pods.startup, pods.run),
            (Duration::from_secs(200), Duration::from_secs(200))
        );
        let mut plan = PairPlan::new(s, ExpectationInput::default());
        plan.set_deadlines(pods);
        assert_eq!(
            (plan.deadline, plan.startup_flag),
            (Duration::from_secs(200), "--timeout")
        );
        let inplace = Deadlines::in_place(Duration::from_secs(120), Duration::from_secs(15));
        assert_eq!(inplace.startup, Duration::from_secs(135));
        assert_eq!(inplace.run, Duration::from_secs(270));
        assert_eq!(
            (inplace.connect, inplace.exit_grace),
            (Duration::from_secs(15), Duration::from_secs(5))
        );
    }

    #[test]
    fn the_child_plan_carries_the_resolved_expectation() {
        let flags = ExpectationOverrides::from_flags(Some(1000.0), None, None, false).unwrap();
        let plan = PairPlan::new(settings(), ExpectationInput { config: None, flags });
        let child = plan.child_plan(Locality::DifferentHosts, "kubernetes").unwrap();
        assert_eq!(child.expectation.locality, Locality::DifferentHosts);
        assert_eq!(child.expectation.min_host_bandwidth_bps, 1000e9);
        assert_eq!(child.expectation.source, "flags");
        assert_eq!(child.settings, settings());
        assert_eq!(child.placement_mode, "kubernetes");
    }
}
