//! What a run measures: the settings, its cases (test × size × memory pair), its stop rule
//! and the unit bandwidth is shown in.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Test parameters, as agreed by both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub tests: Vec<TestKind>,
    pub sizes: Vec<u64>,
    pub memory: Vec<MemoryPair>,
    pub warmup_iterations: u64,
    pub min_iterations: u64,
    /// Each case runs at least this long (after warmup) and at least `min_iterations`.
    pub min_time_s: f64,
    /// Upper bound on one case's measurement time; a case that hits it reports what it measured.
    pub max_time_s: f64,
    /// Outstanding operations for bandwidth tests.
    pub window: u32,
    pub unit: BandwidthUnit,
    /// CUDA cases without a driver fail the run instead of being skipped.
    pub require_cuda: bool,
    /// Adaptive stop: a case ends once its estimate is stable (see [`StopRule`]) instead of after
    /// a fixed `min_time_s`. Absent: the fixed rule (`min_time_s` and `min_iterations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopRule>,
    /// The cases to run, when not every `tests` × `sizes` combination (the verdict profile picks
    /// a few). Each shape runs for every memory pair. Empty: `tests` × `sizes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<CaseShape>,
    /// KV-shaped RMA: one operation is a list of this many non-contiguous blocks of each size,
    /// issued as that many put/get operations and one flush. Applies to `put_bw`/`get_bw` in
    /// `tests` × `sizes` (a `plan` names its own). Absent: one block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u32>,
    /// Bandwidth cases try these windows during warmup and measure with the fastest (the window
    /// used is the measurement's `window`). Empty: `window` only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window_candidates: Vec<u32>,
    /// Benchmark-only methodology control: buffers are neither written nor verified (as
    /// ucx_perftest moves them); every case then reports `verified: false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untouched_buffers: bool,
    /// How both sides allocate GPU memory (`--cuda-alloc`); absent: `legacy` (`cuMemAlloc`).
    #[serde(default, skip_serializing_if = "crate::CudaAllocMode::is_legacy")]
    pub cuda_alloc: crate::CudaAllocMode,
}

/// When a case has measured enough: after at least `min_rounds` rounds of about `round_s`
/// seconds each, once the confidence interval of the per-round statistic (bandwidth, or the
/// latency p50) is narrower than `rel_half_width` of its mean, and not before `min_time_s`; a
/// case that reaches `max_time_s` stops with the precision it has.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StopRule {
    /// Target half-width of the interval relative to the mean, e.g. 0.02 for ±2 %.
    pub rel_half_width: f64,
    /// Two-sided confidence level of the interval, e.g. 0.95.
    pub confidence: f64,
    /// Fewest rounds before the interval is trusted.
    pub min_rounds: u32,
    /// Target duration of one measured round, seconds.
    pub round_s: f64,
}

impl StopRule {
    /// ±2 % at 95 % confidence over rounds of 20 ms, at least 5 of them.
    pub const DEFAULT: StopRule = StopRule {
        rel_half_width: 0.02,
        confidence: 0.95,
        min_rounds: 5,
        round_s: 0.02,
    };
}

/// One case of a [`RunSettings::plan`]: a test at one size (a block size when `blocks` > 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CaseShape {
    pub test: TestKind,
    pub size: u64,
    /// Blocks per operation (RMA tests only); absent or 1 is one contiguous message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u32>,
    /// `pair --kv-shape`: one rank-to-rank read of a model's KV geometry (`size` is its
    /// descriptor size); the NIXL engine posts exactly these descriptors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<crate::KvLayout>,
}

impl CaseShape {
    pub fn new(test: TestKind, size: u64) -> Self {
        CaseShape {
            test,
            size,
            blocks: None,
            kv: None,
        }
    }
    pub fn blocks(test: TestKind, size: u64, blocks: u32) -> Self {
        CaseShape {
            test,
            size,
            blocks: (blocks > 1).then_some(blocks),
            kv: None,
        }
    }
    /// A KV read or write (`GetBw` / `PutBw`) of `layout`'s descriptors.
    pub fn kv(test: TestKind, layout: crate::KvLayout) -> Self {
        CaseShape {
            test,
            size: layout.len,
            blocks: None,
            kv: Some(layout),
        }
    }
}

