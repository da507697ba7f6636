//! In-run negative controls for `pair --rails` (issue 35): after the rails were run and judged,
//! a short extra phase on one rail pair, configured to be bad on purpose, that the detector must
//! catch. The phase runs through the same seam (the row's launcher pins its ranks the way the main
//! run's were pinned), so it crosses the path the rows crossed; a control the run does not catch
//! makes the whole report inconclusive, as for a plain pair (`icb_pair::controls`).

use super::{RailProgress, RailRow, RailSeam, RailsPlan, run_phase, run_rails};
use icb_core::model::{ControlKind, ControlResult, PairReport, VerdictStatus};
use icb_core::rails::RailFindingKind;
use icb_core::rails::judge::judge_rails;
use icb_core::verdict::controls::{control_not_run, judge_tcp_control};
use icb_pair::CancellationToken;
use icb_pair::controls::{short_control_plan, tcp_control_plan};
use icb_pair::{PairError, PairOutcome, run_pair};

/// [`run_rails`], then (when it ended with a complete report) each of `kinds` on one rail pair,
/// their results put into the report and its verdict judged again with them. An interruption
/// during a control ends as [`PairError::Interrupted`] carrying the rails' report as evidence.
pub async fn run_rails_with_controls<S: RailSeam>(
    kinds: &[ControlKind],
    plan: &RailsPlan,
    seam: &mut S,
    cancel: &CancellationToken,
    progress: &mut RailProgress<'_>,
) -> Result<PairOutcome, PairError> {
    let mut outcome = run_rails(plan, seam, cancel, progress).await?;
    if kinds.is_empty() || outcome.report.partial.is_some() {
        return Ok(outcome);
    }
    let mut controls = Vec::with_capacity(kinds.len());
    for kind in kinds {
        let result = match kind {
            ControlKind::Tcp => tcp_on_one_rail(plan, seam, &outcome.report, cancel).await,
            ControlKind::WrongNic => wrong_nic_on_one_rail(plan, seam, &outcome.report, cancel).await,
            // `pair` refuses --recipe with --rails; a caller that asked anyway learns it did not run.
            ControlKind::KnobsOff => Ok(control_not_run(
                *kind,
                "it needs a plain pair under a recipe's env (--local --recipe, or gate --recipe)",
            )),
        };
        let c = match result {
            Ok(c) => c,
            // The rails finished: their report is the evidence to write out.
            Err(PairError::Interrupted(mut i)) => {
                i.partial = Some(Box::new(outcome.report.clone()));
                return Err(PairError::Interrupted(i));
            }
            Err(e) => control_not_run(*kind, &e.to_string()),
        };
        tracing::info!("control {kind}: caught={} ({})", c.caught, c.detail);
        controls.push(c);
    }
    // A wrong-NIC control not caught: the counters cannot tell a rail on the wrong NIC here, so
    // no attribution of the run is trusted (and the verdict, below, is inconclusive).
    let missed = controls.iter().find(|c| c.kind == ControlKind::WrongNic && !c.caught);
    if let (Some(c), Some(rails)) = (missed, outcome.report.rails.as_mut()) {
        rails.distrust_counters(&c.detail);
    }
    outcome.report.controls = controls;
    icb_core::verdict::controls::apply(&mut outcome.report);
    Ok(outcome)
}

/// The rail a control runs on: the first row that measured a bandwidth case, with that row's
/// own cases as the main run to repeat and compare with.
fn control_rail(plan: &RailsPlan, report: &PairReport) -> Option<(usize, PairReport)> {
    plan.rows.iter().find_map(|row| {
        let main = rail_cases(report, row.index);
        main.cases
            .iter()
            .any(|c| c.status == icb_core::CaseStatus::Measured && c.test.is_bandwidth())
            .then_some((row.index, main))
    })
}

/// The rails report with only row `index`'s cases: that rail's main run.
fn rail_cases(report: &PairReport, index: usize) -> PairReport {
    let mut main = report.clone();
    main.cases.retain(|c| c.rail == Some(index));
    main
}

/// The TCP control on one rail pair: that row's launcher, its largest host-memory bandwidth case
/// once more with UCX forced to TCP on the prefill rank; caught when it is classified TCP. A
/// control that could not run is not caught. `Err` only for an interruption.
async fn tcp_on_one_rail<S: RailSeam>(
    plan: &RailsPlan,
    seam: &mut S,
    report: &PairReport,
    cancel: &CancellationToken,
) -> Result<ControlResult, PairError> {
    let kind = ControlKind::Tcp;
    let Some((index, main)) = control_rail(plan, report) else {
        return Ok(control_not_run(
            kind,
            "no rail measured a bandwidth case to repeat over TCP",
        ));
    };
    let Some(control) = tcp_control_plan(&plan.pair, &main) else {
        return Ok(control_not_run(
            kind,
            "no rail measured a bandwidth case to repeat over TCP",
        ));
    };
    let mut launcher = match seam.launcher(&plan.rows[index]) {
        Ok(l) => l,
        Err(e) => return Ok(on_rail(index, control_not_run(kind, &e.message))),
    };
    let result = match run_pair(&control, &mut launcher, cancel, &mut |_| {}).await {
        Ok(o) => judge_tcp_control(&o.report, &main),
        Err(PairError::Interrupted(i)) => return Err(PairError::Interrupted(i)),
        Err(e) => control_not_run(kind, &e.to_string()),
    };
    Ok(on_rail(index, result))
}

