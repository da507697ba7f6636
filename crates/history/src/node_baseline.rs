//! A sweep's nodes against their past: each node's median pair bandwidth (its verdict's
//! `median_bps`) against the mean of its last matching sweeps, the figure the
//! `IcBenchNodeRegressed` alert compares with its 7-day average. A node's own slowdown moves its
//! median; one slow partner does not.

use crate::baseline::Judge;
use crate::record::NodeRow;
use crate::{History, HistoryError};
use icb_core::model::{BaselineVerdict, Metric, NodeBaselineCheck};
use rusqlite::params;

impl History {
    /// Every node of a sweep with a median, against its last `judge.last` sweeps.
    pub fn compare_nodes(&self, nodes: &[NodeRow], judge: &Judge<'_>) -> Result<Vec<NodeBaselineCheck>, HistoryError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT n.median_bps FROM node_results n JOIN runs u ON u.id = n.run
             WHERE n.node = ?1 AND n.median_bps IS NOT NULL AND u.run_id != ?2 AND u.started_at < ?3
             ORDER BY u.started_at DESC LIMIT ?4",
        )?;
        let threshold = judge.thresholds.of(Metric::BandwidthBps);
        let mut out = vec![];
        for n in nodes {
            let Some(value) = n.median_bps else {
                continue;
            };
            let earlier = stmt
                .query_map(params![n.node, judge.run_id, judge.started_at, judge.last], |r| {
                    r.get(0)
                })?
                .collect::<Result<Vec<f64>, _>>()?;
            let mean = crate::baseline::mean_stddev(&earlier).map(|(m, _)| m);
            let change = mean.filter(|m| *m != 0.0).map(|m| (value - m) / m);
            out.push(NodeBaselineCheck {
                node: n.node.clone(),
                verdict: change.map_or(BaselineVerdict::NewBaseline, |c| {
                    crate::query::verdict_of(Metric::BandwidthBps, c, threshold)
                }),
                value,
                baseline_mean: mean,
                baseline_runs: earlier.len() as u32,
                change,
                threshold,
                recent: earlier.into_iter().rev().collect(),
            });
        }
        Ok(out)
    }
}
