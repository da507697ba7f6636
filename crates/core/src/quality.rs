//! Measurement-quality findings: what makes a measured number less trustworthy than it looks,
//! said once per finding with the cases it concerns (not once per measured value).
//!
//! They never change the pair's verdict (the data path was observed, whatever the timing); they
//! go to the report's `warnings`, next to the engine's own. They are typed ([`QualityFinding`],
//! [`kinds_of`]) so that a reader decides on the kind, never on the text: the sweep leaves a
//! latency its pair called implausible out of its node verdicts.

use crate::model::{CaseResult, CaseStatus, MemoryPair, PairReport, TestKind, TransportClass};
use crate::units::format_size;
use serde::{Deserialize, Serialize};

/// Below this many round trips a p99 is the sample's maximum, not a percentile.
pub const MIN_SAMPLES_FOR_P99: u64 = 100;
/// p99 above this multiple of p50 (and at least [`SPREAD_FLOOR_US`] apart): the timing is noisy.
pub const SPREAD_RATIO: f64 = 10.0;
/// Sub-microsecond spreads are clock resolution, not noise.
pub const SPREAD_FLOOR_US: f64 = 5.0;
/// Messages up to this size should see the data path's base latency.
pub const SMALL_MESSAGE: u64 = 64 * 1024;
/// Cases named in one finding before "and N more".
const LISTED: usize = 4;

/// The p50 one-way latency (µs) of a small message above which a data path is far slower than it
/// can be: shared memory, cma and RDMA give single-digit µs, TCP tens of µs. The margin is wide
/// (×20–100) so that only a starved CPU or a descheduled side trips it, not a slow machine.
fn implausible_small_latency_us(class: TransportClass) -> Option<f64> {
    match class {
        TransportClass::SharedMemory
        | TransportClass::Cma
        | TransportClass::SelfLoop
        | TransportClass::CudaIpc
        | TransportClass::Rdma => Some(100.0),
        TransportClass::Tcp | TransportClass::RmaEmulated => Some(2000.0),
        TransportClass::CudaCopyStaging | TransportClass::Unknown => None,
    }
}

/// What a measurement-quality finding says of its cases: the typed form that decisions are made
/// on (the sweep leaves a latency it distrusts out of its node verdicts), rendered to the
/// report's `warnings` by [`QualityFinding::line`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QualityKind {
    /// Fewer than [`MIN_SAMPLES_FOR_P99`] round trips: the p99 is the slowest sample.
    FewRoundTrips,
    /// p99 more than [`SPREAD_RATIO`]× p50 (and [`SPREAD_FLOOR_US`] apart): noisy timing.
    HighVariance,
    /// A small message's p50 far above what its data path gives: the data path is right, its
    /// timing is not (a starved CPU, a descheduled side).
    ImplausibleLatency,
}

impl QualityKind {
    /// Every kind, in the order the findings are reported.
    pub const ALL: [QualityKind; 3] = [
        QualityKind::FewRoundTrips,
        QualityKind::HighVariance,
        QualityKind::ImplausibleLatency,
    ];

    /// What was found, the start of the warning line.
    pub fn headline(self) -> String {
        match self {
            QualityKind::FewRoundTrips => {
                format!("p99 from fewer than {MIN_SAMPLES_FOR_P99} round trips is the slowest sample, not a percentile")
            }
            QualityKind::HighVariance => format!("high latency variance: p99 more than {SPREAD_RATIO:.0}× p50"),
            QualityKind::ImplausibleLatency => "latency far above what the data path gives".into(),
        }
    }

    /// What to do about it, the end of the warning line.
    pub fn advice(self) -> &'static str {
        match self {
            QualityKind::FewRoundTrips => "raise --min-iterations or --min-time",
            QualityKind::HighVariance => {
                "something competes for the CPU or the link: rerun on a quiet machine or pin the sides to their own cores"
            }
            QualityKind::ImplausibleLatency => {
                "the CPU is oversubscribed or a side was descheduled; the data path is right, its timing is not: rerun on a quiet machine"
            }
        }
    }

    /// Whether this kind concerns measured case `c` (a tag_lat case with its latency), with the
    /// figures its line quotes.
    fn flags(self, c: &CaseResult) -> Option<FlaggedCase> {
        if c.status != CaseStatus::Measured || c.test != TestKind::TagLat {
            return None;
        }
        let m = c.measurement.as_ref()?;
        let l = m.latency_us.as_ref()?;
        let data_path = c.transport.as_ref().map(|t| t.data_path.class);
        let hit = match self {
            QualityKind::FewRoundTrips => m.iterations < MIN_SAMPLES_FOR_P99,
            QualityKind::HighVariance => l.p99 > SPREAD_RATIO * l.p50 && l.p99 - l.p50 >= SPREAD_FLOOR_US,
            QualityKind::ImplausibleLatency => {
                let limit = data_path.and_then(implausible_small_latency_us);
                c.size <= SMALL_MESSAGE && limit.is_some_and(|limit| l.p50 > limit)
            }
        };
        hit.then_some(FlaggedCase {
            test: c.test,
            size: c.size,
            memory: c.memory,
            iterations: m.iterations,
            p50_us: l.p50,
            p99_us: l.p99,
            data_path,
        })
    }
}

