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
    let opts = textwrap::Options::new(usize::from(view.width.max(20)))
        .subsequent_indent("  ")
        .break_words(false)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    for line in textwrap::wrap(text, opts) {
        let _ = writeln!(out, "{line}");
    }
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
