//! icb-history: every result ic-bench measured, and how a run compares with its past (issue 21).
//!
//! The store is one SQLite file ([`History`], rusqlite with SQLite bundled): WAL, a busy timeout
//! that is the lock deadline, and immediate write transactions, so overlapping CronJob runs
//! queue and a killed run leaves the last committed state; a `schema_version` table with
//! migrations from v1 ([`schema`]). A row is one figure of one case ([`record::Row`]), keyed by
//! what makes results comparable: the case ([`icb_core::model::CaseKey`]: node pair, rail, test,
//! memory pair, size/blocks, direction, engine) and its environment
//! ([`icb_core::model::EnvKey`]: GPU, NIC firmware/driver, UCX and NIXL versions, a hash of the
//! transport environment). [`baseline`] compares a run with the mean of its last matching runs;
//! [`ack`] reads the known regressions; [`query`] and [`answer`] answer `ic-bench history`; [`session`] is
//! what the commands call.
#![forbid(unsafe_code)]

pub mod ack;
pub mod answer;
pub mod baseline;
mod error;
pub mod import;
mod node_baseline;
pub mod query;
pub mod record;
pub mod render;
mod run_verdict;
pub mod schema;
pub mod session;
mod store;
mod write;

pub use ack::{Ack, AckError, Acks};
pub use baseline::{BaselineSource, FlagError, Thresholds};
pub use error::HistoryError;
pub use record::{RunKind, RunRecord, RunVerdict};
pub use session::{Options, Prepared};
pub use store::{DEFAULT_LOCK_DEADLINE, History};
pub use write::Written;
