//! icb-flags: the flag groups more than one `ic-bench` command flattens, and their readers.
//!
//! The rule that splits the command line between this crate and the binary: a flag group that
//! several commands share (what to measure, which engine, what to expect, which cluster, which
//! devices, where the report goes, the history, the rails, the KV shape) lives here, once, with
//! the reader that turns it into the typed options of the crate it feeds (`TestArgs` into
//! `RunSettings`, `ClusterArgs` into `icb_kube::ClusterOptions`, `HistoryArgs` into
//! `icb_report::RunHistory`, …). A command's own flags, its parse step (which flags contradict
//! each other, which target they choose), its drive and its emit stay in the binary's
//! `src/cmd/<command>.rs`. Cargo keeps its shared argument builders in its library
//! (`command_prelude`) for the same reason: one spelling of each flag, its help and its value
//! parser, whichever command takes it.
//!
//! Only the binary depends on this crate; it is the one place besides the binary that knows clap.
#![forbid(unsafe_code)]

mod clap_error;
pub mod cluster;
pub mod common;
pub mod devices;
pub mod exports;
pub mod history;
pub mod kv;
pub mod output;
pub mod rails;

pub use clap_error::one_line_clap_error;
