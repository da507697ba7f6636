//! The words a pair verdict and its negative controls are said in, shared by the pair table,
//! the per-rail table and the gate's output.

use icb_core::model::{BandwidthUnit, ControlResult, PairReport, VerdictStatus};

pub(crate) fn verdict_word(s: VerdictStatus) -> &'static str {
    match s {
        VerdictStatus::Pass => "PASS",
        VerdictStatus::Warn => "WARN",
        VerdictStatus::Fail => "FAIL",
        VerdictStatus::Interrupted => "INTERRUPTED",
        VerdictStatus::Inconclusive => "INCONCLUSIVE",
    }
}

/// The verdict's reason as a person reads it after the status word: an inconclusive reason's own
/// `inconclusive: ` (kept in the JSON) is not said twice.
pub(crate) fn verdict_reason(r: &PairReport) -> &str {
    match r.verdict.status {
        VerdictStatus::Inconclusive => r
            .verdict
            .reason
            .strip_prefix("inconclusive: ")
            .unwrap_or(&r.verdict.reason),
        _ => &r.verdict.reason,
    }
}

/// One negative control: caught or not, what it was seen as, and the main path against it.
pub(crate) fn control_line(c: &ControlResult, unit: BandwidthUnit) -> String {
    let bw = |b: Option<f64>| {
        b.map_or_else(
            || "no figure".to_string(),
            |b| icb_core::units::format_bandwidth(b, unit),
        )
    };
    if !c.kind.tests_the_detector() {
        // knobs-off: the detail already holds both rows (with and without the recipe's env).
        let word = if c.caught { "measured" } else { "NOT measured" };
        return format!("control {}: {word}: {}", c.kind, c.detail);
    }
    let against = match c.speedup() {
        Some(x) => format!(
            "; main {} vs control {} ({x:.1}x)",
            bw(c.main_bandwidth_bps),
            bw(c.bandwidth_bps)
        ),
        None => String::new(),
    };
    let word = if c.caught { "caught" } else { "NOT caught" };
    format!("control {}: {word}: {}{against}", c.kind, c.detail)
}
