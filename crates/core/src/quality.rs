//! Measurement-quality findings: what makes a measured number less trustworthy than it looks,
//! said once per finding with the cases it concerns (not once per measured value).
//!
//! They never change the verdict (the data path was observed, whatever the timing); they go to
//! the report's `warnings`, next to the engine's own.

use crate::model::{CaseResult, CaseStatus, PairReport, TestKind, TransportClass};
use crate::units::format_size;

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

/// The findings for `report`'s measured cases, each once with its cases.
pub fn findings(report: &PairReport) -> Vec<String> {
    findings_for(&report.cases)
}

/// [`findings`] for a list of cases.
pub fn findings_for(cases: &[CaseResult]) -> Vec<String> {
    let latency_cases = || {
        cases
            .iter()
            .filter(|c| c.status == CaseStatus::Measured && c.test == TestKind::TagLat)
            .filter_map(|c| Some((c, c.measurement.as_ref()?)))
            .filter_map(|(c, m)| Some((c, m.iterations, m.latency_us.as_ref()?)))
    };
    let mut out = Vec::new();

    let few: Vec<String> = latency_cases()
        .filter(|(_, n, _)| *n < MIN_SAMPLES_FOR_P99)
        .map(|(c, n, _)| format!("{} ({n} round trips)", label(c)))
        .collect();
    push(
        &mut out,
        &format!("p99 from fewer than {MIN_SAMPLES_FOR_P99} round trips is the slowest sample, not a percentile"),
        few,
        "raise --min-iterations or --min-time",
    );

    let noisy: Vec<String> = latency_cases()
        .filter(|(_, _, l)| l.p99 > SPREAD_RATIO * l.p50 && l.p99 - l.p50 >= SPREAD_FLOOR_US)
        .map(|(c, _, l)| format!("{} (p50 {:.1} µs, p99 {:.1} µs)", label(c), l.p50, l.p99))
        .collect();
    push(
        &mut out,
        &format!("high latency variance: p99 more than {SPREAD_RATIO:.0}× p50"),
        noisy,
        "something competes for the CPU or the link: rerun on a quiet machine or pin the sides to their own cores",
    );

    let slow: Vec<String> = latency_cases()
        .filter(|(c, _, _)| c.size <= SMALL_MESSAGE)
        .filter_map(|(c, _, l)| {
            let class = c.transport.as_ref()?.data_path.class;
            let limit = implausible_small_latency_us(class)?;
            (l.p50 > limit).then(|| {
                format!(
                    "{} (p50 {:.1} µs over {class}, expected < {limit:.0} µs)",
                    label(c),
                    l.p50
                )
            })
        })
        .collect();
    push(
        &mut out,
        "latency far above what the data path gives",
        slow,
        "the CPU is oversubscribed or a side was descheduled; the data path is right, its timing is not: rerun on a quiet machine",
    );
    out
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

fn label(c: &CaseResult) -> String {
    format!("{} {} {}", c.test, format_size(c.size), c.memory)
}

fn push(out: &mut Vec<String>, finding: &str, cases: Vec<String>, advice: &str) {
    if cases.is_empty() {
        return;
    }
    let mut listed = cases.iter().take(LISTED).cloned().collect::<Vec<_>>().join(", ");
    if cases.len() > LISTED {
        listed.push_str(&format!(" and {} more", cases.len() - LISTED));
    }
    let n = cases.len();
    let noun = if n == 1 { "case" } else { "cases" };
    out.push(format!("{finding} in {n} {noun}: {listed}: {advice}"));
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

    #[test]
    fn each_warning_text_is_kept_once() {
        let merged = once_each(vec!["a".into(), "b".into(), "a".into()], vec!["b".into(), "c".into()]);
        assert_eq!(merged, ["a", "b", "c"]);
    }
}
