//! The readable table: a one-paragraph summary first (verdict, the one thing to fix first, where
//! the evidence is), then one row per case, units in the headers, then the findings (each a
//! diagnostic: `fail[case]: …`) and the verdict with its fix hint. Fitted to the reader's width
//! ([`View`]): columns wrap, long lines wrap on whole words. A probe report is rendered by
//! `probe_text`, a gate's by `gate`. No colours, so it reads the same in a terminal, a log or CI.

use crate::column_fit;
use crate::diagnostic::{Diagnostic, push_diagnostic};
use crate::format::{ExportError, Exporter, View};
use crate::labels::bw_value;
use crate::verdict_text::{control_line, verdict_reason, verdict_word};
use crate::wrap::{break_long_lanes, glue_units, keep_whole, longest_token, push_wrapped};
use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use icb_core::checks::ProbeReport;
use icb_core::classify::join_lanes;
use icb_core::model::{CaseResult, CaseStatus, EvidenceSource, Expectation, PairReport, Status, VerdictStatus};
use icb_core::units::format_size;
use std::fmt::Write as _;

/// The reader's [`View`]; `view.wide` (`-o wide`) lists every row unfolded and adds the per-role
/// transport variables of a `probe env` report.
#[derive(Debug, Clone, Copy, Default)]
pub struct TableExporter {
    pub view: View,
}

pub(crate) fn new_table(header: Vec<&str>, view: View) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .force_no_tty()
        .set_header(header);
    if view.wide {
        t.set_content_arrangement(ContentArrangement::Disabled);
    } else {
        t.set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(view.width);
    }
    t
}

/// The paragraph a reader needs first: the verdict, the one thing to fix first, where the evidence is.
fn pair_summary(r: &PairReport) -> String {
    let measured = r.cases.iter().filter(|c| c.status == CaseStatus::Measured).count();
    let mut s = format!(
        "{}: {}.",
        verdict_word(r.verdict.status),
        verdict_reason(r).trim_end_matches('.')
    );
    if let Some(h) = &r.verdict.hint {
        let _ = write!(s, " Fix first: {}.", h.trim_end_matches('.'));
    }
    if let Some(b) = r.baseline.as_deref().filter(|b| b.regressed > 0) {
        let _ = write!(
            s,
            " Regressed: {} figure(s) worse than their baseline ({}), listed below.",
            b.regressed, b.source
        );
    }
    let _ = write!(
        s,
        " Evidence: {measured} of {} case(s) measured, one row each below with its data path{}; -o json keeps every value.",
        r.cases.len(),
        if r.verdict.status == VerdictStatus::Pass {
            ""
        } else {
            ", findings after the table"
        }
    );
    s
}

fn data_path_cell(c: &CaseResult) -> String {
    let Some(t) = &c.transport else {
        return "-".to_string();
    };
    let p = &t.data_path;
    let lanes = join_lanes(&p.transports);
    let cell = match p.source {
        EvidenceSource::None => "unknown".to_string(),
        EvidenceSource::EndpointLanes => format!("{lanes} (lanes)"),
        EvidenceSource::RequestInfo | EvidenceSource::ProtoInfo if p.protocol.is_empty() => lanes,
        EvidenceSource::RequestInfo | EvidenceSource::ProtoInfo => format!("{}, {lanes}", p.protocol),
    };
    // The two sides named different protocols: say whose the cell is and what the other said.
    match t.views_note() {
        Some(note) => format!("{cell} ({note})"),
        None => cell,
    }
}

fn verdict_cell(c: &CaseResult) -> String {
    match (&c.verdict, c.status) {
        (Some(v), _) => v.status.to_string(),
        (None, CaseStatus::Skipped) => "skipped".to_string(),
        (None, CaseStatus::Failed) => "failed".to_string(),
        (None, CaseStatus::Measured) => "-".to_string(),
    }
}

fn expectation_line(e: &Expectation, unit: icb_core::model::BandwidthUnit) -> String {
    let bw = |bps: f64| format!("{} {}", bw_value(bps, unit), unit.label());
    let mixed = e.min_mixed_bandwidth_bps.unwrap_or(e.min_cuda_bandwidth_bps);
    format!(
        "expected for {} ({}): host→host ≥ {}, cuda→cuda ≥ {}, host↔cuda ≥ {} for messages ≥ {} (≥ {} in flight); tcp carrying data {}",
        e.locality,
        e.source,
        bw(e.min_host_bandwidth_bps),
        bw(e.min_cuda_bandwidth_bps),
        bw(mixed),
        format_size(e.min_size_for_bandwidth),
        format_size(e.min_in_flight_for_bandwidth()),
        if e.tcp_is_failure { "fails" } else { "warns" }
    )
}

