//! A pair's report reduced to the sweep's [`Outcome`]: the verdict, the data paths, the
//! bandwidth a pair is scored on, and every point the reports plot.

use crate::results::{LatencyPoint, Outcome, SizePoint};

impl Outcome {
    /// The pair report reduced to what the sweep scores and plots.
    pub fn from_report(report: &icb_core::PairReport) -> Outcome {
        let data_paths = report
            .verdict
            .data_paths
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok()?.as_str().map(String::from))
            .collect();
        let mut series = Vec::new();
        let mut latencies = Vec::new();
        let mut latency: Option<(u64, f64)> = None;
        for c in &report.cases {
            let Some(m) = &c.measurement else { continue };
            let memory = format!("{}-{}", c.memory.initiator, c.memory.target);
            if let Some(bw) = m.bandwidth_bps {
                series.push(SizePoint {
                    test: c.test.as_str().to_string(),
                    size: c.size,
                    bandwidth_bps: bw,
                    memory: Some(memory.clone()),
                    direction: direction(c).map(String::from),
                });
            }
            if let Some(l) = &m.latency_us {
                latencies.push(LatencyPoint {
                    test: c.test.as_str().to_string(),
                    size: c.size,
                    memory: Some(memory),
                    p50_us: l.p50,
                    p99_us: l.p99,
                });
                if latency.is_none_or(|(size, _)| c.size < size) {
                    latency = Some((c.size, l.p50));
                }
            }
        }
        let largest = series.iter().map(|p| p.size).max();
        let bandwidth_bps = series
            .iter()
            .filter(|p| Some(p.size) == largest)
            .map(|p| p.bandwidth_bps)
            // A pair is as good as its worst direction (put pushes into decode, get pulls out of it).
            .fold(None, |acc: Option<f64>, b| Some(acc.map_or(b, |a| a.min(b))));
        Outcome::Measured {
            verdict: serde_json::to_value(report.verdict.status)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            reason: report.verdict.reason.clone(),
            data_paths,
            bandwidth_bps,
            latency_us: latency.map(|(_, l)| l),
            series,
            latency: latencies,
            warnings: report.warnings.clone(),
        }
    }
}

/// Which way a case's bytes went, seen from the prefill side (NIXL's vocabulary): RMA put and
/// NIXL WRITE push into decode, RMA get and NIXL READ pull out of it; tag tests have no one
/// direction to name.
fn direction(c: &icb_core::model::CaseResult) -> Option<&'static str> {
    use icb_core::model::{Direction, TestKind};
    match (c.run_by.direction, c.test) {
        (Some(d), _) => Some(d.as_str()),
        (None, TestKind::PutBw) => Some(Direction::Write.as_str()),
        (None, TestKind::GetBw) => Some(Direction::Read.as_str()),
        (None, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_reduced_to_its_worst_direction_at_the_largest_size() {
        let report: icb_core::PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        let Outcome::Measured {
            verdict,
            bandwidth_bps,
            series,
            data_paths,
            ..
        } = Outcome::from_report(&report)
        else {
            panic!("measured");
        };
        assert_eq!(serde_json::json!(verdict), serde_json::json!(report.verdict.status));
        assert_eq!(data_paths.len(), report.verdict.data_paths.len());
        let largest = series.iter().map(|p| p.size).max();
        let worst = series
            .iter()
            .filter(|p| Some(p.size) == largest)
            .map(|p| p.bandwidth_bps)
            .reduce(f64::min);
        assert_eq!(bandwidth_bps, worst);
        let rma = |t: &str| t == "put_bw" || t == "get_bw";
        assert!(series.iter().filter(|p| rma(&p.test)).all(|p| p.direction.is_some()));
    }
}
