//! How a run, a case or a check was judged, against which expectation.

use super::*;
use serde::{Deserialize, Serialize};
use std::fmt;

/// ok / warn / fail / skipped, shared by cases and probe checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Skipped,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skipped => "skipped",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckVerdict {
    pub status: Status,
    /// One line: what was seen.
    pub reason: String,
    /// One line: what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// A case's finding that a reader acts on by its type, not its text (added within v1):
    /// absent for every other finding and for probe checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<CaseFinding>,
}

/// The typed findings a case's verdict carries (`verdict.finding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseFinding {
    /// GPU→GPU on one host off cuda_ipc because the memory is not legacy-IPC capable (the
    /// allocation mode is the cause; `cuda_alloc` says which).
    AllocatorFallback,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictStatus {
    Pass,
    Warn,
    Fail,
    /// A signal stopped the run: what was measured is evidence, not an answer. Never a pass.
    Interrupted,
    /// The run measured, but cannot say whether the fabric is right: a judged case whose
    /// transport could not be attributed, a bandwidth case without a figure, nothing measured,
    /// or a negative control the run did not catch. Never a pass, never exit 0.
    Inconclusive,
}

impl VerdictStatus {
    /// The process exit code for this verdict (see [`crate::exit`]).
    pub fn exit_code(self) -> i32 {
        match self {
            VerdictStatus::Pass | VerdictStatus::Warn => crate::exit::OK,
            VerdictStatus::Fail | VerdictStatus::Inconclusive => crate::exit::VERDICT_FAILED,
            VerdictStatus::Interrupted => crate::exit::INTERRUPTED,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VerdictStatus::Pass => "pass",
            VerdictStatus::Warn => "warn",
            VerdictStatus::Fail => "fail",
            VerdictStatus::Interrupted => "interrupted",
            VerdictStatus::Inconclusive => "inconclusive",
        }
    }

    /// Whether the run may be called fit: pass or warn only (never fail, interrupted or
    /// inconclusive).
    pub fn is_fit(self) -> bool {
        matches!(self, VerdictStatus::Pass | VerdictStatus::Warn)
    }
}

/// The rolled-up answer for the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: VerdictStatus,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The data-path classes seen across measured cases, most important first.
    #[serde(default)]
    pub data_paths: Vec<TransportClass>,
}

/// What the placement should give; defaults from the reference fabric figures, overridable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub locality: Locality,
    /// Minimum bandwidth (bytes/s) for host-memory cases at or above `min_size_for_bandwidth`.
    pub min_host_bandwidth_bps: f64,
    /// Minimum bandwidth (bytes/s) for cases with CUDA memory on either side.
    pub min_cuda_bandwidth_bps: f64,
    /// Minimum bandwidth (bytes/s) for host↔cuda cases (one side CUDA, the other host memory);
    /// absent means `min_cuda_bandwidth_bps` applies. Same-host host↔cuda goes over PCIe, not
    /// NVLink, so it needs its own floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_mixed_bandwidth_bps: Option<f64>,
    /// Bandwidth floors apply only to messages this large or larger (KV-cache-sized blocks).
    pub min_size_for_bandwidth: u64,
    /// Whether TCP carrying the data fails the run (default true) or only warns.
    pub tcp_is_failure: bool,
    /// Where these numbers came from: `defaults`, `flags`, or a config file path.
    pub source: String,
    /// What the link between different hosts can carry at most (bytes/s), for the physics check:
    /// the smaller of the two sides' NIC line rates as each read it from sysfs
    /// (`icb_probe::facts::line_rate_bps`). Absent: a generous built-in bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_rate_bps: Option<f64>,
}
