//! `--prometheus URL`: the engines' metrics as a Prometheus server holds them, over a window.
//! Counters and histogram parts are asked for their `increase(…[WINDOW])`, gauges for their
//! last value, each an instant query of the HTTP API at one instant; the answers become the same samples a
//! `--metrics FILE` gives, so one translation serves both.

use crate::engines::wanted_names;
use crate::expo::Sample;
use crate::http::{HttpError, encode, get};
use std::collections::BTreeMap;
use std::time::Duration;

/// What a Prometheus server answered that is not a result.
#[derive(Debug, thiserror::Error)]
pub enum PromError {
    #[error("--prometheus {0}")]
    Http(#[from] HttpError),
    #[error("--prometheus {url}: not a Prometheus API answer for '{query}': {why}")]
    Answer { url: String, query: String, why: String },
}

/// One series of an instant query's vector: its labels and value.
type Point = (BTreeMap<String, String>, f64);

/// One instant query's vector at `at` (Unix seconds).
fn query(base: &str, promql: &str, at: &str, deadline: Duration) -> Result<Vec<Point>, PromError> {
    let url = format!(
        "{}/api/v1/query?query={}&time={at}",
        base.trim_end_matches('/'),
        encode(promql)
    );
    let body = get(&url, deadline)?;
    let bad = |why: &str| PromError::Answer {
        url: base.to_string(),
        query: promql.to_string(),
        why: why.to_string(),
    };
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| bad(&e.to_string()))?;
    if v["status"] != "success" {
        return Err(bad(v["error"].as_str().unwrap_or("status is not success")));
    }
    let result = v["data"]["result"].as_array().ok_or_else(|| bad("no data.result"))?;
    let mut out = Vec::new();
    for r in result {
        let labels = r["metric"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.as_str() != "__name__")
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let value = r["value"][1]
            .as_str()
            .and_then(crate::expo::parse_value)
            .ok_or_else(|| bad("a sample without a value"))?;
        out.push((labels, value));
    }
    Ok(out)
}

/// Every metric name the server holds.
fn names(base: &str, deadline: Duration) -> Result<Vec<String>, PromError> {
    let url = format!("{}/api/v1/label/__name__/values", base.trim_end_matches('/'));
    let body = get(&url, deadline)?;
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| PromError::Answer {
        url: base.to_string(),
        query: "__name__ values".into(),
        why: e.to_string(),
    })?;
    Ok(v["data"]
        .as_array()
        .map(|a| a.iter().filter_map(|n| n.as_str().map(str::to_string)).collect())
        .unwrap_or_default())
}

/// The samples of every metric `probe serving` reads, over `window` (a PromQL duration: `5m`).
/// Names of the engines' families that this probe does not know are kept as samples of value 0
/// with no series, so another engine version's names are reported, not silently ignored.
pub fn samples(base: &str, window: &str, deadline: Duration) -> Result<Vec<Sample>, PromError> {
    let held = names(base, deadline)?;
    let wanted = wanted_names();
    // Every query at one instant: `increase` extrapolates to the window's end, so a sum and a
    // count asked a millisecond apart would not divide to the per-transfer figure.
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let at = format!("{at:.3}");
    let mut out = Vec::new();
    for (name, counter) in &wanted {
        if !held.contains(name) {
            continue;
        }
        let promql = if *counter {
            format!("increase({name}[{window}])")
        } else {
            format!("last_over_time({name}[{window}])")
        };
        for (labels, value) in query(base, &promql, &at, deadline)? {
            out.push(Sample {
                name: name.clone(),
                labels,
                value,
            });
        }
    }
    for name in held {
        let family = name.starts_with("vllm:nixl_") || name.starts_with("vllm:kv_") || name.starts_with("sglang:kv_");
        if family && !wanted.iter().any(|(w, _)| *w == name) {
            out.push(Sample {
                name,
                labels: BTreeMap::new(),
                value: 0.0,
            });
        }
    }
    Ok(out)
}
