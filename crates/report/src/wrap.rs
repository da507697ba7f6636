//! Wrapping text for a reader's width on whole tokens: a flag, a pod name, a lane or a figure
//! with its unit is never split mid-way (issue 17); a token longer than its room overflows or,
//! for a lane, breaks after its `/`.

use crate::format::View;
use comfy_table::{ColumnConstraint, Table, Width};
use std::fmt::Write as _;

/// Gives columns `(index, width)` at least that many columns (padding included), so their
/// short words never break.
pub(crate) fn keep_whole(t: &mut Table, columns: &[(usize, u16)]) {
    for (i, width) in columns {
        if let Some(col) = t.column_mut(*i) {
            col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(*width)));
        }
    }
}

/// Appends `text` as one or more lines no wider than the view (continuations indented).
pub(crate) fn push_wrapped(out: &mut String, text: &str, view: View) {
    if view.wide {
        let _ = writeln!(out, "{text}");
        return;
    }
    // Whole tokens only: a flag (`--min-iterations`), a pod name or a number is never split at
    // a hyphen or mid-word; one longer than the line overflows it instead.
    for line in fill(text, usize::from(view.width), "", "  ") {
        let _ = writeln!(out, "{line}");
    }
}

/// Units that must stay on the line of their figure (`8.00 GB/s`, never `8.00` / `GB/s`).
const UNITS: [&str; 8] = [" GB/s", " MiB/s", " µs", " ms", " GiB", " MiB", " KiB", " B "];

/// `text` as lines no wider than `width` (`first` starts the first line, `rest` the others),
/// broken only at spaces: a word, a flag, a path or a check id is never split (not at a hyphen,
/// not at a `/`), and a figure stays with its unit. A token longer than the line gets a line of
/// its own, unbroken: a path cut in two could not be copied. No line is wider than `width` but
/// such a token's.
pub(crate) fn fill(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    // A no-break space joins a figure to its unit for the wrapping, and is a plain space again
    // in what is printed.
    let mut joined = text.to_string();
    for unit in UNITS {
        joined = joined.replace(unit, &unit.replacen(' ', "\u{a0}", 1));
    }
    let opts = textwrap::Options::new(width.max(20))
        .initial_indent(first)
        .subsequent_indent(rest)
        .break_words(false)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation)
        // First fit, not optimal fit: the optimal one lets a line run past the width to avoid
        // a short one, and the width is a terminal's edge.
        .wrap_algorithm(textwrap::WrapAlgorithm::FirstFit);
    textwrap::wrap(&joined, opts)
        .into_iter()
        .map(|line| line.replace('\u{a0}', " "))
        .collect()
}

/// A number and its unit (`16 KiB`, `3 sizes`, `24 %`) joined by a no-break space, so a narrow column
/// wraps between tokens, never between a figure and what it counts.
pub(crate) fn glue_units(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let between = i > 0
                && chars[i - 1].is_ascii_digit()
                && chars.get(i + 1).is_some_and(|n| n.is_alphabetic() || *n == '%');
            if c == ' ' && between { '\u{a0}' } else { c }
        })
        .collect()
}

/// A lane wider than `room` (`rc_mlx5/mlx5_0:1,` in a 12-column data path) breaks after its
/// `/` (transport / device) instead of mid-name.
pub(crate) fn break_long_lanes(cell: &str, room: usize) -> String {
    let words: Vec<String> = cell
        .split(' ')
        .map(|w| {
            if w.chars().count() > room && w.contains('/') {
                w.replacen('/', "/\n", 1)
            } else {
                w.to_string()
            }
        })
        .collect();
    words.join(" ")
}

/// The longest space-separated token in `cells`, in characters.
pub(crate) fn longest_token<'a>(cells: impl Iterator<Item = &'a str>) -> usize {
    cells
        .flat_map(|c| c.split_whitespace())
        .map(|w| w.chars().count())
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_breaks_only_at_spaces_and_keeps_figures_with_their_units() {
        let text = "UCX_TLS=tcp [spec.containers[engine].env (recipes/fail/ucx-tls-tcp-only.yaml:19)] lists \
                    no RDMA transport: 2.45 GB/s measured, expected-by-default ≥ 8.00 GB/s";
        for width in [20usize, 24, 31, 40, 80] {
            let lines = fill(text, width, "  ", "    ");
            let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
            assert_eq!(
                words,
                text.split_whitespace().collect::<Vec<_>>(),
                "{width}: {lines:#?}"
            );
            for line in &lines {
                let long_token = line.split_whitespace().count() == 1;
                assert!(line.chars().count() <= width || long_token, "{width}: {line:?}");
                assert!(!line.trim_start().starts_with("GB/s"), "{width}: {lines:#?}");
                assert!(!line.contains('\u{a0}'));
            }
            assert!(lines[0].starts_with("  U") && lines[1..].iter().all(|l| l.starts_with("    ")));
        }
    }

    #[test]
    fn a_token_longer_than_the_line_gets_a_line_of_its_own_unbroken() {
        // A long path after a short head: the head is not stretched past the width to keep it.
        let head = "ic-bench probe env: /work/t/crates/recipe/../../tests/fixtures/recipes/fail/ucx-tls-tcp-only.yaml";
        let lines = fill(head, head.len() - 2, "", "  ");
        assert_eq!(lines[0], "ic-bench probe env:", "{lines:#?}");
        let path = "/srv/recipes/team-a/very-long-directory-name/deploy.yaml";
        let lines = fill(&format!("see {path} for it"), 30, "", "  ");
        assert_eq!(
            lines,
            vec!["see".to_string(), format!("  {path}"), "  for it".to_string()]
        );
    }
}
