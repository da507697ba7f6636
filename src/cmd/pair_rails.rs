//! `ic-bench pair --rails`: every rail of a node pair at once (`icb_pair::rails`). Here only the
//! flags, read once into a [`RailsTarget`], and the wiring of the local seam.

use super::interrupt::Interrupt;
use super::pair::PairCommand;
use icb_core::rails::RailPattern;
use icb_pair::rails::local::LocalRails;
use icb_pair::rails::{AloneRuns, RailSelection, RailsPlan, plan_rows, run_rails};
use icb_pair::{PairError, SideRole};

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
}

impl EmulatedRailArgs {
    /// The first of these flags given, if any.
    pub fn given(&self) -> Option<&'static str> {
        [
            (!self.slow_rail.is_empty(), "--slow-rail"),
            (!self.dead_rail.is_empty(), "--dead-rail"),
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
    /// The choice for `selection` (read by the seam's target): with `--rails`, `--rail-devices`
    /// names what the ranks are told; on its own it is the selection.
    pub fn choice(&self, selection: RailSelection) -> Choice {
        let told = match &selection {
            RailSelection::Devices(_) => None,
            _ => self.rail_devices.clone(),
        };
        Choice {
            selection,
            told,
            pattern: self.pattern(),
            margin: self.rail_margin,
            alone: self.alone(),
        }
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

/// A rail of an emulated node, as `--slow-rail`/`--dead-rail` name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRail {
    pub side: SideRole,
    pub rail: usize,
}

/// A local rails run, decided.
#[derive(Debug, Clone)]
pub struct RailsTarget {
    pub opts: icb_pair::local::LocalOptions,
    /// Emulated rail NICs per node (0: this host's devices).
    pub emulated: usize,
    pub choice: Choice,
    pub slow: Vec<(NodeRail, String)>,
    pub dead: Vec<NodeRail>,
}

/// `node-b/2` → the prefill side's rail 2 (the local pair's decode node is node-a).
fn node_rail(text: &str, k: usize, flag: &str) -> anyhow::Result<NodeRail> {
    let bad = || {
        anyhow::anyhow!(
            "{flag} {text:?}: write NODE/I with NODE node-a (decode) or node-b (prefill) and I a rail 0-{}",
            k.saturating_sub(1)
        )
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

/// Reads the rails flags of a `--local` run.
pub fn target(
    rails: &RailArgs,
    emulated_faults: &EmulatedRailArgs,
    opts: icb_pair::local::LocalOptions,
) -> anyhow::Result<RailsTarget> {
    let node = opts.isolation == icb_isolate::Isolation::Node;
    let (emulated, selection) = match (rails.rails.as_deref(), &rails.rail_devices) {
        (Some(text), _) if text.trim().parse::<usize>().is_ok() => {
            let k: usize = text.trim().parse()?;
            if !node {
                anyhow::bail!("--rails {k} emulates {k} rail NICs per node: use it with --local --isolation node");
            }
            if k == 0 {
                anyhow::bail!("--rails 0: give at least one rail");
            }
            (k, RailSelection::Auto)
        }
        (Some(text), _) => (0, text.parse::<RailSelection>()?),
        (None, Some(devs)) => (0, RailSelection::Devices(devs.clone())),
        (None, None) => anyhow::bail!("--rail-pattern and the other rail flags need --rails or --rail-devices"),
    };
    if node && emulated == 0 {
        anyhow::bail!("--isolation node has no rail NICs unless asked: give --rails K (e.g. --rails 4)");
    }
    if !node && !matches!(opts.isolation, icb_isolate::Isolation::None) {
        anyhow::bail!(
            "rails run on two nodes: use --isolation node --rails K, or no isolation over this host's devices"
        );
    }
    if (!emulated_faults.slow_rail.is_empty() || !emulated_faults.dead_rail.is_empty()) && emulated == 0 {
        anyhow::bail!("--slow-rail and --dead-rail change emulated rails: use them with --isolation node --rails K");
    }
    let slow = emulated_faults
        .slow_rail
        .iter()
        .map(|s| {
            let (at, rate) = s
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("--slow-rail {s:?}: write NODE/I=RATE, e.g. node-b/2=200mbit"))?;
            let rate = super::pair_local::parse_link_rate(rate).map_err(anyhow::Error::msg)?;
            Ok((node_rail(at, emulated, "--slow-rail")?, rate))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let dead = emulated_faults
        .dead_rail
        .iter()
        .map(|s| node_rail(s, emulated, "--dead-rail"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(RailsTarget {
        opts,
        emulated,
        choice: rails.choice(selection),
        slow,
        dead,
    })
}

pub fn run(cmd: &PairCommand, t: &RailsTarget) -> anyhow::Result<i32> {
    let interrupt = Interrupt::install()?;
    let mut seam = LocalRails::create(t.opts.clone(), t.emulated)?;
    for (at, rate) in &t.slow {
        seam.limit_rail(at.side, at.rail, rate)?;
    }
    for at in &t.dead {
        seam.cut_rail(at.side, at.rail)?;
    }
    let prefill = seam.node_info(SideRole::Prefill)?;
    let decode = seam.node_info(SideRole::Decode)?;
    let plan = rails_plan(cmd, &t.choice, &prefill, &decode)?;
    let result = super::common::runtime()?.block_on(run_plan(&plan, &mut seam, &interrupt));
    let removed = seam.cleanup();
    match (result, removed) {
        (Ok(outcome), Ok(_)) => super::common::emit_pair(&outcome.report, &cmd.output),
        (Err(PairError::Interrupted(i)), _) => super::common::emit_interrupted(&i, &cmd.output, &interrupt),
        (Err(e), _) => Err(e.into()),
        (Ok(_), Err(e)) => Err(anyhow::anyhow!("the run finished, but cleaning up failed: {e}")),
    }
}

/// What a rails run pairs and how it judges, as the flags said (any seam).
#[derive(Debug, Clone)]
pub struct Choice {
    pub selection: RailSelection,
    /// `--rail-devices` with `--rails`: what the ranks are told instead of their own NICs.
    pub told: Option<Vec<String>>,
    pub pattern: RailPattern,
    pub margin: f64,
    pub alone: AloneRuns,
}

/// The rows of two nodes (a refusal is one line, exit 2).
pub fn rails_plan(
    cmd: &PairCommand,
    c: &Choice,
    prefill: &icb_pair::rails::NodeRailInfo,
    decode: &icb_pair::rails::NodeRailInfo,
) -> anyhow::Result<RailsPlan> {
    let rows = plan_rows(prefill, decode, &c.selection, c.told.as_deref(), c.pattern)?;
    tracing::info!("{} rail pairs between {} and {}", rows.len(), prefill.node, decode.node);
    Ok(RailsPlan {
        pair: cmd.plan.clone(),
        rows,
        pattern: c.pattern,
        margin: c.margin,
        alone: c.alone,
    })
}

/// Runs the rows through `seam`, one progress line per case on stderr.
pub async fn run_plan<S: icb_pair::rails::RailSeam>(
    plan: &RailsPlan,
    seam: &mut S,
    interrupt: &Interrupt,
) -> Result<icb_pair::PairOutcome, PairError> {
    let unit = plan.pair.settings.unit;
    let mut progress = |row: &icb_pair::rails::RailRow, p: &icb_core::protocol::CaseProgress| {
        eprintln!("rail {}: {}", row.index, icb_report::text::case_line(&p.case, unit));
    };
    run_rails(plan, seam, interrupt.token(), &mut progress).await
}
