//! The sweep HTML report's trend (`sweep --baseline`): per node and per pair, the last runs'
//! bandwidth as a small line with this run at its end, the baseline mean, the change, and the
//! verdict against the baseline; regressed rows are marked (`class="regressed"`).

use super::html::esc;
use icb_core::model::{BaselineCheck, BaselineReport, BaselineVerdict, Metric};
use icb_sweep::SweepResults;
use icb_sweep::results::gbps;
use std::collections::BTreeMap;
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
    h.push_str(&nodes(r, b, &bw));
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

/// One row per node: its pairs' bandwidth averaged run by run (aligned from the newest), and
/// how many of its figures regressed.
fn nodes(r: &SweepResults, b: &BaselineReport, bw: &[&BaselineCheck]) -> String {
    let mut by_node: BTreeMap<&str, Vec<&BaselineCheck>> = BTreeMap::new();
    for c in bw {
        by_node.entry(c.case.prefill.as_str()).or_default().push(c);
        if c.case.decode != c.case.prefill {
            by_node.entry(c.case.decode.as_str()).or_default().push(c);
        }
    }
    let mut h = String::from(
        "<table id=\"node-trends\"><tr><th>node</th><th>trend (mean of its pairs)</th><th>regressed figures</th></tr>",
    );
    for node in &r.nodes {
        let Some(checks) = by_node.get(node.as_str()) else {
            continue;
        };
        let regressed = b.regressed_on(node).count();
        let _ = write!(
            h,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{regressed}</td></tr>",
            if b.node_regressed(node) {
                BaselineVerdict::Regressed.as_str()
            } else {
                ""
            },
            esc(node),
            spark(&node_series(checks))
        );
    }
    h.push_str("</table>");
    h
}

/// The mean across `checks` of each run's figure, newest run last.
fn node_series(checks: &[&BaselineCheck]) -> Vec<f64> {
    let longest = checks.iter().map(|c| c.recent.len() + 1).max().unwrap_or(0);
    (0..longest)
        .rev()
        .filter_map(|back| {
            let at: Vec<f64> = checks
                .iter()
                .filter_map(|c| {
                    let n = c.recent.len();
                    if back == 0 {
                        Some(c.value)
                    } else {
                        n.checked_sub(back).map(|i| c.recent[i])
                    }
                })
                .collect();
            (!at.is_empty()).then(|| at.iter().sum::<f64>() / at.len() as f64)
        })
        .collect()
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
    fn node_series_align_from_the_newest_run() {
        let key = |a: &str| icb_core::model::CaseKey {
            prefill: a.into(),
            decode: "n".into(),
            rail: None,
            test: "put_bw".into(),
            memory: "host-host".into(),
            size: 1,
            blocks: None,
            direction: None,
            engine: "ucx".into(),
        };
        let check = |a: &str, recent: Vec<f64>, value: f64| BaselineCheck {
            case: key(a),
            metric: Metric::BandwidthBps,
            verdict: BaselineVerdict::Within,
            value,
            baseline_mean: None,
            baseline_stddev: None,
            baseline_runs: recent.len() as u32,
            change: None,
            threshold: 0.1,
            note: None,
            recent,
        };
        let a = check("a", vec![10.0, 20.0], 30.0);
        let b = check("b", vec![40.0], 50.0);
        assert_eq!(node_series(&[&a, &b]), vec![10.0, 30.0, 40.0]);
        assert!(spark(&[1.0, 2.0]).starts_with("<svg class=\"spark\""));
    }
}
