//! Baselines: each figure of a run against the mean of the last N matching runs (same
//! [`CaseKey`] and [`EnvKey`]), with a threshold per metric and its direction (bandwidth down,
//! latency up). No matching run with the same environment starts a new baseline, and the check
//! says which key field changed.

use crate::ack::Acks;
use crate::record::Row;
use crate::write::{case_id, env_id, env_of};
use crate::{History, HistoryError};
use icb_core::model::{BaselineCheck, BaselineReport, BaselineVerdict, Metric};
use rusqlite::params;
use std::path::PathBuf;

/// Default thresholds: 10 % for bandwidth (twice the measured run-to-run spread: a default
/// `pair --local` stays within ±5 % of its median, −7 % once in 60 case-runs; README and
/// BENCHMARKS.md), 25 % for latency: not derived from a measurement (small-message p50 on a shared
/// CPU moves far more than any fabric threshold; BENCHMARKS.md says so): set it from the fleet's
/// own spread.
pub const DEFAULT_BANDWIDTH_THRESHOLD: f64 = 0.10;
pub const DEFAULT_LATENCY_THRESHOLD: f64 = 0.25;

/// `--regression`: the threshold per metric, fractions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub bandwidth: f64,
    pub latency: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            bandwidth: DEFAULT_BANDWIDTH_THRESHOLD,
            latency: DEFAULT_LATENCY_THRESHOLD,
        }
    }
}

impl Thresholds {
    pub fn of(&self, metric: Metric) -> f64 {
        match metric {
            Metric::BandwidthBps => self.bandwidth,
            Metric::LatencyP50Us => self.latency,
        }
    }

    /// `10%` (every metric), or `bandwidth=10%,latency=30%` (the others keep their default).
    pub fn parse(s: &str) -> Result<Thresholds, FlagError> {
        let mut t = Thresholds::default();
        for part in s.split(',').map(str::trim) {
            match part.split_once('=') {
                Some((metric, pct)) => {
                    let v = percent(pct)?;
                    match metric.trim().parse::<Metric>().map_err(FlagError::Metric)? {
                        Metric::BandwidthBps => t.bandwidth = v,
                        Metric::LatencyP50Us => t.latency = v,
                    }
                }
                None => {
                    let v = percent(part)?;
                    t = Thresholds {
                        bandwidth: v,
                        latency: v,
                    };
                }
            }
        }
        Ok(t)
    }
}

/// A `--threshold` or `--baseline` value that does not parse; the one line says what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error("'{0}' is not a percentage: write e.g. 10%")]
    NotPercent(String),
    #[error("'{0}': a threshold is above 0 % and below 1000 %")]
    OutOfRange(String),
    /// The metric's own line (`'speed' is not a metric: use bandwidth or latency`).
    #[error("{0}")]
    Metric(String),
    #[error("--baseline {0}: N in last:N is a whole number above 0")]
    LastCount(String),
    #[error("--baseline: give last:N or a results file")]
    NoBaseline,
}

fn percent(s: &str) -> Result<f64, FlagError> {
    let s = s.trim();
    let v: f64 = s
        .strip_suffix('%')
        .unwrap_or(s)
        .trim()
        .parse()
        .map_err(|_| FlagError::NotPercent(s.to_string()))?;
    if !(v > 0.0 && v < 1000.0) {
        return Err(FlagError::OutOfRange(s.to_string()));
    }
    Ok(v / 100.0)
}

/// `--baseline`: the last N matching runs of `--history`, or a results file.
#[derive(Debug, Clone, PartialEq)]
pub enum BaselineSource {
    Last(u32),
    File(PathBuf),
}

impl BaselineSource {
    pub fn parse(s: &str) -> Result<BaselineSource, FlagError> {
        match s.strip_prefix("last:") {
            Some(n) => match n.parse::<u32>() {
                Ok(n) if n > 0 => Ok(BaselineSource::Last(n)),
                _ => Err(FlagError::LastCount(s.to_string())),
            },
            None if s.is_empty() => Err(FlagError::NoBaseline),
            None => Ok(BaselineSource::File(PathBuf::from(s))),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            BaselineSource::Last(n) => format!("last:{n}"),
            BaselineSource::File(p) => p.display().to_string(),
        }
    }
}

/// How a run's rows are compared.
#[derive(Debug, Clone)]
pub struct Judge<'a> {
    /// Runs to average (a file baseline: all of its one run).
    pub last: u32,
    pub thresholds: Thresholds,
    pub acks: &'a Acks,
    pub today: jiff::civil::Date,
    /// The run being judged: never its own baseline.
    pub run_id: &'a str,
    /// Only runs that started before it count.
    pub started_at: &'a str,
    pub source: String,
}

