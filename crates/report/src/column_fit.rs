//! How a table's columns share the reader's width (issue 38): each gets what its content needs
//! before any header is kept on one line. comfy-table's own arrangement gave the columns whose
//! header was long (`Bandwidth (GB/s)`, `Latency p50 / p99 (µs)`) their whole header first, and
//! the data path, the column a reader came for, was left about 12 columns to wrap in.

use comfy_table::{ColumnConstraint, Table, Width};

/// Padding of a comfy-table cell: one space either side.
const PADDING: usize = 2;

/// What one column asks for, padding included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Need {
    /// Its longest word (header or body): narrower, a word would be split.
    pub word: usize,
    /// Its longest body line, each cell on one line.
    pub body: usize,
    /// Its body and its header each on one line.
    pub whole: usize,
}

fn width(text: &str) -> usize {
    text.chars().count()
}

/// The need of a column headed `header` holding `cells`. Words are what a cell wraps between:
/// split at spaces (not at the no-break spaces that join a figure to its unit) and line breaks.
pub(crate) fn need<'a>(header: &str, cells: impl IntoIterator<Item = &'a str>) -> Need {
    let longest_line = |text: &str| text.lines().map(width).max().unwrap_or(0);
    let longest_word = |text: &str| text.split([' ', '\n']).map(width).max().unwrap_or(0);
    let (mut word, mut body) = (longest_word(header), 0);
    for cell in cells {
        word = word.max(longest_word(cell));
        body = body.max(longest_line(cell));
    }
    let word = word + PADDING;
    let body = (body + PADDING).max(word);
    Need {
        word,
        body,
        whole: (longest_line(header) + PADDING).max(body),
    }
}

/// Column widths (padding included) for `needs` in `room` columns (the reader's width less the
/// table's borders). Every column first gets its longest word, so no word is ever split (when
/// the words alone are wider than `room`, the table is too); then its body lines whole, the
/// column that needs least more first, so a short column is never wrapped to widen a long one by
/// a little; the longest free text takes what is left and wraps on its words. Headers come last:
/// a header wraps (`Bandwidth` / `(GB/s)`) before a cell does.
pub(crate) fn share(needs: &[Need], room: usize) -> Vec<usize> {
    let mut widths: Vec<usize> = needs.iter().map(|n| n.word).collect();
    let mut left = room.saturating_sub(widths.iter().sum());
    let targets: [fn(&Need) -> usize; 2] = [|n| n.body, |n| n.whole];
    for target in targets {
        let short_of = |widths: &[usize], i: usize| target(&needs[i]).saturating_sub(widths[i]);
        let mut order: Vec<usize> = (0..needs.len()).collect();
        order.sort_by_key(|&i| short_of(&widths, i));
        for &i in &order {
            // A short column given part of what it lacks still wraps: the part is wasted there.
            if short_of(&widths, i) <= left {
                left -= short_of(&widths, i);
                widths[i] = target(&needs[i]);
            }
        }
        // The rest goes to the column furthest from whole, the long free text, which wraps in
        // fewer lines for every column it gets.
        if let Some(&i) = order.iter().rev().find(|&&i| short_of(&widths, i) > 0) {
            let more = short_of(&widths, i).min(left);
            widths[i] += more;
            left -= more;
        }
    }
    widths
}

/// Fixes `t`'s columns at `widths` (padding included), so comfy-table wraps each cell in it.
pub(crate) fn fix_widths(t: &mut Table, widths: &[usize]) {
    for (i, w) in widths.iter().enumerate() {
        if let Some(col) = t.column_mut(i) {
            let w = u16::try_from(*w).unwrap_or(u16::MAX);
            col.set_constraint(ColumnConstraint::Absolute(Width::Fixed(w)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_need_is_the_longest_word_line_and_header_padded() {
        let n = need("Bandwidth (GB/s)", ["0.610", "13.30"]);
        assert_eq!(
            n,
            Need {
                word: 11,
                body: 11,
                whole: 18
            }
        );
        let n = need("Data path", ["rendezvous zero-copy, rc_mlx5/mlx5_0:1", "a\nbb"]);
        assert_eq!(
            n,
            Need {
                word: 18,
                body: 40,
                whole: 40
            }
        );
        // A figure joined to its unit by a no-break space is one word.
        assert_eq!(need("Size", ["64\u{a0}MiB"]).word, 8);
    }

    #[test]
    fn content_comes_before_headers_and_short_columns_before_long_ones() {
        let header_only = Need {
            word: 11,
            body: 11,
            whole: 18,
        };
        let short = Need {
            word: 9,
            body: 14,
            whole: 24,
        };
        let path = Need {
            word: 18,
            body: 50,
            whole: 50,
        };
        // Words 38, bodies 75, wholes 92: 60 columns make the short column whole and give the
        // path the rest; no header is kept on one line.
        assert_eq!(share(&[header_only, short, path], 60), [11, 14, 35]);
        // Room for every body, then for the headers, the one that needs least more first.
        assert_eq!(share(&[header_only, short, path], 85), [18, 17, 50]);
        // Not enough for the short column's whole line: the path gets the 3 columns instead.
        let latency = Need {
            word: 9,
            body: 13,
            whole: 13,
        };
        let lanes = Need {
            word: 12,
            body: 40,
            whole: 40,
        };
        assert_eq!(share(&[latency, lanes], 24), [9, 15]);
        // Words wider than the room: each keeps its word, the table is wider than the room.
        assert_eq!(share(&[header_only, short, path], 30), [11, 9, 18]);
    }
}
