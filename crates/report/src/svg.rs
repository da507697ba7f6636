//! Bandwidth against message size as a standalone SVG: one polyline per (test, memory pair)
//! series, each with its own dash pattern and marker and a legend entry naming the data path its
//! cases went over; a log-2 size axis whose last tick is the largest size; the bandwidth floors as
//! dashed lines from the size they apply from; failed cases as red crosses; the verdict on top.
//! Written by hand (no plotting dependency); every text node is XML-escaped.

use crate::format::{ExportError, Exporter};
use icb_core::checks::ProbeReport;
use icb_core::model::{CaseStatus, MemoryPair, PairReport, Status, TestKind, TransportClass};
use icb_core::units::format_size;
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub struct SvgExporter;

const W: f64 = 880.0;
const H: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 220.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 forbids are dropped rather than emitted.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// A "nice" axis maximum: 1, 2 or 5 times a power of ten, at least `v`.
fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|m| *m >= v)
        .unwrap_or(10.0 * p)
}

/// One line of the chart: a bandwidth test on one memory pair.
struct Series {
    name: String,
    /// The data paths its cases went over, e.g. `rdma` or `shared memory, cma`.
    paths: Vec<TransportClass>,
    points: Vec<(u64, f64)>,
}

/// A bandwidth case that failed: where it sits on the size axis, and its value when it has one.
struct FailedCase {
    size: u64,
    value: Option<f64>,
    label: String,
}

/// Per series: a dash pattern and a marker, so lines that overlap stay distinguishable.
const DASHES: [&str; 4] = ["", "9 4", "3 3", "12 3 3 3"];

