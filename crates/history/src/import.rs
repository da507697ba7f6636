//! `ic-bench history import FILE…`: pair, gate and sweep JSON files into the history, told apart
//! by their `schema` field.

use crate::record::{RunKind, RunRecord, gate_record, pair_record, sweep_record};
use crate::{History, HistoryError};
use icb_core::model::{GATE_SCHEMA, GateReport, PAIR_SCHEMA, PairReport};
use icb_sweep::results::{SWEEP_SCHEMA, SweepResults};
use std::path::Path;

/// The run a results file holds.
pub fn read_run(path: &Path) -> Result<RunRecord, HistoryError> {
    let bad = |why: String| HistoryError::Import {
        path: path.to_path_buf(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => bad("not a JSON results file (not text)".into()),
        _ => bad(e.to_string()),
    })?;
    run_from_text(path, &text)
}

/// The run the text of a results file read from `path` (named in the errors) holds: what
/// [`read_run`] does after reading, public for the fuzz target `history_import`.
pub fn run_from_text(path: &Path, text: &str) -> Result<RunRecord, HistoryError> {
    let bad = |why: String| HistoryError::Import {
        path: path.to_path_buf(),
        why,
    };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not a JSON results file ({})", quote(e))))?;
    let schema = value
        .get("schema")
        .and_then(|s| s.as_str())
        .unwrap_or_default()
        .to_string();
    let parse_err = |e: serde_json::Error| bad(format!("not an {} file ({})", quote(&schema), quote(e)));
    match schema.as_str() {
        PAIR_SCHEMA => Ok(pair_record(
            &serde_json::from_value::<PairReport>(value).map_err(parse_err)?,
            RunKind::Pair,
        )),
        SWEEP_SCHEMA => Ok(sweep_record(
            &serde_json::from_value::<SweepResults>(value).map_err(parse_err)?,
        )),
        GATE_SCHEMA => {
            let gate = serde_json::from_value::<GateReport>(value).map_err(parse_err)?;
            gate_record(&gate).ok_or_else(|| bad("a gate report whose pair never ran: nothing to import".into()))
        }
        other => Err(bad(format!(
            "schema '{}' is not one ic-bench imports: {PAIR_SCHEMA}, {SWEEP_SCHEMA} or {GATE_SCHEMA}",
            quote(other)
        ))),
    }
}

/// What the file says, quoted in one error line (escaped, bounded: the file is outside input).
fn quote(text: impl std::fmt::Display) -> String {
    icb_core::error_line::quote_outside(&text.to_string())
}

/// What one file added.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Imported {
    pub file: String,
    pub run_id: String,
    pub kind: &'static str,
    pub rows: usize,
    pub replaced: bool,
}

impl History {
    /// Imports every file (each in its own transaction), stopping at the first bad one.
    pub fn import(&mut self, files: &[impl AsRef<Path>]) -> Result<Vec<Imported>, HistoryError> {
        files
            .iter()
            .map(|f| {
                let f = f.as_ref();
                let run = read_run(f)?;
                let w = self.record(&run, Some(&f.display().to_string()))?;
                Ok(Imported {
                    file: f.display().to_string(),
                    run_id: run.run_id,
                    kind: run.kind.as_str(),
                    rows: w.rows,
                    replaced: w.replaced,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An imported file is outside input: what an error quotes from it (its schema, serde's
    /// message about a bad value) stays on one bounded line.
    #[test]
    fn errors_quote_the_file_on_one_line() {
        let p = Path::new("f.json");
        let long = "x".repeat(20_000);
        for text in [
            r#"{"schema":"ic-bench.pair/v9\n\u001b[2J"}"#.to_string(),
            format!(r#"{{"schema":"{long}"}}"#),
            r#"{"schema":"ic-bench.sweep/v1","schedule":{"kind":"a\r\nb"}}"#.to_string(),
        ] {
            let e = run_from_text(p, &text).unwrap_err().to_string();
            assert!(!e.chars().any(char::is_control) && e.len() < 1000, "{e}");
        }
        let e = run_from_text(p, r#"{"schema":"ic-bench.pair/v9\n"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(r"schema 'ic-bench.pair/v9\n' is not one ic-bench imports"),
            "{e}"
        );
    }
}
