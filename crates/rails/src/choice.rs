//! What a rails run pairs and how it judges, as the flags said ([`Choice`], any seam), and the
//! local target of `pair --local --rails`: this host's devices, or K emulated rail NICs per node
//! with their faults ([`LocalRailsTarget::read`]). Every refusal is one line
//! ([`RailFlagError`]).

use super::{AloneRuns, NodeRailInfo, RailPlanError, RailSelection, RailsPlan, plan_rows};
use icb_core::rails::RailPattern;
use icb_isolate::Isolation;
use icb_pair::{PairPlan, SideRole};

/// What a rails run pairs and how it judges, as the flags said (any seam).
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub selection: RailSelection,
    /// `--rail-devices` with `--rails`: what the ranks are told instead of their own NICs.
    pub told: Option<Vec<String>>,
    pub pattern: RailPattern,
    pub margin: f64,
    pub alone: AloneRuns,
}

impl Choice {
    /// The choice for `selection`: with `--rails`, `--rail-devices` names what the ranks are
    /// told; on its own it is the selection (and tells nothing more).
    pub fn new(
        selection: RailSelection,
        rail_devices: Option<Vec<String>>,
        pattern: RailPattern,
        margin: f64,
        alone: AloneRuns,
    ) -> Choice {
        let told = told_devices(&selection, rail_devices);
        Choice {
            selection,
            told,
            pattern,
            margin,
            alone,
        }
    }

    /// The rows of two nodes, as one plan with `pair`'s settings (a refusal is one line).
    pub fn plan(
        &self,
        pair: PairPlan,
        prefill: &NodeRailInfo,
        decode: &NodeRailInfo,
    ) -> Result<RailsPlan, RailPlanError> {
        let rows = plan_rows(prefill, decode, &self.selection, self.told.as_deref(), self.pattern)?;
        tracing::info!("{} rail pairs between {} and {}", rows.len(), prefill.node, decode.node);
        Ok(RailsPlan {
            pair,
            rows,
            pattern: self.pattern,
            margin: self.margin,
            alone: self.alone,
        })
    }
}

/// `--rail-devices`: with `--rails`, what the ranks are told instead of their own NICs; on its
/// own it is the selection and tells nothing more.
pub fn told_devices(selection: &RailSelection, rail_devices: Option<Vec<String>>) -> Option<Vec<String>> {
    match selection {
        RailSelection::Devices(_) => None,
        _ => rail_devices,
    }
}

/// Where a rails run happens: what a number K given to `--rails` means there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RailSite {
    /// `pair --local --isolation node`: K emulated rail NICs per node.
    EmulatedNodes,
    /// `pair --local` on this host's devices.
    ThisHost,
    /// `pair --prefill node/A --decode node/B`.
    Kubernetes,
    /// `serve --rails` / `connect --rails` between two hosts.
    BareMetal,
    /// `gate --rails`.
    Gate,
}

/// The one selection rule of `--rails`/`--rail-devices`: how many emulated rail NICs (0: none)
/// and which rails; a count emulates rail NICs, on emulated nodes only.
pub fn read_selection(
    rails: Option<&str>,
    rail_devices: Option<&[String]>,
    site: RailSite,
) -> Result<(usize, RailSelection), RailFlagError> {
    match (rails, rail_devices) {
        (Some(text), _) => match (text.trim().parse::<usize>(), site) {
            (Ok(0), RailSite::EmulatedNodes) => Err(RailFlagError::NoRail),
            (Ok(k), RailSite::EmulatedNodes) => Ok((k, RailSelection::Auto)),
            (Ok(k), RailSite::ThisHost) => Err(RailFlagError::EmulatedWithoutNodes(k)),
            (Ok(_), RailSite::Kubernetes) => Err(RailFlagError::EmulatedOnKubernetes(text.to_string())),
            (Ok(_), RailSite::BareMetal) => Err(RailFlagError::EmulatedBetweenHosts(text.to_string())),
            (Ok(_), RailSite::Gate) => Err(RailFlagError::EmulatedInGate(text.to_string())),
            (Err(_), _) => Ok((0, text.parse::<RailSelection>()?)),
        },
        (None, Some(devs)) => Ok((0, RailSelection::Devices(devs.to_vec()))),
        (None, None) if site == RailSite::BareMetal => Err(RailFlagError::NoRailsOnHost),
        (None, None) => Err(RailFlagError::NoRails),
    }
}

