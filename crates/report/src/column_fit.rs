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
    /// Its longest part that reads as one (a data path's protocol, `rendezvous zero-copy read,`,
    /// or one lane): [`longest_part`], raised by the caller where it matters; else `word`.
    pub part: usize,
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
        part: word,
        body,
        whole: (longest_line(header) + PADDING).max(body),
    }
}

/// The longest `, `-separated part of `cells`, padding included: what a data path
/// (`rendezvous zero-copy read, cma/memory`) wraps between before it wraps inside a part.
pub(crate) fn longest_part<'a>(cells: impl IntoIterator<Item = &'a str>) -> usize {
    cells
        .into_iter()
        .flat_map(|c| c.split(", "))
        .map(|part| width(part) + 1)
        .max()
        .map_or(0, |w| w + PADDING)
}

/// Column widths (padding included) for `needs` in `room` columns (the reader's width less the
/// table's borders); column `free` is the long free text (the data path). Every column first
/// gets its longest word, so no word is ever split (when the words alone are wider than `room`,
/// the table is too); then its longest part; then its body lines whole, the column that needs
/// least more first, so a short column is never wrapped to widen a long one by a little; `free`
/// takes what is left after the bodies' and the headers' rounds and wraps on its words. Headers come last, the same way:
/// a header wraps (`Bandwidth` / `(GB/s)`) before a cell does.
pub(crate) fn share(needs: &[Need], room: usize, free: usize) -> Vec<usize> {
    let mut widths: Vec<usize> = needs.iter().map(|n| n.word).collect();
    let mut left = room.saturating_sub(widths.iter().sum());
    let targets: [fn(&Need) -> usize; 3] = [|n| n.part.max(n.word), |n| n.body, |n| n.whole];
    for (round, target) in targets.into_iter().enumerate() {
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
        // The rest goes to the free text, which wraps in fewer lines for every column it gets;
        // not after the parts' round: a part given in part still breaks, and the short
        // columns' lines would go without.
        if round > 0 && free < needs.len() {
            let more = short_of(&widths, free).min(left);
            widths[free] += more;
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

    fn need_of(word: usize, body: usize, whole: usize) -> Need {
        Need {
            word,
            part: word,
            body,
            whole,
        }
    }

    #[test]
    fn a_need_is_the_longest_word_line_and_header_padded() {
        let n = need("Bandwidth (GB/s)", ["0.610", "13.30"]);
        assert_eq!((n.word, n.part, n.body, n.whole), (11, 11, 11, 18));
        let n = need("Data path", ["rendezvous zero-copy, rc_mlx5/mlx5_0:1", "a\nbb"]);
        assert_eq!((n.word, n.part, n.body, n.whole), (18, 18, 40, 40));
        // A figure joined to its unit by a no-break space is one word.
        assert_eq!(need("Size", ["64\u{a0}MiB"]).word, 8);
        // A part keeps its comma: `rendezvous zero-copy,` is 21 columns.
        assert_eq!(longest_part(["rendezvous zero-copy, rc_mlx5/mlx5_0:1"]), 23);
    }

    #[test]
    fn content_comes_before_headers_and_short_columns_before_long_ones() {
        let (header_only, short, path) = (need_of(11, 11, 18), need_of(9, 14, 24), need_of(18, 50, 50));
        // Words 38, bodies 75, wholes 92: 60 columns make the short column whole and give the
        // path the rest; no header is kept on one line.
        assert_eq!(share(&[header_only, short, path], 60, 2), [11, 14, 35]);
        // Room for every body, then for the headers, the one that needs least more first; the
        // rest to the path, which is whole already, so the short column's header gets nothing.
        assert_eq!(share(&[header_only, short, path], 85, 2), [18, 14, 50]);
        // Not enough for the short column's whole line: the path gets the 3 columns instead.
        let (latency, lanes) = (need_of(9, 13, 13), need_of(12, 40, 40));
        assert_eq!(share(&[latency, lanes], 24, 1), [9, 15]);
        // A data path's parts before the short columns' lines: `rendezvous zero-copy read,` whole.
        let phrased = Need { part: 28, ..lanes };
        assert_eq!(share(&[latency, phrased], 40, 1), [9, 31]);
        assert_eq!(share(&[latency, phrased], 46, 1), [13, 33]);
        // A part that cannot be had whole is not had in part: the short column's line first.
        assert_eq!(share(&[latency, phrased], 35, 1), [13, 22]);
        // Words wider than the room: each keeps its word, the table is wider than the room.
        assert_eq!(share(&[header_only, short, path], 30, 2), [11, 9, 18]);
    }
}
