//! The expectations file format (see the [`verdict`](super) module docs): serde types, unit
//! checks, and the bandwidth parser shared with the flags.

use super::expectation::ExpectationOverrides;
use crate::ParseError;
use crate::error_line::quote_outside;
use crate::model::*;
use serde::Deserialize;

/// A bandwidth in the expectations file: text with a unit, or a bare number (rejected: units matter).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum BandwidthValue {
    Text(String),
    Number(f64),
}

impl BandwidthValue {
    fn bps(&self, key: &str) -> Result<f64, ParseError> {
        match self {
            BandwidthValue::Text(t) => parse_bandwidth(t).map_err(|e| ParseError::new(format!("{key}: {e}"))),
            BandwidthValue::Number(n) => Err(ParseError::new(format!(
                "{key}: {n} has no unit: write e.g. '{n} GB/s' (10^9 B/s), 'MiB/s' or 'Gb/s' (bits)"
            ))),
        }
    }
}

/// Floors for one locality in the expectations file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalityFloors {
    pub host: Option<BandwidthValue>,
    pub cuda: Option<BandwidthValue>,
    pub host_cuda: Option<BandwidthValue>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TcpPolicy {
    Fail,
    Warn,
}

/// The expectations file (see the module docs for the format).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectationConfig {
    pub same_host: Option<LocalityFloors>,
    pub different_hosts: Option<LocalityFloors>,
    /// A size such as `1MiB` or `4194304`.
    pub min_size: Option<BandwidthSize>,
    pub tcp: Option<TcpPolicy>,
}

/// A size in the expectations file: `1MiB` or a plain byte count.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum BandwidthSize {
    Bytes(u64),
    Text(String),
}

impl ExpectationConfig {
    /// The overrides this file sets for one locality; units are checked here.
    pub fn overrides_for(&self, locality: Locality) -> Result<ExpectationOverrides, ParseError> {
        let (key, floors) = match locality {
            Locality::SameHost => ("same_host", &self.same_host),
            Locality::DifferentHosts => ("different_hosts", &self.different_hosts),
        };
        let floor = |name: &str, v: &Option<BandwidthValue>| -> Result<Option<f64>, ParseError> {
            v.as_ref().map(|b| b.bps(&format!("{key}.{name}"))).transpose()
        };
        let default = LocalityFloors::default();
        let f = floors.as_ref().unwrap_or(&default);
        let min_size = match &self.min_size {
            None => None,
            Some(BandwidthSize::Bytes(0)) => {
                return Err(ParseError::new("min_size: 0 bytes: use a positive size such as 1MiB"));
            }
            Some(BandwidthSize::Bytes(n)) => Some(*n),
            Some(BandwidthSize::Text(t)) => {
                Some(crate::units::parse_size(t).map_err(|e| ParseError::new(format!("min_size: {e}")))?)
            }
        };
        Ok(ExpectationOverrides {
            min_host_bandwidth_bps: floor("host", &f.host)?,
            min_cuda_bandwidth_bps: floor("cuda", &f.cuda)?,
            min_mixed_bandwidth_bps: floor("host_cuda", &f.host_cuda)?,
            min_size_for_bandwidth: min_size,
            tcp_is_failure: self.tcp.map(|p| p == TcpPolicy::Fail),
        })
    }
}

/// Parses the expectations file's text (YAML or JSON) and checks every value, so a bad file is
/// reported before any test runs.
pub fn parse_expectation_config(text: &str) -> Result<ExpectationConfig, ParseError> {
    let cfg: ExpectationConfig = if text.trim().is_empty() {
        ExpectationConfig::default()
    } else {
        // No source snippet: only the error's first line is kept, and rendering the snippet
        // (annotate-snippets) was half of what a bad file cost (the `expectation` fuzz target).
        serde_saphyr::from_str_with_options(text, serde_saphyr::options! { with_snippet: false }).map_err(|e| {
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or("unreadable");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            ParseError::new(format!(
                "bad expectations file: {} (see the format in docs/schema.md, \"expectation\")",
                quote_outside(first)
            ))
        })?
    };
    // A value's error quotes it (`bad bandwidth '…'`): escaped and bounded, the file is outside
    // input (the class of bug the `control_frame` fuzz target found; `expectation` checks it).
    let one_line = |e: ParseError| ParseError::new(quote_outside(&e.to_string()));
    cfg.overrides_for(Locality::SameHost).map_err(one_line)?;
    cfg.overrides_for(Locality::DifferentHosts).map_err(one_line)?;
    Ok(cfg)
}

/// Parses `8 GB/s`, `9000MiB/s`, `100 Gb/s` (bits), `1.5GiB/s`, `500 MB/s` into bytes per second.
pub fn parse_bandwidth(text: &str) -> Result<f64, ParseError> {
    let t = text.trim();
    let bad = || {
        ParseError::new(format!(
            "bad bandwidth '{text}': use a positive number with a unit, e.g. 10 GB/s, 9000 MiB/s or 100 Gb/s"
        ))
    };
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult = match unit.trim() {
        "GB/s" => 1e9,
        "MB/s" => 1e6,
        "kB/s" | "KB/s" => 1e3,
        "B/s" => 1.0,
        "GiB/s" => (1u64 << 30) as f64,
        "MiB/s" => (1u64 << 20) as f64,
        "Gb/s" | "Gbit/s" | "Gbps" => 1e9 / 8.0,
        "Mb/s" | "Mbit/s" | "Mbps" => 1e6 / 8.0,
        _ => return Err(bad()),
    };
    let v = n * mult;
    if !(v.is_finite() && v > 0.0) {
        return Err(bad());
    }
    Ok(v)
}
