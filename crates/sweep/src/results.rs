//! The results file, `ic-bench.sweep/v1` (docs/schema.md): the plan, every pair measured so far,
//! the second pass and the node verdicts. Rewritten atomically after every pair (a temp file in
//! the same directory, then rename), so a killed sweep leaves a valid file that `--resume` reads.

use crate::schedule::{Pair, Round, Schedule};
use crate::score::NodeVerdict;
use icb_core::model::{Criteria, Direction, TestKind};
use icb_core::quality::QualityKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

pub const SWEEP_SCHEMA: &str = "ic-bench.sweep/v1";

/// One size of one bandwidth test, for the per-pair plots and gauges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizePoint {
    /// The test, spelled as the pair report spells it (`put_bw`, `get_bw`, `tag_bw`).
    pub test: TestKind,
    pub size: u64,
    pub bandwidth_bps: f64,
    /// Memory pair, `host-cuda` (initiator-target); absent in files written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Seen from the prefill side: `write` pushes into decode (put, NIXL WRITE), `read` pulls
    /// out of it (get, NIXL READ); absent where the test has no single direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
}

/// One size of one latency test, for the per-pair gauges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    /// The latency test (`tag_lat`).
    pub test: TestKind,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// One-way latency percentiles, µs.
    pub p50_us: f64,
    pub p99_us: f64,
    /// The pair's measurement-quality findings that concern this case (`few_round_trips`,
    /// `high_variance`, `implausible_latency`); absent when none did (and in files written
    /// before they were kept, whose latencies are then all taken as measured).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quality: Vec<QualityKind>,
}

impl LatencyPoint {
    /// The finding that makes this p50 unfit to judge a node by, if any. Only
    /// `implausible_latency` is: the pair itself says that its timing, not its data path, is
    /// wrong. `high_variance` is not: it says the p99 is far above the p50, and the p50 judged
    /// here is what a noisy tail does not move (noise bad enough to move the p50 trips
    /// `implausible_latency` on its own), while a link that stalls now and then shows exactly
    /// that spread, so leaving it out would hide a real fault. `few_round_trips` is about the
    /// p99 too.
    pub fn distrusted(&self) -> Option<QualityKind> {
        self.quality
            .iter()
            .copied()
            .find(|k| *k == QualityKind::ImplausibleLatency)
    }
}

/// What one pair gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Outcome {
    /// The pair ran and was judged.
    Measured {
        /// The pair verdict (`pass`, `warn`, `fail`, `inconclusive`: the pair report's own
        /// status, spelled as there).
        verdict: icb_core::VerdictStatus,
        reason: String,
        /// Data-path classes seen (tcp, rdma, shared_memory …), most important first.
        data_paths: Vec<String>,
        /// Bandwidth at the largest size measured, the worst of the bandwidth tests, bytes/s.
        bandwidth_bps: Option<f64>,
        /// Median one-way latency of the smallest tag_lat case, µs.
        latency_us: Option<f64>,
        #[serde(default)]
        series: Vec<SizePoint>,
        /// Every latency case measured (absent in files written before it was kept).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        latency: Vec<LatencyPoint>,
        /// The pair report's measurement-quality warnings (noisy machine, outliers, short runs).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
        /// `sweep --rails`: one row per rail pair of the pair report's per-rail table; absent
        /// for a pair measured without rails (and in files written before it was kept).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        rails: Vec<crate::rails::RailSummary>,
        /// The negative controls the pair ran after its main run (the second pass runs the tcp
        /// control unless `--no-controls`), as the pair report records them; absent when none
        /// ran (the first pass, and files written before they were kept).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        controls: Vec<icb_core::model::ControlResult>,
        /// A plain pair's NIC error and congestion counters over its measured cases (issue 40,
        /// the report's `cases[].nic_health`): the congested and lossy ports on each side, and
        /// why a side read none; absent for a rails pair (its rows' `health`) and in files
        /// written before it was kept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nic: Option<Box<crate::nic::PairNic>>,
    },
    /// A bench pod could not be placed on `node` (no GPU free, taint, missing node): not a
    /// fabric verdict.
    Unschedulable { node: Option<String>, reason: String },
    /// Nothing measured for another reason (a side crashed, a deadline passed).
    Error { reason: String },
    /// A side was killed from outside (a signal, an OOM kill, an eviction): nothing measured and
    /// nothing learnt about either node, so the pair is not counted (the soak of issue 22 showed
    /// kills counted as errors against both nodes of healthy pairs).
    Disrupted { reason: String },
}

