//! Bandwidth against message size as a standalone SVG: one polyline per (test, memory pair)
//! series, a log-2 size axis, the bandwidth floors as dashed lines, the verdict in the title.
//! Written by hand (no plotting dependency); every text node is XML-escaped.

use crate::format::{ExportError, Exporter};
use icb_core::checks::ProbeReport;
use icb_core::model::{CaseStatus, MemoryPair, PairReport, TestKind, VerdictStatus};
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

impl Exporter for SvgExporter {
    fn pair(&self, r: &PairReport) -> Result<String, ExportError> {
        let unit = r.settings.unit;
        let mut series: BTreeMap<(TestKind, MemoryPair), Vec<(u64, f64)>> = BTreeMap::new();
        for c in r
            .cases
            .iter()
            .filter(|c| c.status == CaseStatus::Measured && c.test.is_bandwidth())
        {
            if let Some(bps) = c.measurement.as_ref().and_then(|m| m.bandwidth_bps)
                && bps.is_finite()
                && bps >= 0.0
            {
                series
                    .entry((c.test, c.memory))
                    .or_default()
                    .push((c.size, unit.from_bytes_per_s(bps)));
            }
        }
        for pts in series.values_mut() {
            pts.sort_by_key(|p| p.0);
        }

        let mut floors: Vec<(String, f64)> = Vec::new();
        for m in series.keys().map(|k| k.1) {
            let v = unit.from_bytes_per_s(r.expectation.floor_for(m));
            if !floors.iter().any(|(_, f)| (*f - v).abs() < 1e-9) {
                floors.push((m.to_string(), v));
            }
        }

        let sizes: Vec<u64> = series.values().flatten().map(|p| p.0.max(1)).collect();
        let (xmin, xmax) = match (sizes.iter().min(), sizes.iter().max()) {
            (Some(a), Some(b)) => (
                (*a as f64).log2().floor(),
                (*b as f64).log2().ceil().max((*a as f64).log2() + 1.0),
            ),
            _ => (3.0, 26.0),
        };
        let peak = series
            .values()
            .flatten()
            .map(|p| p.1)
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
        let status = match r.verdict.status {
            VerdictStatus::Pass => "PASS",
            VerdictStatus::Warn => "WARN",
            VerdictStatus::Fail => "FAIL",
        };
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
        // At most ~8 labels, so sizes like "128 KiB" never overlap.
        let step = (((xmax - xmin) / 8.0).ceil() as i64).max(1);
        let mut e = xmin as i64;
        while e as f64 <= xmax {
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
            e += step;
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

        for (label, v) in &floors {
            let py = y(*v);
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#999" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" fill="#777" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT + pw - 4.0,
                py - 4.0,
                esc(&format!("floor {label}: {v:.2} {}", unit.label()))
            );
        }

        if series.is_empty() {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">no bandwidth case was measured</text>"#,
                LEFT + pw / 2.0,
                TOP + ph / 2.0
            );
        }
        for (i, ((test, memory), pts)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<String> = pts
                .iter()
                .map(|(sz, v)| format!("{:.1},{:.1}", x(*sz), y(*v)))
                .collect();
            let name = format!("{test} {memory}");
            let _ = writeln!(
                s,
                r#"<polyline data-series="{}" points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                esc(&name),
                points.join(" ")
            );
            for (sz, v) in pts {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"><title>{}</title></circle>"#,
                    x(*sz),
                    y(*v),
                    esc(&format!("{name} {}: {v:.2} {}", format_size(*sz), unit.label()))
                );
            }
            let ly = TOP + 14.0 + 18.0 * i as f64;
            let lx = LEFT + pw + 16.0;
            let _ = writeln!(
                s,
                r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
                ly - 4.0,
                lx + 20.0,
                ly - 4.0,
                lx + 26.0,
                esc(&name)
            );
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
}
