//! Writing a run: one immediate transaction (the lock is taken before anything is read, so two
//! writers queue rather than deadlock), the run's old rows replaced when its id was recorded
//! before (a resumed sweep, a file imported twice).

use crate::record::{Row, RunRecord};
use crate::{History, HistoryError};
use icb_core::model::{CaseKey, EnvKey};
use rusqlite::{OptionalExtension as _, Transaction, TransactionBehavior, params};

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub rows: usize,
    /// The run id was already there: its rows were replaced.
    pub replaced: bool,
}

impl History {
    /// Records `run` (replacing an earlier record of the same run id), `source` being the file
    /// it was imported from, if any.
    pub fn record(&mut self, run: &RunRecord, source: Option<&str>) -> Result<Written, HistoryError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| HistoryError::classify(&self.path, e, self.deadline))?;
        let written = write_run(&tx, run, source)?;
        tx.commit()
            .map_err(|e| HistoryError::classify(&self.path, e, self.deadline))?;
        Ok(written)
    }
}

fn write_run(tx: &Transaction<'_>, run: &RunRecord, source: Option<&str>) -> Result<Written, HistoryError> {
    let replaced = tx.execute("DELETE FROM runs WHERE run_id = ?1", [&run.run_id])? > 0;
    tx.execute(
        "INSERT INTO runs(run_id, kind, started_at, recorded_at, tool_version, verdict, source)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            run.run_id,
            run.kind.as_str(),
            run.started_at,
            jiff::Timestamp::now().to_string(),
            run.tool_version,
            run.verdict.as_str(),
            source.unwrap_or_default()
        ],
    )?;
    let id = tx.last_insert_rowid();
    for row in &run.rows {
        write_row(tx, id, row)?;
    }
    let mut node = tx.prepare_cached(
        "INSERT OR REPLACE INTO node_results(run, node, status, median_bps, median_latency_us) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for n in &run.nodes {
        node.execute(params![id, n.node, n.status, n.median_bps, n.median_latency_us])?;
    }
    Ok(Written {
        rows: run.rows.len(),
        replaced,
    })
}

fn write_row(tx: &Transaction<'_>, run: i64, row: &Row) -> Result<(), HistoryError> {
    let case = case_id(tx, &row.case, true)?.unwrap_or_default();
    let env = env_id(tx, &row.env, true)?.unwrap_or_default();
    tx.prepare_cached(
        "INSERT OR REPLACE INTO results(run, case_id, env, metric, value, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![run, case, env, row.metric.as_str(), row.value, row.status])?;
    Ok(())
}

/// The case's id; with `create`, made when missing.
pub(crate) fn case_id(conn: &rusqlite::Connection, k: &CaseKey, create: bool) -> Result<Option<i64>, HistoryError> {
    let p = params![
        k.prefill,
        k.decode,
        k.rail.as_deref().unwrap_or_default(),
        k.test,
        k.memory,
        k.size as i64,
        k.blocks.unwrap_or(0),
        k.direction.as_deref().unwrap_or_default(),
        k.engine
    ];
    if create {
        conn.prepare_cached(
            "INSERT INTO cases(prefill, decode, rail, test, memory, size, blocks, direction, engine)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING",
        )?
        .execute(p)?;
    }
    Ok(conn
        .prepare_cached(
            "SELECT id FROM cases WHERE prefill = ?1 AND decode = ?2 AND rail = ?3 AND test = ?4 AND memory = ?5
             AND size = ?6 AND blocks = ?7 AND direction = ?8 AND engine = ?9",
        )?
        .query_row(p, |r| r.get(0))
        .optional()?)
}

/// The environment's id; with `create`, made when missing.
pub(crate) fn env_id(conn: &rusqlite::Connection, e: &EnvKey, create: bool) -> Result<Option<i64>, HistoryError> {
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    let p = params![
        s(&e.gpu),
        s(&e.nic_firmware),
        s(&e.nic_driver),
        s(&e.ucx),
        s(&e.nixl),
        s(&e.transport_env)
    ];
    if create {
        conn.prepare_cached(
            "INSERT INTO envs(gpu, nic_firmware, nic_driver, ucx, nixl, transport_env)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
        )?
        .execute(p)?;
    }
    Ok(conn
        .prepare_cached(
            "SELECT id FROM envs WHERE gpu = ?1 AND nic_firmware = ?2 AND nic_driver = ?3 AND ucx = ?4
             AND nixl = ?5 AND transport_env = ?6",
        )?
        .query_row(p, |r| r.get(0))
        .optional()?)
}

/// The environment of id `id`.
pub(crate) fn env_of(conn: &rusqlite::Connection, id: i64) -> Result<EnvKey, HistoryError> {
    let o = |v: String| (!v.is_empty()).then_some(v);
    Ok(conn
        .prepare_cached("SELECT gpu, nic_firmware, nic_driver, ucx, nixl, transport_env FROM envs WHERE id = ?1")?
        .query_row([id], |r| {
            Ok(EnvKey {
                gpu: o(r.get(0)?),
                nic_firmware: o(r.get(1)?),
                nic_driver: o(r.get(2)?),
                ucx: o(r.get(3)?),
                nixl: o(r.get(4)?),
                transport_env: o(r.get(5)?),
            })
        })?)
}