/// Distinct non-ok case findings, so a reason repeated over 20 sizes is read once: in a fitted
/// view each a diagnostic (`fail[case]: 3 cases, e.g. tag_bw 64 MiB host→host`, then the reason
/// at full width), in `-o wide` one line each.
/// What the two sides' RDMA readiness disagrees on, each with its fix; a side whose readiness
/// was not read is said, never taken as agreeing.
fn push_readiness(out: &mut String, r: &PairReport, view: View) {
    let Some(readiness) = r.readiness.as_deref() else {
        return;
    };
    for m in &readiness.mismatches {
        push_wrapped(out, &format!("readiness: {m}; fix: {}", m.field.fix()), view);
    }
    let unread = readiness.unread_sides();
    if !unread.is_empty() {
        let text = format!("readiness not compared: not read on {}", unread.join(" and "));
        push_wrapped(out, &text, view);
    }
}

fn push_case_findings(out: &mut String, r: &PairReport, view: View) {
    let mut findings: Vec<(Status, &str, Vec<&CaseResult>)> = Vec::new();
    for c in &r.cases {
        let Some(v) = c
            .verdict
            .as_ref()
            .filter(|v| !matches!(v.status, Status::Ok | Status::Skipped))
        else {
            continue;
        };
        match findings
            .iter_mut()
            .find(|(s, reason, _)| *s == v.status && *reason == v.reason)
        {
            Some(f) => f.2.push(c),
            None => findings.push((v.status, &v.reason, vec![c])),
        }
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.0));
    if findings.is_empty() {
        return;
    }
    let _ = writeln!(out, "findings:");
    for (status, reason, cases) in &findings {
        if view.wide {
            push_wrapped(out, &format!("  {status} ×{}: {reason}", cases.len()), view);
            continue;
        }
        let place = match cases.len() {
            1 => crate::text::case_head(cases[0]),
            n => format!("{n} cases, e.g. {}", crate::text::case_head(cases[0])),
        };
        let d = Diagnostic {
            status: status.as_str(),
            id: Some("case"),
            place: Some(&place),
            seen: reason,
            fix: None,
        };
        push_diagnostic(out, &d, usize::from(view.width));
    }
}

/// The verdict and its fix. Fitted, a diagnostic like the case findings above it
/// (`fail[verdict]: prefill A → decode B`, then the reason and `fix:` at full width, issue 38);
/// `-o wide` keeps its `verdict:` and `hint:` lines.
fn push_verdict(out: &mut String, r: &PairReport, view: View) {
    if view.wide {
        let status = verdict_word(r.verdict.status);
        push_wrapped(out, &format!("verdict: {status}: {}", verdict_reason(r)), view);
        if let Some(h) = &r.verdict.hint {
            push_wrapped(out, &format!("hint: {h}"), view);
        }
        return;
    }
    let p = &r.placement;
    let between = format!("prefill {} → decode {}", p.prefill.host, p.decode.host);
    let status = verdict_word(r.verdict.status).to_lowercase();
    let d = Diagnostic {
        status: &status,
        id: Some("verdict"),
        place: Some(&between),
        seen: verdict_reason(r),
        fix: r.verdict.hint.as_deref().map(|h| ("fix", h)),
    };
    push_diagnostic(out, &d, usize::from(view.width));
}

/// A latency in µs for the table: two decimals, none from 1 ms on (`123457`, not `123456.78`:
/// hundredths of a µs say nothing there, and the two digits more once pushed the table past an
/// 80-column terminal). JSON keeps every digit.
fn latency_figure(us: f64) -> String {
    if us >= 1000.0 {
        format!("{us:.0}")
    } else {
        format!("{us:.2}")
    }
}

/// Index of the data path column, the table's long free text.
const DATA_PATH: usize = 5;

/// Fits the case table to `width` columns: the width goes where the content needs it
/// ([`column_fit::share`]), so a data path (`rc_mlx5/mlx5_0:1`) is whole at 100 columns while the
/// headers wrap. When even the longest words do not fit (80 columns with an RDMA lane), a lane
/// of the data path breaks after its `/` (transport / device), never mid-name. `paths` are the
/// measured cases' data paths, whose parts (the protocol, each lane) are kept whole if they fit;
/// the skip reasons in that column are prose and wrap anywhere between words.
fn fit_columns(t: &mut Table, header: &[&str], mut rows: Vec<Vec<String>>, paths: &[String], width: u16) {
    // The table's borders: one left of each column and one at the end.
    let room = usize::from(width).saturating_sub(header.len() + 1);
    let grid = column_fit::Grid::new(header, &rows);
    let others: usize = (0..header.len())
        .filter(|&i| i != DATA_PATH)
        .map(|i| grid.word(i))
        .sum();
    let path_room = room.saturating_sub(others);
    let grid = if grid.word(DATA_PATH) > path_room {
        for row in &mut rows {
            row[DATA_PATH] = break_long_lanes(&row[DATA_PATH], path_room.saturating_sub(2));
        }
        column_fit::Grid::new(header, &rows)
    } else {
        grid
    };
    let part = column_fit::longest_part(paths.iter().map(String::as_str));
    column_fit::fix_widths(t, &column_fit::share(&grid, room, DATA_PATH, part));
    for row in rows {
        t.add_row(row);
    }
}

