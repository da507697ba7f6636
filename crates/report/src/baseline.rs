//! How every format shows `--baseline` (issue 21): a case that passed its floors but is slower
//! than its own past is **pass, regressed**, never a fail. The table marks the case's verdict
//! cell and lists each regressed figure with its baseline below; JUnit keeps the test case a
//! success and adds the comparison as properties; Prometheus has a gauge per figure.

use icb_core::model::{BaselineCheck, BaselineReport, BaselineVerdict, CaseKey, PairReport};

/// The most figure lines a table lists (`-o wide` or `-o json` have all).
const MAX_LINES: usize = 12;

/// `ok` as `ok, regressed` (or `, acknowledged`) when the case's figures are.
pub(crate) fn mark_cell(cell: String, baseline: Option<&BaselineReport>, key: &CaseKey) -> String {
    match baseline.and_then(|b| b.mark(key)) {
        Some(v) => format!("{cell}, {v}"),
        None => cell,
    }
}

/// The summary sentence: how many figures regressed against which baseline.
pub(crate) fn summary(b: &BaselineReport) -> String {
    let count = |v: BaselineVerdict| b.checks.iter().filter(|c| c.verdict == v).count();
    let pct = |m| {
        b.thresholds
            .iter()
            .find(|(x, _)| *x == m)
            .map_or(0.0, |(_, t)| t * 100.0)
    };
    format!(
        "baseline {}: {} regressed, {} acknowledged, {} within, {} improved, {} new baseline(s) (threshold: bandwidth {:.0} %, latency {:.0} %)",
        b.source,
        b.regressed,
        count(BaselineVerdict::Acknowledged),
        count(BaselineVerdict::Within),
        count(BaselineVerdict::Improved),
        b.new_baselines,
        pct(icb_core::model::Metric::BandwidthBps),
        pct(icb_core::model::Metric::LatencyP50Us),
    )
}

/// One line per figure a reader must see (regressed, acknowledged, and a changed key), worst
/// first, at most [`MAX_LINES`] unless `all`.
pub(crate) fn lines(b: &BaselineReport, all: bool) -> Vec<String> {
    let mut shown: Vec<&BaselineCheck> = b
        .checks
        .iter()
        .filter(|c| match c.verdict {
            BaselineVerdict::Regressed | BaselineVerdict::Acknowledged => true,
            BaselineVerdict::NewBaseline => c.key_changed,
            BaselineVerdict::Within | BaselineVerdict::Improved => false,
        })
        .collect();
    shown.sort_by_key(|c| c.verdict != BaselineVerdict::Regressed);
    let total = shown.len();
    let mut out: Vec<String> = shown
        .into_iter()
        .take(if all { usize::MAX } else { MAX_LINES })
        .map(|c| {
            format!(
                "  {} {} {}: {}",
                c.case.pair_label(),
                c.case.case_label(),
                c.metric.short(),
                c.summary()
            )
        })
        .collect();
    if out.len() < total {
        out.push(format!(
            "  … {} more (-o wide or -o json lists them all)",
            total - out.len()
        ));
    }
    out
}

/// JUnit properties of a pair case: each figure's comparison (`baseline.bandwidth` =
/// `regressed -31.2 % vs 45.00 GB/s (mean of 5)`).
pub(crate) fn case_properties(r: &PairReport, key: &CaseKey) -> Vec<(String, String)> {
    r.baseline
        .as_deref()
        .map(|b| {
            b.for_case(key)
                .map(|c| (format!("baseline.{}", c.metric.short()), c.summary()))
                .collect()
        })
        .unwrap_or_default()
}
