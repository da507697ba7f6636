//! Sweep results (`ic-bench.sweep/v1`) in each format. The [`Exporter`](crate::Exporter) impls of
//! the format modules call these; what is shared by several of them lives here.

pub(crate) mod fleet;
pub mod html;
pub(crate) mod junit;
pub(crate) mod prometheus;
pub(crate) mod rails;
pub(crate) mod table;
pub(crate) mod trend;

use icb_sweep::score::first_pass_verdicts;
use icb_sweep::{NodeVerdict, SweepResults};
use std::borrow::Cow;

/// The node verdicts to show: the final ones once the sweep is complete, while it runs the
/// first-pass verdicts of the pairs so far (every export is rewritten after every pair).
pub(crate) fn verdicts(r: &SweepResults) -> Cow<'_, [NodeVerdict]> {
    if r.node_verdicts.is_empty() {
        Cow::Owned(first_pass_verdicts(&r.nodes, &r.pairs))
    } else {
        Cow::Borrowed(&r.node_verdicts)
    }
}
