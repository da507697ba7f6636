//! icb-pair: the one pipeline behind every way of running a pair.
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
//! exec API and runs the sides there, with the workers' own environment and UCX. The orchestration itself is tested without root or a cluster through a scripted
//! fake launcher (`tests/pipeline.rs`).
//!
//! [`kv`] runs a model's KV transfer (`pair --kv-shape`): one process per TP rank, NIXL or the
//! UCX engine ([`kv::ranks`], repetitions as barriers), locally (the coordinator here, each rank
//! on the CPUs [`kv::cpus`] picks from the NUMA topology) or in two whole-node bench pods
//! ([`kv::kube_ranks`], the coordinator in the decode pod, admitting ranks by the run's token);
//! else one [`run_pair`] per rank-to-rank read. Its coordinator is tested with scripted ranks
//! (`tests/kv_ranks_scripted.rs`, `tests/kv_coordinator_auth.rs`), its CPU placement on
//! recorded sysfs trees (`tests/kv_cpus.rs`).
//!
//! [`rails`] runs many pairs at once, one per rail of a node pair (`pair --rails`): each row is
//! one [`run_pair`] with its own launcher from a [`rails::RailSeam`], between snapshots of both
//! nodes' NIC counters; the rows are judged together (`icb_core::rails::judge`). Its scripted
//! tests are `tests/rails_scripted.rs`.
//!
//! [`target`] is the one typed target a `pair` command's parse step builds (local, pods, in place,
//! rails, KV) and [`target::PairTarget::run`], which drives any of them to one end, saying what
//! it does through the [`target::RunView`] seam.
#![forbid(unsafe_code)]

pub mod controls;
pub mod emit;
pub mod inplace;
pub mod kube;
pub mod kv;
pub mod launcher;
pub mod local;
pub mod plan;
pub mod rails;
mod run;
pub mod target;
pub mod view;

pub use icb_core::protocol::SideErrorKind;
pub use launcher::{LaunchError, LaunchFailure, Launcher, Side};
pub use plan::{Deadlines, ExpectationError, ExpectationFlags, ExpectationInput, PairPlan};
pub use run::{Interrupted, PairError, PairOutcome, SideRole, run_pair};
pub use tokio_util::sync::CancellationToken;
