//! `ic-bench history`'s answers: one [`Question`] in, the text to print out (pretty JSON, or the
//! table of [`render`]). The command line only reads its flags into a question.

use crate::query::{CompareRow, NodePoint};
use crate::{History, HistoryError, Thresholds, import::Imported, render};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `ic-bench history` is asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    /// `import FILE…`: load pair, gate and sweep JSON.
    Import(Vec<PathBuf>),
    /// `list`: the last runs, newest first.
    List { last: u32 },
    /// `show node/NAME`: one node's trend.
    ShowNode { node: String, last: u32 },
    /// `show pair A B`: one node pair's trend, case by case.
    ShowPair { prefill: String, decode: String, last: u32 },
    /// `compare RUN_A RUN_B`: two runs case by case.
    Compare {
        run_a: String,
        run_b: String,
        thresholds: Thresholds,
    },
}

/// How the answer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Json,
    /// A table; `width` fits the case label to the terminal (`None`: nothing cut).
    Table {
        width: Option<usize>,
    },
}

/// Why a question got no answer.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("history show: give node/NAME or pair A B")]
    Subject,
    #[error("history: give the database with --history FILE (or IC_BENCH_HISTORY)")]
    NoDatabase,
    /// Only `import` creates the database.
    #[error("--history {}: no such file (a run with --history FILE creates it)", .0.display())]
    NoSuchDatabase(PathBuf),
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl Question {
    /// `show`'s subject: `node/NAME` or `pair A B`.
    pub fn show(what: &[String], last: u32) -> Result<Question, AnswerError> {
        match what {
            [one] if one.starts_with("node/") && one.len() > 5 => Ok(Question::ShowNode {
                node: one[5..].to_string(),
                last,
            }),
            [kind, a, b] if kind == "pair" => Ok(Question::ShowPair {
                prefill: a.clone(),
                decode: b.clone(),
                last,
            }),
            _ => Err(AnswerError::Subject),
        }
    }
}

/// The database `ic-bench history` asks (`--history FILE`, waiting `deadline` for another run's
/// lock): one that is not there is created by `import` (`importing`) and refused otherwise.
pub fn open_asked(path: Option<&Path>, deadline: Duration, importing: bool) -> Result<History, AnswerError> {
    let path = path.ok_or(AnswerError::NoDatabase)?;
    if !importing && !path.exists() {
        return Err(AnswerError::NoSuchDatabase(path.to_path_buf()));
    }
    Ok(History::open(path, deadline)?)
}

/// The answer to `question`, as `style` writes it.
pub fn answer(h: &mut History, question: Question, style: Style) -> Result<String, AnswerError> {
    let width = match style {
        Style::Json => None,
        Style::Table { width } => width,
    };
    let json = style == Style::Json;
    Ok(match question {
        Question::Import(files) => {
            let done = h.import(&files)?;
            if json {
                to_json(&done)?
            } else {
                done.iter().map(import_line).collect()
            }
        }
        Question::List { last } => {
            let runs = h.runs(last)?;
            if json { to_json(&runs)? } else { render::runs(&runs) }
        }
        Question::ShowNode { node, last } => {
            let t: Vec<NodePoint> = h.node_trend(&node, last)?;
            if json { to_json(&t)? } else { render::node(&node, &t) }
        }
        Question::ShowPair { prefill, decode, last } => {
            let t = h.pair_trend(&prefill, &decode, last)?;
            if json {
                to_json(&t)?
            } else {
                render::pair(&prefill, &decode, &t, width)
            }
        }
        Question::Compare {
            run_a,
            run_b,
            thresholds,
        } => {
            let rows: Vec<CompareRow> = h.compare_runs(&run_a, &run_b, thresholds)?;
            if json {
                to_json(&rows)?
            } else {
                render::compare(&run_a, &run_b, &rows, width)
            }
        }
    })
}

fn to_json(v: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    Ok(serde_json::to_string_pretty(v)? + "\n")
}

/// One imported file, as `history import` says it.
fn import_line(d: &Imported) -> String {
    let replaced = if d.replaced { ", replaced" } else { "" };
    format!("{}: {} {} ({} figures{replaced})\n", d.file, d.kind, d.run_id, d.rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No `--history`, or one that is not there (outside `import`), is one line naming the
    /// fix; `import` creates it.
    #[test]
    fn only_import_creates_the_database_asked() {
        let deadline = Duration::from_secs(1);
        let e = open_asked(None, deadline, true).err().unwrap();
        assert!(matches!(e, AnswerError::NoDatabase), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.db");
        let e = open_asked(Some(&file), deadline, false).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "--history {}: no such file (a run with --history FILE creates it)",
                file.display()
            )
        );
        assert!(open_asked(Some(&file), deadline, true).is_ok());
        assert!(file.exists());
    }

    fn show(what: &[&str]) -> Result<Question, AnswerError> {
        Question::show(&what.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 7)
    }

    #[test]
    fn show_reads_a_node_or_a_pair_and_refuses_anything_else() {
        assert_eq!(
            show(&["node/a"]).unwrap(),
            Question::ShowNode {
                node: "a".into(),
                last: 7
            }
        );
        assert_eq!(
            show(&["pair", "a", "b"]).unwrap(),
            Question::ShowPair {
                prefill: "a".into(),
                decode: "b".into(),
                last: 7
            }
        );
        for bad in [&["node/"][..], &["a"], &["pair", "a"], &["pairs", "a", "b"]] {
            let e = show(bad).unwrap_err();
            assert!(matches!(e, AnswerError::Subject), "{bad:?}: {e}");
            assert_eq!(e.to_string(), "history show: give node/NAME or pair A B");
        }
    }

    #[test]
    fn an_import_line_says_what_was_replaced() {
        let d = Imported {
            file: "p.json".into(),
            kind: "pair",
            run_id: "r1".into(),
            rows: 3,
            replaced: true,
        };
        assert_eq!(import_line(&d), "p.json: pair r1 (3 figures, replaced)\n");
    }
}
