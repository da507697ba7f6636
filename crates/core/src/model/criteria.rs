//! What a run was judged against, stated in its report (sweep results, gate report): the tests,
//! floors, `--allow-tcp`, engine and profile. A sweep keeps it in its results file so `--resume`
//! measures the missing pairs the way the first run measured the others (a resumed sweep whose
//! pairs ran under different floors would compare unlike things and blame nodes for it); a gate
//! states it so a pass reads with the floors it passed.

use super::{EngineKind, MemoryPair, RunSettings, TestKind};
use serde::{Deserialize, Serialize};

/// A run's criteria (`criteria` in `ic-bench.sweep/v1` and `ic-bench.gate/v1`): every flag that
/// changes what a pair measures or how it is judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Criteria {
    /// `--tests`, as the CLI spells them (`put_bw`, `tag_lat` …).
    pub tests: Vec<String>,
    /// `--sizes`, bytes.
    pub sizes: Vec<u64>,
    /// `--memory`, `host-host` …
    pub memory: Vec<String>,
    /// `--max-time`, seconds.
    pub max_time_s: f64,
    /// `--min-host-bw`, bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_host_bw_bps: Option<f64>,
    /// `--min-cuda-bw`, bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_cuda_bw_bps: Option<f64>,
    /// `--min-bw-size`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_bw_size: Option<u64>,
    /// `--allow-tcp`: TCP carrying the data is a warning, not a failure.
    pub allow_tcp: bool,
    /// `--expect-config`, the path as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_config: Option<String>,
    /// The transfer engine every pair ran (`ucx`).
    pub engine: String,
    /// The measurement profile (`sweep`: the short per-pair profile of `ic-bench sweep`).
    pub profile: String,
    /// `--ucx-profile` of the UCX engine when not the default (`nixl`: UCX configured as NIXL's
    /// backend configures it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ucx_profile: Option<String>,
    /// `--host-ipc`.
    #[serde(default)]
    pub host_ipc: bool,
    /// `--memlock-unlimited`: RDMA bench pods ran non-root without IPC_LOCK. Absent (false) in
    /// files written before it was kept, and left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memlock_unlimited: bool,
    /// `--rails` (whole-node mode: every rail of each node pair at once); absent: plain pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rails: Option<String>,
    /// `--rail-margin` as a fraction, with `--rails`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail_margin: Option<f64>,
}

/// The values a command line gives for its criteria, its defaults filled in, as its flags spell
/// them (bandwidth floors in GB/s): what [`Criteria::from_flags`] states. `gate` and `sweep` each
/// fill one from their own arguments, so both state their criteria the same way.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CriteriaFlags {
    pub tests: Vec<TestKind>,
    pub sizes: Vec<u64>,
    pub memory: Vec<MemoryPair>,
    pub max_time_s: f64,
    pub min_host_bw_gbps: Option<f64>,
    pub min_cuda_bw_gbps: Option<f64>,
    pub min_bw_size: Option<u64>,
    pub allow_tcp: bool,
    pub expect_config: Option<String>,
    pub engine: EngineKind,
    /// `--ucx-profile` when not the default.
    pub ucx_profile: Option<String>,
    pub host_ipc: bool,
    /// `--memlock-unlimited` (pair/sweep on Kubernetes).
    pub memlock_unlimited: bool,
    pub rails: Option<String>,
    /// `--rail-margin` as a fraction; stated only with `rails`.
    pub rail_margin: f64,
}

/// A criteria field naming something this build does not know (a results file written by
/// another version, or edited): the flag that sets it and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {error}")]
pub struct UnknownName {
    pub flag: &'static str,
    pub error: crate::ParseError,
}