impl Outcome {
    /// The pair says nothing good about its link: a failed verdict or nothing measured.
    pub fn failed(&self) -> bool {
        match self {
            Outcome::Measured { verdict, .. } => *verdict == icb_core::VerdictStatus::Fail,
            Outcome::Error { .. } => true,
            Outcome::Unschedulable { .. } | Outcome::Disrupted { .. } => false,
        }
    }

    /// The pair measured, but its run could not tell whether the fabric is right (an
    /// unattributed data path, a control not caught): its nodes are not judged by it.
    pub fn inconclusive(&self) -> bool {
        matches!(self, Outcome::Measured { verdict, .. } if *verdict == icb_core::VerdictStatus::Inconclusive)
    }

    /// The first negative control the pair ran and did not catch: the detector was not shown to
    /// work on this pair, so nothing it measured may accuse or clear a node (a failed verdict
    /// keeps its status in the pair report, but not its weight here). `None` when every control
    /// was caught or none ran.
    pub fn uncaught_control(&self) -> Option<&icb_core::model::ControlResult> {
        match self {
            Outcome::Measured { controls, .. } => controls.iter().find(|c| !c.caught),
            _ => None,
        }
    }

    /// Whether the pair counts in its nodes' verdicts: not when it never ran (unschedulable) or
    /// was killed from outside (disrupted).
    pub fn counts(&self) -> bool {
        !matches!(self, Outcome::Unschedulable { .. } | Outcome::Disrupted { .. })
    }

    pub fn bandwidth(&self) -> Option<f64> {
        match self {
            Outcome::Measured { bandwidth_bps, .. } => *bandwidth_bps,
            _ => None,
        }
    }

    /// The latency point a pair's latency is judged on: the smallest latency case, when that
    /// case is small enough ([`LATENCY_RULE_MAX_SIZE`]) to measure latency rather than transfer
    /// time: a 1 MiB round trip is bandwidth in disguise, already judged by the bandwidth rules.
    fn judged_latency(&self) -> Option<&LatencyPoint> {
        let Outcome::Measured { latency, .. } = self else {
            return None;
        };
        latency
            .iter()
            .filter(|p| p.size <= LATENCY_RULE_MAX_SIZE)
            .min_by_key(|p| p.size)
    }

    /// One-way p50 latency of the judged latency case (see `judged_latency`), µs, when the pair
    /// trusts it: `None` too when its own quality check distrusts that figure
    /// ([`LatencyPoint::distrusted`]), which then judges no node.
    pub fn latency(&self) -> Option<f64> {
        self.judged_latency()
            .filter(|p| p.distrusted().is_none())
            .map(|p| p.p50_us)
    }

    /// The judged latency with the finding that distrusts it, when the pair's quality check does:
    /// a figure left out of the node verdicts, for their evidence.
    pub fn distrusted_latency(&self) -> Option<(&LatencyPoint, QualityKind)> {
        let p = self.judged_latency()?;
        Some((p, p.distrusted()?))
    }

    pub fn short(&self) -> String {
        match self {
            Outcome::Measured {
                verdict,
                data_paths,
                bandwidth_bps,
                ..
            } => format!(
                "{} ({}{})",
                verdict.as_str(),
                data_paths.join("+"),
                bandwidth_bps.map(|b| format!(", {} GB/s", gbps(b))).unwrap_or_default()
            ),
            Outcome::Unschedulable { reason, .. } => format!("unschedulable: {reason}"),
            Outcome::Error { reason } => format!("error: {reason}"),
            Outcome::Disrupted { reason } => format!("disrupted: {reason}"),
        }
    }
}

/// Latency cases up to this size are judged as latency (8 B … 64 KiB: the sweep's default
/// profile measures tag_lat at 64 KiB).
pub const LATENCY_RULE_MAX_SIZE: u64 = 64 << 10;

/// Bytes/s as GB/s with two decimals, or three significant digits below 1 GB/s, so a throttled
/// link reads `0.00375`, not `0.00`.
pub fn gbps(bytes_per_s: f64) -> String {
    icb_core::units::bandwidth_value(bytes_per_s, icb_core::model::BandwidthUnit::GBps)
}

/// One pair's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    #[serde(flatten)]
    pub pair: Pair,
    /// 1: the schedule; 2: the second pass.
    pub pass: u8,
    pub run_id: String,
    pub duration_s: f64,
    /// When the pair's run ended (RFC 3339, UTC): how fresh this pair's figures are, which the
    /// node-pair matrix for schedulers carries per pair ([`crate::matrix`]). Absent in files
    /// written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    pub outcome: Outcome,
}

