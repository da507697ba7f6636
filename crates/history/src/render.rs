//! `ic-bench history` as text: fixed-width columns that fit 100 columns, and a terminal
//! sparkline per trend (`▁▂▃▄▅▆▇█`, scaled between the trend's own minimum and maximum).

use crate::query::{CaseTrend, CompareRow, NodePoint, RunSummary};
use icb_core::model::Metric;
use std::fmt::Write as _;

/// The widest line these tables print.
pub const MAX_WIDTH: usize = 100;

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// One bar per value, oldest first; a flat trend is all middle bars.
pub fn sparkline(values: &[f64]) -> String {
    let (lo, hi) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(*v), hi.max(*v))
    });
    values
        .iter()
        .map(|v| {
            if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
                BARS[3]
            } else {
                BARS[(((v - lo) / (hi - lo)) * 7.0).round() as usize]
            }
        })
        .collect()
}

/// `s` cut to `width` characters (an ellipsis marks the cut).
fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
    t.push('…');
    t
}

fn figure(metric: Metric, v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| metric.show(v))
}

pub fn runs(list: &[RunSummary]) -> String {
    let mut out = format!(
        "{:<32} {:<5} {:<20} {:<7} {:>7} {:>6}\n",
        "RUN", "KIND", "STARTED", "VERDICT", "FIGURES", "PAIRS"
    );
    for r in list {
        let _ = writeln!(
            out,
            "{:<32} {:<5} {:<20} {:<7} {:>7} {:>6}",
            fit(&r.run_id, 32),
            r.kind,
            fit(&r.started_at, 20),
            r.verdict,
            r.rows,
            r.pairs
        );
    }
    if list.is_empty() {
        out.push_str("(no runs recorded)\n");
    }
    out
}

pub fn node(name: &str, points: &[NodePoint]) -> String {
    let bw: Vec<f64> = points.iter().filter_map(|p| p.median_bps).collect();
    let mut out = format!("node {name}: {} run(s)  bandwidth {}\n", points.len(), sparkline(&bw));
    let _ = writeln!(
        out,
        "{:<32} {:<20} {:<13} {:>14} {:>14}",
        "RUN", "STARTED", "STATUS", "MEDIAN BW", "LATENCY P50"
    );
    for p in points {
        let _ = writeln!(
            out,
            "{:<32} {:<20} {:<13} {:>14} {:>14}",
            fit(&p.run_id, 32),
            fit(&p.started_at, 20),
            fit(&p.status, 13),
            figure(Metric::BandwidthBps, p.median_bps),
            figure(Metric::LatencyP50Us, p.median_latency_us)
        );
    }
    out
}

pub fn pair(a: &str, b: &str, trends: &[CaseTrend]) -> String {
    let mut out = format!("pair {a} ↔ {b}: {} case figure(s)\n", trends.len());
    let _ = writeln!(
        out,
        "{:<12} {:<38} {:>4} {:>14} {:>14}  TREND",
        "PAIR", "CASE", "RUNS", "FIRST", "LAST"
    );
    for t in trends {
        let values: Vec<f64> = t.points.iter().map(|p| p.2).collect();
        let line = format!(
            "{:<12} {:<38} {:>4} {:>14} {:>14}  {}",
            fit(&t.case.pair_label(), 12),
            fit(&t.case.case_label(), 38),
            values.len(),
            figure(t.metric, values.first().copied()),
            figure(t.metric, values.last().copied()),
            sparkline(&values)
        );
        let _ = writeln!(out, "{}", fit(&line, MAX_WIDTH));
    }
    out
}

pub fn compare(a: &str, b: &str, rows: &[CompareRow]) -> String {
    let mut out = format!("{a} → {b}\n");
    let _ = writeln!(
        out,
        "{:<12} {:<34} {:>14} {:>14} {:>8} {:<12}",
        "PAIR", "CASE", "BEFORE", "AFTER", "CHANGE", "VERDICT"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<12} {:<34} {:>14} {:>14} {:>8} {:<12}",
            fit(&r.case.pair_label(), 12),
            fit(&r.case.case_label(), 34),
            figure(r.metric, r.before),
            figure(r.metric, r.after),
            r.change.map_or_else(|| "-".into(), |c| format!("{:+.1}%", c * 100.0)),
            r.verdict.map_or("-", |v| v.as_str())
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_between_the_trends_own_bounds() {
        assert_eq!(sparkline(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]), "▁▂▃▄▅▆▇█");
        assert_eq!(sparkline(&[45e9, 45e9, 30e9]), "██▁");
        assert_eq!(sparkline(&[5.0, 5.0]), "▄▄");
        assert_eq!(sparkline(&[]), "");
    }

    #[test]
    fn long_names_are_cut_to_fit() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
    }
}
