//! `--rails` and its companions, shared by `pair`, `connect` and `serve` (`icb_rails` runs them),
//! and the emulated rails' faults of `pair --local --isolation node --rails K`.

use icb_core::rails::RailPattern;
use icb_rails::{AloneRuns, Choice, RailSelection};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct RailArgs {
    /// Whole-node mode: every GPU↔NIC rail of the node pair at once, one rank per rail on each
    /// side. `auto` (the nodes' rail maps, as `probe node` prints them), `gpu0=mlx5_0,gpu1=mlx5_3,…`,
    /// or with --local --isolation node a number K of emulated rail NICs per node
    #[arg(long, value_name = "auto|K|gpuN=NIC,…")]
    pub rails: Option<String>,

    /// Host-memory rails over these network devices (one per rail, on both sides); with --rails,
    /// what each rank is told in UCX_NET_DEVICES instead of its own NIC (the counters then show
    /// whether the bytes left through the rail's NIC)
    #[arg(long, value_name = "DEV,…", value_delimiter = ',')]
    pub rail_devices: Option<Vec<String>>,

    /// aligned (rail i ↔ rail i, the production shape) or cross (every prefill rail with every
    /// decode rail, in rounds of one partner each)
    #[arg(long, value_name = "PATTERN", value_enum, default_value_t = PatternArg::Aligned)]
    pub rail_pattern: PatternArg,

    /// A rail more than this far below the median of the node pair's rails fails, even above
    /// the floor (e.g. 20%)
    #[arg(long, value_name = "PERCENT", default_value = "20%", value_parser = parse_percent)]
    pub rail_margin: f64,

    /// Which rails also run alone: suspects (slow or misattributed together) or all (adds
    /// aggregate ÷ Σ alone)
    #[arg(long, value_name = "WHICH", value_enum, default_value_t = AloneArg::Suspects)]
    pub rail_alone: AloneArg,
}

/// The emulated rails' faults of `pair --local --isolation node --rails K`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct EmulatedRailArgs {
    /// With --local --isolation node --rails K: limit rail I of NODE (node-a: decode, node-b:
    /// prefill) to RATE (tc tbf), e.g. node-b/2=200mbit
    #[arg(long, value_name = "NODE/I=RATE")]
    pub slow_rail: Vec<String>,

    /// With --local --isolation node --rails K: take rail I of NODE down at its switch port
    #[arg(long, value_name = "NODE/I")]
    pub dead_rail: Vec<String>,

    /// With --local --isolation node --rails K: congest rail I of NODE (tc tbf at RATE; the
    /// emulated NIC's CNP/ECN counters count the packets held back), e.g. node-b/1=200mbit
    #[arg(long, value_name = "NODE/I=RATE")]
    pub congested_rail: Vec<String>,

    /// With --local --isolation node --rails K: drop PERCENT of rail I of NODE's packets each
    /// way (nft; the emulated NIC's sequence-error counters count them), e.g. node-b/2=2%
    #[arg(long, value_name = "NODE/I=PERCENT")]
    pub lossy_rail: Vec<String>,
}

impl EmulatedRailArgs {
    /// The first of these flags given, if any.
    pub fn given(&self) -> Option<&'static str> {
        [
            (!self.slow_rail.is_empty(), "--slow-rail"),
            (!self.dead_rail.is_empty(), "--dead-rail"),
            (!self.congested_rail.is_empty(), "--congested-rail"),
            (!self.lossy_rail.is_empty(), "--lossy-rail"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PatternArg {
    #[default]
    Aligned,
    Cross,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AloneArg {
    #[default]
    Suspects,
    All,
}

pub fn parse_percent(s: &str) -> Result<f64, String> {
    let n = s.trim().trim_end_matches('%').trim();
    match n.parse::<f64>() {
        Ok(v) if (0.0..100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(format!("bad margin {s:?}: give a percentage from 0 to 99, e.g. 20%")),
    }
}

impl RailArgs {
    /// The choice for `selection` (read by the seam's target; `Choice::new`'s rule).
    pub fn choice(&self, selection: RailSelection) -> Choice {
        Choice::new(
            selection,
            self.rail_devices.clone(),
            self.pattern(),
            self.rail_margin,
            self.alone(),
        )
    }

    pub fn pattern(&self) -> RailPattern {
        match self.rail_pattern {
            PatternArg::Aligned => RailPattern::Aligned,
            PatternArg::Cross => RailPattern::Cross,
        }
    }

    pub fn alone(&self) -> AloneRuns {
        match self.rail_alone {
            AloneArg::Suspects => AloneRuns::Suspects,
            AloneArg::All => AloneRuns::All,
        }
    }

    /// Whether any rails flag was given (then the run is a rails run).
    pub fn wanted(&self) -> bool {
        self.rails.is_some() || self.rail_devices.is_some()
    }

    /// A rails-only flag given without --rails/--rail-devices (it would be ignored).
    pub fn stray_flag(&self) -> Option<&'static str> {
        if self.wanted() {
            return None;
        }
        [
            (self.rail_pattern != PatternArg::Aligned, "--rail-pattern"),
            (self.rail_alone != AloneArg::Suspects, "--rail-alone"),
            ((self.rail_margin - 0.2).abs() > 1e-9, "--rail-margin"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}
