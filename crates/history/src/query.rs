//! What `ic-bench history` shows: the runs, a node's trend, a node pair's trend per case, and
//! two runs compared case by case. Every answer is a serialisable struct (`-o json`); the text
//! is [`crate::render`]'s.

use crate::baseline::Thresholds;
use crate::{History, HistoryError};
use icb_core::model::{BaselineVerdict, CaseKey, Metric};
use rusqlite::params;
use serde::Serialize;
use std::collections::BTreeMap;

/// One recorded run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    pub kind: String,
    pub started_at: String,
    pub verdict: String,
    /// Figures recorded.
    pub rows: u64,
    /// Node pairs it measured.
    pub pairs: u64,
}

/// One run of a node's trend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodePoint {
    pub run_id: String,
    /// The run's kind (`sweep`, `pair`, `gate`): a sweep night's node median (its profile's
    /// sizes, every partner) and a pair's figure at its largest size are not the same quantity,
    /// so trends keep each kind apart.
    pub kind: String,
    pub started_at: String,
    /// The node's verdict in a sweep; the run's verdict for a pair or gate.
    pub status: String,
    /// The node's median bandwidth (sweep), or the median of its pairs' figures at their
    /// largest size (pair, gate), bytes/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_bps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_latency_us: Option<f64>,
}

/// `(run_id, started_at, value)`.
pub type Point = (String, String, f64);

/// One figure of one case across runs, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseTrend {
    #[serde(flatten)]
    pub case: CaseKey,
    pub metric: Metric,
    /// `(run_id, started_at, value)`.
    pub points: Vec<Point>,
}

/// One row of `history compare`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    #[serde(flatten)]
    pub case: CaseKey,
    pub metric: Metric,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<f64>,
    /// (after − before) / before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<f64>,
    /// within, improved or regressed at the default thresholds; absent where one run lacks it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<BaselineVerdict>,
}

const CASE_COLUMNS: &str = "c.prefill, c.decode, c.rail, c.test, c.memory, c.size, c.blocks, c.direction, c.engine";