/// The control's detail names the rail pair it ran on.
fn on_rail(index: usize, mut c: ControlResult) -> ControlResult {
    c.detail = format!("rail {index}: {}", c.detail);
    c
}

/// A row and the rail whose NICs it is pinned to for the wrong-NIC control: the first row with
/// another row whose ends are other devices on both nodes.
fn wrong_nic_row(plan: &RailsPlan) -> Option<RailRow> {
    let row = plan.rows.first()?;
    let other = plan.rows.iter().find(|o| {
        o.prefill.counter_device != row.prefill.counter_device && o.decode.counter_device != row.decode.counter_device
    })?;
    let mut pinned = row.clone();
    pinned.prefill.ucx_net_devices = other.prefill.ucx_net_devices.clone();
    pinned.decode.ucx_net_devices = other.decode.ucx_net_devices.clone();
    Some(pinned)
}

/// The wrong-NIC control: one row's ranks pinned (`UCX_NET_DEVICES`) to another rail's NICs on
/// both nodes, one short case run alone between two counter snapshots, judged as any row alone;
/// caught when the counters put its bytes on the other rail's NIC (a `wrong_nic` finding). A
/// control that could not run or measured nothing is not caught. `Err` only for an
/// interruption.
async fn wrong_nic_on_one_rail<S: RailSeam>(
    plan: &RailsPlan,
    seam: &mut S,
    report: &PairReport,
    cancel: &CancellationToken,
) -> Result<ControlResult, PairError> {
    let kind = ControlKind::WrongNic;
    let Some(pinned) = wrong_nic_row(plan) else {
        return Ok(wrong_nic_not_run(
            "the node pair has one rail: no other rail's NIC to pin a rank to",
        ));
    };
    let Some(pair) = short_control_plan(&plan.pair, &rail_cases(report, pinned.index)) else {
        let why = format!(
            "rail {} measured no bandwidth case to repeat on another NIC",
            pinned.index
        );
        return Ok(wrong_nic_not_run(&why));
    };
    // Every row stays in the plan: the counters name whose NIC carried the bytes by them.
    let control = RailsPlan { pair, ..plan.clone() };
    let none: Vec<Option<PairOutcome>> = (0..plan.rows.len()).map(|_| None).collect();
    // Quiet: its case is no rail's result.
    let quiet = &mut |_: &RailRow, _: &icb_core::protocol::CaseProgress| {};
    let (run, outcome, attribution, _health) = match run_phase(&control, seam, &[&pinned], &none, cancel, quiet).await {
        Ok(mut phase) => phase.remove(0),
        Err(PairError::Interrupted(i)) => return Err(PairError::Interrupted(i)),
        Err(e) => return Ok(wrong_nic_not_run(&e.to_string())),
    };
    let case = format!(
        "rail {} pinned to {} and {}",
        pinned.index, pinned.prefill.ucx_net_devices, pinned.decode.ucx_net_devices
    );
    let row = icb_core::rails::RailResult {
        index: pinned.index,
        prefill: pinned.prefill.clone(),
        decode: pinned.decode.clone(),
        concurrent: run.clone(),
        alone: Some(run.clone()),
        line_rate_share: None,
        attribution,
        health: None,
        mismatches: Vec::new(),
        status: VerdictStatus::Pass,
    };
    let judged = judge_rails(plan.pattern, vec![row], plan.margin, plan.pair.settings.unit);
    let seen = judged.findings.iter().find(|f| f.kind == RailFindingKind::WrongNic);
    let detail = match (seen, &run.error) {
        (Some(f), _) => format!("a rank pinned to another rail's NIC was seen as wrong_nic: {}", f.text),
        (None, Some(e)) => format!("{NOT_ATTRIBUTED}: the wrong-nic control ({case}) could not run: {e}"),
        (None, None) => format!(
            "{NOT_ATTRIBUTED}: the wrong-nic control was not caught, the NICs' counters did not show {case} on the wrong NIC ({})",
            judged
                .findings
                .iter()
                .find(|f| f.kind == RailFindingKind::NotAttributed)
                .map_or("its bytes looked like its own rail's", |f| f.text.as_str())
        ),
    };
    let data_paths = outcome.map(|o| o.report.verdict.data_paths).unwrap_or_default();
    Ok(ControlResult {
        kind,
        caught: seen.is_some(),
        seen_as: data_paths,
        case,
        bandwidth_bps: run.bandwidth_bps,
        main_bandwidth_bps: None,
        detail,
        removed: Vec::new(),
        effect: None,
    })
}

/// How a wrong-NIC control that was not caught starts its line: the verdict's words for what it
/// means to the whole run.
const NOT_ATTRIBUTED: &str = "counter attribution: not attributed";

/// A wrong-NIC control that could not run: not caught, saying what that means for the run.
fn wrong_nic_not_run(why: &str) -> ControlResult {
    let mut c = control_not_run(ControlKind::WrongNic, why);
    c.detail = format!("{NOT_ATTRIBUTED}: {}", c.detail);
    c
}