/// The marker of series `shape` at (x, y); `title` (a data point's tooltip) marks it as a point.
fn marker(shape: usize, x: f64, y: f64, color: &str, title: Option<&str>) -> String {
    let (name, attrs) = match shape % 4 {
        0 => ("circle", format!(r#"cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}""#)),
        1 => (
            "rect",
            format!(
                r#"x="{:.1}" y="{:.1}" width="7" height="7" fill="white" stroke="{color}" stroke-width="1.5""#,
                x - 3.5,
                y - 3.5
            ),
        ),
        2 => (
            "path",
            format!(
                r#"d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{color}""#,
                y - 4.5,
                x + 4.0,
                y + 3.0,
                x - 4.0,
                y + 3.0
            ),
        ),
        _ => (
            "path",
            format!(
                r#"d="M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z" fill="white" stroke="{color}" stroke-width="1.5""#,
                y - 4.5,
                x + 4.5,
                y + 4.5,
                x - 4.5
            ),
        ),
    };
    match title {
        Some(t) => format!(r#"<{name} data-point="1" {attrs}><title>{}</title></{name}>"#, esc(t)),
        None => format!("<{name} {attrs}/>"),
    }
}

fn collect(r: &PairReport) -> (Vec<Series>, Vec<FailedCase>) {
    let unit = r.settings.unit;
    // One curve per operation, blocks per operation and memory pair: a 64-block list is another
    // curve than one message of the same size.
    let mut series: BTreeMap<(TestKind, String, u32, MemoryPair), Series> = BTreeMap::new();
    let mut failed = Vec::new();
    for c in r.cases.iter().filter(|c| c.test.is_bandwidth()) {
        let value = c
            .measurement
            .as_ref()
            .and_then(|m| m.bandwidth_bps)
            .filter(|b| b.is_finite() && *b >= 0.0)
            .map(|b| unit.from_bytes_per_s(b));
        let verdict_failed = c.verdict.as_ref().is_some_and(|v| v.status == Status::Fail);
        if c.status == CaseStatus::Failed || verdict_failed {
            let why = c
                .verdict
                .as_ref()
                .map(|v| v.reason.clone())
                .or_else(|| c.reason.clone())
                .unwrap_or_default();
            failed.push(FailedCase {
                size: c.size,
                value,
                label: format!("{}: failed: {why}", crate::labels::case_name(c)),
            });
        }
        let (CaseStatus::Measured, Some(v)) = (c.status, value) else {
            continue;
        };
        let blocks = c.blocks.unwrap_or(1);
        let key = (c.test, c.operation(), blocks, c.memory);
        let s = series.entry(key).or_insert_with(|| Series {
            name: match blocks {
                1 => format!("{} {}", c.operation(), c.memory),
                n => format!("{} ×{n} {}", c.operation(), c.memory),
            },
            paths: Vec::new(),
            points: Vec::new(),
        });
        s.points.push((c.size, v));
        if let Some(t) = &c.transport
            && !s.paths.contains(&t.data_path.class)
        {
            s.paths.push(t.data_path.class);
        }
    }
    let mut series: Vec<Series> = series.into_values().collect();
    for s in &mut series {
        s.points.sort_by_key(|p| p.0);
    }
    (series, failed)
}

impl Exporter for SvgExporter {
    fn pair(&self, r: &PairReport) -> Result<String, ExportError> {
        let unit = r.settings.unit;
        let (series, failed) = collect(r);

        let mut floors: Vec<(String, f64)> = Vec::new();
        let mut pairs: Vec<MemoryPair> = Vec::new();
        for c in r.cases.iter().filter(|c| c.test.is_bandwidth()) {
            if !pairs.contains(&c.memory) {
                pairs.push(c.memory);
            }
        }
        for m in pairs {
            let v = unit.from_bytes_per_s(r.expectation.floor_for(m));
            match floors.iter_mut().find(|(_, f)| (*f - v).abs() < 1e-9) {
                Some(f) => f.0 = format!("{}, {m}", f.0),
                None => floors.push((m.to_string(), v)),
            }
        }

        let sizes: Vec<u64> = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .chain(failed.iter().map(|f| f.size))
            .map(|s| s.max(1))
            .collect();
        let (xmin, xmax) = match (sizes.iter().min(), sizes.iter().max()) {
            (Some(a), Some(b)) => (
                (*a as f64).log2().floor(),
                (*b as f64).log2().ceil().max((*a as f64).log2().floor() + 1.0),
            ),
            _ => (3.0, 26.0),
        };
        let peak = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(floors.iter().map(|f| f.1))
            .fold(0.0f64, f64::max);
        let ymax = nice_max(peak * 1.05);
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let x = |size: u64| LEFT + ((size.max(1) as f64).log2() - xmin) / (xmax - xmin) * pw;
        let y = |v: f64| TOP + ph - (v / ymax).clamp(0.0, 1.0) * ph;

        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let status = crate::verdict_text::verdict_word(r.verdict.status);
        let title = format!(
            "ic-bench pair, {} ({}): {status}",
            r.placement.locality, r.placement.mode
        );
        let _ = writeln!(
            s,
            r#"<text x="{LEFT}" y="24" font-size="15" font-weight="bold">{}</text>"#,
            esc(&title)
        );
        let mut reason: String = r.verdict.reason.chars().take(110).collect();
        if reason.len() < r.verdict.reason.len() {
            reason.push('…');
        }
        let _ = writeln!(s, r##"<text x="{LEFT}" y="40" fill="#555">{}</text>"##, esc(&reason));

        // Axes and grid.
        let _ = writeln!(
            s,
            r##"<path d="M{LEFT},{TOP} V{} H{}" stroke="black" fill="none"/>"##,
            TOP + ph,
            LEFT + pw
        );
        // At most ~8 labels, so sizes like "128 KiB" never overlap; counted down from the
        // largest size so the last tick is always there.
        let step = (((xmax - xmin) / 8.0).ceil() as i64).max(1);
        let mut e = xmax as i64;
        while e as f64 >= xmin {
            if (0..64).contains(&e) {
                let size = 1u64 << e;
                let px = x(size);
                let _ = writeln!(
                    s,
                    r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#eee"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                    TOP + ph,
                    TOP + ph + 16.0,
                    esc(&format_size(size))
                );
            }
            e -= step;
        }
        for i in 0..=5 {
            let v = ymax * i as f64 / 5.0;
            let py = y(v);
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                py + 4.0,
                esc(format!("{v:.4}").trim_end_matches('0').trim_end_matches('.'))
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">message size (log2 scale)</text>"#,
            LEFT + pw / 2.0,
            H - 16.0
        );
        let _ = writeln!(
            s,
            r#"<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">bandwidth ({})</text>"#,
            TOP + ph / 2.0,
            TOP + ph / 2.0,
            esc(unit.label())
        );

        // A floor applies from its minimum size on: drawn there only, and not at all when no
        // case is that large.
        let floor_from = r.expectation.min_size_for_bandwidth.max(1);
        let floors_drawn = (floor_from as f64).log2() <= xmax;
        if floors_drawn {
            let fx = x(floor_from).max(LEFT);
            for (label, v) in &floors {
                let py = y(*v);
                let _ = writeln!(
                    s,
                    r##"<line data-floor="{}" x1="{fx:.1}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#777" stroke-width="1.5" stroke-dasharray="6 4"><title>{}</title></line>"##,
                    esc(label),
                    LEFT + pw,
                    esc(&format!(
                        "floor {label} (≥ {}): {v:.2} {}",
                        format_size(floor_from),
                        unit.label()
                    ))
                );
            }
        }

        if series.is_empty() && failed.is_empty() {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">no bandwidth case was measured</text>"#,
                LEFT + pw / 2.0,
                TOP + ph / 2.0
            );
        }
        let lx = LEFT + pw + 16.0;
        for (i, line) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let dash = DASHES[i % DASHES.len()];
            // Earlier series are drawn wider, so a later one on top of it leaves an edge visible.
            let width = (3.5 - 0.5 * i as f64).max(1.5);
            let points: Vec<String> = line
                .points
                .iter()
                .map(|(sz, v)| format!("{:.1},{:.1}", x(*sz), y(*v)))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline data-series="{}" points="{}" fill="none" stroke="{color}" stroke-width="{width}" stroke-dasharray="{dash}" stroke-opacity="0.85"/>"#,
                esc(&line.name),
                points.join(" ")
            );
            let paths: Vec<&str> = line.paths.iter().map(|p| p.as_str()).collect();
            let paths = if paths.is_empty() {
                "data path unknown".to_string()
            } else {
                paths.join(", ")
            };
            for (sz, v) in &line.points {
                let tip = format!(
                    "{} {}: {v:.2} {} over {paths}",
                    line.name,
                    format_size(*sz),
                    unit.label()
                );
                let _ = writeln!(s, "{}", marker(i, x(*sz), y(*v), color, Some(&tip)));
            }
            let ly = TOP + 14.0 + 32.0 * i as f64;
            let _ = writeln!(
                s,
                r##"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>{}<text x="{:.1}" y="{ly:.1}">{}</text><text data-path="{}" x="{:.1}" y="{:.1}" fill="#555" font-size="11">{}</text>"##,
                ly - 4.0,
                lx + 20.0,
                ly - 4.0,
                marker(i, lx + 10.0, ly - 4.0, color, None),
                lx + 26.0,
                esc(&line.name),
                esc(&paths),
                lx + 26.0,
                ly + 13.0,
                esc(&format!("over {paths}"))
            );
        }
        for f in &failed {
            let (fx, fy) = (x(f.size), f.value.map_or(TOP + ph, y));
            let _ = writeln!(
                s,
                r##"<path data-failed="1" d="M{:.1},{:.1} L{:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1}" stroke="#d00" stroke-width="2.5"><title>{}</title></path>"##,
                fx - 5.0,
                fy - 5.0,
                fx + 5.0,
                fy + 5.0,
                fx - 5.0,
                fy + 5.0,
                fx + 5.0,
                fy - 5.0,
                esc(&f.label)
            );
        }
        if !failed.is_empty() {
            let ly = TOP + 14.0 + 32.0 * series.len() as f64;
            let _ = writeln!(
                s,
                r##"<path d="M{:.1},{:.1} L{:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1}" stroke="#d00" stroke-width="2.5"/><text x="{:.1}" y="{ly:.1}">failed case ({})</text>"##,
                lx + 5.0,
                ly - 9.0,
                lx + 15.0,
                ly + 1.0,
                lx + 5.0,
                ly + 1.0,
                lx + 15.0,
                ly - 9.0,
                lx + 26.0,
                failed.len()
            );
        }
        if floors_drawn {
            // The floors are named in the legend, not on their lines, where a label would cover points.
            let first = TOP + 14.0 + 32.0 * (series.len() + usize::from(!failed.is_empty())) as f64;
            for (i, (label, v)) in floors.iter().enumerate() {
                let ly = first + 32.0 * i as f64;
                let _ = writeln!(
                    s,
                    r##"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#777" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{:.1}" y="{ly:.1}">floor {}: {v:.2} {}</text><text x="{:.1}" y="{:.1}" fill="#555" font-size="11">for messages ≥ {}</text>"##,
                    ly - 4.0,
                    lx + 20.0,
                    ly - 4.0,
                    lx + 26.0,
                    esc(label),
                    esc(unit.label()),
                    lx + 26.0,
                    ly + 13.0,
                    esc(&format_size(floor_from))
                );
            }
        }
        s.push_str("</svg>\n");
        Ok(s)
    }

    fn probe(&self, _: &ProbeReport) -> Result<String, ExportError> {
        Err(ExportError::Unsupported {
            format: "svg",
            what: "probe results (there is no bandwidth to plot)",
            instead: "-o table, json, junit or prometheus",
        })
    }

    fn sweep(&self, _: &icb_sweep::SweepResults) -> Result<String, ExportError> {
        Err(ExportError::Unsupported {
            format: "svg",
            what: "a sweep (one chart per pair would not say which node is bad)",
            instead: "--export-html FILE (heatmap, node table and per-pair plots), or -o table",
        })
    }
}