impl Criteria {
    /// The qualification settings these criteria measure with.
    pub fn settings(&self) -> Result<RunSettings, UnknownName> {
        let tests = self
            .tests
            .iter()
            .map(|t| {
                t.parse::<TestKind>()
                    .map_err(|error| UnknownName { flag: "--tests", error })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let memory = self
            .memory
            .iter()
            .map(|m| {
                m.parse::<MemoryPair>().map_err(|error| UnknownName {
                    flag: "--memory",
                    error,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RunSettings::qualification(
            tests,
            self.sizes.clone(),
            memory,
            self.max_time_s,
        ))
    }

    /// The criteria a run under `profile` (`gate`, `sweep`) states for these flags.
    pub fn from_flags(profile: &str, flags: &CriteriaFlags) -> Criteria {
        let f = flags;
        Criteria {
            tests: f.tests.iter().map(|t| t.as_str().to_string()).collect(),
            sizes: f.sizes.clone(),
            memory: f
                .memory
                .iter()
                .map(|m| format!("{}-{}", m.initiator, m.target))
                .collect(),
            max_time_s: f.max_time_s,
            min_host_bw_bps: f.min_host_bw_gbps.map(|g| g * 1e9),
            min_cuda_bw_bps: f.min_cuda_bw_gbps.map(|g| g * 1e9),
            min_bw_size: f.min_bw_size,
            allow_tcp: f.allow_tcp,
            expect_config: f.expect_config.clone(),
            engine: f.engine.to_string(),
            profile: profile.into(),
            ucx_profile: f.ucx_profile.clone(),
            host_ipc: f.host_ipc,
            memlock_unlimited: f.memlock_unlimited,
            rails: f.rails.clone(),
            rail_margin: f.rails.as_ref().map(|_| f.rail_margin),
        }
    }

    /// Every field as (the flag that sets it, its value as that flag would spell it), in flag
    /// order: what `--resume` compares and names.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "unset".into());
        vec![
            ("--tests", self.tests.join(",")),
            (
                "--sizes",
                self.sizes.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
            ),
            ("--memory", self.memory.join(",")),
            ("--max-time", format!("{:?}", self.max_time_s)),
            (
                "--min-host-bw",
                opt(self.min_host_bw_bps.map(|b| format!("{:?}GB/s", b / 1e9))),
            ),
            (
                "--min-cuda-bw",
                opt(self.min_cuda_bw_bps.map(|b| format!("{:?}GB/s", b / 1e9))),
            ),
            ("--min-bw-size", opt(self.min_bw_size.map(|s| s.to_string()))),
            ("--allow-tcp", self.allow_tcp.to_string()),
            ("--expect-config", opt(self.expect_config.clone())),
            ("--engine", self.engine.clone()),
            ("--profile", self.profile.clone()),
            (
                "--ucx-profile",
                self.ucx_profile.clone().unwrap_or_else(|| "default".into()),
            ),
            ("--host-ipc", self.host_ipc.to_string()),
            ("--memlock-unlimited", self.memlock_unlimited.to_string()),
            ("--rails", opt(self.rails.clone())),
            ("--rail-margin", opt(self.rail_margin.map(|m| format!("{:?}", m)))),
        ]
    }

    /// The value of the field `flag` sets, as in [`Self::fields`] (empty for an unknown flag).
    pub fn value_of(&self, flag: &str) -> String {
        self.fields()
            .into_iter()
            .find(|(f, _)| *f == flag)
            .map(|(_, v)| v)
            .unwrap_or_default()
    }

    /// Whether `self` and `other` differ in the field `flag` sets.
    pub fn field_differs(&self, other: &Criteria, flag: &str) -> bool {
        self.value_of(flag) != other.value_of(flag)
    }

    /// The first field where `self` (the file's) and `given` (this command line's) differ, as the
    /// flag that sets it; `None` when they agree.
    pub fn differing_flag(&self, given: &Criteria) -> Option<&'static str> {
        self.fields()
            .into_iter()
            .zip(given.fields())
            .find(|((_, a), (_, b))| a != b)
            .map(|((flag, _), _)| flag)
    }

    /// Relaxations a `pass` made under these criteria carries, for node annotations: a node that
    /// passed only because TCP was allowed must not read like one that passed on RDMA.
    pub fn relaxations(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.allow_tcp {
            out.push("--allow-tcp");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Criteria {
        Criteria {
            tests: vec!["put_bw".into()],
            sizes: vec![1 << 20],
            memory: vec!["host-host".into()],
            max_time_s: 1.0,
            engine: "ucx".into(),
            profile: "sweep".into(),
            ..Criteria::default()
        }
    }

    #[test]
    fn the_first_differing_flag_is_named() {
        assert_eq!(base().differing_flag(&base()), None);
        let mut other = base();
        other.allow_tcp = true;
        assert_eq!(base().differing_flag(&other), Some("--allow-tcp"));
        assert_eq!(other.relaxations(), ["--allow-tcp"]);
        let mut other = base();
        other.sizes = vec![64 << 10];
        other.min_host_bw_bps = Some(1e9);
        assert_eq!(base().differing_flag(&other), Some("--sizes"));
    }

    #[test]
    fn from_flags_spells_the_values_as_the_report_states_them() {
        let flags = CriteriaFlags {
            tests: vec![TestKind::PutBw, TestKind::TagLat],
            sizes: vec![1 << 20],
            memory: vec!["host-cuda".parse().unwrap()],
            max_time_s: 1.0,
            min_host_bw_gbps: Some(12.5),
            engine: EngineKind::Nixl,
            rail_margin: 0.2,
            ..CriteriaFlags::default()
        };
        let c = Criteria::from_flags("gate", &flags);
        assert_eq!(c.tests, ["put_bw", "tag_lat"]);
        assert_eq!(c.memory, ["host-cuda"]);
        assert_eq!(c.min_host_bw_bps, Some(12.5e9));
        assert_eq!((c.engine.as_str(), c.profile.as_str()), ("nixl", "gate"));
        // The margin is stated only for a rails run.
        assert_eq!((c.rails, c.rail_margin), (None, None));
        let rails = CriteriaFlags {
            rails: Some("auto".into()),
            ..flags
        };
        assert_eq!(Criteria::from_flags("gate", &rails).rail_margin, Some(0.2));
    }

    #[test]
    fn the_settings_are_the_criterias_and_an_unknown_name_is_named_by_its_flag() {
        let settings = base().settings().unwrap();
        assert_eq!(settings.tests, [TestKind::PutBw]);
        assert_eq!(settings.memory, [MemoryPair::HOST_HOST]);
        assert_eq!(
            (settings.sizes.as_slice(), settings.max_time_s),
            (&[1u64 << 20][..], 1.0)
        );
        let mut bad = base();
        bad.memory = vec!["disk-host".into()];
        assert_eq!(bad.settings().unwrap_err().flag, "--memory");
        let mut bad = base();
        bad.tests = vec!["am_bw".into()];
        assert!(bad.settings().unwrap_err().to_string().starts_with("--tests: "));
    }

    #[test]
    fn memlock_unlimited_is_kept_and_older_files_read_as_without_it() {
        let mut with = base();
        with.memlock_unlimited = true;
        let text = serde_json::to_string(&with).unwrap();
        assert!(text.contains(r#""memlock_unlimited":true"#), "{text}");
        assert_eq!(serde_json::from_str::<Criteria>(&text).unwrap(), with);
        assert_eq!(base().differing_flag(&with), Some("--memlock-unlimited"));
        assert_eq!(with.value_of("--memlock-unlimited"), "true");
        // A file written before the field existed (and one written without the flag) lacks it.
        let without = serde_json::to_string(&base()).unwrap();
        assert!(!without.contains("memlock"), "{without}");
        assert!(!serde_json::from_str::<Criteria>(&without).unwrap().memlock_unlimited);
    }

    #[test]
    fn round_trips_and_omits_unset_floors() {
        let text = serde_json::to_string(&base()).unwrap();
        assert!(!text.contains("min_host_bw_bps"), "{text}");
        assert_eq!(serde_json::from_str::<Criteria>(&text).unwrap(), base());
    }
}
