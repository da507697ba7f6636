//! icb-pair: one pair, start to verdict: the pipeline every way of running a pair goes through.
//!
//! A pair run is planned once ([`PairPlan`]: settings, where the expectation comes from,
//! deadlines), then [`run_pair`] does the sequence exactly once for any [`Launcher`]: start the
//! decode side (`ic-bench serve`), read its typed `listening` line, start the prefill side
//! (`ic-bench connect --plan`, which gets the settings and the resolved expectation as one
//! [`icb_core::protocol::ChildPlan`] document), read its per-case progress and its report, stop
//! both, clean up exactly once on every path (success, failure, deadline, cancel) and judge once.
//!
//! Launchers only start, describe and remove things: [`local`] runs two processes, optionally in
//! Linux namespaces that model pods and nodes (`icb_isolate`); [`kube`] runs two bench pods
//! (`icb_kube`); [`inplace`] copies this binary into two running worker containers through the
//! exec API and runs the sides there, with the workers' own environment and UCX. [`controls`]
//! are the negative controls a run repeats itself under (UCX forced to TCP). The orchestration
//! itself is tested without root or a cluster through a scripted fake launcher
//! (`tests/pipeline.rs`).
//!
//! The two orchestrators built on this pipeline have crates of their own (issue 38: this crate
//! was three under one name): `icb-rails` runs one pair per rail of a node pair at once, each a
//! [`run_pair`]; `icb-kv-transfer` runs a model's KV transfer as one process per TP rank behind
//! a coordinator. `icb-target` is the one typed target a `pair` command builds over all of them.
#![forbid(unsafe_code)]

pub mod controls;
pub mod inplace;
pub mod kube;
pub mod launcher;
pub mod local;
pub mod plan;
mod run;

pub use icb_core::protocol::SideErrorKind;
pub use launcher::{LaunchError, LaunchFailure, Launcher, Side};
pub use plan::{Deadlines, ExpectationError, ExpectationFlags, ExpectationInput, PairPlan};
pub use run::{Interrupted, PairError, PairOutcome, SideRole, run_pair};
pub use tokio_util::sync::CancellationToken;