fn case_from(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<CaseKey> {
    let o = |v: String| (!v.is_empty()).then_some(v);
    Ok(CaseKey {
        prefill: r.get(at)?,
        decode: r.get(at + 1)?,
        rail: o(r.get(at + 2)?),
        test: r.get(at + 3)?,
        memory: r.get(at + 4)?,
        size: r.get::<_, i64>(at + 5)? as u64,
        blocks: Some(r.get::<_, u32>(at + 6)?).filter(|b| *b > 0),
        direction: o(r.get(at + 7)?),
        engine: r.get(at + 8)?,
    })
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (n > 0).then(|| {
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    })
}

impl History {
    /// The newest `limit` runs, newest first.
    pub fn runs(&self, limit: u32) -> Result<Vec<RunSummary>, HistoryError> {
        let mut stmt = self.conn.prepare(
            "SELECT u.run_id, u.kind, u.started_at, u.verdict,
                    (SELECT count(*) FROM results r WHERE r.run = u.id),
                    (SELECT count(DISTINCT c.prefill || '→' || c.decode) FROM results r JOIN cases c ON c.id = r.case_id WHERE r.run = u.id)
             FROM runs u ORDER BY u.started_at DESC, u.id DESC LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit], |r| {
            Ok(RunSummary {
                run_id: r.get(0)?,
                kind: r.get(1)?,
                started_at: r.get(2)?,
                verdict: r.get(3)?,
                rows: r.get::<_, i64>(4)? as u64,
                pairs: r.get::<_, i64>(5)? as u64,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A node's last `limit` runs, oldest first.
    pub fn node_trend(&self, node: &str, limit: u32) -> Result<Vec<NodePoint>, HistoryError> {
        let mut points: BTreeMap<(String, String), NodePoint> = BTreeMap::new();
        let mut stmt = self.conn.prepare(
            "SELECT u.run_id, u.started_at, n.status, n.median_bps, n.median_latency_us, u.kind
             FROM node_results n JOIN runs u ON u.id = n.run WHERE n.node = ?1",
        )?;
        for p in stmt.query_map([node], |r| {
            Ok(NodePoint {
                run_id: r.get(0)?,
                started_at: r.get(1)?,
                status: r.get(2)?,
                median_bps: r.get(3)?,
                median_latency_us: r.get(4)?,
                kind: r.get(5)?,
            })
        })? {
            let p = p?;
            points.insert((p.started_at.clone(), p.run_id.clone()), p);
        }
        self.pair_runs_of_node(node, &mut points)?;
        let mut out: Vec<NodePoint> = points.into_values().collect();
        let skip = out.len().saturating_sub(limit as usize);
        Ok(out.split_off(skip))
    }

    /// Runs without node verdicts (pair, gate) that measured `node`: the median of its figures at
    /// each run's largest size.
    fn pair_runs_of_node(
        &self,
        node: &str,
        points: &mut BTreeMap<(String, String), NodePoint>,
    ) -> Result<(), HistoryError> {
        let mut stmt = self.conn.prepare(
            "SELECT u.run_id, u.started_at, u.verdict, c.size, r.value, u.kind FROM results r
             JOIN runs u ON u.id = r.run JOIN cases c ON c.id = r.case_id
             WHERE r.metric = 'bandwidth_bps' AND (c.prefill = ?1 OR c.decode = ?1)
               AND NOT EXISTS (SELECT 1 FROM node_results n WHERE n.run = u.id)",
        )?;
        // (started_at, run_id) → (verdict, largest size, its figures, kind)
        type RunFigures = (String, u64, Vec<f64>, String);
        let mut runs: BTreeMap<(String, String), RunFigures> = BTreeMap::new();
        for row in stmt.query_map([node], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)? as u64,
                r.get::<_, f64>(4)?,
                r.get::<_, String>(5)?,
            ))
        })? {
            let (run, at, verdict, size, value, kind) = row?;
            let e = runs.entry((at, run)).or_insert((verdict, 0, vec![], kind));
            if size > e.1 {
                *e = (e.0.clone(), size, vec![], e.3.clone());
            }
            if size == e.1 {
                e.2.push(value);
            }
        }
        for ((at, run), (verdict, _, values, kind)) in runs {
            let p = NodePoint {
                run_id: run.clone(),
                kind,
                started_at: at.clone(),
                status: verdict,
                median_bps: median(values),
                median_latency_us: None,
            };
            points.insert((at, run), p);
        }
        Ok(())
    }

    /// Every case measured between `a` and `b` (either way), each metric's last `limit` runs.
    pub fn pair_trend(&self, a: &str, b: &str, limit: u32) -> Result<Vec<CaseTrend>, HistoryError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {CASE_COLUMNS}, r.metric, u.run_id, u.started_at, r.value FROM results r
             JOIN runs u ON u.id = r.run JOIN cases c ON c.id = r.case_id
             WHERE (c.prefill = ?1 AND c.decode = ?2) OR (c.prefill = ?2 AND c.decode = ?1)
             ORDER BY u.started_at, u.id"
        ))?;
        let mut trends: BTreeMap<(CaseKey, Metric), Vec<Point>> = BTreeMap::new();
        for row in stmt.query_map(params![a, b], |r| {
            Ok((
                case_from(r, 0)?,
                r.get::<_, String>(9)?,
                r.get::<_, String>(10)?,
                r.get::<_, String>(11)?,
                r.get::<_, f64>(12)?,
            ))
        })? {
            let (case, metric, run, at, value) = row?;
            let metric: Metric = metric.parse().map_err(HistoryError::Usage)?;
            trends.entry((case, metric)).or_default().push((run, at, value));
        }
        Ok(trends
            .into_iter()
            .map(|((case, metric), mut points)| {
                let skip = points.len().saturating_sub(limit as usize);
                CaseTrend {
                    case,
                    metric,
                    points: points.split_off(skip),
                }
            })
            .collect())
    }

    /// The figures of one run by case and metric.
    fn figures(&self, run_id: &str) -> Result<BTreeMap<(CaseKey, Metric), f64>, HistoryError> {
        let exists: i64 = self
            .conn
            .query_row("SELECT count(*) FROM runs WHERE run_id = ?1", [run_id], |r| r.get(0))?;
        if exists == 0 {
            return Err(HistoryError::Usage(format!(
                "no run '{run_id}' in {}: ic-bench history list shows the run ids",
                self.path.display()
            )));
        }
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {CASE_COLUMNS}, r.metric, r.value FROM results r
             JOIN runs u ON u.id = r.run JOIN cases c ON c.id = r.case_id WHERE u.run_id = ?1"
        ))?;
        let mut out = BTreeMap::new();
        for row in stmt.query_map([run_id], |r| {
            Ok((case_from(r, 0)?, r.get::<_, String>(9)?, r.get::<_, f64>(10)?))
        })? {
            let (case, metric, value) = row?;
            out.insert((case, metric.parse().map_err(HistoryError::Usage)?), value);
        }
        Ok(out)
    }

    /// Run `a` against run `b`, one row per case and metric either has.
    pub fn compare_runs(&self, a: &str, b: &str, thresholds: Thresholds) -> Result<Vec<CompareRow>, HistoryError> {
        let before = self.figures(a)?;
        let after = self.figures(b)?;
        let keys: std::collections::BTreeSet<_> = before.keys().chain(after.keys()).cloned().collect();
        Ok(keys
            .into_iter()
            .map(|(case, metric)| {
                let x = before.get(&(case.clone(), metric)).copied();
                let y = after.get(&(case.clone(), metric)).copied();
                let change = x.zip(y).filter(|(x, _)| *x != 0.0).map(|(x, y)| (y - x) / x);
                let verdict = change.map(|c| verdict_of(metric, c, thresholds.of(metric)));
                CompareRow {
                    case,
                    metric,
                    before: x,
                    after: y,
                    change,
                    verdict,
                }
            })
            .collect())
    }
}

/// within / improved / regressed for a relative change of `metric`.
pub fn verdict_of(metric: Metric, change: f64, threshold: f64) -> BaselineVerdict {
    let worse = if metric.higher_is_better() { -change } else { change };
    if worse > threshold {
        BaselineVerdict::Regressed
    } else if -worse > threshold {
        BaselineVerdict::Improved
    } else {
        BaselineVerdict::Within
    }
}
