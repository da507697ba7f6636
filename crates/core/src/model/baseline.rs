//! How a run compares with its history (`--baseline`, issue 21): per case and metric, the mean
//! and spread of the last matching runs, the change, and a verdict that is not the fabric
//! verdict. A case can pass its floors and still be **regressed**: slower than its own past by
//! more than the threshold. Every field here is additive to the v1 schemas.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What makes two results comparable, less the environment (see [`EnvKey`]): the node pair, the
/// rail, the case's test, memory pair, shape and direction, and the engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CaseKey {
    pub prefill: String,
    pub decode: String,
    /// The rail (its NIC) in whole-node mode; absent for a plain pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<String>,
    pub test: String,
    pub memory: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    pub engine: String,
}

impl CaseKey {
    /// The key of a pair report's case (memory spelt as the flags spell it: `host-cuda`).
    pub fn of_case(report: &super::PairReport, case: &super::CaseResult) -> CaseKey {
        CaseKey {
            prefill: report.placement.prefill.host.clone(),
            decode: report.placement.decode.host.clone(),
            rail: case.rail.map(|r| format!("rail{r}")),
            test: case.test.to_string(),
            memory: format!("{}-{}", case.memory.initiator, case.memory.target),
            size: case.size,
            blocks: case.blocks,
            direction: case.run_by.direction.map(|d| d.to_string()),
            engine: case.run_by.engine.to_string(),
        }
    }

    /// `put_bw host-host 1 MiB`, with the blocks, direction and rail when there are some.
    pub fn case_label(&self) -> String {
        let size = crate::units::format_size(self.size);
        let shape = match self.blocks {
            Some(n) if n > 1 => format!("{n} × {size}"),
            _ => size,
        };
        let mut s = format!("{} {} {shape}", self.test, self.memory);
        if let Some(d) = &self.direction {
            s = format!("{s} {d}");
        }
        if let Some(r) = &self.rail {
            s = format!("{s} rail {r}");
        }
        s
    }

    /// `a→b`.
    pub fn pair_label(&self) -> String {
        format!("{}→{}", self.prefill, self.decode)
    }
}

/// The environment a result was measured in: a change in any of these starts a new baseline.
/// `None`: not known for this result (a sweep file does not record versions).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnvKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_firmware: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ucx: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nixl: Option<String>,
    /// FNV-1a 64 of the sides' transport environment (`UCX_*`, `NCCL_*`, `NIXL_*` …), hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport_env: Option<String>,
}

impl EnvKey {
    /// The fields that differ from `other`, as `ucx 1.21.0 → 1.22.0`.
    pub fn changes_from(&self, other: &EnvKey) -> Vec<String> {
        let fields = [
            ("gpu", &self.gpu, &other.gpu),
            ("nic firmware", &self.nic_firmware, &other.nic_firmware),
            ("nic driver", &self.nic_driver, &other.nic_driver),
            ("ucx", &self.ucx, &other.ucx),
            ("nixl", &self.nixl, &other.nixl),
            ("transport env", &self.transport_env, &other.transport_env),
        ];
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        fields
            .into_iter()
            .filter(|(_, now, before)| now != before)
            .map(|(name, now, before)| format!("{name} {} → {}", show(before), show(now)))
            .collect()
    }
}

/// The figures a history keeps per case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Bytes/s; higher is better.
    BandwidthBps,
    /// One-way latency p50, µs; lower is better.
    LatencyP50Us,
}

impl Metric {
    pub const ALL: [Metric; 2] = [Metric::BandwidthBps, Metric::LatencyP50Us];

