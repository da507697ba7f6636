//! An interrupted rails run still reports: every rail's cases measured before the signal (rows
//! that finished, and the partial reports of rows cut short), each tagged with its rail, in one
//! report marked partial, as a plain pair writes its own. Never judged: the rails table and the
//! verdict are left to a complete run.

use icb_core::model::{PairReport, PartialRun};
use icb_pair::{Interrupted, PairError, PairOutcome};

/// A phase stopped by the signal, as one interruption: every row's cleanup, and the partial
/// report of every rail's cases so far (`earlier`: the rows' finished runs of earlier phases,
/// which an alone run does not replace; then this phase's `runs` of rows `indices`).
pub(super) fn interrupted(
    indices: &[usize],
    runs: &[Result<PairOutcome, PairError>],
    earlier: &[Option<PairOutcome>],
    rails: usize,
) -> PairError {
    let cleanup = Interrupted::cleanup_of(runs);
    let mut parts: Vec<_> = earlier
        .iter()
        .enumerate()
        .filter_map(|(i, o)| Some((i, o.as_ref()?.report.clone())))
        .collect();
    let fresh = phase_reports(indices, runs);
    parts.extend(
        fresh
            .into_iter()
            .filter(|(i, _)| earlier.get(*i).is_none_or(Option::is_none)),
    );
    let partial = merge(parts, rails);
    PairError::Interrupted(Interrupted { cleanup, partial })
}

/// The reports one phase left when `cancel` stopped it: `(row index, report)` for every row
/// that finished or reported its cases before stopping.
fn phase_reports(rows: &[usize], runs: &[Result<PairOutcome, PairError>]) -> Vec<(usize, PairReport)> {
    rows.iter()
        .zip(runs)
        .filter_map(|(index, run)| match run {
            Ok(o) => Some((*index, o.report.clone())),
            Err(PairError::Interrupted(Interrupted { partial: Some(p), .. })) => Some((*index, (**p).clone())),
            Err(_) => None,
        })
        .collect()
}

/// One partial report of `rails` rows from the rows' reports (earlier rounds' finished rows and
/// this phase's), `None` when no row measured anything. A row's report marked partial counts the
/// cases it planned; a finished row planned what it measured; a row with no report planned what
/// the others did.
fn merge(parts: Vec<(usize, PairReport)>, rails: usize) -> Option<Box<PairReport>> {
    let per_row = |r: &PairReport| r.partial.as_ref().map_or(r.cases.len(), |p| p.planned_cases);
    let planned_each = parts.iter().map(|(_, r)| per_row(r)).max()?;
    let planned_known: usize = parts.iter().map(|(_, r)| per_row(r)).sum();
    let planned = planned_known + planned_each * rails.saturating_sub(parts.len());
    let mut cases = Vec::new();
    let mut frame: Option<PairReport> = None;
    for (index, mut r) in parts {
        cases.extend(std::mem::take(&mut r.cases).into_iter().map(|mut c| {
            c.rail = Some(index);
            c
        }));
        frame.get_or_insert(r);
    }
    let mut frame = frame?;
    cases.sort_by_key(|c| c.rail);
    frame.cases = cases;
    frame.placement.mode = format!("{} · {rails} rails", frame.placement.mode);
    frame.rails = None;
    frame.partial = Some(PartialRun {
        reason: "interrupted".into(),
        planned_cases: planned,
    });
    Some(Box::new(frame))
}
