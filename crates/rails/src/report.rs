//! From the rows' pair runs to one pair report: each row's figure, bytes and data path, and the
//! roll-up whose verdict names the worst rail and its fix.

use super::RailsPlan;
use icb_core::model::{CaseStatus, PairReport, Status, TestKind, Verdict, VerdictStatus};
use icb_core::rails::{RailRun, RailsOutcome};
use icb_core::units::format_bandwidth;
use icb_pair::{PairError, PairOutcome};
use std::time::Duration;

/// A row's run as the table needs it; the outcome is kept for the report's cases.
pub(super) fn rail_run(result: Result<PairOutcome, PairError>) -> (RailRun, Option<PairOutcome>) {
    match result {
        Ok(outcome) => {
            let report = &outcome.report;
            let run = RailRun {
                bandwidth_bps: figure(report),
                status: report.verdict.status,
                reason: report.verdict.reason.clone(),
                app_bytes: app_bytes(report),
                data_path: data_path(report),
                error: None,
            };
            (run, Some(outcome))
        }
        Err(e) => (
            RailRun {
                bandwidth_bps: None,
                status: VerdictStatus::Fail,
                reason: e.to_string(),
                app_bytes: 0,
                data_path: None,
                error: Some(e.to_string()),
            },
            None,
        ),
    }
}

/// A rail's figure: the worst bandwidth test at the largest size it measured (a rail slow in one
/// direction only is a slow rail), as the sweep scores a pair.
fn figure(report: &PairReport) -> Option<f64> {
    let measured: Vec<(u64, f64)> = report
        .cases
        .iter()
        .filter(|c| c.status == CaseStatus::Measured && c.blocks.is_none_or(|b| b <= 1))
        .filter_map(|c| Some((c.size, c.measurement.as_ref()?.bandwidth_bps?)))
        .collect();
    let largest = measured.iter().map(|(size, _)| *size).max()?;
    measured
        .iter()
        .filter(|(size, _)| *size == largest)
        .map(|(_, bw)| *bw)
        .reduce(f64::min)
}

/// Payload bytes the row moved, warm-up included where the engine reports it (what the NICs'
/// counters should show, before headers). An engine that does not report its warm-up gives the
/// measured bytes alone: a lower bound, never an estimate. Latency cases move the message both
/// ways.
fn app_bytes(report: &PairReport) -> u64 {
    report
        .cases
        .iter()
        .filter_map(|c| {
            let m = c.measurement.as_ref()?;
            let moved = m.bytes.saturating_add(m.warmup_bytes.unwrap_or(0));
            let both_ways = c.test == TestKind::TagLat;
            Some(if both_ways { moved.saturating_mul(2) } else { moved })
        })
        .sum()
}

/// `tcp/rail2`: the transports and devices the cases' evidence says carried the bytes.
fn data_path(report: &PairReport) -> Option<String> {
    let mut lanes: Vec<String> = report
        .cases
        .iter()
        .filter_map(|c| c.transport.as_ref())
        .flat_map(|t| &t.data_path.transports)
        .map(|l| format!("{}/{}", l.transport, l.device))
        .collect();
    lanes.sort();
    lanes.dedup();
    (!lanes.is_empty()).then(|| lanes.join(","))
}

/// One pair report for the node pair: the first measured row's report as the frame (tool,
/// peers, settings, expectation), every row's cases tagged with their row, and the verdict of
/// the rails.
pub(super) fn assemble(
    plan: &RailsPlan,
    outcome: RailsOutcome,
    outcomes: Vec<Option<PairOutcome>>,
    elapsed: Duration,
) -> Result<PairOutcome, PairError> {
    let mut frame: Option<PairOutcome> = None;
    let mut cases = Vec::new();
    let mut cleanup = Vec::new();
    for (index, o) in outcomes.into_iter().enumerate() {
        let Some(o) = o else { continue };
        cases.extend(o.report.cases.iter().cloned().map(|mut c| {
            c.rail = Some(index);
            c
        }));
        if !o.cleanup.is_empty() {
            cleanup.push(format!("rail {index}: {}", o.cleanup));
        }
        frame.get_or_insert(o);
    }
    let Some(mut frame) = frame else {
        let why = outcome
            .findings
            .first()
            .map_or_else(|| "no rail ran".to_string(), |f| f.text.clone());
        return Err(PairError::Setup(format!("no rail measured anything: {why}")));
    };
    let report = &mut frame.report;
    report.cases = cases;
    report.duration_s = elapsed.as_secs_f64();
    report.placement.mode = format!("{} · {} rails", report.placement.mode, plan.rows.len());
    let data_paths = std::mem::take(&mut report.verdict.data_paths);
    report.verdict = Verdict {
        data_paths,
        ..verdict(&outcome, plan.pair.settings.unit)
    };
    report.rails = Some(Box::new(outcome));
    frame.cleanup = cleanup.join("; ");
    Ok(frame)
}

fn verdict(outcome: &RailsOutcome, unit: icb_core::model::BandwidthUnit) -> Verdict {
    let worst = outcome
        .rails
        .iter()
        .map(|r| r.status)
        .max_by_key(|s| match s {
            VerdictStatus::Pass => 0,
            VerdictStatus::Warn => 1,
            VerdictStatus::Fail => 2,
            VerdictStatus::Inconclusive => 3,
            VerdictStatus::Interrupted => 4,
        })
        .unwrap_or(VerdictStatus::Fail);
    // Rails that all passed on nodes whose DRA slices misplace their devices: the measured
    // fabric is fine, the claims the nodes' workers make are not. A warning, never a pass.
    let misplaced = outcome
        .findings
        .iter()
        .any(|f| f.kind == icb_core::rails::RailFindingKind::PcieRootMismatch);
    let worst = if worst == VerdictStatus::Pass && misplaced {
        VerdictStatus::Warn
    } else {
        worst
    };
    let first = outcome.findings.iter().find(|f| f.status >= Status::Warn);
    let summary = format!(
        "{} rails, aggregate {}, median {}",
        outcome.rails.len(),
        format_bandwidth(outcome.aggregate_bps, unit),
        format_bandwidth(outcome.median_bps, unit)
    );
    // The worst finding names the rail; a rail whose own pair verdict warns (TCP allowed, a
    // noisy case) without a rails finding is named by that verdict.
    let worst_row = outcome
        .rails
        .iter()
        .find(|r| r.status == worst && worst != VerdictStatus::Pass);
    let (reason, hint) = match (first, worst_row) {
        (Some(f), _) if worst != VerdictStatus::Pass => (format!("{} ({summary})", f.text), f.fix.clone()),
        (_, Some(row)) => (
            format!(
                "{}: {} ({summary})",
                icb_core::rails::judge::rail_name(row),
                row.concurrent.reason
            ),
            None,
        ),
        _ => (summary, None),
    };
    Verdict {
        status: worst,
        reason,
        hint,
        data_paths: Vec::new(),
    }
}