/// Why a sweep stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// SIGINT/SIGTERM/SIGHUP: the pairs in flight were dropped (not recorded), `--resume` runs them.
    Interrupted,
    /// The Kubernetes API failed beyond its retries: no node is to blame, `--resume` continues.
    ClusterError,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Interrupted => "interrupted",
            StopReason::ClusterError => "cluster_error",
        }
    }
}

/// A stop before the end, as written into the file at that moment (and cleared by `--resume`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    pub reason: StopReason,
    /// One line: the signal, or the API error.
    pub detail: String,
    /// RFC 3339 UTC.
    pub at: String,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResults {
    pub schema: String,
    pub tool_version: String,
    pub sweep_id: String,
    pub started_at: String,
    pub updated_at: String,
    /// True once every planned pair and the second pass ran.
    pub complete: bool,
    pub schedule: Schedule,
    pub nodes: Vec<String>,
    /// Per-pair time budget, seconds.
    pub pair_budget_s: f64,
    pub rounds: Vec<Round>,
    pub pairs: Vec<PairResult>,
    #[serde(default)]
    pub node_verdicts: Vec<NodeVerdict>,
    /// What the pairs were measured and judged against (absent in files written before it was
    /// kept: `--resume` then takes this command line's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<Criteria>,
    /// Runs of this sweep so far: 1 for the first, one more per `--resume` (part of the run ids
    /// after the first, so a resumed pair never reuses a pod name). 0 in older files.
    #[serde(default)]
    pub attempt: u32,
    /// Set when the sweep stopped before its end (signal, API outage); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
    /// `--baseline`: each pair's figures against the mean of their last matching runs (issue
    /// 21); absent without `--baseline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Box<icb_core::model::BaselineReport>>,
    /// Each node's RDMA readiness, as the last pair that ran on it read it (issue 40; kept so
    /// that `--resume` keeps the fleet view); absent before any pair read one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_readiness: BTreeMap<String, icb_core::readiness::Readiness>,
    /// The fleet view of [`SweepResults::node_readiness`]: firmware and MTUs across the nodes,
    /// the odd ones out named ([`crate::fleet`]); absent before any pair read a readiness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<crate::fleet::FleetView>,
}

impl SweepResults {
    /// A new sweep of `nodes` with its plan, nothing measured yet.
    pub fn new(
        sweep_id: String,
        schedule: Schedule,
        nodes: Vec<String>,
        pair_budget_s: f64,
        rounds: Vec<Round>,
    ) -> Self {
        SweepResults {
            schema: SWEEP_SCHEMA.into(),
            tool_version: String::new(),
            sweep_id,
            started_at: String::new(),
            updated_at: String::new(),
            complete: false,
            schedule,
            nodes,
            pair_budget_s,
            rounds,
            pairs: vec![],
            node_verdicts: vec![],
            criteria: None,
            attempt: 1,
            stopped: None,
            baseline: None,
            node_readiness: BTreeMap::new(),
            fleet: None,
        }
    }

    /// Keeps what a pair read of its two nodes' readiness (a side not read keeps what an
    /// earlier pair read) and recomputes the fleet view.
    pub fn add_readiness(&mut self, pair: &Pair, read: icb_core::readiness::PairReadiness) {
        for (node, r) in [(&pair.prefill, read.prefill), (&pair.decode, read.decode)] {
            if let Some(r) = r {
                self.node_readiness.insert(node.clone(), r);
            }
        }
        if !self.node_readiness.is_empty() {
            self.fleet = Some(crate::fleet::fleet_view(&self.nodes, &self.node_readiness));
        }
    }

    /// The run id of slot `slot` of round `round` of pass `pass`: unique across resumes, since
    /// the rounds a resume runs are numbered from 0 again.
    pub fn run_id(&self, pass: u8, round: usize, slot: usize) -> String {
        match self.attempt {
            0 | 1 => format!("{}-p{pass}r{round}x{slot}", self.sweep_id),
            n => format!("{}-a{n}p{pass}r{round}x{slot}", self.sweep_id),
        }
    }

    /// The sweep id a run id of [`Self::run_id`] starts with (`<sweep_id>-p1r0x0`): what labels
    /// a pair's bench pods as this sweep's.
    pub fn sweep_id_of(run_id: &str) -> &str {
        run_id.split_once('-').map_or(run_id, |(id, _)| id)
    }