    pub fn as_str(self) -> &'static str {
        match self {
            Metric::BandwidthBps => "bandwidth_bps",
            Metric::LatencyP50Us => "latency_p50_us",
        }
    }

    /// The short name `--regression` and `--ack` files use.
    pub fn short(self) -> &'static str {
        match self {
            Metric::BandwidthBps => "bandwidth",
            Metric::LatencyP50Us => "latency",
        }
    }

    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::BandwidthBps)
    }

    /// A value as people read it: GB/s for bandwidth, µs for latency.
    pub fn show(self, value: f64) -> String {
        match self {
            Metric::BandwidthBps => format!(
                "{} GB/s",
                crate::units::bandwidth_value(value, crate::BandwidthUnit::GBps)
            ),
            Metric::LatencyP50Us => format!("{value:.2} µs"),
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Metric::ALL
            .into_iter()
            .find(|m| m.as_str() == s || m.short() == s)
            .ok_or_else(|| format!("'{s}' is not a metric: use bandwidth or latency"))
    }
}

/// How one figure stands against its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineVerdict {
    /// Within the threshold of the baseline mean.
    Within,
    /// Better than the baseline by more than the threshold.
    Improved,
    /// Worse than the baseline by more than the threshold: **pass, regressed** when the case passed.
    Regressed,
    /// Regressed, but listed in the `--ack` file (reported, never fails the run).
    Acknowledged,
    /// No earlier run with this key: this run starts the baseline (`note` says what changed).
    NewBaseline,
}

impl BaselineVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            BaselineVerdict::Within => "within",
            BaselineVerdict::Improved => "improved",
            BaselineVerdict::Regressed => "regressed",
            BaselineVerdict::Acknowledged => "acknowledged",
            BaselineVerdict::NewBaseline => "new_baseline",
        }
    }
}

impl fmt::Display for BaselineVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One case's metric against its baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineCheck {
    #[serde(flatten)]
    pub case: CaseKey,
    pub metric: Metric,
    pub verdict: BaselineVerdict,
    /// This run's figure.
    pub value: f64,
    /// Mean of the matching earlier runs (absent for a new baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_mean: Option<f64>,
    /// Their sample standard deviation (absent below two runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_stddev: Option<f64>,
    /// How many earlier runs the baseline is the mean of.
    pub baseline_runs: u32,
    /// (value − mean) / mean: negative is slower bandwidth or lower latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<f64>,
    /// The threshold applied, a fraction (0.10 = 10 %).
    pub threshold: f64,
    /// A new baseline: what changed in the key; acknowledged: the ack's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A new baseline because the environment key changed (new UCX, firmware …), not a first run:
    /// the reports show these, as a reader must know the comparison restarted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub key_changed: bool,
    /// The baseline runs' figures, oldest first (the trend the reports draw).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<f64>,
}

impl BaselineCheck {
    /// `regressed −31.2 % vs 45.00 GB/s (mean of 5)`: the verdict with the baseline figure.
    pub fn summary(&self) -> String {
        let compared = against_baseline(
            self.verdict,
            self.metric,
            (self.baseline_mean, self.change),
            self.baseline_runs,
        );
        compared.unwrap_or_else(|| match &self.note {
            Some(n) => format!("{}: {n}", self.verdict),
            None => self.verdict.to_string(),
        })
    }
}

/// `regressed −31.2 % vs 45.00 GB/s (mean of 5)`: a verdict with the baseline figure it was
/// judged against (a case's or a node's); none without both a mean and a change to show.
fn against_baseline(
    verdict: BaselineVerdict,
    metric: Metric,
    (mean, change): (Option<f64>, Option<f64>),
    runs: u32,
) -> Option<String> {
    let (mean, change) = (mean?, change?);
    Some(format!(
        "{verdict} {:+.1} % vs {} (mean of {runs})",
        change * 100.0,
        metric.show(mean)
    ))
}

/// A node's median bandwidth in a sweep against its last matching runs (what the
/// `IcBenchNodeRegressed` alert compares too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeBaselineCheck {
    pub node: String,
    pub verdict: BaselineVerdict,
    /// This sweep's median pair bandwidth of the node, bytes/s.
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_mean: Option<f64>,
    pub baseline_runs: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<f64>,
    pub threshold: f64,
    /// The earlier runs' medians, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<f64>,
}

impl NodeBaselineCheck {
    /// `regressed -45.0 % vs 0.105 GB/s (mean of 7)`.
    pub fn summary(&self) -> String {
        let compared = against_baseline(
            self.verdict,
            Metric::BandwidthBps,
            (self.baseline_mean, self.change),
            self.baseline_runs,
        );
        compared.unwrap_or_else(|| format!("{}: first sweep of this node", self.verdict))
    }
}