/// A rail of an emulated node, as `--slow-rail`/`--dead-rail` name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRail {
    pub side: SideRole,
    pub rail: usize,
}

/// Why the rails flags of a local run cannot run (one line, exit 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RailFlagError {
    #[error("--rails {0} emulates {0} rail NICs per node: use it with --local --isolation node")]
    EmulatedWithoutNodes(usize),
    #[error("--rails {0} emulates rail NICs: use it with --local --isolation node; on Kubernetes give --rails auto")]
    EmulatedOnKubernetes(String),
    #[error("--rails {0} emulates rail NICs (pair --local --isolation node); between two hosts give --rails auto")]
    EmulatedBetweenHosts(String),
    #[error("--rails {0} emulates rail NICs (pair --local --isolation node); a gate takes --rails auto")]
    EmulatedInGate(String),
    #[error("the rail flags need --rails or --rail-devices")]
    NoRailsOnHost,
    #[error("--rails 0: give at least one rail")]
    NoRail,
    #[error("--rail-pattern and the other rail flags need --rails or --rail-devices")]
    NoRails,
    #[error("--isolation node has no rail NICs unless asked: give --rails K (e.g. --rails 4)")]
    NodesWithoutRails,
    #[error("rails run on two nodes: use --isolation node --rails K, or no isolation over this host's devices")]
    Isolation,
    #[error(
        "--slow-rail, --dead-rail, --congested-rail and --lossy-rail change emulated rails: use them with --isolation node --rails K"
    )]
    FaultsNeedEmulatedRails,
    #[error("--slow-rail {0:?}: write NODE/I=RATE, e.g. node-b/2=200mbit")]
    SlowRail(String),
    #[error("--congested-rail {0:?}: write NODE/I=RATE, e.g. node-b/1=200mbit")]
    CongestedRail(String),
    #[error("--lossy-rail {0:?}: write NODE/I=PERCENT with 0.1% to 50%, e.g. node-b/2=2%")]
    LossyRail(String),
    #[error("{0}")]
    Rate(String),
    #[error("{flag} {text:?}: write NODE/I with NODE node-a (decode) or node-b (prefill) and I a rail 0-{last}")]
    NodeRail {
        flag: &'static str,
        text: String,
        last: usize,
    },
    #[error(transparent)]
    Selection(#[from] RailPlanError),
}

impl NodeRail {
    /// `node-b/2` → the prefill side's rail 2 (the local pair's decode node is node-a), of `k`.
    pub fn parse(text: &str, k: usize, flag: &'static str) -> Result<NodeRail, RailFlagError> {
        let bad = || RailFlagError::NodeRail {
            flag,
            text: text.to_string(),
            last: k.saturating_sub(1),
        };
        let (node, rail) = text.split_once('/').ok_or_else(bad)?;
        let side = match node {
            "node-a" => SideRole::Decode,
            "node-b" => SideRole::Prefill,
            _ => return Err(bad()),
        };
        let rail = rail.parse::<usize>().ok().filter(|r| *r < k).ok_or_else(bad)?;
        Ok(NodeRail { side, rail })
    }
}

/// The rails flags of a local run, as given.
#[derive(Debug, Clone, Default)]
pub struct LocalRailsFlags<'a> {
    /// `--rails`: `auto`, `gpuN=NIC,…` or a number K of emulated rail NICs.
    pub rails: Option<&'a str>,
    pub rail_devices: Option<&'a [String]>,
    /// `--slow-rail NODE/I=RATE`, `--dead-rail NODE/I`.
    pub slow_rail: &'a [String],
    pub dead_rail: &'a [String],
    /// `--congested-rail NODE/I=RATE`, `--lossy-rail NODE/I=PERCENT`.
    pub congested_rail: &'a [String],
    pub lossy_rail: &'a [String],
}

