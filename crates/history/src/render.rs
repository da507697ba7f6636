//! `ic-bench history` as text: columns as wide as what they show (run ids and pair labels are
//! identifiers a later command needs whole, so they are never cut; only a case label shrinks to
//! the terminal's width, and `-o wide` cuts nothing), and a terminal sparkline per trend
//! (`▁▂▃▄▅▆▇█`, scaled between the trend's own minimum and maximum).

use crate::query::{CaseTrend, CompareRow, NodePoint, RunSummary};
use icb_core::model::Metric;
use std::fmt::Write as _;

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

/// An RFC 3339 time to the second (`…T01:44:10.664868Z` → `…T01:44:10Z`): the tables' STARTED
/// column; `-o json` keeps the whole value.
fn to_second(t: &str) -> String {
    match t.find('.') {
        Some(dot) => {
            let rest = &t[dot + 1..];
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            format!("{}{}", &t[..dot], &rest[digits..])
        }
        None => t.to_string(),
    }
}

/// A figure column: `123.45 GB/s`, `12345.6 µs`.
const FIG: usize = 11;

/// The widest `items` (at least `min`, the header's): identifier columns are never cut.
fn widest<'a>(items: impl Iterator<Item = &'a str>, min: usize) -> usize {
    items.map(|s| s.chars().count()).fold(min, usize::max)
}

/// How wide the one column that may shrink (the case label) can be: everything else is shown
/// whole (run ids, pair labels, figures); `width` `None` (`-o wide`) cuts nothing.
fn flexible(natural: usize, fixed: usize, width: Option<usize>) -> usize {
    match width {
        Some(w) if fixed + natural > w => w.saturating_sub(fixed).max(20).min(natural),
        _ => natural,
    }
}

pub fn runs(list: &[RunSummary]) -> String {
    let id = widest(list.iter().map(|r| r.run_id.as_str()), 3);
    let times: Vec<String> = list.iter().map(|r| to_second(&r.started_at)).collect();
    let started = widest(times.iter().map(String::as_str), 7);
    let verdict = widest(list.iter().map(|r| r.verdict.as_str()), 7);
    let mut out = format!(
        "{:<id$} {:<5} {:<started$} {:<verdict$} {:>7} {:>6}\n",
        "RUN", "KIND", "STARTED", "VERDICT", "FIGURES", "PAIRS"
    );
    for (r, at) in list.iter().zip(&times) {
        let _ = writeln!(
            out,
            "{:<id$} {:<5} {:<started$} {:<verdict$} {:>7} {:>6}",
            r.run_id, r.kind, at, r.verdict, r.rows, r.pairs
        );
    }
    if list.is_empty() {
        out.push_str("(no runs recorded)\n");
    }
    out
}

