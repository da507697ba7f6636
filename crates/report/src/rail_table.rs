//! The per-rail table of `pair --rails`: the verdict and the rail to fix first, one row per rail
//! (GPU, NIC name and PCI address, PCIe relation, data path, figure concurrently and alone, % of
//! the NIC's line rate, which NICs carried the bytes by their counters, what the NICs' error and
//! congestion counters say (`Health`), verdict), then the node
//! pair's aggregate and every finding with its fix. Fits 100 columns; `-o wide` adds every case.

use crate::format::View;
use crate::labels::bw_value;
use crate::table::new_table;
use crate::verdict_text::verdict_word;
use crate::wrap::{glue_units, keep_whole, push_wrapped};
use icb_core::model::{BandwidthUnit, PairReport, Status};
use icb_core::rails::{AttributionStatus, RailEnd, RailPattern, RailResult, RailsOutcome, SideAttribution};
use icb_core::units::format_bandwidth;
use std::fmt::Write as _;

fn summary(r: &PairReport, rails: &RailsOutcome) -> String {
    let mut s = format!(
        "{}: {}.",
        verdict_word(r.verdict.status),
        r.verdict.reason.trim_end_matches('.')
    );
    if let Some(h) = &r.verdict.hint {
        let _ = write!(s, " Fix first: {}.", h.trim_end_matches('.'));
    }
    let alone = rails.rails.iter().filter(|x| x.alone.is_some()).count();
    let _ = write!(
        s,
        " Evidence: {} rail pairs ({}) run at once{}, bytes attributed from the NICs' own counters; -o wide adds every case, -o json keeps every value.",
        rails.rails.len(),
        rails.pattern.as_str(),
        match alone {
            0 => String::new(),
            n => format!(", {n} again alone"),
        }
    );
    s
}

/// The NIC's name, and below it its PCI address where the view has room (100 columns).
fn nic_cell(row: &RailResult, view: View) -> String {
    let roomy = view.wide || view.width >= 100;
    let end = |e: &RailEnd| match &e.nic.pci {
        Some(pci) if roomy => format!("{}\n{pci}", e.nic.name),
        _ => e.nic.name.clone(),
    };
    let (p, d) = (end(&row.prefill), end(&row.decode));
    if p == d { p } else { format!("{p}\n↔ {d}") }
}

fn gpu_cell(row: &RailResult) -> String {
    let g = |e: &RailEnd| {
        e.gpu
            .as_ref()
            .map_or_else(|| "-".to_string(), |g| g.ordinal.to_string())
    };
    let (p, d) = (g(&row.prefill), g(&row.decode));
    if p == d { p } else { format!("{p}↔{d}") }
}

fn rail_cell(row: &RailResult, pattern: RailPattern) -> String {
    match pattern {
        RailPattern::Aligned => row.index.to_string(),
        RailPattern::Cross => format!("{}→{}", row.prefill.rail, row.decode.rail),
    }
}