/// One case a finding concerns, with the figures its line quotes.
#[derive(Debug, Clone, PartialEq)]
pub struct FlaggedCase {
    pub test: TestKind,
    pub size: u64,
    pub memory: MemoryPair,
    pub iterations: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// The data path the case crossed, when known.
    pub data_path: Option<TransportClass>,
}

impl FlaggedCase {
    /// The case and the figures `kind` quotes: `tag_lat 8 B host→host (1 round trips)`.
    fn describe(&self, kind: QualityKind) -> String {
        let label = format!("{} {} {}", self.test, format_size(self.size), self.memory);
        match (
            kind,
            self.data_path.and_then(|c| Some((c, implausible_small_latency_us(c)?))),
        ) {
            (QualityKind::FewRoundTrips, _) => format!("{label} ({} round trips)", self.iterations),
            (QualityKind::ImplausibleLatency, Some((class, limit))) => {
                format!(
                    "{label} (p50 {:.1} µs over {class}, expected < {limit:.0} µs)",
                    self.p50_us
                )
            }
            (QualityKind::HighVariance | QualityKind::ImplausibleLatency, _) => {
                format!("{label} (p50 {:.1} µs, p99 {:.1} µs)", self.p50_us, self.p99_us)
            }
        }
    }
}

/// One finding: its kind and the cases it concerns (never empty).
#[derive(Debug, Clone, PartialEq)]
pub struct QualityFinding {
    pub kind: QualityKind,
    pub cases: Vec<FlaggedCase>,
}

impl QualityFinding {
    /// The warning line: `<headline> in <n> case(s): <cases>: <advice>`, at most [`LISTED`]
    /// cases named before "and N more".
    pub fn line(&self) -> String {
        let n = self.cases.len();
        let mut listed = self
            .cases
            .iter()
            .take(LISTED)
            .map(|c| c.describe(self.kind))
            .collect::<Vec<_>>()
            .join(", ");
        if n > LISTED {
            listed.push_str(&format!(" and {} more", n - LISTED));
        }
        let noun = if n == 1 { "case" } else { "cases" };
        format!(
            "{} in {n} {noun}: {listed}: {}",
            self.kind.headline(),
            self.kind.advice()
        )
    }
}

/// The kinds of finding that concern case `c`, in [`QualityKind::ALL`]'s order: what a reader
/// of one case (the sweep, per latency point) needs without the whole report.
pub fn kinds_of(c: &CaseResult) -> Vec<QualityKind> {
    QualityKind::ALL.into_iter().filter(|k| k.flags(c).is_some()).collect()
}

/// The typed findings for `cases`, each kind once with its cases, in [`QualityKind::ALL`]'s order.
pub fn assess(cases: &[CaseResult]) -> Vec<QualityFinding> {
    QualityKind::ALL
        .into_iter()
        .map(|kind| QualityFinding {
            kind,
            cases: cases.iter().filter_map(|c| kind.flags(c)).collect(),
        })
        .filter(|f| !f.cases.is_empty())
        .collect()
}

/// The findings for `report`'s measured cases, each once with its cases, as warning lines.
pub fn findings(report: &PairReport) -> Vec<String> {
    findings_for(&report.cases)
}

/// [`findings`] for a list of cases.
pub fn findings_for(cases: &[CaseResult]) -> Vec<String> {
    assess(cases).iter().map(QualityFinding::line).collect()
}

/// `report.warnings` plus [`findings`], each text once, in first-seen order.
pub fn add_findings(report: &mut PairReport) {
    let found = findings(report);
    report.warnings = once_each(std::mem::take(&mut report.warnings), found);
}

