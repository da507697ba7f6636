//! The sweep HTML report's trend (`sweep --baseline`): per node and per pair, the last runs'
//! bandwidth as a small line with this run at its end, the baseline mean, the change, and the
//! verdict against the baseline; regressed rows are marked (`class="regressed"`).

use super::html::esc;
use icb_core::model::{BaselineCheck, BaselineReport, Metric};
use icb_sweep::SweepResults;
use icb_sweep::results::gbps;
use std::fmt::Write as _;

/// Empty without a baseline.
pub(crate) fn html(r: &SweepResults) -> String {
    let Some(b) = r.baseline.as_deref() else {
        return String::new();
    };
    let bw: Vec<&BaselineCheck> = b.checks.iter().filter(|c| c.metric == Metric::BandwidthBps).collect();
    let mut h = format!(
        "<h2>Trend against the baseline ({}: {} regressed)</h2><style>tr.regressed td{{background:#ffebe9}}</style>",
        esc(&b.source),
        b.regressed
    );
    h.push_str(&nodes(b));
    h.push_str("<table id=\"pair-trends\"><tr><th>pair</th><th>case</th><th>trend</th><th>baseline GB/s</th><th>now GB/s</th><th>change</th><th>verdict</th></tr>");
    for c in &bw {
        let mut series = c.recent.clone();
        series.push(c.value);
        let _ = write!(
            h,
            "<tr class=\"{v}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.case.pair_label()),
            esc(&c.case.case_label()),
            spark(&series),
            c.baseline_mean.map(gbps).unwrap_or_else(|| "-".into()),
            gbps(c.value),
            c.change
                .map(|x| format!("{:+.1} %", x * 100.0))
                .unwrap_or_else(|| "-".into()),
            esc(&c
                .note
                .clone()
                .map_or_else(|| c.verdict.to_string(), |n| format!("{}: {n}", c.verdict))),
            v = c.verdict.as_str(),
        );
    }
    h.push_str("</table>");
    h
}

/// One row per node: its median bandwidth over the baseline runs and this one, the change, and
/// whether the node itself regressed.
fn nodes(b: &BaselineReport) -> String {
    let mut h = String::from(
        "<table id=\"node-trends\"><tr><th>node</th><th>median GB/s trend</th><th>baseline GB/s</th><th>now GB/s</th><th>change</th><th>verdict</th></tr>",
    );
    for c in &b.nodes {
        let mut series = c.recent.clone();
        series.push(c.value);
        let _ = write!(
            h,
            "<tr class=\"{v}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{v}</td></tr>",
            esc(&c.node),
            spark(&series),
            c.baseline_mean.map(gbps).unwrap_or_else(|| "-".into()),
            gbps(c.value),
            c.change
                .map(|x| format!("{:+.1} %", x * 100.0))
                .unwrap_or_else(|| "-".into()),
            v = c.verdict.as_str(),
        );
    }
    h.push_str("</table>");
    h
}

/// A 120×24 SVG line through `values` (oldest first), this run a dot at the end.
fn spark(values: &[f64]) -> String {
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(*v), h.max(*v)));
    let span = if hi > lo { hi - lo } else { 1.0 };
    let step = if values.len() > 1 {
        116.0 / (values.len() - 1) as f64
    } else {
        0.0
    };
    let pts: Vec<(f64, f64)> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (2.0 + i as f64 * step, 21.0 - (v - lo) / span * 18.0))
        .collect();
    let line: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    let (x, y) = pts.last().copied().unwrap_or((2.0, 12.0));
    format!(
        "<svg class=\"spark\" width=\"120\" height=\"24\"><polyline fill=\"none\" stroke=\"#0969da\" points=\"{}\"/><circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"#cf222e\"/></svg>",
        line.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparkline_ends_at_this_run() {
        let svg = spark(&[1.0, 2.0, 0.5]);
        assert!(svg.starts_with("<svg class=\"spark\""), "{svg}");
        assert!(svg.contains("points=\"2.0,15.0 60.0,3.0 118.0,21.0\""), "{svg}");
        assert!(svg.contains("cx=\"118.0\" cy=\"21.0\""), "{svg}");
    }
}