/// `-o wide` (no wrapping): the short columns padded to their old widths, as before issue 38.
fn keep_wide_columns(t: &mut Table, rows: Vec<Vec<String>>, r: &PairReport, view: View, nic: bool) {
    // The size column is as wide as its longest shape (`1024 × 16 KiB` for a NIXL batch).
    let size_width = r
        .cases
        .iter()
        .map(|c| c.shape().chars().count())
        .max()
        .unwrap_or(0)
        .clamp(6, 13) as u16
        + 2;
    let narrow = view.width < 100;
    let others: u16 = if narrow {
        9 + 11 + size_width.min(10) + 11 + 10 + 9
    } else {
        9 + 11 + size_width + 11 + 11 + 9
    };
    let room = view.width.saturating_sub(others + 8).max(12);
    let longest = longest_token(rows.iter().map(|row| row[DATA_PATH].as_str()));
    let path_width = (longest.clamp(10, 24) as u16 + 2).min(room);
    for mut row in rows {
        row[DATA_PATH] = break_long_lanes(&row[DATA_PATH], usize::from(path_width - 2));
        t.add_row(row);
    }
    let (size, latency) = if narrow {
        (size_width.min(10), 10)
    } else {
        (size_width, 11)
    };
    let mut widths = vec![
        (0, 9),
        (1, 11),
        (2, size),
        (3, 11),
        (4, latency),
        (5, path_width),
        (6, 9),
    ];
    if nic {
        // `-o wide` does not wrap: room for `not explained (part not read)`.
        widths.push((7, 31));
    }
    keep_whole(t, &widths);
}