fn once_each(mut all: Vec<String>, more: Vec<String>) -> Vec<String> {
    all.extend(more);
    let mut seen = std::collections::HashSet::new();
    all.retain(|w| seen.insert(w.clone()));
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DataPath, EvidenceSource, LatencyStats, Measurement, MemoryPair, TransportEvidence};

    fn latency_case(size: u64, iterations: u64, p50: f64, p99: f64, class: TransportClass) -> CaseResult {
        CaseResult {
            test: TestKind::TagLat,
            memory: MemoryPair::HOST_HOST,
            size,
            blocks: None,
            run_by: Default::default(),
            rail: None,
            cuda_alloc: None,
            status: CaseStatus::Measured,
            reason: None,
            measurement: Some(Measurement {
                warmup_bytes: None,
                warmup_iterations: 1,
                iterations,
                elapsed_s: 1.0,
                bytes: size * iterations,
                bandwidth_bps: None,
                latency_us: Some(LatencyStats {
                    min: p50 / 2.0,
                    mean: p50,
                    p50,
                    p90: p50,
                    p99,
                    p999: p99,
                    max: p99,
                }),
                window: 1,
                verified: true,
                precision: None,
                list_latency_us: None,
                window_trials: Vec::new(),
                post_us: None,
            }),
            transport: Some(TransportEvidence {
                lanes: vec![],
                protocol: None,
                data_path: DataPath {
                    class,
                    transports: vec![],
                    protocol: String::new(),
                    source: EvidenceSource::RequestInfo,
                },
                chosen_by: None,
                other_view: None,
            }),
            verdict: None,
            nic_health: None,
        }
    }

    #[test]
    fn a_healthy_run_has_no_findings() {
        let f = findings_for(&[latency_case(8, 10_000, 0.4, 1.2, TransportClass::SharedMemory)]);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn each_finding_once_with_its_cases() {
        let f = findings_for(&[
            latency_case(8, 1, 4000.0, 4100.0, TransportClass::SharedMemory),
            latency_case(4096, 1, 3900.0, 4000.0, TransportClass::SharedMemory),
            latency_case(1 << 20, 5000, 800.0, 810.0, TransportClass::Cma),
        ]);
        assert_eq!(f.len(), 2, "{f:#?}");
        assert!(f[0].starts_with("p99 from fewer than 100 round trips"), "{}", f[0]);
        assert!(
            f[0].contains("in 2 cases: tag_lat 8 B host→host (1 round trips), tag_lat 4 KiB"),
            "{}",
            f[0]
        );
        assert!(
            f[1].starts_with("latency far above what the data path gives in 2 cases"),
            "{}",
            f[1]
        );
        assert!(f[1].contains("p50 4000.0 µs over shared memory"), "{}", f[1]);
        // 1 MiB is not a small message: its p50 is bandwidth-bound.
        assert!(!f[1].contains("1 MiB"), "{}", f[1]);
    }

    #[test]
    fn spread_is_flagged_once_and_long_lists_are_cut() {
        let cases: Vec<CaseResult> = (0..6)
            .map(|i| latency_case(8 << i, 1000, 1.0, 50.0, TransportClass::Rdma))
            .collect();
        let f = findings_for(&cases);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].starts_with("high latency variance: p99 more than 10× p50 in 6 cases"),
            "{}",
            f[0]
        );
        assert!(f[0].contains(" and 2 more: "), "{}", f[0]);
    }

    /// The warning lines are a contract (people grep them, the gate quotes them): rendering
    /// them from the typed findings keeps each byte of the text they had as plain strings.
    #[test]
    fn the_typed_findings_render_the_warning_lines_unchanged() {
        let cases = [
            latency_case(8, 1, 4000.0, 4100.0, TransportClass::SharedMemory),
            latency_case(64, 1000, 1.0, 50.0, TransportClass::Rdma),
            latency_case(4096, 10_000, 2500.0, 2600.0, TransportClass::Tcp),
        ];
        assert_eq!(
            findings_for(&cases),
            [
                "p99 from fewer than 100 round trips is the slowest sample, not a percentile in 1 case: \
                 tag_lat 8 B host→host (1 round trips): raise --min-iterations or --min-time",
                "high latency variance: p99 more than 10× p50 in 1 case: tag_lat 64 B host→host \
                 (p50 1.0 µs, p99 50.0 µs): something competes for the CPU or the link: rerun on a \
                 quiet machine or pin the sides to their own cores",
                "latency far above what the data path gives in 2 cases: tag_lat 8 B host→host (p50 \
                 4000.0 µs over shared memory, expected < 100 µs), tag_lat 4 KiB host→host (p50 2500.0 \
                 µs over tcp, expected < 2000 µs): the CPU is oversubscribed or a side was descheduled; \
                 the data path is right, its timing is not: rerun on a quiet machine",
            ]
        );
        let kinds: Vec<QualityKind> = assess(&cases).iter().map(|f| f.kind).collect();
        assert_eq!(kinds, QualityKind::ALL);
        use QualityKind::{FewRoundTrips, HighVariance, ImplausibleLatency};
        assert_eq!(kinds_of(&cases[0]), [FewRoundTrips, ImplausibleLatency]);
        assert_eq!(kinds_of(&cases[1]), [HighVariance]);
        assert_eq!(
            serde_json::to_string(&ImplausibleLatency).unwrap(),
            "\"implausible_latency\""
        );
    }

    #[test]
    fn each_warning_text_is_kept_once() {
        let merged = once_each(vec!["a".into(), "b".into(), "a".into()], vec!["b".into(), "c".into()]);
        assert_eq!(merged, ["a", "b", "c"]);
    }
}
