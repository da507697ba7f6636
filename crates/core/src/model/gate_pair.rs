//! What the gate says of its pair step's warnings (issue 35 "controls", issue 36 item 4): a pass
//! of the gate listed only the probes' warnings while the pair step it ran warned (TCP allowed, a
//! knobs-off control, a KV request slower than TCP). Every warning is read from the pair report's
//! typed parts — each case's verdict, the controls, the rails' findings, the KV outcome — never
//! from the text of its rolled-up reason, and each becomes one `warn` finding of step `pair`
//! naming the cases, rail or control it was seen on. Warnings never change the gate's verdict.

use super::{CaseResult, ControlKind, ControlResult, Finding, KnobsEffect, PairReport, Status, VerdictStatus};

/// The pair step's warnings as gate findings, one per distinct thing seen: the same case-level
/// reason on many cases is one finding listing them; a recipe knob slower than UCX's defaults is
/// one finding (the knobs-off control's), not also the verdict line it produced. A pair verdict
/// at `warn` that none of these explains is kept as a finding of its own, so no warning of the
/// pair step is dropped.
pub(super) fn warnings(pair: &PairReport) -> Vec<Finding> {
    let mut out = case_warnings(pair);
    out.extend(pair.controls.iter().filter_map(|c| control_warning(pair, c)));
    if let Some(rails) = pair.rails.as_deref() {
        out.extend(rails.findings.iter().filter(|f| f.status == Status::Warn).map(|f| {
            let on = f.rail.map(|r| format!("rail {r}: ")).unwrap_or_default();
            warn(format!("{on}{}", f.text), f.fix.clone())
        }));
    }
    out.extend(kv_slower_than_tcp(pair));
    if out.is_empty() && pair.verdict.status == VerdictStatus::Warn {
        out.push(warn(pair.verdict.reason.clone(), pair.verdict.hint.clone()));
    }
    out
}

fn warn(detail: String, hint: Option<String>) -> Finding {
    Finding {
        step: "pair".into(),
        status: Status::Warn,
        check: None,
        detail,
        hint,
    }
}

/// How many cases a finding names before it says "and N more".
const CASES_NAMED: usize = 3;

/// The cases whose own verdict warned, one finding per distinct reason and fix, naming the
/// cases (and rail) it was seen on.
fn case_warnings(pair: &PairReport) -> Vec<Finding> {
    let mut groups: Vec<(&str, Option<&String>, Vec<&CaseResult>)> = Vec::new();
    for c in &pair.cases {
        let Some(v) = c.verdict.as_ref().filter(|v| v.status == Status::Warn) else {
            continue;
        };
        match groups
            .iter_mut()
            .find(|(reason, hint, _)| *reason == v.reason && *hint == v.hint.as_ref())
        {
            Some((_, _, cases)) => cases.push(c),
            None => groups.push((&v.reason, v.hint.as_ref(), vec![c])),
        }
    }
    groups
        .into_iter()
        .map(|(reason, hint, cases)| {
            let mut named: Vec<String> = cases.iter().take(CASES_NAMED).map(|c| case_name(c)).collect();
            if cases.len() > CASES_NAMED {
                named.push(format!("{} more", cases.len() - CASES_NAMED));
            }
            warn(format!("{reason} (on {})", named.join(", ")), hint.cloned())
        })
        .collect()
}

fn case_name(c: &CaseResult) -> String {
    let rail = c.rail.map(|r| format!(" rail {r}")).unwrap_or_default();
    format!("{} {} {}{rail}", c.operation(), c.shape(), c.memory)
}

/// A control's warning: the fast path no faster than forced TCP (the TCP control), or what the
/// recipe's knobs did against UCX's defaults (knobs-off: slower, changed nothing, faster, or no
/// figure to compare). An uncaught detector control makes the pair inconclusive, which the gate
/// already fails on.
fn control_warning(pair: &PairReport, c: &ControlResult) -> Option<Finding> {
    let vars = c.removed.join(", ");
    match (c.kind, c.effect) {
        // One finding however many TCP controls ran: the rule is the run's, not a control's.
        (ControlKind::Tcp, _) => {
            let first_tcp = pair.controls.iter().find(|k| k.kind == ControlKind::Tcp)?;
            if !std::ptr::eq(first_tcp, c) {
                return None;
            }
            let (reason, hint) = crate::verdict::controls::fast_path_no_faster_than_tcp(pair)?;
            Some(warn(reason, Some(hint)))
        }
        (ControlKind::KnobsOff, Some(KnobsEffect::Slower)) => Some(warn(
            c.detail.clone(),
            Some(format!(
                "drop or re-tune {vars} in the recipe: UCX's own choice was faster on this pair"
            )),
        )),
        (ControlKind::KnobsOff, Some(KnobsEffect::Unchanged)) => Some(warn(
            c.detail.clone(),
            Some(format!(
                "UCX's defaults did as well on this pair: {vars} may not be needed here"
            )),
        )),
        (ControlKind::KnobsOff, Some(KnobsEffect::Faster)) => Some(warn(c.detail.clone(), None)),
        (ControlKind::KnobsOff, None) => Some(warn(c.detail.clone(), None)),
        (ControlKind::WrongNic, _) => None,
    }
}

/// A `--kv-shape` request slower than the same bytes over a TCP fallback (the estimate the pair
/// prints beside it): the pair warns of it whatever the estimate's size, so the gate does too.
fn kv_slower_than_tcp(pair: &PairReport) -> Option<Finding> {
    let kv = pair.kv.as_deref()?;
    let p50 = kv.p50_slower_than_tcp()?;
    Some(warn(
        format!(
            "the KV transfer of {} ({:.1} ms p50 per request, prefill TP{} → decode TP{}) is slower than the same \
             bytes over a TCP fallback (~{:.1} ms)",
            kv.model, p50, kv.prefill_tp, kv.decode_tp, kv.tcp_estimate_ms
        ),
        Some("a starved machine or a slow path: check the data path and the machine's load; set --max-kv-ms to fail on it".into()),
    ))
}
