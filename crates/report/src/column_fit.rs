//! How a table's columns share the reader's width (issue 38): by what their content needs, not by
//! their headers. comfy-table's own arrangement gave the columns whose header was long
//! (`Bandwidth (GB/s)`, `Latency p50 / p99 (µs)`) their whole header first, and the data path,
//! the column a reader came for, was left about 12 columns to wrap in.

use comfy_table::{ColumnConstraint, Table, Width};

/// Padding of a comfy-table cell: one space either side.
const PADDING: usize = 2;

/// A table to fit, row 0 its header. Words are what a cell wraps between: split at spaces (not
/// at the no-break spaces that join a figure to its unit) and line breaks, as comfy-table splits
/// them.
pub(crate) struct Grid {
    /// Each column's longest word, padding included: narrower, a word would be split.
    words: Vec<usize>,
    /// For each cell, the narrowest width (padding included) at which it takes at most 1, 2, …
    /// lines (none: at no width, it has line breaks); as many entries as it takes lines at its
    /// column's word width.
    fits: Vec<Vec<Vec<Option<usize>>>>,
}

/// The lines `words` (one line's word widths) take in `width` columns (padding included),
/// wrapped the way comfy-table wraps: each word on the line while it fits.
fn wrapped(words: &[usize], width: usize) -> usize {
    let room = width.saturating_sub(PADDING);
    let (mut lines, mut used) = (1, None::<usize>);
    for &w in words {
        used = match used {
            Some(u) if u + 1 + w <= room => Some(u + 1 + w),
            Some(_) => {
                lines += 1;
                Some(w)
            }
            None => Some(w),
        };
    }
    lines
}

impl Grid {
    pub(crate) fn new(header: &[&str], rows: &[Vec<String>]) -> Grid {
        let cell = |text: &str| -> Vec<Vec<usize>> {
            text.split('\n')
                .map(|line| line.split(' ').map(|w| w.chars().count()).collect())
                .collect()
        };
        let mut cells = vec![header.iter().map(|h| cell(h)).collect::<Vec<_>>()];
        cells.extend(rows.iter().map(|row| row.iter().map(|c| cell(c)).collect()));
        let words: Vec<usize> = (0..header.len())
            .map(|i| {
                cells
                    .iter()
                    .flat_map(|row| row[i].iter().flatten())
                    .copied()
                    .max()
                    .unwrap_or(0)
                    + PADDING
            })
            .collect();
        let fits = cells
            .iter()
            .map(|row| row.iter().zip(&words).map(|(lines, &word)| fits(lines, word)).collect())
            .collect();
        Grid { words, fits }
    }

    /// Column `i`'s longest word, padding included.
    pub(crate) fn word(&self, i: usize) -> usize {
        self.words[i]
    }

    /// How many lines the cell at `row`, `column` takes in `width` columns (padding included).
    fn lines(&self, row: usize, column: usize, width: usize) -> usize {
        let fits = &self.fits[row][column];
        fits.iter()
            .position(|w| w.is_some_and(|w| w <= width))
            .map_or(fits.len(), |k| k + 1)
    }

    /// The table's height in lines at `widths`.
    fn height(&self, widths: &[usize]) -> usize {
        (0..self.fits.len())
            .map(|r| {
                (0..widths.len())
                    .map(|c| self.lines(r, c, widths[c]))
                    .max()
                    .unwrap_or(0)
            })
            .sum()
    }
}

/// The narrowest widths at which a cell of `lines` takes at most 1, 2, … lines, from its
/// column's `word` width up to its longest line.
fn fits(lines: &[Vec<usize>], word: usize) -> Vec<Option<usize>> {
    let at = |width: usize| lines.iter().map(|l| wrapped(l, width)).sum::<usize>();
    let longest = lines
        .iter()
        .map(|l| l.iter().sum::<usize>() + l.len().saturating_sub(1))
        .max()
        .unwrap_or(0);
    let mut fits: Vec<Option<usize>> = vec![None; at(word)];
    for width in word..=(longest + PADDING).max(word) {
        let n = at(width);
        for fit in fits.iter_mut().skip(n - 1).filter(|f| f.is_none()) {
            *fit = Some(width);
        }
    }
    fits
}

/// The longest `, `-separated part of `cells`, padding included: what a data path
/// (`rendezvous zero-copy read, cma/memory`) wraps between before it wraps inside a part.
pub(crate) fn longest_part<'a>(cells: impl IntoIterator<Item = &'a str>) -> usize {
    cells
        .into_iter()
        .flat_map(|c| c.split(", "))
        .map(|part| part.chars().count() + 1)
        .max()
        .map_or(0, |w| w + PADDING)
}