/// The verdict profile's block size and count for its one KV-shaped case: 64 blocks of 16 KiB,
/// a small vLLM/NIXL-like descriptor list (1 MiB per operation).
pub const KV_BLOCK_SIZE: u64 = 16 << 10;
pub const KV_BLOCKS: u32 = 64;
/// The verdict profile's bandwidth size: 4 MiB, above the floors' 1 MiB and short enough
/// (~1 ms per operation on shared memory) that a round of a few dozen takes milliseconds.
pub const VERDICT_BANDWIDTH_SIZE: u64 = 4 << 20;

impl RunSettings {
    /// The default gate: the cases a verdict needs and nothing else, each stopped adaptively.
    /// The short profile of the qualification commands (`gate`, `sweep`): the cases given, a
    /// short warmup, at least 8 iterations and 50 ms (less when `max_time_s` is shorter), a
    /// window of 16, stopping at the default precision or after `max_time_s`.
    pub fn qualification(
        tests: Vec<TestKind>,
        sizes: Vec<u64>,
        memory: Vec<MemoryPair>,
        max_time_s: f64,
    ) -> RunSettings {
        // gate and sweep measure host-host unless told: CUDA memory here was named, and a
        // named memory type that cannot be measured fails the pair.
        let require_cuda = memory.iter().any(|m| m.uses_cuda());
        RunSettings {
            tests,
            sizes,
            memory,
            warmup_iterations: 4,
            min_iterations: 8,
            min_time_s: 0.05_f64.min(max_time_s),
            max_time_s,
            window: 16,
            unit: BandwidthUnit::GBps,
            require_cuda,
            stop: Some(StopRule::DEFAULT),
            plan: Vec::new(),
            blocks: None,
            window_candidates: Vec::new(),
            untouched_buffers: false,
            cuda_alloc: Default::default(),
        }
    }

    /// Bandwidth where the floors apply (tag, put and get at 4 MiB), latency at 8 B, and one
    /// KV-shaped put (64 × 16 KiB), for every memory pair (CUDA pairs are skipped without a
    /// driver). A case stops at ±2 % (95 % confidence) or after 1 s.
    pub fn verdict_profile() -> RunSettings {
        let plan = vec![
            CaseShape::new(TestKind::TagBw, VERDICT_BANDWIDTH_SIZE),
            CaseShape::new(TestKind::PutBw, VERDICT_BANDWIDTH_SIZE),
            CaseShape::new(TestKind::GetBw, VERDICT_BANDWIDTH_SIZE),
            CaseShape::new(TestKind::TagLat, 8),
            CaseShape::blocks(TestKind::PutBw, KV_BLOCK_SIZE, KV_BLOCKS),
        ];
        RunSettings {
            tests: vec![TestKind::TagBw, TestKind::TagLat, TestKind::PutBw, TestKind::GetBw],
            sizes: vec![8, KV_BLOCK_SIZE, VERDICT_BANDWIDTH_SIZE],
            memory: MemoryPair::ALL.to_vec(),
            warmup_iterations: 16,
            min_iterations: 1,
            min_time_s: 0.05,
            max_time_s: 1.0,
            window: 32,
            unit: BandwidthUnit::GBps,
            require_cuda: false,
            stop: Some(StopRule::DEFAULT),
            plan,
            blocks: None,
            window_candidates: Vec::new(),
            untouched_buffers: false,
            cuda_alloc: Default::default(),
        }
    }

