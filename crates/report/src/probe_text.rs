//! A probe report for people: the summary paragraph, then each check that is not ok as a
//! diagnostic (header with status, id and where; what was seen and the fix at full width), then
//! the tables of what is tabular (recipes, serving figures, rails) and the counts. `-o wide`
//! keeps its table of every check at natural width.

use crate::diagnostic::{Diagnostic, push_diagnostic};
use crate::format::View;
use crate::paths::{common_dir, strip_dir};
use crate::table::new_table;
use crate::wrap::{keep_whole, push_wrapped};
use icb_core::checks::{Check, ProbeReport};
use icb_core::model::Status;
use std::fmt::Write as _;

/// Longest text of one field in a fitted view: a scope naming hundreds of files would otherwise
/// fill the screen (`-o wide` and `-o json` keep all of it).
const MAX_CELL_CHARS: usize = 200;

pub(crate) fn clip(text: &str, view: View) -> String {
    if view.wide || text.chars().count() <= MAX_CELL_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().take(MAX_CELL_CHARS).collect();
    // Cut at a space, so the last word shown is whole (a path cut mid-way reads as another path).
    let kept = kept.rfind(' ').map_or(kept.as_str(), |i| &kept[..i]);
    format!("{kept} … (-o wide shows all)")
}

/// Findings listed one by one up to this many; past it, one per check and fix.
const MAX_PROBE_ROWS: usize = 40;

/// The probe's summary: its verdict, the first failing (else warning) check with its fix, and
/// where the rest is.
fn probe_summary(r: &ProbeReport, view: View) -> String {
    let status = r.status.to_string().to_uppercase();
    // The failing checks, each id once, in order (the list the verdict's "fix first" names,
    // carried by the report, not read back from its text): said once here, with the first
    // one's fix below.
    let failing = r.fix_first();
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

/// The checks as they read in a fitted view: one diagnostic each, or past a screenful one per
/// check, status and fix (`N places, e.g. …`). Returns how many diagnostics it wrote.
fn push_findings(out: &mut String, shown: &[&Check], short: &dyn Fn(&str) -> String, view: View) -> usize {
    let width = usize::from(view.width);
    let mut said = 0;
    let mut say = |out: &mut String, c: &Check, place: Option<String>, seen: String| {
        let d = Diagnostic {
            status: c.status.as_str(),
            id: Some(&c.id),
            place: place.as_deref(),
            seen: &seen,
            fix: c.hint.as_deref().map(|h| ("fix", h)),
        };
        push_diagnostic(out, &d, width);
        out.push('\n');
        said += 1;
    };
    if shown.len() <= MAX_PROBE_ROWS {
        for c in shown {
            say(out, c, c.scope.as_deref().map(short), short(&c.detail));
        }
        return said;
    }
    // Many files (a directory of 1000 recipes) make thousands of the same few findings: one
    // per finding says where and how often.
    let mut groups: Vec<(&Check, Vec<&Check>)> = Vec::new();
    for c in shown {
        match groups
            .iter_mut()
            .find(|(g, _)| g.id == c.id && g.status == c.status && g.hint == c.hint)
        {
            Some((_, all)) => all.push(c),
            None => groups.push((c, vec![c])),
        }
    }
    groups.sort_by_key(|(g, _)| std::cmp::Reverse(g.status));
    for (first, all) in &groups {
        let scope = first.scope.as_deref().map(short).unwrap_or_else(|| "-".to_string());
        let (place, seen) = match all.len() {
            1 => (scope, short(&first.detail)),
            n => (
                format!("{n} places, e.g. {scope}"),
                format!("e.g. {}", short(&first.detail)),
            ),
        };
        say(out, first, Some(place), seen);
    }
    said
}

/// `-o wide`: every check a row of one table at natural width.
fn checks_table(shown: &[&Check], view: View) -> comfy_table::Table {
    let mut t = new_table(vec!["Check", "Status", "Scope", "Detail", "Hint"], view);
    // Check ids are names: kept whole (up to a point) rather than broken mid-word.
    let longest_id = shown.iter().map(|c| c.id.chars().count()).max().unwrap_or(5);
    keep_whole(&mut t, &[(0, (longest_id + 2).min(26) as u16), (1, 9)]);
    for c in shown {
        t.add_row(vec![
            c.id.clone(),
            c.status.to_string(),
            c.scope.clone().unwrap_or_else(|| "-".to_string()),
            c.detail.clone(),
            c.hint.clone().unwrap_or_default(),
        ]);
    }
    t
}

/// The whole probe report in the table formats.
pub(crate) fn render(r: &ProbeReport, view: View) -> String {
    let shown: Vec<&Check> = r
        .checks
        .iter()
        .filter(|c| view.wide || c.status != Status::Ok)
        .collect();
    // The directory every file path shares is said once, above the findings.
    let dir = if view.wide {
        None
    } else {
        // Scopes name the files; details also quote other paths (/dev/shm…), which
        // would make the shared directory "/".
        common_dir(shown.iter().filter_map(|c| c.scope.as_deref()))
    };
    let short = |s: &str| clip(&strip_dir(s, dir.as_deref()), view);
    let mut out = String::new();
    push_wrapped(&mut out, &strip_dir(&probe_summary(r, view), dir.as_deref()), view);
    out.push('\n');
    push_wrapped(&mut out, &format!("ic-bench probe {}: {}", r.kind, r.target), view);
    if let Some(d) = &dir {
        push_wrapped(&mut out, &format!("paths below are relative to {d}"), view);
    }
    if view.wide {
        if !shown.is_empty() {
            let _ = writeln!(out, "{}", checks_table(&shown, view));
        }
    } else if !shown.is_empty() {
        let mut findings = String::new();
        let said = push_findings(&mut findings, &shown, &short, view);
        if said < shown.len() {
            push_wrapped(
                &mut out,
                &format!(
                    "{} findings, said once per check and fix ({said} below; -o wide lists every one):",
                    shown.len()
                ),
                view,
            );
        }
        out.push('\n');
        out.push_str(&findings);
    }
    push_tables(&mut out, r, &short, view);
    push_ending(&mut out, r, view);
    out
}

/// What is tabular: serving figures, the recipes of a set, `-o wide`'s transport variables, the
/// rail map.
fn push_tables(out: &mut String, r: &ProbeReport, short: &dyn Fn(&str) -> String, view: View) {
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
                out,
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
}

/// The counts, the verdict and the next steps.
fn push_ending(out: &mut String, r: &ProbeReport, view: View) {
    let k = &r.counts;
    let mut counts = format!("{} ok, {} warn, {} fail, {} skipped", k.ok, k.warn, k.fail, k.skipped);
    if !view.wide && k.ok > 0 {
        let _ = write!(counts, " (ok checks not listed: -o wide lists all {})", r.checks.len());
    }
    push_wrapped(out, &counts, view);
    // A set of many recipes names every failing one in its verdict: -o wide/json keep it all.
    push_wrapped(out, &format!("verdict: {}: {}", r.status, clip(&r.verdict, view)), view);
    for s in &r.next_steps {
        push_wrapped(out, &format!("next: {s}"), view);
    }
}