impl TableExporter {
    /// One row per case (folded where skipped alike), the expectation, the findings.
    fn cases(&self, r: &PairReport) -> Result<String, ExportError> {
        let unit = r.settings.unit;
        let view = self.view;
        let bw_header = format!("Bandwidth ({})", unit.label());
        let mut header = vec![
            "Test",
            "Memory",
            "Size",
            bw_header.as_str(),
            "Latency p50 / p99 (µs)",
            "Data path",
            "Verdict",
        ];
        // The NIC counters' word per case, where any case read one (issue 40).
        let nic = crate::case_health::any_read(r);
        if nic {
            header.push("NIC");
        }
        let mut t = new_table(header.clone(), view);
        // Skipped cases that share a memory pair and a reason (e.g. every CUDA case without a
        // driver) read as one row: hundreds of identical rows would bury the measured ones.
        // Memory pairs skipped for the same reason fold too (cuda→host and cuda→cuda both lack
        // the prefill side's driver): identical rows but for the memory column.
        let mut skipped_groups: Vec<(Vec<icb_core::model::MemoryPair>, String, Vec<&CaseResult>)> = Vec::new();
        for c in r.cases.iter().filter(|c| c.status == CaseStatus::Skipped) {
            let reason = c.reason.clone().unwrap_or_else(|| "-".to_string());
            match skipped_groups.iter_mut().find(|(_, why, _)| *why == reason) {
                Some(g) => {
                    if !g.0.contains(&c.memory) {
                        g.0.push(c.memory);
                    }
                    g.2.push(c)
                }
                None => skipped_groups.push((vec![c.memory], reason, vec![c])),
            }
        }
        // A shape wider than its column (`64 × 16 KiB` in 80 columns) wraps between its tokens,
        // never between a figure and its unit; `-o wide` does not wrap.
        let size_cell = |shape: String| if view.wide { shape } else { glue_units(&shape) };
        let mut rows: Vec<Vec<String>> = Vec::new();
        for c in &r.cases {
            let group = skipped_groups
                .iter()
                .find(|(_, _, cases)| cases.iter().any(|g| std::ptr::eq(*g, c)));
            if let Some((memory, reason, cases)) = group.filter(|g| g.2.len() > 1) {
                if std::ptr::eq(cases[0], c) {
                    let mut tests: Vec<String> = Vec::new();
                    for name in cases.iter().map(|c| c.operation()) {
                        if !tests.contains(&name) {
                            tests.push(name);
                        }
                    }
                    let sizes: std::collections::BTreeSet<u64> = cases.iter().map(|c| c.size).collect();
                    let memory: Vec<String> = memory.iter().map(|m| m.to_string()).collect();
                    rows.push(vec![
                        tests.join(", "),
                        memory.join(", "),
                        size_cell(match sizes.len() {
                            1 => format_size(cases[0].size),
                            n => format!("{n} sizes"),
                        }),
                        "-".to_string(),
                        "-".to_string(),
                        reason.clone(),
                        format!("skipped ×{}", cases.len()),
                    ]);
                    if nic {
                        rows.last_mut().into_iter().for_each(|row| row.push("-".to_string()));
                    }
                }
                continue;
            }
            let m = c.measurement.as_ref();
            let bw = m
                .and_then(|m| m.bandwidth_bps)
                .map(|b| bw_value(b, unit))
                .unwrap_or_else(|| "-".to_string());
            let lat = m
                .and_then(|m| m.latency_us.as_ref())
                .map(|l| format!("{} / {}", latency_figure(l.p50), latency_figure(l.p99)))
                .unwrap_or_else(|| "-".to_string());
            let path = match c.status {
                CaseStatus::Measured => data_path_cell(c),
                _ => c.reason.clone().unwrap_or_else(|| "-".to_string()),
            };
            let mut row = vec![
                c.operation(),
                c.memory.to_string(),
                size_cell(c.shape()),
                bw,
                lat,
                path,
                crate::baseline::mark_cell(
                    verdict_cell(c),
                    r.baseline.as_deref(),
                    &icb_core::model::CaseKey::of_case(r, c),
                ),
            ];
            if nic {
                row.push(crate::case_health::cell(c));
            }
            rows.push(row);
        }
        if view.wide {
            keep_wide_columns(&mut t, rows, r, view, nic);
        } else {
            let paths: Vec<String> = r
                .cases
                .iter()
                .filter(|c| c.status == CaseStatus::Measured)
                .map(data_path_cell)
                .collect();
            fit_columns(&mut t, &header, rows, &paths, view.width);
        }

        for i in [2, 3, 4] {
            if let Some(col) = t.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
        let mut out = String::new();
        push_wrapped(&mut out, &pair_summary(r), view);
        out.push('\n');
        let p = &r.placement;
        let mut head = format!(
            "ic-bench pair: {} ({}), prefill {} → decode {}, UCX {} / {}",
            p.locality, p.mode, p.prefill.host, p.decode.host, r.client.ucx_version, r.server.ucx_version
        );
        if let Some(profile) = r.ucx_profile {
            head.push_str(&format!(", --ucx-profile {profile} (tag cases measured, not judged)"));
        }
        push_wrapped(&mut out, &head, view);
        push_wrapped(&mut out, &expectation_line(&r.expectation, unit), view);
        // The no-break spaces that kept a figure with its unit have done their work.
        let _ = writeln!(out, "{}", t.to_string().replace('\u{a0}', " "));

        push_case_findings(&mut out, r, view);
        crate::case_health::push_lines(&mut out, r, view);
        for w in &r.warnings {
            push_wrapped(&mut out, &format!("warning: {w}"), view);
        }
        push_readiness(&mut out, r, view);
        if let Some(b) = r.baseline.as_deref() {
            push_wrapped(&mut out, &crate::baseline::summary(b), view);
            for line in crate::baseline::lines(b, view.wide) {
                push_wrapped(&mut out, &line, view);
            }
        }
        for c in &r.controls {
            push_wrapped(&mut out, &control_line(c, unit), view);
        }
        let classes: Vec<&str> = r.verdict.data_paths.iter().map(|c| c.as_str()).collect();
        if !classes.is_empty() {
            push_wrapped(&mut out, &format!("data paths: {}", classes.join(", ")), view);
        }
        push_verdict(&mut out, r, view);
        if r.cases.iter().all(|c| c.status != CaseStatus::Measured) && !r.cases.is_empty() {
            push_wrapped(
                &mut out,
                &format!(
                    "note: no case was measured; {} case(s) skipped or failed",
                    r.cases.len()
                ),
                view,
            );
        }
        Ok(out)
    }
}

impl Exporter for TableExporter {
    fn pair(&self, r: &PairReport) -> Result<String, ExportError> {
        if let Some(rails) = &r.rails {
            let mut out = crate::rail_table::render(r, rails, self.view);
            if self.view.wide {
                out.push('\n');
                out.push_str(&self.cases(r)?);
            }
            return Ok(out);
        }
        let mut out = self.cases(r)?;
        if let Some(kv) = &r.kv {
            out.push('\n');
            out.push_str(&crate::kv_table::render(kv, r.settings.unit, self.view));
        }
        Ok(out)
    }

    fn probe(&self, r: &ProbeReport) -> Result<String, ExportError> {
        Ok(crate::probe_text::render(r, self.view))
    }

    fn sweep(&self, results: &icb_sweep::SweepResults) -> Result<String, ExportError> {
        Ok(crate::sweep::table::render(results, self.view))
    }
    fn gate(&self, report: &icb_core::model::GateReport) -> Result<String, ExportError> {
        Ok(crate::gate::table(report, self.view))
    }
}
