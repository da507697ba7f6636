//! In-run negative controls (issue 35): a short extra run on the same two sides, configured to be
//! bad on purpose, that ic-bench must catch. A PASS then rests on a detector shown to work on the
//! cluster it ran on; a control the run did not catch makes the run inconclusive.

use super::TransportClass;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a control breaks on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlKind {
    /// The same pair with UCX (or NIXL's UCX) forced to TCP (`UCX_TLS=tcp` on the prefill side,
    /// which leaves wire-up only TCP addresses to pick from): must be classified TCP.
    Tcp,
    /// `--rails` only: one rail pair's ranks pinned (`UCX_NET_DEVICES`) to another rail's NICs
    /// for one short phase run alone: the NICs' counters must show that rail's bytes on the
    /// other rail's NIC (a `wrong_nic` finding), or no counter attribution of the run is trusted.
    WrongNic,
}

impl ControlKind {
    pub const ALL: [ControlKind; 2] = [ControlKind::Tcp, ControlKind::WrongNic];

    /// The spelling of `--control KIND` (the JSON spells `wrong_nic` with an underscore).
    pub fn as_str(self) -> &'static str {
        match self {
            ControlKind::Tcp => "tcp",
            ControlKind::WrongNic => "wrong-nic",
        }
    }

    /// Whether the control needs `--rails` (a rank per rail to pin elsewhere).
    pub fn needs_rails(self) -> bool {
        self == ControlKind::WrongNic
    }
}

impl fmt::Display for ControlKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ControlKind {
    type Err = crate::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "tcp" => Ok(ControlKind::Tcp),
            "wrong-nic" | "wrong_nic" => Ok(ControlKind::WrongNic),
            other => Err(crate::ParseError::new(format!(
                "'{other}' is not a control: use tcp or wrong-nic (with --rails)"
            ))),
        }
    }
}

/// The fast path must beat forced TCP by this factor at the same case shape, or the run warns:
/// a "fast path" no faster than a TCP fallback is itself a finding. Measured on the 2-core build
/// machine (one host, 4 MiB tag_bw): shared memory/cma 4-40 GB/s, forced TCP over loopback
/// 0.8-2.5 GB/s; across real hosts RDMA is 10-50x TCP. 1.25x keeps run-to-run noise of either
/// side (±20 % seen at 1 MiB) from calling a healthy path TCP-like.
pub const FAST_PATH_MARGIN: f64 = 1.25;

/// One negative control as it ran and was judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlResult {
    pub kind: ControlKind,
    /// Whether ic-bench saw what the control broke (for `tcp`: every measured case classified
    /// TCP). `false`: the detector could not see it here, and the run is inconclusive.
    pub caught: bool,
    /// The data paths the control's cases were classified as (empty: nothing measured).
    #[serde(default)]
    pub seen_as: Vec<TransportClass>,
    /// The case shape the control measured, e.g. `tag_bw 4 MiB host-host`.
    pub case: String,
    /// The control's bandwidth (bytes/s), when it measured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_bps: Option<f64>,
    /// The main run's bandwidth for the same case shape (bytes/s), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_bandwidth_bps: Option<f64>,
    /// One line: what was seen, in the verdict's words.
    pub detail: String,
}

impl ControlResult {
    /// main ÷ control bandwidth, when both are known.
    pub fn speedup(&self) -> Option<f64> {
        match (self.main_bandwidth_bps, self.bandwidth_bps) {
            (Some(m), Some(c)) if c > 0.0 => Some(m / c),
            _ => None,
        }
    }
}
