//! The readable table: a one-paragraph summary first (verdict, the one thing to fix first, where
//! the evidence is), then one row per case or check, units in the headers, then the findings and
//! the verdict with its fix hint. Fitted to the reader's width ([`View`]): columns wrap, long
//! lines wrap, the directory shared by file paths is said once, and ok probe checks collapse into
//! a count unless `-o wide`. No colours, so it reads the same in a terminal, a log or CI.

use crate::format::{ExportError, Exporter, View};
use crate::labels::bw_value;
use crate::paths::{common_dir, strip_dir};
use crate::verdict_text::{control_line, verdict_reason, verdict_word};
use crate::wrap::{break_long_lanes, glue_units, keep_whole, longest_token, push_wrapped};
use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use icb_core::checks::{Check, ProbeReport};
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

/// Longest cell text in a fitted table: a scope naming hundreds of files would otherwise fill
/// the screen (`-o wide` and `-o json` keep all of it).
const MAX_CELL_CHARS: usize = 200;

fn clip(text: &str, view: View) -> String {
    if view.wide || text.chars().count() <= MAX_CELL_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().take(MAX_CELL_CHARS).collect();
    format!("{kept}… (-o wide shows all)")
}

/// Probe rows listed one by one up to this many; past it, one row per check and fix.
const MAX_PROBE_ROWS: usize = 40;

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