/// `own 103 %` (the rail's own NIC), `rail2 97 %` for another device that carried a share,
/// `not attributed` when the counters could not tell.
fn evidence(side: &SideAttribution, own: &str) -> String {
    if side.status == AttributionStatus::NotAttributed {
        return "not attributed".into();
    }
    side.devices
        .iter()
        .filter(|d| d.share >= 0.05 || d.device == own)
        .take(2)
        .map(|d| {
            let name = if d.device == own { "own" } else { d.device.as_str() };
            format!("{name} {:.0} %", 100.0 * d.share)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn bytes_cell(row: &RailResult) -> String {
    match &row.attribution {
        None => "-".into(),
        Some(a) => {
            let p = evidence(&a.prefill, &row.prefill.counter_device);
            let d = evidence(&a.decode, &row.decode.counter_device);
            let tag = match a.phase {
                icb_core::rails::Phase::Alone => " (alone)",
                icb_core::rails::Phase::Concurrent => "",
            };
            if p == d {
                format!("{p}{tag}")
            } else {
                format!("P {p}\nD {d}{tag}")
            }
        }
    }
}

/// The transports that carried the bytes, the device named only where it is not what the
/// rail's ranks were told (`tcp` on the rail's own device, `tcp/eth0` elsewhere).
fn path_cell(row: &RailResult) -> Option<String> {
    let path = row.concurrent.data_path.as_ref()?;
    let told = [&row.prefill.ucx_net_devices, &row.decode.ucx_net_devices];
    let lanes: Vec<&str> = path
        .split(',')
        .map(|lane| match lane.split_once('/') {
            Some((t, dev)) if told.iter().any(|d| *d == dev) => t,
            _ => lane,
        })
        .collect();
    let mut lanes = lanes;
    lanes.dedup();
    Some(lanes.join(","))
}

/// `88 %`, `0.2 %` below one percent (a throttled rail must not read "0 %").
fn line_share(share: f64) -> String {
    if share < 0.01 {
        format!("{:.1} %", 100.0 * share)
    } else {
        format!("{:.0} %", 100.0 * share)
    }
}

fn figure(bps: Option<f64>, unit: BandwidthUnit) -> String {
    bps.map_or_else(|| "-".to_string(), |b| bw_value(b, unit))
}

/// The whole rails view of a pair report.
pub(crate) fn render(r: &PairReport, rails: &RailsOutcome, view: View) -> String {
    let unit = r.settings.unit;
    let mut out = String::new();
    push_wrapped(&mut out, &glue_units(&summary(r, rails)), view);
    let _ = writeln!(out);
    let bw = format!("{} all", unit.label());
    // Below 100 columns the PCIe relation and the share of the line rate give way (the
    // findings still say both; `-o wide` and 100 columns show them).
    let roomy = view.wide || view.width >= 100;
    let header: Vec<&str> = if roomy {
        vec![
            "Rail",
            "GPU",
            "NIC",
            "PCIe",
            "Data path",
            &bw,
            "Alone",
            "Line",
            "NIC counters",
            "Health",
            "Verdict",
        ]
    } else {
        vec![
            "Rail",
            "GPU",
            "NIC",
            "Data path",
            &bw,
            "Alone",
            "NIC counters",
            "Health",
            "Verdict",
        ]
    };
    let mut t = new_table(header, view);
    for row in &rails.rails {
        let relation = [row.prefill.relation, row.decode.relation]
            .into_iter()
            .flatten()
            .max()
            .map_or_else(|| "-".to_string(), |x| x.to_string());
        let mut cells = vec![
            rail_cell(row, rails.pattern),
            gpu_cell(row),
            nic_cell(row, view),
            relation,
            path_cell(row)
                .or_else(|| row.concurrent.error.as_ref().map(|_| "failed".to_string()))
                .unwrap_or_else(|| "-".into()),
            figure(row.concurrent.bandwidth_bps, unit),
            figure(row.alone.as_ref().and_then(|a| a.bandwidth_bps), unit),
            row.line_rate_share.map_or_else(|| "-".to_string(), line_share),
            bytes_cell(row),
            row.health.as_ref().map_or_else(|| "-".to_string(), |h| h.cell()),
            row.status.as_str().to_string(),
        ];
        if !roomy {
            cells.remove(7);
            cells.remove(3);
        }
        t.add_row(cells);
    }
    if roomy {
        keep_whole(&mut t, &[(0, 6), (2, 14), (5, 9), (6, 7), (7, 6), (9, 11), (10, 9)]);
    } else {
        keep_whole(&mut t, &[(0, 6), (2, 8), (4, 9), (5, 7), (7, 11), (8, 9)]);
    }
    let _ = writeln!(out, "{t}");
    let mut totals = format!(
        "aggregate {} over {} rails; median {}; a rail more than {:.0} % below the median fails",
        format_bandwidth(rails.aggregate_bps, unit),
        rails.rails.len(),
        format_bandwidth(rails.median_bps, unit),
        100.0 * rails.margin
    );
    if let (Some(sum), Some(scaling)) = (rails.sum_alone_bps, rails.scaling()) {
        let _ = write!(
            totals,
            "; aggregate ÷ Σ alone ({}) = {:.2}",
            format_bandwidth(sum, unit),
            scaling
        );
    }
    push_wrapped(&mut out, &glue_units(&totals), view);
    for f in &rails.findings {
        let word = match f.status {
            Status::Fail => "FAIL",
            Status::Warn => "WARN",
            Status::Ok | Status::Skipped => "ok",
        };
        let fix = f.fix.as_ref().map(|x| format!(" Fix: {x}.")).unwrap_or_default();
        let line = format!("{word} {}.{fix}", f.text.trim_end_matches('.'));
        push_wrapped(&mut out, &glue_units(&line), view);
    }
    out
}
