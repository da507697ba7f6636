//! The per-rail table of `pair --rails`: the verdict and the rail to fix first, one row per rail
//! (GPU, NIC name and PCI address, PCIe relation, data path, figure concurrently and alone, % of
//! the NIC's line rate, which NICs carried the bytes by their counters, what the NICs' error and
//! congestion counters say (`Health`), verdict), then the node
//! pair's aggregate and every finding with its fix. Fits 100 columns; `-o wide` adds every case.

use crate::column_fit;
use crate::format::View;
use crate::labels::bw_value;
use crate::table::new_table;
use crate::verdict_text::verdict_word;
use crate::wrap::{glue_units, push_wrapped};
use comfy_table::Table;
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

/// The NIC's name, and below it its PCI address when `pci` (the view has room for it).
fn nic_cell(row: &RailResult, pci_line: bool) -> String {
    let end = |e: &RailEnd| match &e.nic.pci {
        Some(pci) if pci_line => format!("{}\n{pci}", e.nic.name),
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

/// The layouts tried in turn, each whether it shows the NICs' PCI addresses and the columns it
/// leaves out: everything; without the PCI addresses; without the PCIe relation and the share of
/// the line rate too; without the alone figure too. The findings below the table still say each.
const LAYOUTS: [(bool, &[usize]); 4] = [
    (true, &[]),
    (false, &[]),
    (false, &[PCIE, LINE]),
    (false, &[PCIE, ALONE, LINE]),
];
const PCIE: usize = 3;
const DATA_PATH: usize = 4;
const ALONE: usize = 6;
const LINE: usize = 7;

/// One rail's cells in the full layout, a figure glued to its unit (`0.2 %` never wraps), the
/// NICs' PCI addresses below their names when `pci`.
fn row_cells(row: &RailResult, pattern: RailPattern, unit: BandwidthUnit, pci: bool) -> Vec<String> {
    let relation = [row.prefill.relation, row.decode.relation]
        .into_iter()
        .flatten()
        .max()
        .map_or_else(|| "-".to_string(), |x| x.to_string());
    [
        rail_cell(row, pattern),
        gpu_cell(row),
        nic_cell(row, pci),
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
    ]
    .iter()
    .map(|c| glue_units(c))
    .collect()
}

/// `cells` without the columns `left_out`.
fn without<S: AsRef<str>>(cells: &[S], left_out: &[usize]) -> Vec<String> {
    cells
        .iter()
        .enumerate()
        .filter(|(i, _)| !left_out.contains(i))
        .map(|(_, c)| c.as_ref().to_string())
        .collect()
}

/// The table as comfy-table arranges it (`-o wide`: unbounded).
fn arranged(header: &[&str], rows: Vec<Vec<String>>, view: View) -> Table {
    let mut t = new_table(header.to_vec(), view);
    for row in rows {
        t.add_row(row);
    }
    t
}

/// The full layout's `header` and `rows` without the columns `left_out`, their columns fitted to
/// the view ([`column_fit::share`]: each column its longest word, the data path its longest lane,
/// the rest where it saves the most lines), or none when the columns' longest words alone are
/// wider than the view.
fn fitted(header: &[&str], rows: &[Vec<String>], left_out: &[usize], view: View) -> Option<Table> {
    let header = without(header, left_out);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = rows.iter().map(|r| without(r, left_out)).collect();
    // The table's borders: one left of each column and one at the end.
    let room = usize::from(view.width).saturating_sub(header.len() + 1);
    let grid = column_fit::Grid::new(&header, &rows);
    if (0..header.len()).map(|i| grid.word(i)).sum::<usize>() > room {
        return None;
    }
    let path = DATA_PATH - left_out.iter().filter(|&&i| i < DATA_PATH).count();
    let part = column_fit::longest_part(rows.iter().map(|r| r[path].as_str()));
    let widths = column_fit::share(&grid, room, path, part);
    let mut t = arranged(&header, rows, view);
    column_fit::fix_widths(&mut t, &widths);
    Some(t)
}

/// The whole rails view of a pair report.
pub(crate) fn render(r: &PairReport, rails: &RailsOutcome, view: View) -> String {
    let unit = r.settings.unit;
    let mut out = String::new();
    push_wrapped(&mut out, &glue_units(&summary(r, rails)), view);
    let _ = writeln!(out);
    let bw = format!("{} all", unit.label());
    let header = [
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
    ];
    let rows = |pci: bool| -> Vec<Vec<String>> {
        rails
            .rails
            .iter()
            .map(|row| row_cells(row, rails.pattern, unit, pci))
            .collect()
    };
    let t = if view.wide {
        arranged(&header, rows(true), view)
    } else {
        // Every column first gets its longest word, so no word is ever split: the first layout
        // whose words fit the view (the PCI addresses only in the first).
        let (full, short) = (rows(true), rows(false));
        LAYOUTS
            .iter()
            .find_map(|&(pci, left_out)| fitted(&header, if pci { &full } else { &short }, left_out, view))
            // Not even the narrowest layout's words fit: comfy-table arranges it.
            .unwrap_or_else(|| {
                let (_, left_out) = LAYOUTS[LAYOUTS.len() - 1];
                let header = without(&header, left_out);
                let header: Vec<&str> = header.iter().map(String::as_str).collect();
                let rows = short.iter().map(|r| without(r, left_out)).collect();
                arranged(&header, rows, view)
            })
    };
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
