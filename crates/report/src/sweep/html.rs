//! A self-contained HTML report of a sweep (no network fetches: inline CSS and SVG only): the
//! N×N heatmap of pair bandwidth (and beside it, for a whole-node sweep, the node × rail heatmap:
//! [`super::rails`]), the node table with its evidence, the second pass, and one bandwidth-vs-size
//! plot per pair.

use crate::format::{ExportError, Exporter};
use icb_core::checks::ProbeReport;
use icb_core::model::PairReport;
use icb_sweep::results::{Outcome, PairResult, SizePoint, SweepResults, gbps};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Red (0) → green (1).
pub(crate) fn color(frac: f64) -> String {
    let f = frac.clamp(0.0, 1.0);
    let r = (220.0 * (1.0 - f) + 40.0 * f) as u8;
    let g = (60.0 * (1.0 - f) + 170.0 * f) as u8;
    format!("rgb({r},{g},70)")
}

/// A pair cell's tooltip: the pair and its outcome, then what its NICs' counters said (issue
/// 40: the congested or lossy ports with their node, or what was not read).
fn pair_tooltip(p: &PairResult) -> String {
    let mut t = format!("{}: {}", p.pair, p.outcome.short());
    if let Outcome::Measured { nic: Some(nic), .. } = &p.outcome {
        let _ = write!(t, "\n{}", nic.summary(&p.pair));
    }
    t
}

/// `ic-bench sweep --export-html`: sweeps only (a pair report's chart is `-o svg`). Not an `-o`
/// value: `pair` and `probe` share [`Format`](crate::Format) and check it before they run, so a
/// sweep-only format there would pass that check and fail after the whole run.
pub struct HtmlExporter;

impl Exporter for HtmlExporter {
    fn pair(&self, _: &PairReport) -> Result<String, ExportError> {
        Err(ExportError::Unsupported {
            format: "html",
            what: "a pair report (the HTML report is a sweep's)",
            instead: "-o svg for a chart, or -o table, json, junit or prometheus",
        })
    }

    fn probe(&self, _: &ProbeReport) -> Result<String, ExportError> {
        Err(ExportError::Unsupported {
            format: "html",
            what: "probe results (the HTML report is a sweep's)",
            instead: "-o table, json, junit or prometheus",
        })
    }

    fn sweep(&self, results: &SweepResults) -> Result<String, ExportError> {
        Ok(render(results))
    }
}