/// A node's trend, one section per run kind (sweep nights apart from pair and gate runs: their
/// figures are not the same quantity, so one median or sparkline over both would mislead).
pub fn node(name: &str, points: &[NodePoint]) -> String {
    let mut kinds: Vec<&str> = points.iter().map(|p| p.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let mut out = format!("node {name}: {} run(s)\n", points.len());
    let id = widest(points.iter().map(|p| p.run_id.as_str()), 3);
    let started = widest(points.iter().map(|p| p.started_at.as_str()), 7).min(20);
    let status = widest(points.iter().map(|p| p.status.as_str()), 6);
    for kind in kinds {
        let these: Vec<&NodePoint> = points.iter().filter(|p| p.kind == kind).collect();
        let bw: Vec<f64> = these.iter().filter_map(|p| p.median_bps).collect();
        let _ = writeln!(out, "{kind} runs: {}  bandwidth {}", these.len(), sparkline(&bw));
        let _ = writeln!(
            out,
            "{:<id$} {:<started$} {:<status$} {:>FIG$} {:>FIG$}",
            "RUN", "STARTED", "STATUS", "MEDIAN BW", "LAT P50"
        );
        for p in these {
            let _ = writeln!(
                out,
                "{:<id$} {:<started$} {:<status$} {:>FIG$} {:>FIG$}",
                p.run_id,
                to_second(&p.started_at),
                p.status,
                figure(Metric::BandwidthBps, p.median_bps),
                figure(Metric::LatencyP50Us, p.median_latency_us)
            );
        }
    }
    out
}

/// `width`: the terminal's (`COLUMNS`), or `None` for `-o wide`; only the case label is cut.
pub fn pair(a: &str, b: &str, trends: &[CaseTrend], width: Option<usize>) -> String {
    let mut out = format!("pair {a} ↔ {b}: {} case figure(s)\n", trends.len());
    let labels: Vec<(String, String)> = trends
        .iter()
        .map(|t| (t.case.pair_label(), t.case.case_label()))
        .collect();
    let pair_w = widest(labels.iter().map(|l| l.0.as_str()), 4);
    let spark = trends.iter().map(|t| t.points.len()).max().unwrap_or(0).max(5);
    let fixed = pair_w + 1 + 1 + 4 + 1 + FIG + 1 + FIG + 2 + spark;
    let case_w = flexible(widest(labels.iter().map(|l| l.1.as_str()), 4), fixed, width);
    let _ = writeln!(
        out,
        "{:<pair_w$} {:<case_w$} {:>4} {:>FIG$} {:>FIG$}  TREND",
        "PAIR", "CASE", "RUNS", "FIRST", "LAST"
    );
    for (t, (pair, case)) in trends.iter().zip(&labels) {
        let values: Vec<f64> = t.points.iter().map(|p| p.2).collect();
        let _ = writeln!(
            out,
            "{:<pair_w$} {:<case_w$} {:>4} {:>FIG$} {:>FIG$}  {}",
            pair,
            fit(case, case_w),
            values.len(),
            figure(t.metric, values.first().copied()),
            figure(t.metric, values.last().copied()),
            sparkline(&values)
        );
    }
    out
}

/// `width` as for [`pair`].
pub fn compare(a: &str, b: &str, rows: &[CompareRow], width: Option<usize>) -> String {
    let mut out = format!("{a} → {b}\n");
    let labels: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r.case.pair_label(), r.case.case_label()))
        .collect();
    let pair_w = widest(labels.iter().map(|l| l.0.as_str()), 4);
    let fixed = pair_w + 1 + 1 + FIG + 1 + FIG + 1 + 8 + 1 + 9;
    let case_w = flexible(widest(labels.iter().map(|l| l.1.as_str()), 4), fixed, width);
    let _ = writeln!(
        out,
        "{:<pair_w$} {:<case_w$} {:>FIG$} {:>FIG$} {:>8} VERDICT",
        "PAIR", "CASE", "BEFORE", "AFTER", "CHANGE"
    );
    for (r, (pair, case)) in rows.iter().zip(&labels) {
        let _ = writeln!(
            out,
            "{:<pair_w$} {:<case_w$} {:>FIG$} {:>FIG$} {:>8} {}",
            pair,
            fit(case, case_w),
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

    /// Issue 36 item 5: two pairs `node-3→node-10` and `node-3→node-11` read `node-3→node…`
    /// and run ids were cut that `history compare` needs whole.
    #[test]
    fn identifiers_are_never_cut_and_only_the_case_label_shrinks() {
        use crate::query::CompareRow;
        use icb_core::model::{CaseKey, Metric};
        let key = |decode: &str| CaseKey {
            prefill: "node-3".into(),
            decode: decode.into(),
            test: "put_bw".into(),
            memory: "host-host".into(),
            size: 4 << 20,
            blocks: None,
            direction: Some("write".into()),
            engine: "ucx".into(),
            rail: None,
        };
        let row = |decode: &str| CompareRow {
            case: key(decode),
            metric: Metric::BandwidthBps,
            before: Some(5e9),
            after: Some(1e9),
            change: Some(-0.8),
            verdict: None,
        };
        let rows = vec![row("node-10"), row("node-11")];
        let id = "sw20261128-000000-abcdef-p1r1x1";
        for width in [Some(80), Some(100), None] {
            let text = compare(id, id, &rows, width);
            assert!(
                text.contains("node-3→node-10") && text.contains("node-3→node-11"),
                "{text}"
            );
            assert!(text.starts_with(id), "{text}");
            if let Some(w) = width {
                for line in text.lines() {
                    assert!(line.chars().count() <= w.max(id.len() * 2 + 3), "{w}: {line}");
                }
            }
        }
    }

    /// Issue 36 item 5: `history show node/X` mixed pair runs (4 MiB, both directions) and sweep
    /// nights (64 KiB / 1 MiB) in one sparkline.
    #[test]
    fn a_node_trend_keeps_sweep_nights_apart_from_pair_runs() {
        let p = |run: &str, kind: &str, bw: f64| NodePoint {
            run_id: run.into(),
            kind: kind.into(),
            started_at: format!("2026-11-2{}T02:00:00Z", run.len() % 9),
            status: "pass".into(),
            median_bps: Some(bw),
            median_latency_us: None,
        };
        let text = node(
            "n1",
            &[
                p("sw1", "sweep", 20e9),
                p("pair-1", "pair", 5e9),
                p("sw2", "sweep", 20e9),
            ],
        );
        assert!(text.contains("sweep runs: 2  bandwidth ▄▄"), "{text}");
        assert!(text.contains("pair runs: 1  bandwidth ▄"), "{text}");
    }

    #[test]
    fn times_are_shown_to_the_second() {
        assert_eq!(to_second("2026-11-29T01:44:10.66486828Z"), "2026-11-29T01:44:10Z");
        assert_eq!(to_second("2026-11-29T01:44:10+01:00"), "2026-11-29T01:44:10+01:00");
        assert_eq!(to_second("2026-11-29T01:44:10.5+01:00"), "2026-11-29T01:44:10+01:00");
    }

    #[test]
    fn long_names_are_cut_to_fit() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
    }
}