/// The run's comparison with its history: present only when `--baseline` was given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineReport {
    /// `last:N` or the baseline file's path.
    pub source: String,
    /// The threshold per metric, fractions.
    pub thresholds: Vec<(Metric, f64)>,
    pub checks: Vec<BaselineCheck>,
    /// Checks regressed and not acknowledged.
    pub regressed: usize,
    /// Checks that start a new baseline.
    pub new_baselines: usize,
    /// A sweep: each node's median bandwidth against its past (absent for a pair).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeBaselineCheck>,
}

impl BaselineReport {
    pub fn regressions(&self) -> impl Iterator<Item = &BaselineCheck> {
        self.checks.iter().filter(|c| c.verdict == BaselineVerdict::Regressed)
    }

    /// The checks of one node pair's case (`test`, memory, size, blocks, direction).
    pub fn for_case<'a>(&'a self, key: &'a CaseKey) -> impl Iterator<Item = &'a BaselineCheck> + 'a {
        self.checks.iter().filter(move |c| &c.case == key)
    }

    /// The worst verdict of a case's checks that a reader must see: regressed, else
    /// acknowledged (within, improved and new baselines are not marked).
    pub fn mark(&self, key: &CaseKey) -> Option<BaselineVerdict> {
        let verdicts: Vec<BaselineVerdict> = self.for_case(key).map(|c| c.verdict).collect();
        [BaselineVerdict::Regressed, BaselineVerdict::Acknowledged]
            .into_iter()
            .find(|v| verdicts.contains(v))
    }

    /// A node is regressed when its median bandwidth is (the node itself, not one slow partner:
    /// a partner of a regressed node has one slow pair of several).
    pub fn node_regressed(&self, node: &str) -> bool {
        self.node_check(node)
            .is_some_and(|c| c.verdict == BaselineVerdict::Regressed)
    }

    pub fn node_check(&self, node: &str) -> Option<&NodeBaselineCheck> {
        self.nodes.iter().find(|c| c.node == node)
    }

    /// Checks regressed on a pair involving `node`.
    pub fn regressed_on<'a>(&'a self, node: &'a str) -> impl Iterator<Item = &'a BaselineCheck> + 'a {
        self.regressions()
            .filter(move |c| c.case.prefill == node || c.case.decode == node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(mean: Option<f64>, change: Option<f64>) -> NodeBaselineCheck {
        NodeBaselineCheck {
            node: "n1".into(),
            verdict: BaselineVerdict::Regressed,
            value: 30e9,
            baseline_mean: mean,
            baseline_runs: 3,
            change,
            threshold: 0.1,
            recent: Vec::new(),
        }
    }

    /// A node's summary shows its baseline only with both a mean and a change; without either it
    /// says this is the node's first sweep.
    #[test]
    fn a_node_summary_shows_its_baseline_or_its_first_sweep() {
        let compared = node(Some(40e9), Some(-0.25)).summary();
        assert_eq!(compared, "regressed -25.0 % vs 40.00 GB/s (mean of 3)");
        for (mean, change) in [(None, Some(-0.25)), (Some(40e9), None)] {
            let first = node(mean, change).summary();
            assert_eq!(first, "regressed: first sweep of this node");
        }
    }

    /// A latency comparison is shown in the metric's own unit, the change signed.
    #[test]
    fn the_comparison_uses_the_metric_s_unit_and_a_signed_change() {
        let shown = against_baseline(
            BaselineVerdict::Improved,
            Metric::LatencyP50Us,
            (Some(5.0), Some(0.5)),
            7,
        );
        assert_eq!(
            shown.as_deref(),
            Some(format!("improved +50.0 % vs {} (mean of 7)", Metric::LatencyP50Us.show(5.0)).as_str())
        );
        assert_eq!(
            against_baseline(BaselineVerdict::Within, Metric::BandwidthBps, (None, None), 0),
            None
        );
    }
}