    /// The full curve: every test at every default size (8 B … 64 MiB) and memory pair, stopped
    /// adaptively, with up to 5 s per case.
    pub fn full_curve() -> RunSettings {
        RunSettings {
            tests: TestKind::ALL.to_vec(),
            sizes: crate::units::default_sizes(),
            min_iterations: 32,
            min_time_s: 0.1,
            max_time_s: 5.0,
            plan: Vec::new(),
            ..RunSettings::verdict_profile()
        }
    }

    /// The cases these settings ask for, in run order (memory pairs innermost for a plan, sizes
    /// innermost for `tests` × `sizes`, as before plans existed).
    pub fn case_list(&self) -> Vec<(CaseShape, MemoryPair)> {
        let mut out = Vec::new();
        if self.plan.is_empty() {
            for &test in &self.tests {
                for &memory in &self.memory {
                    for &size in &self.sizes {
                        let blocks = if test.is_rma() { self.blocks.unwrap_or(1) } else { 1 };
                        out.push((CaseShape::blocks(test, size, blocks), memory));
                    }
                }
            }
        } else {
            for shape in &self.plan {
                for &memory in &self.memory {
                    out.push((*shape, memory));
                }
            }
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    TagBw,
    TagLat,
    PutBw,
    GetBw,
}

impl TestKind {
    pub const ALL: [TestKind; 4] = [TestKind::TagBw, TestKind::TagLat, TestKind::PutBw, TestKind::GetBw];

    pub fn as_str(self) -> &'static str {
        match self {
            TestKind::TagBw => "tag_bw",
            TestKind::TagLat => "tag_lat",
            TestKind::PutBw => "put_bw",
            TestKind::GetBw => "get_bw",
        }
    }

    /// Bandwidth tests report bytes per second; latency tests report percentiles.
    pub fn is_bandwidth(self) -> bool {
        !matches!(self, TestKind::TagLat)
    }

    /// RMA tests are the operations NIXL uses to move KV cache.
    pub fn is_rma(self) -> bool {
        matches!(self, TestKind::PutBw | TestKind::GetBw)
    }
}

impl fmt::Display for TestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TestKind {
    type Err = crate::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TestKind::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| crate::ParseError::new(format!("unknown test '{s}': use tag_bw, tag_lat, put_bw or get_bw")))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryType {
    Host,
    Cuda,
}

impl MemoryType {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::Host => "host",
            MemoryType::Cuda => "cuda",
        }
    }
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Memory on the initiating (prefill/client) side → memory on the target (decode/server) side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemoryPair {
    pub initiator: MemoryType,
    pub target: MemoryType,
}

impl MemoryPair {
    pub const HOST_HOST: MemoryPair = MemoryPair {
        initiator: MemoryType::Host,
        target: MemoryType::Host,
    };
    pub const ALL: [MemoryPair; 4] = [
        MemoryPair {
            initiator: MemoryType::Host,
            target: MemoryType::Host,
        },
        MemoryPair {
            initiator: MemoryType::Host,
            target: MemoryType::Cuda,
        },
        MemoryPair {
            initiator: MemoryType::Cuda,
            target: MemoryType::Host,
        },
        MemoryPair {
            initiator: MemoryType::Cuda,
            target: MemoryType::Cuda,
        },
    ];

    pub fn uses_cuda(self) -> bool {
        self.initiator == MemoryType::Cuda || self.target == MemoryType::Cuda
    }
}

impl fmt::Display for MemoryPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}→{}", self.initiator, self.target)
    }
}

