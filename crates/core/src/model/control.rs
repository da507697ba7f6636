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
    /// The same pair with the recipe's transport variables (`UCX_*`, `NIXL_*` it sets for its
    /// workers) removed from both sides, so UCX runs with its defaults: a recipe knob that makes
    /// the path slower than no knob at all is a finding (`--control knobs-off`).
    KnobsOff,
}

impl ControlKind {
    pub const ALL: [ControlKind; 3] = [ControlKind::Tcp, ControlKind::WrongNic, ControlKind::KnobsOff];

    /// The spelling of `--control KIND` (the JSON spells `wrong_nic` and `knobs_off` with an
    /// underscore).
    pub fn as_str(self) -> &'static str {
        match self {
            ControlKind::Tcp => "tcp",
            ControlKind::WrongNic => "wrong-nic",
            ControlKind::KnobsOff => "knobs-off",
        }
    }

    /// Whether the control shows the detector working (a pass rests on it, so one not caught
    /// makes the run inconclusive); `knobs-off` compares two healthy configurations instead.
    pub fn tests_the_detector(self) -> bool {
        match self {
            ControlKind::Tcp | ControlKind::WrongNic => true,
            ControlKind::KnobsOff => false,
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
            "knobs-off" | "knobs_off" => Ok(ControlKind::KnobsOff),
            other => Err(crate::ParseError::new(format!(
                "'{other}' is not a control: use tcp, knobs-off (with a recipe) or wrong-nic (with --rails)"
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

/// What the recipe's transport variables did against UCX's defaults (`knobs-off`), beyond
/// [`KNOBS_OFF_MARGIN`] either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KnobsEffect {
    /// The recipe's env was slower than UCX's defaults: the run warns, naming the variables.
    Slower,
    /// Within the run's noise: the recipe's variables changed nothing measurable here.
    Unchanged,
    /// The recipe's env was faster than UCX's defaults.
    Faster,
}

impl KnobsEffect {
    /// The effect of a recipe env that moved `recipe_bps` against `defaults_bps` without it, on
    /// the same data path: beyond [`KNOBS_OFF_MARGIN`] either way.
    pub fn of(recipe_bps: f64, defaults_bps: f64) -> Option<KnobsEffect> {
        Self::beyond(recipe_bps, defaults_bps, KNOBS_OFF_MARGIN)
    }

    /// [`KnobsEffect::of`] where the recipe's env also moved the bytes onto another data path
    /// (e.g. `UCX_TLS=tcp`: tcp with the recipe, cma without). Another path is a typed
    /// difference, not run-to-run noise, so the margin is [`FAST_PATH_MARGIN`], the one the
    /// forced-TCP control holds a fast path to, instead of the same-path noise margin: a recipe
    /// that put the bytes on TCP at half the defaults' rate made them slower, whatever the machine.
    pub fn of_paths(recipe_bps: f64, defaults_bps: f64, same_path: bool) -> Option<KnobsEffect> {
        let margin = if same_path { KNOBS_OFF_MARGIN } else { FAST_PATH_MARGIN };
        Self::beyond(recipe_bps, defaults_bps, margin)
    }

    fn beyond(recipe_bps: f64, defaults_bps: f64, margin: f64) -> Option<KnobsEffect> {
        if !(recipe_bps > 0.0 && defaults_bps > 0.0) {
            return None;
        }
        Some(if defaults_bps > recipe_bps * margin {
            KnobsEffect::Slower
        } else if recipe_bps > defaults_bps * margin {
            KnobsEffect::Faster
        } else {
            KnobsEffect::Unchanged
        })
    }
}

/// How much faster (or slower) UCX's defaults must be than the recipe's env before `knobs-off`
/// calls the recipe's variables slower (or faster) rather than "changed nothing": the control's
/// row (at most 0.3 s) against the main run's row of the same case. Measured on the 2-core build
/// machine with `pair --local` while a cargo build ran on it (docs/benchmarks/2026-11-29-controls.md):
/// with a recipe whose only knob is UCX's own default, the two rows differed by 0.54-2.3x
/// (get_bw 4 MiB) and 0.65-1.49x (put_bw 1 MiB); a recipe forcing TCP was 10-33x slower than the
/// defaults. 3x stays clear of that noise; a knob that costs less than that is reported as
/// "changed nothing" with both figures, for a person to read.
pub const KNOBS_OFF_MARGIN: f64 = 3.0;

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
    /// `knobs_off`: the recipe's variables the control ran without (absent for other kinds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// `knobs_off`: what those variables did against UCX's defaults, when both rows have a figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<KnobsEffect>,
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