/// A local rails run, decided.
#[derive(Debug, Clone)]
pub struct LocalRailsTarget {
    pub opts: icb_pair::local::LocalOptions,
    /// Emulated rail NICs per node (0: this host's devices).
    pub emulated: usize,
    pub choice: Choice,
    pub slow: Vec<(NodeRail, String)>,
    pub dead: Vec<NodeRail>,
    /// Congested rails (a shaper whose held packets the emulated CNP/ECN counters count).
    pub congested: Vec<(NodeRail, String)>,
    /// Lossy rails, with the per mille of packets dropped each way.
    pub lossy: Vec<(NodeRail, u32)>,
}

impl LocalRailsTarget {
    /// Reads the rails flags of a `--local` run; `choice` turns the selection into the run's
    /// [`Choice`] (pattern, margin, alone runs).
    pub fn read(
        flags: &LocalRailsFlags<'_>,
        opts: icb_pair::local::LocalOptions,
        choice: impl FnOnce(RailSelection) -> Choice,
    ) -> Result<LocalRailsTarget, RailFlagError> {
        let node = opts.isolation == Isolation::Node;
        let (emulated, selection) = selection(flags, node)?;
        if node && emulated == 0 {
            return Err(RailFlagError::NodesWithoutRails);
        }
        if !node && !matches!(opts.isolation, Isolation::None) {
            return Err(RailFlagError::Isolation);
        }
        let faults = [flags.slow_rail, flags.dead_rail, flags.congested_rail, flags.lossy_rail];
        if faults.iter().any(|f| !f.is_empty()) && emulated == 0 {
            return Err(RailFlagError::FaultsNeedEmulatedRails);
        }
        let slow = flags
            .slow_rail
            .iter()
            .map(|s| {
                let (at, rate) = s.split_once('=').ok_or_else(|| RailFlagError::SlowRail(s.clone()))?;
                let rate = icb_isolate::parse_rate(rate).map_err(RailFlagError::Rate)?;
                Ok((NodeRail::parse(at, emulated, "--slow-rail")?, rate))
            })
            .collect::<Result<Vec<_>, RailFlagError>>()?;
        let dead = flags
            .dead_rail
            .iter()
            .map(|s| NodeRail::parse(s, emulated, "--dead-rail"))
            .collect::<Result<Vec<_>, _>>()?;
        let congested = flags
            .congested_rail
            .iter()
            .map(|s| {
                let bad = || RailFlagError::CongestedRail(s.clone());
                let (at, rate) = s.split_once('=').ok_or_else(bad)?;
                let rate = icb_isolate::parse_rate(rate).map_err(RailFlagError::Rate)?;
                Ok((NodeRail::parse(at, emulated, "--congested-rail")?, rate))
            })
            .collect::<Result<Vec<_>, RailFlagError>>()?;
        let lossy = flags
            .lossy_rail
            .iter()
            .map(|s| {
                let bad = || RailFlagError::LossyRail(s.clone());
                let (at, pct) = s.split_once('=').ok_or_else(bad)?;
                let pct: f64 = pct.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
                let per_mille = (pct * 10.0).round();
                if !(1.0..=500.0).contains(&per_mille) {
                    return Err(bad());
                }
                Ok((NodeRail::parse(at, emulated, "--lossy-rail")?, per_mille as u32))
            })
            .collect::<Result<Vec<_>, RailFlagError>>()?;
        Ok(LocalRailsTarget {
            opts,
            emulated,
            choice: choice(selection),
            slow,
            dead,
            congested,
            lossy,
        })
    }
}

