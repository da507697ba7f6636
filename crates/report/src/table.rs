//! The readable table: one row per case, units in the headers, then the findings and the verdict
//! with its fix hint. No colours, so it reads the same in a terminal, a log or a CI artifact.

use crate::format::{ExportError, Exporter};
use crate::labels::bw_value;
use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use icb_core::checks::ProbeReport;
use icb_core::classify::join_lanes;
use icb_core::model::{CaseResult, CaseStatus, EvidenceSource, Expectation, PairReport, Status, VerdictStatus};
use icb_core::units::format_size;
use std::fmt::Write as _;

/// `wide: true` (`-o wide`) adds the per-role transport variables of a `probe env` report.
pub struct TableExporter {
    pub wide: bool,
}

fn new_table(header: Vec<&str>) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .force_no_tty()
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
    t
}

fn data_path_cell(c: &CaseResult) -> String {
    let Some(t) = &c.transport else {
        return "-".to_string();
    };
    let p = &t.data_path;
    let lanes = join_lanes(&p.transports);
    match p.source {
        EvidenceSource::None => "unknown".to_string(),
        EvidenceSource::EndpointLanes => format!("{lanes} (lanes)"),
        EvidenceSource::RequestInfo if p.protocol.is_empty() => lanes,
        EvidenceSource::RequestInfo => format!("{}, {lanes}", p.protocol),
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
        "expected for {} ({}): host→host ≥ {}, cuda→cuda ≥ {}, host↔cuda ≥ {} for messages ≥ {}; tcp carrying data {}",
        e.locality,
        e.source,
        bw(e.min_host_bandwidth_bps),
        bw(e.min_cuda_bandwidth_bps),
        bw(mixed),
        format_size(e.min_size_for_bandwidth),
        if e.tcp_is_failure { "fails" } else { "warns" }
    )
}

impl Exporter for TableExporter {
    fn pair(&self, r: &PairReport) -> Result<String, ExportError> {
        let unit = r.settings.unit;
        let bw_header = format!("Bandwidth ({})", unit.label());
        let mut t = new_table(vec![
            "Test",
            "Memory",
            "Size",
            &bw_header,
            "Latency p50 / p99 (µs)",
            "Data path",
            "Verdict",
        ]);
        // Skipped cases that share a memory pair and a reason (e.g. every CUDA case without a
        // driver) read as one row: hundreds of identical rows would bury the measured ones.
        let mut skipped_groups: Vec<(icb_core::model::MemoryPair, String, Vec<&CaseResult>)> = Vec::new();
        for c in r.cases.iter().filter(|c| c.status == CaseStatus::Skipped) {
            let reason = c.reason.clone().unwrap_or_else(|| "-".to_string());
            match skipped_groups
                .iter_mut()
                .find(|(m, why, _)| *m == c.memory && *why == reason)
            {
                Some(g) => g.2.push(c),
                None => skipped_groups.push((c.memory, reason, vec![c])),
            }
        }
        for c in &r.cases {
            let group = skipped_groups
                .iter()
                .find(|(_, _, cases)| cases.iter().any(|g| std::ptr::eq(*g, c)));
            if let Some((memory, reason, cases)) = group.filter(|g| g.2.len() > 1) {
                if std::ptr::eq(cases[0], c) {
                    let mut tests: Vec<String> = Vec::new();
                    for name in cases.iter().map(|c| c.test.to_string()) {
                        if !tests.contains(&name) {
                            tests.push(name);
                        }
                    }
                    let sizes: std::collections::BTreeSet<u64> = cases.iter().map(|c| c.size).collect();
                    t.add_row(vec![
                        tests.join(","),
                        memory.to_string(),
                        match sizes.len() {
                            1 => format_size(cases[0].size),
                            n => format!("{n} sizes"),
                        },
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
            t.add_row(vec![
                c.test.to_string(),
                c.memory.to_string(),
                format_size(c.size),
                bw,
                lat,
                path,
                verdict_cell(c),
            ]);
        }
        for i in [2, 3, 4] {
            if let Some(col) = t.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }

        let mut out = String::new();
        let p = &r.placement;
        let _ = writeln!(
            out,
            "ic-bench pair: {} ({}), prefill {} → decode {}, UCX {} / {}",
            p.locality, p.mode, p.prefill.host, p.decode.host, r.client.ucx_version, r.server.ucx_version
        );
        let _ = writeln!(out, "{}", expectation_line(&r.expectation, unit));
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
                let _ = writeln!(out, "  {status} ×{n}: {reason}");
            }
        }
        for w in &r.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        let classes: Vec<&str> = r.verdict.data_paths.iter().map(|c| c.as_str()).collect();
        if !classes.is_empty() {
            let _ = writeln!(out, "data paths: {}", classes.join(", "));
        }
        let status = match r.verdict.status {
            VerdictStatus::Pass => "PASS",
            VerdictStatus::Warn => "WARN",
            VerdictStatus::Fail => "FAIL",
        };
        let _ = writeln!(out, "verdict: {status}: {}", r.verdict.reason);
        if let Some(h) = &r.verdict.hint {
            let _ = writeln!(out, "hint: {h}");
        }
        if r.cases.iter().all(|c| c.status != CaseStatus::Measured) && !r.cases.is_empty() {
            let _ = writeln!(
                out,
                "note: no case was measured; {} case(s) skipped or failed",
                r.cases.len()
            );
        }
        Ok(out)
    }

    fn probe(&self, r: &ProbeReport) -> Result<String, ExportError> {
        let mut t = new_table(vec!["Check", "Status", "Scope", "Detail", "Hint"]);
        for c in &r.checks {
            t.add_row(vec![
                c.id.clone(),
                c.status.to_string(),
                c.scope.clone().unwrap_or_else(|| "-".to_string()),
                c.detail.clone(),
                c.hint.clone().unwrap_or_default(),
            ]);
        }
        let mut out = String::new();
        let _ = writeln!(out, "ic-bench probe {}: {}", r.kind, r.target);
        let _ = writeln!(out, "{t}");
        if !r.recipes.is_empty() {
            let mut per = new_table(vec!["Recipe", "Status", "ok/warn/fail", "Verdict"]);
            for v in &r.recipes {
                per.add_row(vec![
                    v.recipe.clone(),
                    v.status.to_string(),
                    format!("{}/{}/{}", v.counts.ok, v.counts.warn, v.counts.fail),
                    v.verdict.clone(),
                ]);
            }
            let _ = writeln!(out, "{per}");
        }
        if self.wide && !r.transport_vars.is_empty() {
            let mut vars = new_table(vec!["Role", "Variable", "Value", "Source"]);
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
        let k = &r.counts;
        let _ = writeln!(
            out,
            "{} ok, {} warn, {} fail, {} skipped",
            k.ok, k.warn, k.fail, k.skipped
        );
        let _ = writeln!(out, "verdict: {}: {}", r.status, r.verdict);
        for s in &r.next_steps {
            let _ = writeln!(out, "next: {s}");
        }
        Ok(out)
    }
}