/// Column widths (padding included) for `grid` in `room` columns (the reader's width less the
/// table's borders). Every column first gets its longest word, so no word is ever split (when
/// the words alone are wider than `room`, the table is too). Column `free`, the long free text
/// (the data path), then gets `free_part` (its longest part, protocol or lane, whole) when that
/// fits. The rest goes, a step at a time, where it saves the table the most lines per column
/// spent: a step makes one row a line shorter (every cell of it that needs more gets it), so a
/// short latency cell made one line for 4 columns goes before a header, and a cell that wraps in
/// a row that is tall anyway costs nothing.
pub(crate) fn share(grid: &Grid, room: usize, free: usize, free_part: usize) -> Vec<usize> {
    let mut widths: Vec<usize> = grid.words.clone();
    let mut left = room.saturating_sub(widths.iter().sum());
    if let Some(w) = widths.get_mut(free) {
        // A part given in part still breaks: all of it or nothing.
        let more = free_part.saturating_sub(*w);
        if more <= left {
            *w += more;
            left -= more;
        }
    }
    while let Some(next) = best_step(grid, &widths, left) {
        left -= next.iter().sum::<usize>() - widths.iter().sum::<usize>();
        widths = next;
    }
    widths
}

/// The widths after the step that saves the most lines per column spent (of equal rate, the
/// cheaper) within `left` more columns, or none when no step saves a line.
fn best_step(grid: &Grid, widths: &[usize], left: usize) -> Option<Vec<usize>> {
    let height = grid.height(widths);
    let mut best: Option<(Vec<usize>, usize, usize)> = None;
    for (r, row) in grid.fits.iter().enumerate() {
        let tall = (0..widths.len())
            .map(|c| grid.lines(r, c, widths[c]))
            .max()
            .unwrap_or(1);
        for lines in 1..tall {
            // Every cell of row r in at most `lines` lines, if every cell can be.
            let next: Option<Vec<usize>> = row
                .iter()
                .zip(widths)
                .map(|(fits, &w)| match fits.get(lines - 1) {
                    Some(need) => need.map(|need| need.max(w)),
                    None => Some(w),
                })
                .collect();
            let Some(next) = next else { continue };
            let cost = next.iter().sum::<usize>() - widths.iter().sum::<usize>();
            let saved = height.saturating_sub(grid.height(&next));
            let better = best.as_ref().is_none_or(|(_, c, s)| saved * c > s * cost);
            if cost > 0 && cost <= left && saved > 0 && better {
                best = Some((next, cost, saved));
            }
        }
    }
    best.map(|(next, _, _)| next)
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

    fn grid(header: &[&str], rows: &[&[&str]]) -> Grid {
        let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| c.to_string()).collect()).collect();
        Grid::new(header, &rows)
    }

    #[test]
    fn words_lines_and_wrapping_are_counted_as_comfy_table_wraps() {
        let g = grid(
            &["Bandwidth (GB/s)", "Size"],
            &[&["0.610", "64\u{a0}MiB"], &["a\nbb", "8 B"]],
        );
        assert_eq!(g.word(0), 11);
        assert_eq!(
            g.fits[0][0],
            [Some(18), Some(11)],
            "one line from 18 columns, two from 11"
        );
        assert_eq!(g.fits[2][0], [None, Some(11)], "a line break: never one line");
        // A figure joined to its unit by a no-break space is one word.
        assert_eq!(g.word(1), 8);
        assert_eq!((g.lines(0, 0, 18), g.lines(0, 0, 17), g.lines(2, 0, 11)), (1, 2, 2));
        // A part keeps its comma: `rendezvous zero-copy,` is 21 columns.
        assert_eq!(longest_part(["rendezvous zero-copy, rc_mlx5/mlx5_0:1"]), 23);
    }

    #[test]
    fn the_width_goes_where_it_saves_the_most_lines() {
        let header = ["Latency p50 / p99 (µs)", "Data path"];
        let rows: &[&[&str]] = &[
            &["0.49 / 0.80", "eager short, sysv/memory"],
            &["-", "rendezvous zero-copy read, cma/memory"],
            &["-", "zero-copy, cma/memory"],
        ];
        let g = grid(&header, rows);
        // Words: `Latency` 9, `sysv/memory` 13. The path's longest part, `rendezvous zero-copy
        // read,`, is 28; then 4 columns make the latency one line, which the header would not.
        let part = longest_part(rows.iter().map(|r| r[1]));
        assert_eq!(part, 28);
        assert_eq!(share(&g, 41, 1, part), [13, 28]);
        // No room for the part whole: the latency's line first, the rest to the path's lines.
        assert_eq!(share(&g, 35, 1, part), [13, 22]);
        // Room for everything: every cell and the header on one line, and no wider.
        assert_eq!(share(&g, 100, 1, part), [24, 39]);
        // Words wider than the room: each keeps its word, the table is wider than the room.
        assert_eq!(share(&g, 10, 1, part), [9, 13]);
    }

    #[test]
    fn a_cell_in_a_row_tall_anyway_gets_nothing() {
        let rows: &[&[&str]] = &[&["tag_bw, put_bw, get_bw", "skipped ×8"], &["tag_lat", "ok"]];
        let g = grid(&["Test", "Verdict"], rows);
        // 3 more columns would make `skipped ×8` one line, in a row the test list keeps 3 tall.
        assert_eq!(share(&g, 9 + 9 + 3, 9, 0), [9, 9]);
    }
}