fn render(r: &SweepResults) -> String {
    let first: Vec<&PairResult> = r.pairs.iter().filter(|p| p.pass == 1).collect();
    let best = first
        .iter()
        .filter_map(|p| p.outcome.bandwidth())
        .fold(0.0_f64, f64::max);
    let mut cell: BTreeMap<(&str, &str), &PairResult> = BTreeMap::new();
    for p in &first {
        // Only the direction measured: a→b says nothing about b→a (another NIC queue, another
        // switch path), so the mirror cell stays empty rather than repeating a→b.
        cell.insert((p.pair.prefill.as_str(), p.pair.decode.as_str()), p);
    }
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>ic-bench sweep {id}</title><style>\
body{{font-family:system-ui,sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse}}\
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:12px}}td.cell{{width:34px;height:22px;text-align:center;color:#fff}}\
.pass{{color:#1a7f37}}.fail{{color:#cf222e}}.suspect{{color:#9a6700}}.unschedulable{{color:#6e7781}}\
.plots{{display:flex;flex-wrap:wrap;gap:8px}}.maps{{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}}\
td.rail-cell{{width:42px;height:22px;text-align:center;color:#fff}}.plot{{border:1px solid #ddd}}</style></head><body>\
<h1>ic-bench sweep {id}</h1><p>schedule {sched}, {n} nodes, {pairs} pairs, started {start}, updated {upd}{partial}</p>",
        id = esc(&r.sweep_id),
        sched = r.schedule.name(),
        n = r.nodes.len(),
        pairs = r.pairs.len(),
        start = esc(&r.started_at),
        upd = esc(&r.updated_at),
        partial = match (&r.stopped, r.complete) {
            (Some(stop), _) => format!(
                " — <b>stopped ({}): {}</b>; --resume the results file to finish",
                stop.reason.as_str(),
                esc(&stop.detail)
            ),
            (None, false) => " — <b>incomplete</b>".to_string(),
            (None, true) => String::new(),
        }
    );
    let verdicts = super::verdicts(r);
    // Heatmaps: pairs, and beside them the rails of a whole-node sweep.
    h.push_str("<div class=\"maps\"><div><h2>Pair bandwidth (GB/s, worst direction)</h2><table id=\"heatmap\"><tr><th>prefill \\ decode</th>");
    for d in &r.nodes {
        let _ = write!(h, "<th>{}</th>", esc(d));
    }
    h.push_str("</tr>");
    for a in &r.nodes {
        let _ = write!(h, "<tr><th>{}</th>", esc(a));
        for b in &r.nodes {
            match cell.get(&(a.as_str(), b.as_str())) {
                Some(p) => {
                    let (bg, text) = match &p.outcome {
                        Outcome::Measured {
                            bandwidth_bps: Some(bw),
                            verdict,
                            ..
                        } => (
                            if *verdict == icb_core::VerdictStatus::Fail {
                                color(0.0)
                            } else {
                                color(bw / best.max(1.0))
                            },
                            gbps(*bw),
                        ),
                        Outcome::Unschedulable { .. } => ("#8c959f".into(), "U".into()),
                        Outcome::Disrupted { .. } => ("#8c959f".into(), "K".into()),
                        _ => (color(0.0), "×".into()),
                    };
                    let _ = write!(
                        h,
                        "<td class=\"cell\" style=\"background:{bg}\" title=\"{}\">{text}</td>",
                        esc(&pair_tooltip(p))
                    );
                }
                None => h.push_str("<td class=\"unmeasured\" title=\"not measured\"></td>"),
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></div>");
    let cells = icb_sweep::rails::node_rails(&r.pairs, &verdicts);
    h.push_str(&super::rails::html_heatmap(&cells, &r.nodes, &verdicts));
    h.push_str("</div>");
    // Node table.
    h.push_str("<h2>Nodes</h2><table id=\"nodes\"><tr><th>node</th><th>verdict</th><th>median GB/s</th><th>bad pairs</th><th>data paths</th><th>evidence</th></tr>");
    // While the sweep runs, the first-pass verdicts so far.
    for v in verdicts.iter() {
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"{s}\">{s}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td></tr>",
            esc(&v.node),
            v.median_bps.map(gbps).unwrap_or_else(|| "-".into()),
            v.failed_pairs,
            v.pairs,
            esc(&v.data_paths.join(", ")),
            v.evidence.iter().map(|e| esc(e)).collect::<Vec<_>>().join("<br>"),
            s = v.status.as_str()
        );
    }
    h.push_str("</table>");
    // The fleet: firmware and MTUs across the nodes, the odd ones out named (issue 40).
    if let Some((heading, rest)) = super::fleet::lines(r).split_first() {
        let _ = write!(h, "<h2>Fleet</h2><p>{}</p><ul id=\"fleet\">", esc(heading));
        for line in rest {
            let _ = write!(h, "<li>{}</li>", esc(line.trim()));
        }
        h.push_str("</ul>");
    }
    h.push_str(&super::trend::html(r));
    // Second pass.
    let second: Vec<&PairResult> = r.pairs.iter().filter(|p| p.pass == 2).collect();
    let _ = write!(
        h,
        "<h2>Second pass ({} re-pairs)</h2><ul id=\"second-pass\">",
        second.len()
    );
    for p in second {
        let _ = write!(h, "<li>{}: {}</li>", esc(&p.pair.to_string()), esc(&p.outcome.short()));
    }
    h.push_str("</ul><h2>Bandwidth vs size per pair</h2><div class=\"plots\">");
    for p in &r.pairs {
        if let Outcome::Measured { series, .. } = &p.outcome
            && !series.is_empty()
        {
            h.push_str(&plot(p, series, best));
        }
    }
    h.push_str("</div></body></html>\n");
    h
}

/// A small log-x SVG: one polyline per test (and memory pair, when the pair measured several).
fn plot(p: &PairResult, series: &[SizePoint], best: f64) -> String {
    let (w, ht, m) = (220.0, 120.0, 24.0);
    let sizes: Vec<f64> = series.iter().map(|s| (s.size.max(1) as f64).log2()).collect();
    let (lo, hi) = sizes
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    let span = (hi - lo).max(1.0);
    let top = best.max(series.iter().map(|s| s.bandwidth_bps).fold(1.0, f64::max));
    // One line per test and memory pair (`put_bw cuda-cuda`): sizes of different memory pairs
    // are different curves.
    let mut by_test: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for s in series {
        let x = m + ((s.size.max(1) as f64).log2() - lo) / span * (w - 2.0 * m);
        let y = ht - m - s.bandwidth_bps / top * (ht - 2.0 * m);
        let name = match &s.memory {
            Some(mem) if series.iter().any(|o| o.memory.as_ref() != Some(mem)) => format!("{} {mem}", s.test),
            _ => s.test.to_string(),
        };
        by_test.entry(name).or_default().push((x, y));
    }
    let palette = ["#0969da", "#bf3989", "#1a7f37", "#9a6700"];
    let mut svg = format!(
        "<svg class=\"plot\" width=\"{w}\" height=\"{ht}\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"4\" y=\"12\" font-size=\"10\">{} (pass {})</text>\
<line x1=\"{m}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#999\"/><line x1=\"{m}\" y1=\"{m}\" x2=\"{m}\" y2=\"{b}\" stroke=\"#999\"/>",
        esc(&p.pair.to_string()),
        p.pass,
        b = ht - m,
        r = w - m
    );
    for (i, (test, mut pts)) in by_test.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let c = palette[i % palette.len()];
        let line: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{c}\" points=\"{}\"/><text x=\"{}\" y=\"{}\" font-size=\"9\" fill=\"{c}\">{}</text>",
            line.join(" "),
            w - 70.0,
            24.0 + 10.0 * i as f64,
            esc(&test)
        );
        for (x, y) in &pts {
            let _ = write!(svg, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2\" fill=\"{c}\"/>");
        }
    }
    let _ = write!(
        svg,
        "<text x=\"{m}\" y=\"{}\" font-size=\"9\">log size →; top {} GB/s</text></svg>",
        ht - 6.0,
        gbps(top)
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_sweep::schedule::{Pair, Schedule};

    #[test]
    fn html_has_every_cell_the_node_table_and_no_network_fetch() {
        let nodes: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let rounds = Schedule::AllPairs.rounds(&nodes, 0).unwrap();
        let pairs = rounds
            .iter()
            .flatten()
            .map(|p: &Pair| PairResult {
                pair: p.clone(),
                pass: 1,
                run_id: "r".into(),
                duration_s: 1.0,
                finished_at: None,
                outcome: Outcome::Measured {
                    verdict: icb_core::VerdictStatus::Pass,
                    reason: String::new(),
                    data_paths: vec!["rdma".into()],
                    bandwidth_bps: Some(2e10),
                    latency_us: Some(3.0),
                    series: vec![
                        SizePoint {
                            test: icb_core::model::TestKind::PutBw,
                            size: 65536,
                            bandwidth_bps: 1e10,
                            memory: None,
                            direction: None,
                        },
                        SizePoint {
                            test: icb_core::model::TestKind::PutBw,
                            size: 1 << 20,
                            bandwidth_bps: 2e10,
                            memory: None,
                            direction: None,
                        },
                    ],
                    latency: vec![],
                    warnings: vec![],
                    rails: vec![],
                    controls: vec![],
                    nic: None,
                },
            })
            .collect::<Vec<_>>();
        let mut r = SweepResults::new("s<1>".into(), Schedule::AllPairs, nodes.clone(), 1.0, rounds);
        r.pairs = pairs;
        r.complete = true;
        r.node_verdicts = icb_sweep::score::final_verdicts(&nodes, &r.pairs);
        let html = render(&r);
        assert_eq!(
            html.matches("class=\"cell\"").count(),
            3,
            "one cell per measured direction, none mirrored"
        );
        let ab = rounds_first_pair(&r);
        assert!(
            html.contains(&format!("title=\"{}→{}: ", ab.0, ab.1))
                && !html.contains(&format!("title=\"{}→{}: ", ab.1, ab.0)),
            "the mirror of a measured pair is not shown"
        );
        assert!(html.contains("<table id=\"nodes\">") && html.matches("class=\"pass\"").count() == 3);
        assert!(html.contains("s&lt;1&gt;"), "escaped");
        assert_eq!(html.matches("<svg").count(), 3);
        assert!(
            !html.contains("http://")
                || html.matches("http://").count() == html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        );
        assert!(!html.contains("https://") && !html.contains("<script src") && !html.contains("<link"));
    }

    #[test]
    fn each_memory_pair_gets_its_own_line() {
        let point = |memory: &str, size: u64, gb: f64| SizePoint {
            test: icb_core::model::TestKind::PutBw,
            size,
            bandwidth_bps: gb * 1e9,
            memory: Some(memory.into()),
            direction: Some(icb_core::model::Direction::Write),
        };
        let pair = PairResult {
            pair: Pair::new("a", "b"),
            pass: 1,
            run_id: "r".into(),
            duration_s: 1.0,
            finished_at: None,
            outcome: Outcome::Error { reason: String::new() },
        };
        let two = [
            point("host-host", 65536, 10.0),
            point("host-host", 1 << 20, 20.0),
            point("cuda-cuda", 65536, 30.0),
            point("cuda-cuda", 1 << 20, 40.0),
        ];
        let svg = plot(&pair, &two, 40e9);
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert!(
            svg.contains(">put_bw cuda-cuda<") && svg.contains(">put_bw host-host<"),
            "{svg}"
        );
        // One memory pair: the label stays the test's name.
        let svg = plot(&pair, &two[..2], 40e9);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains(">put_bw<"), "{svg}");
    }

    fn rounds_first_pair(r: &SweepResults) -> (String, String) {
        let p = &r.pairs[0].pair;
        (p.prefill.clone(), p.decode.clone())
    }
}