    /// First-pass pairs of the plan that have no result yet (what `--resume` runs).
    pub fn missing(&self) -> Vec<Round> {
        self.rounds
            .iter()
            .map(|r| r.iter().filter(|p| !self.has(p, 1)).cloned().collect::<Vec<_>>())
            .filter(|r| !r.is_empty())
            .collect()
    }

    pub fn has(&self, pair: &Pair, pass: u8) -> bool {
        self.pairs.iter().any(|r| r.pass == pass && &r.pair == pair)
    }

    pub fn planned(&self) -> usize {
        self.rounds.iter().map(Vec::len).sum()
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        s.push('\n');
        s
    }

    /// Reads a results file for `--resume`.
    pub fn load(path: &Path) -> Result<SweepResults, ResultsFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ResultsFileError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_text(path, &text)
    }

    /// Parses the text of a results file read from `path` (named in the errors): what
    /// [`Self::load`] does after reading, public for the fuzz target `sweep_results`.
    pub fn from_text(path: &Path, text: &str) -> Result<SweepResults, ResultsFileError> {
        let r: SweepResults = serde_json::from_str(text).map_err(|e| ResultsFileError::NotResults {
            path: path.to_path_buf(),
            quoted: quote(e),
        })?;
        if r.schema != SWEEP_SCHEMA {
            return Err(ResultsFileError::OtherSchema {
                path: path.to_path_buf(),
                quoted: quote(&r.schema),
            });
        }
        Ok(r)
    }
}

/// Why a results file cannot be resumed from; the one line names `--resume` and the file, and
/// quotes what the file says escaped and bounded (the file is outside input).
#[derive(Debug, thiserror::Error)]
pub enum ResultsFileError {
    #[error("--resume {}: {source}", .path.display())]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("--resume {}: not an {SWEEP_SCHEMA} file ({quoted})", .path.display())]
    NotResults { path: PathBuf, quoted: String },
    #[error("--resume {}: schema '{quoted}', expected {SWEEP_SCHEMA}", .path.display())]
    OtherSchema { path: PathBuf, quoted: String },
}

/// What the file says, quoted in one error line (escaped, bounded: the file is outside input).
fn quote(text: impl std::fmt::Display) -> String {
    icb_core::error_line::quote_outside(&text.to_string())
}

