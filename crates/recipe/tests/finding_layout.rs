//! Issue 38 item 5: `probe env` on real recipes, rendered for 80, 100 and 160 columns, reads like
//! a compiler's diagnostics: each finding a header (status, check id, where), then what was seen
//! and the fix at full width. No word, flag or file name is broken (the five-column table wrapped
//! them into 20-column cells mid-way), and no line is wider than the terminal but one whole
//! token that could not be broken. `-o wide` keeps its table of every check.

use icb_core::checks::{Check, ProbeReport};
use icb_core::model::Status;
use icb_recipe::{Input, probe_env};
use icb_report::{Format, View, render_probe_in};
use std::collections::HashSet;
use std::path::PathBuf;

/// Real recipes with long findings: sglang pods on TCP (four failures with file positions), a
/// Dynamo DGD on EFA with its zero-copy GET, a Dynamo recipe with an unresolved variable.
const RECIPES: [&str; 3] = [
    "fail/ucx-tls-tcp-only.yaml",
    "fail/efa-get-zcopy.yaml",
    "warn/env-unresolved.yaml",
];

fn probe(rel: &str) -> ProbeReport {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/recipes")
        .join(rel);
    probe_env(&[Input::Path(path)]).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The directory the output says once (`paths below are relative to DIR`), which every path
/// after it is written without.
fn said_once_dir(out: &str) -> Option<&str> {
    // The line may wrap before a long directory: the word after the phrase, wherever it is.
    let words: Vec<&str> = out.split_whitespace().collect();
    let at = words.windows(4).position(|w| w == ["below", "are", "relative", "to"])?;
    words.get(at + 4).copied()
}

/// Every whitespace-separated word of `text` (as the output writes it) is a whole token of `out`.
fn assert_words_whole(text: &str, dir: Option<&str>, tokens: &HashSet<&str>, out: &str) {
    let text = match dir {
        Some(d) => text.replace(d, ""),
        None => text.to_string(),
    };
    for word in text.split_whitespace() {
        assert!(tokens.contains(word), "{word:?} is broken or missing:\n{out}");
    }
}

fn assert_reads_as_diagnostics(rel: &str, report: &ProbeReport, findings: &[&Check], width: u16) {
    let out = render_probe_in(report, Format::Table, View { width, wide: false }).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    for line in &lines {
        let one_token = line.split_whitespace().count() == 1;
        assert!(
            line.chars().count() <= usize::from(width) || one_token,
            "{rel} at {width}: {line:?} is too wide:\n{out}"
        );
    }
    assert!(!out.contains('│'), "{rel} at {width}: findings in a table:\n{out}");
    let dir = said_once_dir(&out);
    // The words of the findings only: the summary paragraph above them repeats some.
    let start = lines.iter().position(|l| l.starts_with("ic-bench probe env")).unwrap();
    let end = lines
        .iter()
        .position(|l| l.contains(" ok, ") && l.contains(" warn, "))
        .unwrap();
    let tokens: HashSet<&str> = lines[start + 1..end]
        .iter()
        .flat_map(|l| l.split_whitespace())
        .collect();
    for c in findings {
        let head = format!("{}[{}]", c.status, c.id);
        let scope = c.scope.as_deref().map(|s| match dir {
            Some(d) => s.replace(d, ""),
            None => s.to_string(),
        });
        let first_word = scope.as_deref().and_then(|s| s.split_whitespace().next());
        let header = match first_word {
            Some(w) => format!("{head}: {w}"),
            None => head.clone(),
        };
        assert!(
            lines.iter().any(|l| l.starts_with(&header)),
            "{rel} at {width}: no header {header:?}:\n{out}"
        );
        for text in [Some(&c.detail), c.hint.as_ref(), c.scope.as_ref()]
            .into_iter()
            .flatten()
        {
            assert_words_whole(text, dir, &tokens, &out);
        }
        if let Some(hint) = &c.hint {
            let first = hint.split_whitespace().next().unwrap();
            assert!(
                lines.iter().any(|l| l.starts_with(&format!("  fix: {first}"))),
                "{rel} at {width}: no fix line for {}:\n{out}",
                c.id
            );
        }
    }
}

#[test]
fn probe_env_findings_read_like_diagnostics_without_a_broken_word() {
    for rel in RECIPES {
        let report = probe(rel);
        let findings: Vec<&Check> = report.checks.iter().filter(|c| c.status != Status::Ok).collect();
        assert!(!findings.is_empty(), "{rel} has findings");
        // Long enough that a 20-column cell had to break them.
        assert!(findings.iter().any(|c| c.detail.len() > 60), "{rel}");
        for width in [80u16, 100, 160] {
            assert_reads_as_diagnostics(rel, &report, &findings, width);
        }
        // `-o wide` keeps its table of every check, ok ones too, at natural width.
        let wide = render_probe_in(&report, Format::Wide, View::default()).unwrap();
        for c in &report.checks {
            assert!(
                wide.lines().any(|l| l.starts_with('│') && l.contains(&c.id)),
                "{rel}: {} not a row of -o wide:\n{wide}",
                c.id
            );
        }
        assert!(
            !wide.lines().any(|l| l.starts_with("fail[") || l.starts_with("warn[")),
            "{wide}"
        );
    }
}