impl std::str::FromStr for MemoryPair {
    type Err = crate::ParseError;
    /// Accepts `host-cuda`, `host:cuda`, `host→cuda` or `host->cuda`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            crate::ParseError::new(format!(
                "bad memory pair '{s}': use INITIATOR-TARGET with host or cuda, e.g. host-cuda"
            ))
        };
        let normalized = s.replace("->", "-").replace(['→', ':'], "-");
        let (a, b) = normalized.split_once('-').ok_or_else(bad)?;
        let parse = |x: &str| match x.trim() {
            "host" => Ok(MemoryType::Host),
            "cuda" => Ok(MemoryType::Cuda),
            _ => Err(bad()),
        };
        Ok(MemoryPair {
            initiator: parse(a)?,
            target: parse(b)?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum BandwidthUnit {
    /// 10^9 bytes per second (nixlbench's unit).
    #[default]
    #[serde(rename = "GB/s")]
    GBps,
    /// 2^20 bytes per second (ucx_perftest's "MB/s").
    #[serde(rename = "MiB/s")]
    MiBps,
}

impl BandwidthUnit {
    pub fn from_bytes_per_s(self, bps: f64) -> f64 {
        match self {
            BandwidthUnit::GBps => bps / 1e9,
            BandwidthUnit::MiBps => bps / (1u64 << 20) as f64,
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            BandwidthUnit::GBps => "GB/s",
            BandwidthUnit::MiBps => "MiB/s",
        }
    }
}

#[cfg(test)]
mod measurement_settings_tests {
    use crate::model::*;

    #[test]
    fn verdict_profile_is_small_and_adaptive_and_full_curve_is_every_combination() {
        let v = RunSettings::verdict_profile();
        let cases = v.case_list();
        // 5 shapes × 4 memory pairs; CUDA pairs are skipped quickly without a driver.
        assert_eq!(cases.len(), 5 * 4);
        let host: Vec<CaseShape> = cases
            .iter()
            .filter(|(_, m)| *m == MemoryPair::HOST_HOST)
            .map(|(s, _)| *s)
            .collect();
        assert!(host.contains(&CaseShape::new(TestKind::TagLat, 8)));
        assert!(host.iter().any(|s| s.blocks == Some(KV_BLOCKS) && s.test.is_rma()));
        assert!(
            host.iter()
                .filter(|s| s.test.is_bandwidth() && s.blocks.is_none())
                .all(|s| s.size >= crate::verdict::MIN_SIZE_FOR_BANDWIDTH)
        );
        assert!(v.stop.is_some() && v.max_time_s <= 1.0);

        let mut f = RunSettings::full_curve();
        assert_eq!(f.case_list().len(), 4 * 4 * crate::units::default_sizes().len());
        assert!(f.case_list().iter().all(|(s, _)| s.blocks.is_none()));
        f.blocks = Some(8);
        let rma_blocks = f.case_list().iter().filter(|(s, _)| s.blocks == Some(8)).count();
        assert_eq!(
            rma_blocks,
            2 * 4 * crate::units::default_sizes().len(),
            "put and get only"
        );
    }

    #[test]
    fn settings_and_measurements_without_the_new_fields_still_parse() {
        let old = r#"{"tests":["tag_bw"],"sizes":[8],"memory":[{"initiator":"host","target":"host"}],
            "warmup_iterations":1,"min_iterations":1,"min_time_s":0.1,"max_time_s":1.0,"window":32,
            "unit":"GB/s","require_cuda":false}"#;
        let s: RunSettings = serde_json::from_str(old).unwrap();
        assert!(s.stop.is_none() && s.plan.is_empty() && s.blocks.is_none() && !s.untouched_buffers);
        // Unset optional fields are not written, so v1 readers see the same document.
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            !text.contains("stop") && !text.contains("plan") && !text.contains("untouched"),
            "{text}"
        );
        let m = r#"{"warmup_iterations":1,"iterations":2,"elapsed_s":0.1,"bytes":16,"window":1,"verified":true}"#;
        let m: Measurement = serde_json::from_str(m).unwrap();
        assert!(m.precision.is_none() && m.list_latency_us.is_none() && m.window_trials.is_empty());
        let with = serde_json::to_value(RunSettings::verdict_profile()).unwrap();
        assert_eq!(with["stop"]["rel_half_width"], 0.02);
        assert_eq!(with["plan"][4]["blocks"], KV_BLOCKS);
    }
}
