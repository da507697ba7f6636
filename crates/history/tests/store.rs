//! The store: created with its schema, refused when it is not ic-bench's, newer, read-only or
//! locked beyond the deadline, and safe under concurrent writers.

use crate::common;

use common::{TempHistory, night};
use icb_history::record::{RunKind, pair_record};
use icb_history::schema::SCHEMA_VERSION;
use icb_history::{History, HistoryError};
use std::time::{Duration, Instant};

#[test]
fn a_new_file_gets_the_schema_and_reopens() {
    let t = TempHistory::new();
    let mut h = t.open();
    assert_eq!(h.schema_version().unwrap(), SCHEMA_VERSION);
    let w = h
        .record(&pair_record(&night(0, "a", "b", 1.0, 1.0), RunKind::Pair), None)
        .unwrap();
    assert_eq!((w.rows, w.replaced), (2, false));
    drop(h);
    let mut h = t.open();
    assert_eq!(h.runs(10).unwrap().len(), 1);
    let again = h
        .record(&pair_record(&night(0, "a", "b", 1.0, 1.0), RunKind::Pair), None)
        .unwrap();
    assert!(again.replaced, "the same run recorded twice replaces its rows");
    assert_eq!(h.runs(10).unwrap()[0].rows, 2);
}

#[test]
fn a_file_that_is_not_an_ic_bench_history_is_refused() {
    let t = TempHistory::new();
    std::fs::write(&t.path, "hello, not a database ".repeat(100)).unwrap();
    let e = History::open(&t.path, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, HistoryError::NotIcBench { .. }), "{e}");

    let other = t.dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&other).unwrap();
    conn.execute_batch("CREATE TABLE t(x); PRAGMA application_id = 7;")
        .unwrap();
    drop(conn);
    let e = History::open(&other, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, HistoryError::NotIcBench { .. }), "{e}");
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn a_newer_schema_is_refused() {
    let t = TempHistory::new();
    drop(t.open());
    let conn = rusqlite::Connection::open(&t.path).unwrap();
    conn.execute("INSERT INTO schema_version VALUES (?1, 'later')", [SCHEMA_VERSION + 1])
        .unwrap();
    drop(conn);
    match History::open(&t.path, Duration::from_secs(1)).unwrap_err() {
        HistoryError::NewerSchema { found, supported, .. } => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION))
        }
        e => panic!("expected NewerSchema, got {e}"),
    }
}

#[test]
fn a_read_only_path_is_refused() {
    let t = TempHistory::new();
    drop(t.open());
    std::fs::set_permissions(&t.path, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let e = History::open(&t.path, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, HistoryError::ReadOnly { .. }), "{e}");
    let e = History::open(t.dir.path(), Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, HistoryError::ReadOnly { .. }), "a directory: {e}");
}

#[test]
fn a_lock_held_beyond_the_deadline_is_refused_in_time() {
    let t = TempHistory::new();
    drop(t.open());
    let holder = rusqlite::Connection::open(&t.path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut h = History::open(&t.path, Duration::from_millis(300)).unwrap();
    let started = Instant::now();
    let e = h
        .record(&pair_record(&night(1, "a", "b", 1.0, 1.0), RunKind::Pair), None)
        .unwrap_err();
    assert!(matches!(e, HistoryError::Locked { .. }), "{e}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    h.record(&pair_record(&night(1, "a", "b", 1.0, 1.0), RunKind::Pair), None)
        .expect("writes once the lock is gone");
}

#[test]
fn concurrent_writers_all_land() {
    let t = TempHistory::new();
    let path = t.path.clone();
    // Two writers opening a new file at once: both migrate safely, then 40 runs each.
    let writers: Vec<_> = ["a", "c"]
        .into_iter()
        .map(|node| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut h = History::open(&path, Duration::from_secs(30)).unwrap();
                for n in 0..40 {
                    h.record(&pair_record(&night(n % 28, node, "b", 1.0, 1.0), RunKind::Pair), None)
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("a writer panicked");
    }
    let h = t.open();
    let runs = h.runs(1000).unwrap();
    assert_eq!(runs.len(), 56, "28 distinct nights per node pair (re-records replace)");
    assert!(runs.iter().all(|r| r.rows == 2));
    let ok: String = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn runs_opening_a_new_history_at_the_same_instant_all_get_it() {
    // Two nightly jobs starting together on a fresh file: the WAL switch answers BUSY without
    // waiting to one of them, and a migration may commit between another opener's reads. Each
    // round starts four openers on one barrier; every one must open the same ic-bench history.
    for _ in 0..25 {
        let t = TempHistory::new();
        let start = std::sync::Arc::new(std::sync::Barrier::new(4));
        let openers: Vec<_> = (0..4)
            .map(|_| {
                let (path, start) = (t.path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    History::open(&path, Duration::from_secs(30)).map(|h| h.schema_version().unwrap())
                })
            })
            .collect();
        for o in openers {
            let opened = o.join().expect("an opener panicked");
            assert_eq!(opened.map_err(|e| e.to_string()), Ok(SCHEMA_VERSION));
        }
    }
}
