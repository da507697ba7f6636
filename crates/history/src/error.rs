//! Why the history store could not be used: each a one-line message and a kind the CLI maps to
//! exit 2 (bad input), never matched by its text.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("--history {path}: not an ic-bench history database ({why}): give a new file or one ic-bench wrote")]
    NotIcBench { path: PathBuf, why: String },
    #[error(
        "--history {path}: schema version {found} is newer than this ic-bench reads ({supported}): use a newer ic-bench or another file"
    )]
    NewerSchema { path: PathBuf, found: i64, supported: i64 },
    #[error("--history {path}: read-only ({why}): give a writable path")]
    ReadOnly { path: PathBuf, why: String },
    #[error("--history {path}: still locked by another writer after {waited:?}: retry once the other run ends")]
    Locked { path: PathBuf, waited: Duration },
    #[error("--history {path}: {why}")]
    Open { path: PathBuf, why: String },
    #[error("--ack {path}: {why}")]
    Ack { path: PathBuf, why: String },
    #[error("{path}: {why}")]
    Import { path: PathBuf, why: String },
    #[error("{0}")]
    Usage(String),
    #[error("history database: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

impl HistoryError {
    /// The error of a SQLite failure on `path`, by its code: busy/locked beyond the deadline,
    /// read-only, not a database.
    pub(crate) fn classify(path: &std::path::Path, e: rusqlite::Error, waited: Duration) -> HistoryError {
        use rusqlite::ErrorCode::*;
        let path = path.to_path_buf();
        match e.sqlite_error_code() {
            Some(DatabaseBusy | DatabaseLocked) => HistoryError::Locked { path, waited },
            Some(ReadOnly) => HistoryError::ReadOnly {
                path,
                why: e.to_string(),
            },
            Some(NotADatabase) => HistoryError::NotIcBench {
                path,
                why: "not a SQLite file".into(),
            },
            Some(CannotOpen) => HistoryError::Open {
                path,
                why: format!("cannot open: {e}"),
            },
            _ => HistoryError::Sqlite(e),
        }
    }
}
