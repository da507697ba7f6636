//! The verdict rules: what the placement should give, and ok / warn / fail for every case.
//!
//! Classification decides first, bandwidth second. On the 2-core development machine loopback
//! TCP moves ~4.5 GB/s against ~7 GB/s over sysv, so a bandwidth floor alone cannot tell a TCP
//! fallback from shared memory; the transport UCX reports can. Floors then catch a correct
//! transport that is still slow (wrong NIC, PCIe placement, a throttled link).
//!
//! # The expectations file
//!
//! YAML, parsed with serde-saphyr (so JSON, a subset of YAML, works too). Every key is
//! optional; unknown keys are an error naming the key. Bandwidths carry a unit: `GB/s`
//! (10^9 B/s), `MB/s` (10^6), `GiB/s`, `MiB/s`, or `Gb/s` (10^9 *bits*/s, as NICs are sold).
//!
//! ```yaml
//! same_host:            # both sides on one host
//!   host: 1 GB/s        # host→host
//!   cuda: 50 GB/s       # cuda→cuda
//!   host_cuda: 5 GB/s   # host→cuda and cuda→host
//! different_hosts:
//!   host: 100 Gb/s
//!   cuda: 10 GB/s
//! min_size: 1MiB        # floors apply to messages at least this large
//! tcp: warn             # fail (default) or warn when TCP carries the data
//! ```
//!
//! The CLI reads the file and passes its text to [`parse_expectation_config`]; flags win over
//! the file, the file over [`Expectation::defaults`](crate::model::Expectation::defaults).
//!
//! The module is split by job: [`expectation`] (the floors a placement should give and how
//! flags and the file override them), [`config`] (the expectations file format), `rules` (one
//! case's verdict from its data path and bandwidth) and `rollup` (the report's verdict from the
//! cases').

mod allocator;
mod case_health;
pub mod config;
pub mod controls;
pub mod expectation;
mod rollup;
mod rules;

pub use config::{
    BandwidthSize, BandwidthValue, ExpectationConfig, LocalityFloors, TcpPolicy, parse_bandwidth,
    parse_expectation_config,
};
pub use expectation::*;
pub use rollup::{judge, judge_cases, judge_cases_for, mark_interrupted};
pub use rules::judge_case;

#[cfg(test)]
use crate::model::*;
#[cfg(test)]
use rollup::tls_allows_only_tcp;

/// 10^9: floors are written in GB/s.
const GB: f64 = 1e9;

#[cfg(test)]
mod tests;