/// Writes `text` to `path` atomically: a reader sees the old file or the new one, never half.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Readable like any new file (0666 less the umask), not tempfile's 0600: a textfile collector
    // or a web server often reads the exports as another user.
    let mut tmp = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file is outside input: what an error quotes from it (serde's message about a bad
    /// value, the schema) stays on one bounded line.
    #[test]
    fn errors_quote_the_file_on_one_line() {
        const FILE: &str = include_str!("../tests/fixtures/sweep_before_rails.json");
        let p = Path::new("r.json");
        let long = "x".repeat(20_000);
        for (text, starts) in [
            (
                FILE.replace("\"all-pairs\"", "\"all\\n\\u001b[2Jpairs\""),
                "--resume r.json: not an ic-bench.sweep/v1 file (unknown variant `all\\n\\u{1b}[2Jpairs`",
            ),
            (
                FILE.replace("\"all-pairs\"", &format!("\"{long}\"")),
                "--resume r.json: not an ic-bench.sweep/v1 file (unknown variant `xxx",
            ),
            (
                FILE.replace("\"ic-bench.sweep/v1\"", "\"ic-bench.sweep/v9\\r\\nforged\""),
                "--resume r.json: schema 'ic-bench.sweep/v9\\r\\nforged', expected ic-bench.sweep/v1",
            ),
        ] {
            let e = SweepResults::from_text(p, &text).unwrap_err().to_string();
            assert!(!e.chars().any(char::is_control) && e.len() < 1000, "{e}");
            assert!(e.starts_with(starts), "{e}");
        }
    }

    #[test]
    fn the_sweep_id_is_the_run_ids_prefix() {
        assert_eq!(SweepResults::sweep_id_of("sw1a2b3c-p1r0x0"), "sw1a2b3c");
        assert_eq!(SweepResults::sweep_id_of("sw1a2b3c-a2p2r1x0"), "sw1a2b3c");
    }

    #[test]
    fn run_ids_stay_unique_across_resumes() {
        let mut r = SweepResults::new("sw1".into(), Schedule::Ring, vec![], 1.0, vec![]);
        let first = r.run_id(1, 0, 0);
        assert_eq!(first, "sw1-p1r0x0");
        r.attempt = 2;
        assert_ne!(r.run_id(1, 0, 0), first);
        r.attempt = 3;
        assert_eq!(r.run_id(1, 0, 0), "sw1-a3p1r0x0");
    }

    #[test]
    fn older_files_without_the_new_fields_still_read() {
        let r = SweepResults::new("sw1".into(), Schedule::Ring, vec![], 1.0, vec![]);
        let mut v = serde_json::to_value(&r).unwrap();
        let map = v.as_object_mut().unwrap();
        map.remove("attempt");
        assert!(
            !map.contains_key("criteria") && !map.contains_key("stopped"),
            "omitted while unset"
        );
        let back: SweepResults = serde_json::from_value(v).unwrap();
        assert_eq!(back.attempt, 0);
    }

    /// The quality kinds of a latency point survive the results file (what `--resume` scores
    /// from), and a file written before they were kept still reads, its latencies all trusted.
    #[test]
    fn a_latency_points_quality_round_trips_and_older_files_read_without_it() {
        let point = LatencyPoint {
            test: icb_core::model::TestKind::TagLat,
            size: 8,
            memory: Some("host-host".into()),
            p50_us: 8000.0,
            p99_us: 8100.0,
            quality: vec![QualityKind::HighVariance, QualityKind::ImplausibleLatency],
        };
        let json = serde_json::to_string(&point).unwrap();
        assert!(
            json.ends_with(r#""quality":["high_variance","implausible_latency"]}"#),
            "{json}"
        );
        let back: LatencyPoint = serde_json::from_str(&json).unwrap();
        assert_eq!(back, point);
        assert_eq!(back.distrusted(), Some(QualityKind::ImplausibleLatency));
        let plain = LatencyPoint {
            quality: vec![],
            ..point
        };
        let json = serde_json::to_string(&plain).unwrap();
        assert!(!json.contains("quality"), "omitted when none: {json}");
        assert_eq!(serde_json::from_str::<LatencyPoint>(&json).unwrap(), plain);
        // A whole file of before the field: its latency points load, unflagged, and judge.
        let old = SweepResults::from_text(
            Path::new("old.json"),
            include_str!("../tests/fixtures/sweep_before_rails.json"),
        )
        .unwrap();
        let measured: Vec<&Outcome> = old.pairs.iter().map(|p| &p.outcome).collect();
        assert!(measured.iter().any(|o| o.latency().is_some()), "{measured:#?}");
        assert!(measured.iter().all(|o| o.distrusted_latency().is_none()));
    }

    #[test]
    fn slow_links_keep_three_significant_digits() {
        assert_eq!(gbps(22.0e9), "22.00");
        assert_eq!(gbps(1.0e9), "1.00");
        assert_eq!(gbps(0.13e9), "0.130");
        assert_eq!(gbps(3.75e6), "0.00375");
        assert_eq!(gbps(0.0), "0.00");
    }

    #[test]
    fn missing_pairs_and_atomic_round_trip() {
        let nodes: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
        let rounds = Schedule::AllPairs.rounds(&nodes, 0).unwrap();
        let mut r = SweepResults::new("s".into(), Schedule::AllPairs, nodes, 30.0, rounds);
        assert_eq!(r.missing().iter().map(Vec::len).sum::<usize>(), 3);
        let first = r.rounds[0][0].clone();
        r.pairs.push(PairResult {
            pair: first.clone(),
            pass: 1,
            run_id: "x".into(),
            duration_s: 1.0,
            finished_at: None,
            outcome: Outcome::Error { reason: "boom".into() },
        });
        assert_eq!(r.missing().iter().map(Vec::len).sum::<usize>(), 2);
        assert!(!r.missing().iter().flatten().any(|p| *p == first));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sweep.json");
        write_atomic(&path, &r.to_json()).unwrap();
        assert_eq!(SweepResults::load(&path).unwrap(), r);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file left");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o044, 0o044, "group and others may read it (mode {mode:o})");
        std::fs::write(&path, "{}").unwrap();
        let e = SweepResults::load(&path).unwrap_err();
        assert!(matches!(e, ResultsFileError::NotResults { .. }), "{e}");
        assert!(e.to_string().contains("not an ic-bench.sweep/v1 file"), "{e}");
        let missing = dir.path().join("missing.json");
        assert!(matches!(
            SweepResults::load(&missing),
            Err(ResultsFileError::Unreadable { .. })
        ));
    }
}