impl History {
    /// Every row of a run against its baseline in this history.
    pub fn compare(&self, rows: &[Row], judge: &Judge<'_>) -> Result<BaselineReport, HistoryError> {
        let checks = rows
            .iter()
            .map(|row| self.check(row, judge))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BaselineReport {
            source: judge.source.clone(),
            thresholds: Metric::ALL.iter().map(|m| (*m, judge.thresholds.of(*m))).collect(),
            regressed: checks
                .iter()
                .filter(|c| c.verdict == BaselineVerdict::Regressed)
                .count(),
            new_baselines: checks
                .iter()
                .filter(|c| c.verdict == BaselineVerdict::NewBaseline)
                .count(),
            checks,
            nodes: vec![],
        })
    }

    /// The figures of the last `judge.last` matching runs, newest first.
    fn earlier(&self, case: i64, env: i64, row: &Row, judge: &Judge<'_>) -> Result<Vec<f64>, HistoryError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT r.value FROM results r JOIN runs u ON u.id = r.run
             WHERE r.case_id = ?1 AND r.metric = ?2 AND r.env = ?3 AND u.run_id != ?4 AND u.started_at < ?5
             ORDER BY u.started_at DESC LIMIT ?6",
        )?;
        let values = stmt
            .query_map(
                params![
                    case,
                    row.metric.as_str(),
                    env,
                    judge.run_id,
                    judge.started_at,
                    judge.last
                ],
                |r| r.get(0),
            )?
            .collect::<Result<Vec<f64>, _>>()?;
        Ok(values)
    }

    /// Why there is no baseline, and whether it is a changed key: the environment of the newest
    /// earlier run of the case, when one exists, against this row's.
    fn why_new(&self, case: Option<i64>, row: &Row, judge: &Judge<'_>) -> Result<(String, bool), HistoryError> {
        const FIRST: &str = "first run of this case";
        let Some(case) = case else {
            return Ok((FIRST.into(), false));
        };
        let last_env: Option<i64> = rusqlite::OptionalExtension::optional(
            self.conn
                .prepare_cached(
                    "SELECT r.env FROM results r JOIN runs u ON u.id = r.run
                     WHERE r.case_id = ?1 AND r.metric = ?2 AND u.run_id != ?3 AND u.started_at < ?4
                     ORDER BY u.started_at DESC LIMIT 1",
                )?
                .query_row(
                    params![case, row.metric.as_str(), judge.run_id, judge.started_at],
                    |r| r.get(0),
                ),
        )?;
        let Some(env) = last_env else {
            return Ok((FIRST.into(), false));
        };
        let changes = row.env.changes_from(&env_of(&self.conn, env)?);
        Ok((format!("key changed: {}", changes.join(", ")), true))
    }

    fn check(&self, row: &Row, judge: &Judge<'_>) -> Result<BaselineCheck, HistoryError> {
        let case = case_id(&self.conn, &row.case, false)?;
        let env = env_id(&self.conn, &row.env, false)?;
        let earlier = match (case, env) {
            (Some(c), Some(e)) => self.earlier(c, e, row, judge)?,
            _ => vec![],
        };
        let threshold = judge.thresholds.of(row.metric);
        let mut check = BaselineCheck {
            case: row.case.clone(),
            metric: row.metric,
            verdict: BaselineVerdict::NewBaseline,
            value: row.value,
            baseline_mean: None,
            baseline_stddev: None,
            baseline_runs: earlier.len() as u32,
            change: None,
            threshold,
            note: None,
            key_changed: false,
            recent: earlier.iter().rev().copied().collect(),
        };
        let Some((mean, stddev)) = mean_stddev(&earlier) else {
            let (why, key_changed) = self.why_new(case, row, judge)?;
            check.note = Some(why);
            check.key_changed = key_changed;
            return Ok(check);
        };
        let change = if mean != 0.0 { (row.value - mean) / mean } else { 0.0 };
        check.verdict = match crate::query::verdict_of(row.metric, change, threshold) {
            BaselineVerdict::Regressed => match judge.acks.find(&row.case, row.metric, judge.today) {
                Some(ack) => {
                    check.note = Some(format!("{} (acknowledged until {})", ack.reason, ack.expires));
                    BaselineVerdict::Acknowledged
                }
                None => BaselineVerdict::Regressed,
            },
            other => other,
        };
        check.baseline_mean = Some(mean);
        check.baseline_stddev = stddev;
        check.change = Some(change);
        Ok(check)
    }
}

/// Mean and sample standard deviation (none below two values).
pub fn mean_stddev(values: &[f64]) -> Option<(f64, Option<f64>)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = (values.len() > 1).then(|| (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
    Some((mean, sd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_per_metric() {
        assert_eq!(
            Thresholds::parse("10%").unwrap(),
            Thresholds {
                bandwidth: 0.1,
                latency: 0.1
            }
        );
        let t = Thresholds::parse("latency=40%").unwrap();
        assert_eq!((t.bandwidth, t.latency), (DEFAULT_BANDWIDTH_THRESHOLD, 0.4));
        let t = Thresholds::parse("bandwidth=5, latency=50%").unwrap();
        assert_eq!((t.bandwidth, t.latency), (0.05, 0.5));
        assert_eq!(Thresholds::parse("fast"), Err(FlagError::NotPercent("fast".into())));
        assert_eq!(Thresholds::parse("0%"), Err(FlagError::OutOfRange("0%".into())));
        let e = Thresholds::parse("speed=5%").unwrap_err();
        assert!(
            matches!(e, FlagError::Metric(_)) && e.to_string().contains("not a metric"),
            "{e}"
        );
    }

    #[test]
    fn baseline_sources_parse() {
        assert_eq!(BaselineSource::parse("last:7").unwrap(), BaselineSource::Last(7));
        assert_eq!(
            BaselineSource::parse("night1.json").unwrap(),
            BaselineSource::File("night1.json".into())
        );
        assert_eq!(
            BaselineSource::parse("last:0"),
            Err(FlagError::LastCount("last:0".into()))
        );
        assert_eq!(
            BaselineSource::parse("last:x"),
            Err(FlagError::LastCount("last:x".into()))
        );
        assert_eq!(BaselineSource::parse(""), Err(FlagError::NoBaseline));
    }

    #[test]
    fn mean_and_spread() {
        assert_eq!(mean_stddev(&[]), None);
        assert_eq!(mean_stddev(&[4.0]), Some((4.0, None)));
        let (m, sd) = mean_stddev(&[2.0, 4.0, 6.0]).unwrap();
        assert_eq!(m, 4.0);
        assert!((sd.unwrap() - 2.0).abs() < 1e-12);
    }
}
