//! icb-target: every way of running a pair behind one type, driven to one end, emitted once.
//!
//! [`target::PairTarget`] is what a `pair` command's parse step builds (local, pods, in place,
//! rails, KV): typed options in, [`target::PairTarget::run`] drives any of them to one
//! [`target::PairEnd`], saying what it does through the [`target::RunView`] seam ([`view`]: the
//! terminal's), and [`emit::emit_outcome`] renders, exports and judges the end once. It sits above
//! the three orchestrators it chooses between: `icb-pair` (one pair), `icb-rails` (a pair per
//! rail) and `icb-kv-transfer` (one process per TP rank), so none of them knows the others' flags.
#![forbid(unsafe_code)]

pub mod emit;
pub mod target;
pub mod view;

pub use target::{InPlaceTarget, KubeRailsTarget, KubeTarget, PairEnd, PairTarget, PodsFormat, PrepareError, RunView};