/// The probe's summary: its verdict, the first failing (else warning) check with its fix, and
/// where the rest is.
fn probe_summary(r: &ProbeReport, view: View) -> String {
    let status = r.status.to_string().to_uppercase();
    // The failing checks, each id once, in order (what the verdict's "fix first" names): said
    // once here, with the first one's fix below. Read from the checks, not the verdict's text.
    let mut failing: Vec<&str> = Vec::new();
    for c in r.checks.iter().filter(|c| c.status == Status::Fail) {
        if !failing.contains(&c.id.as_str()) {
            failing.push(c.id.as_str());
        }
    }
    let mut s = match failing.len() {
        0 => format!("{status}: {}.", clip(&r.verdict, view)),
        1 => format!("{status}."),
        n => format!("{status}: {n} checks fail ({}).", failing.join(", ")),
    };
    let first = r
        .checks
        .iter()
        .find(|c| c.status == Status::Fail)
        .or_else(|| r.checks.iter().find(|c| c.status == Status::Warn));
    if let Some(c) = first {
        let scope = c
            .scope
            .as_deref()
            .map(|s| {
                // A workload merged from many files: its first file says where to look.
                let s = match s.find('+') {
                    Some(cut) if !view.wide => format!("{}+…)", &s[..cut]),
                    _ => s.to_string(),
                };
                format!(" ({s})")
            })
            .unwrap_or_default();
        let fix = c.hint.as_deref().unwrap_or(&c.detail);
        let _ = write!(s, " Fix first: {}{scope}: {}.", c.id, fix.trim_end_matches('.'));
    }
    let shown = if view.wide {
        r.checks.len()
    } else {
        r.checks.len() - r.counts.ok
    };
    let _ = write!(s, " Evidence: {shown} check(s) below");
    if !view.wide && r.counts.ok > 0 {
        let _ = write!(s, ", {} ok check(s) only counted (-o wide lists them)", r.counts.ok);
    }
    s.push_str("; -o json keeps every detail.");
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

impl TableExporter {
    /// One row per case (folded where skipped alike), the expectation, the findings.
    fn cases(&self, r: &PairReport) -> Result<String, ExportError> {
        let unit = r.settings.unit;
        let view = self.view;
        let bw_header = format!("Bandwidth ({})", unit.label());
        let mut t = new_table(
            vec![
                "Test",
                "Memory",
                "Size",
                &bw_header,
                "Latency p50 / p99 (µs)",
                "Data path",
                "Verdict",
            ],
            view,
        );
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
        // A shape wider than its column (`64 × 16 KiB` in 80 columns) wraps between its tokens,
        // never between a figure and its unit.
        let size_room = usize::from(if narrow { size_width.min(10) } else { size_width }) - 2;
        let size_cell = |shape: String| {
            if narrow && !view.wide && shape.chars().count() > size_room {
                glue_units(&shape)
            } else {
                shape
            }
        };
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
                .map(|l| format!("{:.2} / {:.2}", l.p50, l.p99))
                .unwrap_or_else(|| "-".to_string());
            let path = match c.status {
                CaseStatus::Measured => data_path_cell(c),
                _ => c.reason.clone().unwrap_or_else(|| "-".to_string()),
            };
            rows.push(vec![
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
            ]);
        }
        // In a narrow terminal the short columns keep their words whole; the data path and
        // the reasons, the long free text, take what is left and wrap.
        // The data path keeps room for its longest token (`rc_mlx5/mlx5_0:1,`), so a lane is
        // never split mid-name; a very long one (capped) still wraps.
        let others: u16 = if narrow {
            9 + 11 + size_width.min(10) + 11 + 10 + 9
        } else {
            9 + 11 + size_width + 11 + 11 + 9
        };
        // What the data path column can have: the view less the other columns and 8 borders.
        let room = view.width.saturating_sub(others + 8).max(12);
        let longest = longest_token(rows.iter().map(|row| row[5].as_str()));
        let path_width = (longest.clamp(10, 24) as u16 + 2).min(room);
        for mut row in rows {
            row[5] = break_long_lanes(&row[5], usize::from(path_width - 2));
            t.add_row(row);
        }
        if narrow {
            // 80 columns: every short column at its narrowest, a long shape wraps between its
            // tokens (`64 ×` / `16 KiB`).
            keep_whole(
                &mut t,
                &[
                    (0, 9),
                    (1, 11),
                    (2, size_width.min(10)),
                    (3, 11),
                    (4, 10),
                    (5, path_width),
                    (6, 9),
                ],
            );
        } else {
            keep_whole(
                &mut t,
                &[
                    (0, 9),
                    (1, 11),
                    (2, size_width),
                    (3, 11),
                    (4, 11),
                    (5, path_width),
                    (6, 9),
                ],
            );
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
        let _ = writeln!(out, "{t}");

        // Distinct non-ok findings, so a reason repeated over 20 sizes is read once.
        let mut findings: Vec<(Status, String, usize)> = Vec::new();
        for v in r.cases.iter().filter_map(|c| c.verdict.as_ref()) {
            if matches!(v.status, Status::Ok | Status::Skipped) {
                continue;
            }
            match findings
                .iter_mut()
                .find(|(s, reason, _)| *s == v.status && *reason == v.reason)
            {
                Some(f) => f.2 += 1,
                None => findings.push((v.status, v.reason.clone(), 1)),
            }
        }
        findings.sort_by_key(|f| std::cmp::Reverse(f.0));
        if !findings.is_empty() {
            let _ = writeln!(out, "findings:");
            for (status, reason, n) in &findings {
                push_wrapped(&mut out, &format!("  {status} ×{n}: {reason}"), view);
            }
        }
        for w in &r.warnings {
            push_wrapped(&mut out, &format!("warning: {w}"), view);
        }
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
        let status = verdict_word(r.verdict.status);
        push_wrapped(&mut out, &format!("verdict: {status}: {}", verdict_reason(r)), view);
        if let Some(h) = &r.verdict.hint {
            push_wrapped(&mut out, &format!("hint: {h}"), view);
        }
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
        let view = self.view;
        let shown: Vec<_> = r
            .checks
            .iter()
            .filter(|c| view.wide || c.status != Status::Ok)
            .collect();
        // The directory every file path shares is said once, above the table.
        let dir = if view.wide {
            None
        } else {
            // Scopes name the files; details also quote other paths (/dev/shm…), which
            // would make the shared directory "/".
            common_dir(shown.iter().filter_map(|c| c.scope.as_deref()))
        };
        let short = |s: &str| clip(&strip_dir(s, dir.as_deref()), view);
        let mut t = new_table(vec!["Check", "Status", "Scope", "Detail", "Hint"], view);
        // Check ids are names: kept whole (up to a point) rather than broken mid-word.
        let longest_id = shown.iter().map(|c| c.id.chars().count()).max().unwrap_or(5);
        keep_whole(&mut t, &[(0, (longest_id + 2).min(26) as u16), (1, 9)]);
        // Many files (a directory of 1000 recipes) make thousands of rows of the same few
        // findings: past a screenful, one row per finding says where and how often.
        let grouped = !view.wide && shown.len() > MAX_PROBE_ROWS;
        if grouped {
            let mut groups: Vec<(&str, Status, Option<&str>, Vec<&Check>)> = Vec::new();
            for c in &shown {
                match groups
                    .iter_mut()
                    .find(|g| g.0 == c.id && g.1 == c.status && g.2 == c.hint.as_deref())
                {
                    Some(g) => g.3.push(c),
                    None => groups.push((&c.id, c.status, c.hint.as_deref(), vec![c])),
                }
            }
            groups.sort_by_key(|g| std::cmp::Reverse(g.1));
            for (id, status, hint, checks) in &groups {
                let first = checks[0];
                let scope = first.scope.as_deref().map(short).unwrap_or_else(|| "-".to_string());
                let (scope, detail) = match checks.len() {
                    1 => (scope, short(&first.detail)),
                    n => (
                        format!("{n} places, e.g. {scope}"),
                        format!("e.g. {}", short(&first.detail)),
                    ),
                };
                t.add_row(vec![
                    id.to_string(),
                    status.to_string(),
                    scope,
                    detail,
                    hint.unwrap_or_default().to_string(),
                ]);
            }
        } else {
            for c in &shown {
                t.add_row(vec![
                    c.id.clone(),
                    c.status.to_string(),
                    c.scope.as_deref().map(short).unwrap_or_else(|| "-".to_string()),
                    short(&c.detail),
                    c.hint.clone().unwrap_or_default(),
                ]);
            }
        }
        let mut out = String::new();
        push_wrapped(&mut out, &strip_dir(&probe_summary(r, view), dir.as_deref()), view);
        out.push('\n');
        push_wrapped(&mut out, &format!("ic-bench probe {}: {}", r.kind, r.target), view);
        if let Some(d) = &dir {
            push_wrapped(&mut out, &format!("paths below are relative to {d}"), view);
        }
        if grouped {
            push_wrapped(
                &mut out,
                &format!(
                    "{} findings in {} rows, one per check and fix (-o wide lists every one):",
                    shown.len(),
                    t.row_count()
                ),
                view,
            );
        }
        if !shown.is_empty() {
            let _ = writeln!(out, "{t}");
        }
        if let Some(serving) = &r.serving {
            out.push_str(&crate::serving_table::render(serving, view));
        }
        if !r.recipes.is_empty() {
            // Past a screenful of recipes, the fitted table lists the ones that are not ok.
            let listed: Vec<_> = r
                .recipes
                .iter()
                .filter(|v| view.wide || r.recipes.len() <= MAX_PROBE_ROWS || v.status != Status::Ok)
                .collect();
            let mut per = new_table(vec!["Recipe", "Status", "ok/warn/fail", "Verdict"], view);
            for v in listed.iter().take(if view.wide { usize::MAX } else { MAX_PROBE_ROWS }) {
                per.add_row(vec![
                    short(&v.recipe),
                    v.status.to_string(),
                    format!("{}/{}/{}", v.counts.ok, v.counts.warn, v.counts.fail),
                    v.verdict.clone(),
                ]);
            }
            let _ = writeln!(out, "{per}");
            let unlisted = r.recipes.len() - per.row_count();
            if unlisted > 0 {
                push_wrapped(
                    &mut out,
                    &format!(
                        "{} recipes, {} not ok; {unlisted} not listed (-o wide lists every recipe)",
                        r.recipes.len(),
                        r.recipes.iter().filter(|v| v.status != Status::Ok).count()
                    ),
                    view,
                );
            }
        }
        if view.wide && !r.transport_vars.is_empty() {
            let mut vars = new_table(vec!["Role", "Variable", "Value", "Source"], view);
            for role in &r.transport_vars {
                if role.vars.is_empty() {
                    vars.add_row(vec![role.scope.clone(), "-".into(), "(none set)".into(), String::new()]);
                }
                for v in &role.vars {
                    vars.add_row(vec![
                        role.scope.clone(),
                        v.name.clone(),
                        v.value.clone(),
                        v.source.clone(),
                    ]);
                }
            }
            let _ = writeln!(out, "{vars}");
        }
        if let Some(map) = &r.rail_map {
            out.push_str(&crate::rails::render(map, view));
        }
        let k = &r.counts;
        let mut counts = format!("{} ok, {} warn, {} fail, {} skipped", k.ok, k.warn, k.fail, k.skipped);
        if !view.wide && k.ok > 0 {
            let _ = write!(counts, " (ok checks not listed: -o wide lists all {})", r.checks.len());
        }
        push_wrapped(&mut out, &counts, view);
        // A set of many recipes names every failing one in its verdict: -o wide/json keep it all.
        push_wrapped(
            &mut out,
            &format!("verdict: {}: {}", r.status, clip(&r.verdict, view)),
            view,
        );
        for s in &r.next_steps {
            push_wrapped(&mut out, &format!("next: {s}"), view);
        }
        Ok(out)
    }

    fn sweep(&self, results: &icb_sweep::SweepResults) -> Result<String, ExportError> {
        Ok(crate::sweep::table::render(results, self.view))
    }
    fn gate(&self, report: &icb_core::model::GateReport) -> Result<String, ExportError> {
        Ok(crate::gate::table(report, self.view))
    }
}