/// How many emulated rail NICs (0: none) and which rails, on emulated nodes or this host.
fn selection(flags: &LocalRailsFlags<'_>, node: bool) -> Result<(usize, RailSelection), RailFlagError> {
    let site = if node {
        RailSite::EmulatedNodes
    } else {
        RailSite::ThisHost
    };
    read_selection(flags.rails, flags.rail_devices, site)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(isolation: Isolation) -> icb_pair::local::LocalOptions {
        icb_pair::local::LocalOptions {
            isolation,
            ..icb_pair::local::LocalOptions::new("ic-bench".into())
        }
    }

    fn choice(selection: RailSelection) -> Choice {
        Choice::new(selection, None, RailPattern::Aligned, 0.2, AloneRuns::Suspects)
    }

    fn read(flags: LocalRailsFlags<'_>, isolation: Isolation) -> Result<LocalRailsTarget, RailFlagError> {
        LocalRailsTarget::read(&flags, opts(isolation), choice)
    }

    #[test]
    fn a_number_emulates_rail_nics_on_emulated_nodes_only() {
        let flags = |rails| LocalRailsFlags {
            rails: Some(rails),
            ..Default::default()
        };
        let t = read(flags("4"), Isolation::Node).unwrap();
        assert_eq!((t.emulated, &t.choice.selection), (4, &RailSelection::Auto));
        assert_eq!(
            read(flags("4"), Isolation::None).unwrap_err(),
            RailFlagError::EmulatedWithoutNodes(4)
        );
        assert_eq!(read(flags("0"), Isolation::Node).unwrap_err(), RailFlagError::NoRail);
        assert_eq!(
            read(flags("auto"), Isolation::Node).unwrap_err(),
            RailFlagError::NodesWithoutRails
        );
        let host = read(flags("auto"), Isolation::None).unwrap();
        assert_eq!((host.emulated, host.choice.selection), (0, RailSelection::Auto));
        assert_eq!(
            read(LocalRailsFlags::default(), Isolation::None).unwrap_err(),
            RailFlagError::NoRails
        );
        assert_eq!(
            RailFlagError::EmulatedWithoutNodes(4).to_string(),
            "--rails 4 emulates 4 rail NICs per node: use it with --local --isolation node"
        );
    }

    #[test]
    fn faults_name_a_node_and_a_rail_of_the_emulated_rails() {
        let slow = ["node-b/2=200MBIT".to_string()];
        let dead = ["node-a/0".to_string()];
        let flags = LocalRailsFlags {
            rails: Some("3"),
            slow_rail: &slow,
            dead_rail: &dead,
            ..Default::default()
        };
        let t = read(flags.clone(), Isolation::Node).unwrap();
        let at = |side, rail| NodeRail { side, rail };
        assert_eq!(t.slow, [(at(SideRole::Prefill, 2), "200mbit".to_string())]);
        assert_eq!(t.dead, [at(SideRole::Decode, 0)]);
        let host = LocalRailsFlags {
            rails: Some("auto"),
            ..flags.clone()
        };
        assert_eq!(
            read(host, Isolation::None).unwrap_err(),
            RailFlagError::FaultsNeedEmulatedRails
        );
        let off_the_end = ["node-b/3=1gbit".to_string()];
        let err = read(
            LocalRailsFlags {
                slow_rail: &off_the_end,
                ..flags.clone()
            },
            Isolation::Node,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--slow-rail \"node-b/3\": write NODE/I with NODE node-a (decode) or node-b (prefill) and I a rail 0-2"
        );
        let no_rate = ["node-b/1".to_string()];
        let err = read(
            LocalRailsFlags {
                slow_rail: &no_rate,
                ..flags.clone()
            },
            Isolation::Node,
        );
        assert_eq!(err.unwrap_err(), RailFlagError::SlowRail("node-b/1".into()));
        let bad_rate = ["node-b/1=fast".to_string()];
        let err = read(
            LocalRailsFlags {
                slow_rail: &bad_rate,
                ..flags
            },
            Isolation::Node,
        );
        assert!(matches!(err, Err(RailFlagError::Rate(_))));
    }

    #[test]
    fn rail_devices_are_the_selection_alone_and_what_the_ranks_are_told_with_rails() {
        let devs = vec!["eth1".to_string()];
        let alone = Choice::new(
            RailSelection::Devices(devs.clone()),
            Some(devs.clone()),
            RailPattern::Aligned,
            0.2,
            AloneRuns::Suspects,
        );
        assert_eq!(alone.told, None);
        let told = Choice::new(
            RailSelection::Auto,
            Some(devs.clone()),
            RailPattern::Cross,
            0.1,
            AloneRuns::All,
        );
        assert_eq!(told.told, Some(devs));
    }

    #[test]
    fn a_count_emulates_rail_nics_and_is_refused_wherever_rails_are_real() {
        let count = |site| read_selection(Some("4"), None, site);
        assert_eq!(count(RailSite::EmulatedNodes), Ok((4, RailSelection::Auto)));
        assert_eq!(count(RailSite::ThisHost), Err(RailFlagError::EmulatedWithoutNodes(4)));
        assert_eq!(
            count(RailSite::Kubernetes),
            Err(RailFlagError::EmulatedOnKubernetes("4".into()))
        );
        assert_eq!(
            count(RailSite::BareMetal),
            Err(RailFlagError::EmulatedBetweenHosts("4".into()))
        );
        assert_eq!(count(RailSite::Gate), Err(RailFlagError::EmulatedInGate("4".into())));
        assert_eq!(
            RailFlagError::EmulatedBetweenHosts("4".into()).to_string(),
            "--rails 4 emulates rail NICs (pair --local --isolation node); between two hosts give --rails auto"
        );
        let devs = ["eth1".to_string()];
        for site in [RailSite::ThisHost, RailSite::Kubernetes, RailSite::BareMetal] {
            assert_eq!(
                read_selection(None, Some(&devs), site),
                Ok((0, RailSelection::Devices(devs.to_vec())))
            );
            assert_eq!(
                read_selection(Some("auto"), Some(&devs), site),
                Ok((0, RailSelection::Auto))
            );
        }
        assert_eq!(
            read_selection(None, None, RailSite::BareMetal),
            Err(RailFlagError::NoRailsOnHost)
        );
        assert_eq!(
            read_selection(None, None, RailSite::Kubernetes),
            Err(RailFlagError::NoRails)
        );
        assert_eq!(
            told_devices(&RailSelection::Auto, Some(devs.to_vec())),
            Some(devs.to_vec())
        );
    }

    #[test]
    fn congested_and_lossy_rails_are_read_and_bad_values_are_one_line() {
        let congested = ["node-b/1=200mbit".to_string()];
        let lossy = ["node-a/2=1.5%".to_string()];
        let flags = LocalRailsFlags {
            rails: Some("3"),
            congested_rail: &congested,
            lossy_rail: &lossy,
            ..Default::default()
        };
        let t = read(flags.clone(), Isolation::Node).unwrap();
        let at = |side, rail| NodeRail { side, rail };
        assert_eq!(t.congested, [(at(SideRole::Prefill, 1), "200mbit".to_string())]);
        assert_eq!(t.lossy, [(at(SideRole::Decode, 2), 15)], "per mille");
        for bad in ["node-a/2", "node-a/2=lots", "node-a/2=0%", "node-a/2=60%"] {
            let lossy = [bad.to_string()];
            let err = read(
                LocalRailsFlags {
                    lossy_rail: &lossy,
                    ..flags.clone()
                },
                Isolation::Node,
            )
            .unwrap_err();
            assert_eq!(err, RailFlagError::LossyRail(bad.into()), "{bad}");
            assert!(err.to_string().contains("e.g. node-b/2=2%"), "{err}");
        }
        let no_rate = ["node-b/1".to_string()];
        let err = read(
            LocalRailsFlags {
                congested_rail: &no_rate,
                ..flags.clone()
            },
            Isolation::Node,
        );
        assert_eq!(err.unwrap_err(), RailFlagError::CongestedRail("node-b/1".into()));
        let host = LocalRailsFlags {
            rails: Some("auto"),
            ..flags
        };
        assert_eq!(
            read(host, Isolation::None).unwrap_err(),
            RailFlagError::FaultsNeedEmulatedRails
        );
    }
}
