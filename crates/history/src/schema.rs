//! The database's identity and schema: an `application_id` saying it is ic-bench's, a
//! `schema_version` table, and one migration per version, applied in order inside one
//! immediate transaction (so two runs opening a new file at once apply them once).

use crate::HistoryError;
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;

/// `PRAGMA application_id` of an ic-bench history: "ICBH".
pub const APPLICATION_ID: i64 = 0x4943_4248;

/// Migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[V1];

/// The newest schema this build reads and writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const V1: &str = "
CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  started_at TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  verdict TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_by_time ON runs(started_at);
CREATE TABLE cases(
  id INTEGER PRIMARY KEY,
  prefill TEXT NOT NULL, decode TEXT NOT NULL, rail TEXT NOT NULL, test TEXT NOT NULL,
  memory TEXT NOT NULL, size INTEGER NOT NULL, blocks INTEGER NOT NULL,
  direction TEXT NOT NULL, engine TEXT NOT NULL,
  UNIQUE(prefill, decode, rail, test, memory, size, blocks, direction, engine)
);
CREATE TABLE envs(
  id INTEGER PRIMARY KEY,
  gpu TEXT NOT NULL, nic_firmware TEXT NOT NULL, nic_driver TEXT NOT NULL,
  ucx TEXT NOT NULL, nixl TEXT NOT NULL, transport_env TEXT NOT NULL,
  UNIQUE(gpu, nic_firmware, nic_driver, ucx, nixl, transport_env)
);
CREATE TABLE results(
  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  case_id INTEGER NOT NULL REFERENCES cases(id),
  env INTEGER NOT NULL REFERENCES envs(id),
  metric TEXT NOT NULL,
  value REAL NOT NULL,
  status TEXT NOT NULL,
  PRIMARY KEY(run, case_id, metric)
) WITHOUT ROWID;
CREATE INDEX results_by_case ON results(case_id, metric, env);
CREATE TABLE node_results(
  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  node TEXT NOT NULL,
  status TEXT NOT NULL,
  median_bps REAL,
  median_latency_us REAL,
  PRIMARY KEY(run, node)
) WITHOUT ROWID;
CREATE INDEX node_results_by_node ON node_results(node);
";

/// Brings `conn` to [`SCHEMA_VERSION`], or refuses a database that is not ic-bench's or is newer.
pub fn migrate(conn: &mut Connection, path: &Path) -> Result<(), HistoryError> {
    // Up to date: nothing to write, so no write lock (a reader never waits for a writer). The
    // check reads the header and the table count in one read transaction: read as two autocommit
    // statements, a second writer's migration committing between them made a fresh history look
    // like a foreign database (application id 0, 12 objects).
    let snapshot = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let up_to_date = version(&snapshot, path)? == SCHEMA_VERSION;
    snapshot.finish()?;
    if up_to_date {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current = version(&tx, path)?;
    if current == 0 {
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    }
    let now = jiff::Timestamp::now().to_string();
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO schema_version(version, applied_at) VALUES (?1, ?2)",
            rusqlite::params![i as i64 + 1, now],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// The schema version of an ic-bench history (0: an empty file); refuses any other database
/// and a newer schema.
fn version(tx: &Connection, path: &Path) -> Result<i64, HistoryError> {
    let app: i64 = tx.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let tables: i64 = tx.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    let current = match (app, tables) {
        (APPLICATION_ID, _) => tx.query_row("SELECT coalesce(max(version), 0) FROM schema_version", [], |r| {
            r.get::<_, i64>(0)
        })?,
        (0, 0) => 0,
        (other, _) => {
            return Err(HistoryError::NotIcBench {
                path: path.to_path_buf(),
                why: match other {
                    0 => format!("a SQLite database with {tables} other object(s)"),
                    id => format!("a SQLite database of application id {id:#x}"),
                },
            });
        }
    };
    if current > SCHEMA_VERSION {
        return Err(HistoryError::NewerSchema {
            path: path.to_path_buf(),
            found: current,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(current)
}
