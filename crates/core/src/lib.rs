//! The pure core of ic-bench.
//!
//! Everything here is data and rules, with no I/O: the result types that form the JSON
//! contract of `ic-bench pair` ([`model`]), the probe result types ([`checks`]), parsing of
//! sizes and units ([`units`]), what must never be printed ([`secrets`]), the lines a pair's two
//! sides print for their parent and the plan the parent hands the prefill side ([`protocol`]), the
//! classification of what UCX reported into a transport class ([`classify`]), the verdict rules
//! that turn measurements plus a placement into ok / warn / fail with a one-line reason and a fix
//! hint ([`verdict`]), the measurement-quality findings that make a number less trustworthy than
//! it looks ([`quality`]), the exit code a report maps to ([`exit`]), and the rail map of a GPU
//! node ([`rails`]).
//!
//! Keeping this crate free of UCX, CUDA, Kubernetes and the file system means the rules can be
//! table-tested exhaustively and reused by every front end (local pair, Kubernetes pair,
//! exporters) without pulling any of those in.
//!
//! [`fabric`] is the one place ic-bench spells the fabric vocabulary: which environment
//! variables decide the transport, which Kubernetes resources are GPUs or RDMA NICs, UCX
//! transport names and `UCX_TLS` / `UCX_NET_DEVICES`, quantities, `/dev/shm` and capabilities.
//! `probe env`, the recipe rules, the node probe and `pair`'s spec cloner all read through it,
//! so they cannot judge the same pod differently.
#![forbid(unsafe_code)]

pub mod checks;
pub mod classify;
pub mod error_line;
pub mod fabric;
pub mod flag_values;
pub mod launch;
pub mod model;
pub mod protocol;
pub mod quality;
pub mod rails;
pub mod readiness;
pub mod secrets;
pub mod serving;
pub mod units;
pub mod verdict;

pub use model::*;

/// Process exit codes: part of the contract, documented in the README.
pub mod exit {
    /// The verdict passed (or only warned).
    pub const OK: i32 = 0;
    /// The verdict failed (the fabric is not what the placement should give) or is
    /// inconclusive (the run could not tell: an unattributed data path, a control not caught);
    /// the report's `verdict.status` says which.
    pub const VERDICT_FAILED: i32 = 1;
    /// Bad flags, bad input, or the test could not be set up (UCX missing, peer unreachable, …).
    pub const USAGE_OR_SETUP: i32 = 2;
    /// Stopped by Ctrl-C or SIGTERM after cleaning up (128 + SIGINT, the shell convention).
    pub const INTERRUPTED: i32 = 130;

    /// The exit code of a pair report: its verdict's, except where the run could not test what
    /// it was asked to ([`setup_problem`]: [`USAGE_OR_SETUP`]) or was cut short (a partial
    /// report: [`INTERRUPTED`]).
    pub fn for_report(report: &crate::PairReport) -> i32 {
        if report.partial.is_some() {
            INTERRUPTED
        } else if setup_problem(report).is_some() {
            USAGE_OR_SETUP
        } else {
            report.verdict.status.exit_code()
        }
    }

    /// Why a judged report is a setup problem rather than a verdict, as the one error line says
    /// it: nothing measured because a requested memory type is unavailable (e.g. `--memory
    /// cuda-cuda` without a driver: not a pass), or a CUDA case skipped under `--require-cuda`
    /// (the machine, not the fabric, is missing something).
    pub fn setup_problem(report: &crate::PairReport) -> Option<String> {
        use crate::CaseStatus;
        let mut skipped = report.cases.iter().filter(|c| c.status == CaseStatus::Skipped);
        let first_skip = skipped.clone().next()?;
        let why = first_skip.reason.as_deref().unwrap_or("skipped");
        if report.settings.require_cuda
            && let Some(cuda) = skipped.find(|c| c.memory.uses_cuda())
        {
            return Some(format!(
                "CUDA memory was asked for (named in --memory, or --require-cuda) but {}: run where the NVIDIA driver is visible (libcuda.so.1), or drop the CUDA memory pairs (or --require-cuda)",
                cuda.reason.as_deref().unwrap_or("CUDA cases were skipped")
            ));
        }
        let measured = report.cases.iter().any(|c| c.status == CaseStatus::Measured);
        (!measured).then(|| {
            format!(
                "nothing was measured: {why}: run where the requested memory types are available, or ask for --memory host-host"
            )
        })
    }
}

/// A value given by the user could not be parsed; the message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

impl ParseError {
    pub fn new(msg: impl Into<String>) -> Self {
        ParseError(msg.into())
    }
}
