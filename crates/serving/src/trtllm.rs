//! TensorRT-LLM's KV-cache transfer timing files (`TRTLLM_KVCACHE_TIME_OUTPUT_PATH`; the C++
//! `TransferSession::exportMeasure` of the cache transceiver, TensorRT-LLM 1.x): one file per rank
//! and side, `rank_<R>_send.csv` / `rank_<R>_recv.csv`; a header `RequestID` followed by one
//! `Delay(ms),Duration(ms),Bandwidth(Gbps)` group per measure (one per connection or chunk), and
//! one row per request. `Bandwidth` is `bytes × 8 / duration / 10^9`: bits, so a measure's bytes
//! are `Bandwidth × 10^9 / 8 × Duration`. A request's window is its measures' earliest start
//! (`Delay`) to latest end (`Delay + Duration`); across ranks a request is merged by min start /
//! max end / sum of bytes (TensorRT-LLM's own way), so the ranks' skew is inside the window.

use crate::engines::rate;
use icb_core::serving::EngineFigures;
use std::collections::BTreeMap;

/// One request on one rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub start_ms: f64,
    pub end_ms: f64,
    pub bytes: f64,
}

/// One rank's file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct RankFile {
    /// The file name (`rank_0_recv.csv`).
    pub name: String,
    pub requests: BTreeMap<String, Request>,
}

/// Why a rank's file could not be read; each names the file (and the line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsvError {
    #[error("{name}: empty")]
    Empty { name: String },
    #[error(
        "{name}: the header is not TensorRT-LLM's 'RequestID,Delay(ms),Duration(ms),Bandwidth(Gbps)…' (another version?): '{header}'"
    )]
    Header { name: String, header: String },
    #[error("{name}:{line}: {why}")]
    Line {
        name: String,
        line: usize,
        why: &'static str,
    },
}

/// Reads one file's text; errors name the line.
pub fn parse(name: &str, text: &str) -> Result<RankFile, CsvError> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or_else(|| CsvError::Empty { name: name.into() })?;
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    if cols.first() != Some(&"RequestID")
        || cols.len() < 4
        || cols[1..4] != ["Delay(ms)", "Duration(ms)", "Bandwidth(Gbps)"]
    {
        return Err(CsvError::Header {
            name: name.into(),
            header: header.into(),
        });
    }
    let mut requests = BTreeMap::new();
    for (i, line) in lines {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let bad = |why: &'static str| CsvError::Line {
            name: name.into(),
            line: i + 1,
            why,
        };
        if cells.len() < 4 || !(cells.len() - 1).is_multiple_of(3) {
            return Err(bad("expected a request id and groups of delay, duration, bandwidth"));
        }
        let mut r: Option<Request> = None;
        for g in cells[1..].chunks(3) {
            let num = |s: &str| s.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
            let (Some(delay), Some(duration), Some(gbps)) = (num(g[0]), num(g[1]), num(g[2])) else {
                return Err(bad("a delay, duration or bandwidth is not a non-negative number"));
            };
            let m = Request {
                start_ms: delay,
                end_ms: delay + duration,
                bytes: gbps * 1e9 / 8.0 * duration / 1e3,
            };
            r = Some(match r {
                None => m,
                Some(a) => merge(a, m),
            });
        }
        if let Some(r) = r {
            requests.insert(cells[0].to_string(), r);
        }
    }
    Ok(RankFile {
        name: name.to_string(),
        requests,
    })
}

fn merge(a: Request, b: Request) -> Request {
    Request {
        start_ms: a.start_ms.min(b.start_ms),
        end_ms: a.end_ms.max(b.end_ms),
        bytes: a.bytes + b.bytes,
    }
}

/// Rate and means over requests: (bytes per request, ms per request, GB/s over the summed windows).
fn summary<'a>(requests: impl Iterator<Item = &'a Request>) -> (f64, Option<f64>, Option<f64>, Option<f64>) {
    let (mut n, mut bytes, mut ms) = (0.0, 0.0, 0.0);
    for r in requests {
        n += 1.0;
        bytes += r.bytes;
        ms += r.end_ms - r.start_ms;
    }
    if n == 0.0 {
        return (0.0, None, None, None);
    }
    (n, Some(bytes / n), Some(ms / n), rate(Some(bytes), Some(ms / 1e3)))
}

/// One figure per file; each carries the pair's figures of its side (`send`/`recv`): the
/// requests merged over every rank file of that side.
pub fn figures(files: &[RankFile], op: &str) -> Vec<EngineFigures> {
    let side = |name: &str| if name.contains("send") { "send" } else { "recv" };
    let mut merged: BTreeMap<&str, BTreeMap<&str, Request>> = BTreeMap::new();
    for f in files {
        let m = merged.entry(side(&f.name)).or_default();
        for (id, r) in &f.requests {
            m.entry(id.as_str()).and_modify(|a| *a = merge(*a, *r)).or_insert(*r);
        }
    }
    files
        .iter()
        .map(|f| {
            let (n, bytes, ms, gbps) = summary(f.requests.values());
            let (_, pair_bytes, _, pair_gbps) = summary(merged[side(&f.name)].values());
            EngineFigures {
                engine: "trtllm".into(),
                metrics: "TensorRT-LLM KV cache timing CSV (TRTLLM_KVCACHE_TIME_OUTPUT_PATH)".into(),
                series: f.name.clone(),
                op: op.to_string(),
                transfers: n,
                ranks_pooled: 1,
                bytes_per_transfer: bytes,
                bytes_per_request: pair_bytes,
                descriptors_per_transfer: None,
                transfer_ms: ms,
                post_ms: None,
                rank_gbps: gbps,
                pair_gbps,
                failures: 0.0,
                defects: vec![
                    "TensorRT-LLM's Bandwidth(Gbps) is bits (10^9 bits/s): divided by 8 here".into(),
                    "TensorRT-LLM merges a request across ranks by min start / max end / sum of bytes: the ranks' skew is inside the pair's window".into(),
                ],
                fabric: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_file_is_refused_with_its_name_and_line() {
        assert_eq!(parse("r.csv", "\n\n"), Err(CsvError::Empty { name: "r.csv".into() }));
        let e = parse("r.csv", "id,a,b,c\n").unwrap_err();
        assert!(matches!(e, CsvError::Header { .. }), "{e}");
        let e = parse("r.csv", "RequestID,Delay(ms),Duration(ms),Bandwidth(Gbps)\n7,1,x,3\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "r.csv:2: a delay, duration or bandwidth is not a non-negative number"
        );
        let ok = parse("r.csv", "RequestID,Delay(ms),Duration(ms),Bandwidth(Gbps)\n7,1,2,8\n").unwrap();
        assert_eq!(ok.requests.len(), 1);
    }
}
