//! Opening the store: WAL (readers never block the writer, a killed writer leaves the last
//! committed state), a busy timeout that is the lock deadline, foreign keys on, and the schema
//! migrated. Every write is one immediate transaction, so two overlapping runs queue for the
//! lock instead of failing half-way.

use crate::HistoryError;
use crate::schema;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a run waits for another writer's lock by default.
pub const DEFAULT_LOCK_DEADLINE: Duration = Duration::from_secs(30);

/// An open history database.
pub struct History {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    pub(crate) deadline: Duration,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").field("path", &self.path).finish()
    }
}

impl History {
    /// Opens (creating it when missing) the history at `path`, waiting at most `deadline` for
    /// another writer's lock.
    pub fn open(path: &Path, deadline: Duration) -> Result<History, HistoryError> {
        refuse_read_only(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| HistoryError::classify(path, e, deadline))?;
        Self::setup(conn, path, deadline)
    }

    /// A history in memory (`--baseline FILE` loads the file into one).
    pub fn in_memory() -> Result<History, HistoryError> {
        let conn = Connection::open_in_memory()?;
        Self::setup(conn, Path::new(":memory:"), DEFAULT_LOCK_DEADLINE)
    }

    fn setup(mut conn: Connection, path: &Path, deadline: Duration) -> Result<History, HistoryError> {
        let fail = |e: rusqlite::Error| HistoryError::classify(path, e, deadline);
        conn.busy_timeout(deadline).map_err(fail)?;
        // Reading the header first: a file that is not SQLite says so here.
        let _: i64 = conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(fail)?;
        switch_to_wal(&conn, deadline).map_err(fail)?;
        conn.pragma_update(None, "foreign_keys", true).map_err(fail)?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(fail)?;
        schema::migrate(&mut conn, path).map_err(|e| match e {
            HistoryError::Sqlite(s) => fail(s),
            other => other,
        })?;
        Ok(History {
            conn,
            path: path.to_path_buf(),
            deadline,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, HistoryError> {
        Ok(self
            .conn
            .query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0))?)
    }
}

/// Puts the file in WAL mode (a no-op once it is). On a new file the switch needs the exclusive
/// lock, and SQLite answers SQLITE_BUSY at once, without calling the busy handler, when another
/// connection is switching at the same moment (it would otherwise deadlock on the escalation);
/// so two runs opening a new history together retry here, up to the lock deadline.
fn switch_to_wal(conn: &Connection, deadline: Duration) -> Result<(), rusqlite::Error> {
    let started = std::time::Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) && started.elapsed() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A file whose mode has no write bit, or a directory: refused before SQLite opens it (root would
/// otherwise write through the mode).
fn refuse_read_only(path: &Path) -> Result<(), HistoryError> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let why = if meta.is_dir() {
        "a directory"
    } else if meta.permissions().readonly() {
        "the file's mode has no write permission"
    } else {
        return Ok(());
    };
    Err(HistoryError::ReadOnly {
        path: path.to_path_buf(),
        why: why.into(),
    })
}
