//! The roll-up: every case's verdict set, then one report verdict whose headline is the most
//! important finding among the worst cases, with report-wide hints (UCX_TLS, IPC without PID).

use super::rules::{Assessment, Finding, assess};
use crate::classify::{describe, severity_rank};
use crate::model::*;

/// Sets every case's verdict and returns the rolled-up one: the worst status wins, its reason is
/// the most important finding among the worst cases (tcp fallback first), and `data_paths` lists
/// the classes seen in measured cases, most explanatory first.
pub fn judge_cases(cases: &mut [CaseResult], exp: &Expectation, settings: &RunSettings) -> Verdict {
    judge_cases_for(cases, exp, settings, UcxProfile::Default)
}

/// [`judge_cases`] for a run under `profile`: with `nixl`, tag cases are measured but not judged
/// (they are left out of the data paths and the count of judged cases, and the reason says so).
pub fn judge_cases_for(
    cases: &mut [CaseResult],
    exp: &Expectation,
    settings: &RunSettings,
    profile: UcxProfile,
) -> Verdict {
    let assessments: Vec<Assessment> = cases.iter().map(|c| assess(c, exp, settings, profile)).collect();
    for (case, a) in cases.iter_mut().zip(&assessments) {
        case.verdict = Some(a.verdict.clone());
    }
    super::case_health::judge_cases(cases);
    let judged = |i: &usize| assessments[*i].finding != Finding::NotJudged;
    let not_judged = assessments.iter().filter(|a| a.finding == Finding::NotJudged).count();

    let mut data_paths: Vec<TransportClass> = Vec::new();
    for c in (0..cases.len())
        .filter(judged)
        .map(|i| &cases[i])
        .filter(|c| c.status == CaseStatus::Measured)
    {
        let class = c
            .transport
            .as_ref()
            .map(|t| t.data_path.class)
            .unwrap_or(TransportClass::Unknown);
        if !data_paths.contains(&class) {
            data_paths.push(class);
        }
    }
    data_paths.sort_by_key(|c| severity_rank(*c));

    let measured = (0..cases.len())
        .filter(judged)
        .filter(|i| cases[*i].status == CaseStatus::Measured)
        .count();
    let skipped = assessments
        .iter()
        .filter(|a| a.verdict.status == Status::Skipped)
        .count();
    let worst = assessments
        .iter()
        .map(|a| a.verdict.status)
        .filter(|s| *s != Status::Skipped)
        .max()
        .unwrap_or(Status::Ok);

    // A fail is evidence whatever else the run could not see; short of one, a judged case whose
    // path or figure is unknown leaves the run unable to call the fabric right.
    let inconclusive = worst != Status::Fail && assessments.iter().any(|a| a.finding.is_inconclusive());
    if worst == Status::Fail || worst == Status::Warn {
        let headline = assessments
            .iter()
            .enumerate()
            .filter(|(_, a)| a.verdict.status == worst)
            .filter(|(_, a)| !inconclusive || a.finding.is_inconclusive())
            // Prefer the largest message as the example: KV-cache transfers are large.
            .min_by_key(|(i, a)| (a.finding, std::cmp::Reverse(cases[*i].size)))
            .map(|(i, a)| (i, a.finding, a.verdict.clone()));
        if let Some((idx, finding, v)) = headline {
            let same = assessments
                .iter()
                .filter(|a| a.verdict.status == worst && a.finding == finding)
                .count();
            let (status, head) = match (inconclusive, worst) {
                (true, _) => (VerdictStatus::Inconclusive, "inconclusive: "),
                (false, Status::Fail) => (VerdictStatus::Fail, ""),
                (false, _) => (VerdictStatus::Warn, ""),
            };
            let first = &cases[idx];
            let example = match first.transport.as_ref() {
                Some(t) => describe(first.test, first.memory, first.size, &t.data_path),
                None => format!(
                    "{} {} {}",
                    first.test,
                    crate::units::format_size(first.size),
                    first.memory
                ),
            };
            let total = cases.len();
            return Verdict {
                status,
                reason: format!("{head}{} ({same} of {total} cases; e.g. {example})", v.reason),
                hint: v.hint,
                data_paths,
            };
        }
    }
    if measured == 0 && not_judged > 0 {
        return Verdict {
            status: VerdictStatus::Inconclusive,
            reason: format!(
                "inconclusive: only tag cases were measured ({not_judged}), which --ucx-profile nixl does not judge"
            ),
            hint: Some("NIXL moves KV with put/get: add put_bw,get_bw to --tests".to_string()),
            data_paths,
        };
    }
    if measured == 0 {
        // Skips for missing CUDA have one fix; any other skip (a server's bound) names its own.
        let other_skip = cases
            .iter()
            .find(|c| c.status == CaseStatus::Skipped && !c.memory.uses_cuda())
            .and_then(|c| c.reason.clone());
        return Verdict {
            status: VerdictStatus::Inconclusive,
            reason: format!("inconclusive: no case was measured ({skipped} skipped)"),
            hint: Some(other_skip.unwrap_or_else(|| {
                "run where the requested memory types are available, or ask for host-host".to_string()
            })),
            data_paths,
        };
    }
    let classes: Vec<&str> = data_paths.iter().map(|c| c.as_str()).collect();
    // The skips' reason belongs in the verdict line: a run that passed on host memory only must
    // not read like one that tested CUDA too.
    let skip_reason = cases
        .iter()
        .find(|c| c.status == CaseStatus::Skipped)
        .and_then(|c| c.reason.as_deref());
    let mut skipped_note = match (skipped, skip_reason) {
        (0, _) => String::new(),
        (n, Some(why)) => format!("; {n} skipped: {why}"),
        (n, None) => format!(", {n} skipped"),
    };
    if not_judged > 0 {
        skipped_note.push_str(&format!(
            "; {not_judged} tag case(s) measured but not judged under --ucx-profile nixl (NIXL moves KV with put/get)"
        ));
    }
    Verdict {
        status: VerdictStatus::Pass,
        reason: format!(
            "all {measured} measured cases ok over {} for {}{skipped_note}",
            classes.join(", "),
            exp.locality
        ),
        hint: None,
        data_paths,
    }
}

/// Judges a whole report in place (case verdicts and the rolled-up verdict).
pub fn judge(report: &mut PairReport) {
    let exp = report.expectation.clone();
    let settings = report.settings.clone();
    report.verdict = judge_cases_for(
        &mut report.cases,
        &exp,
        &settings,
        report.ucx_profile.unwrap_or_default(),
    );
    if let Some(partial) = &report.partial {
        // Each case keeps its own verdict (evidence); the run has none.
        let reason = partial.reason.clone();
        mark_interrupted(report, &reason);
        return;
    }
    if report.verdict.data_paths.contains(&TransportClass::Tcp)
        && let Some(hint) = tcp_only_tls_hint(report).or_else(|| shared_ipc_without_pid_hint(report))
    {
        // The generic namespace/RDMA hint would send the operator after the wrong cause.
        report.verdict.hint = Some(hint);
    }
    super::controls::apply(report);
    readiness_warning(report);
    super::case_health::counter_warning(report);
}

/// A pass whose two sides disagree on their RDMA readiness (an MTU, a GID index, the firmware)
/// is a warning: the bytes moved, but a difference like that costs speed or falls back under
/// load. The first difference is named with its fix; a failing verdict keeps its own answer.
fn readiness_warning(report: &mut PairReport) {
    let Some(readiness) = report.readiness.as_deref() else {
        return;
    };
    let Some(first) = readiness.mismatches.first().cloned() else {
        return;
    };
    if report.verdict.status != VerdictStatus::Pass {
        return;
    }
    let more = readiness.mismatches.len() - 1;
    let more = if more > 0 {
        format!(" (+{more} more)")
    } else {
        String::new()
    };
    report.verdict.status = VerdictStatus::Warn;
    report.verdict.reason = format!(
        "{}; but the two sides' RDMA readiness differs: {first}{more}",
        report.verdict.reason
    );
    if report.verdict.hint.is_none() {
        report.verdict.hint = Some(first.field.fix().to_string());
    }
}

/// Marks `report` as cut short by `reason` (e.g. `interrupted by SIGTERM`): `partial` says so and
/// the run's verdict is [`VerdictStatus::Interrupted`], naming how much was measured, whatever
/// the cases measured before it showed. Exit 130 ([`crate::exit::for_report`]).
pub fn mark_interrupted(report: &mut PairReport, reason: &str) {
    let measured = report.cases.len();
    let planned = report
        .partial
        .as_ref()
        .map_or(measured, |p| p.planned_cases)
        .max(measured);
    report.partial = Some(crate::model::PartialRun {
        reason: reason.to_string(),
        planned_cases: planned,
    });
    report.verdict.status = VerdictStatus::Interrupted;
    report.verdict.reason = format!("{reason}: {measured} of {planned} cases measured, no verdict");
    report.verdict.hint = None;
}

/// Same host, tag traffic over shared memory, but RMA over tcp or emulated: the sides share an
/// IPC namespace (hostIPC) and not a PID namespace, so cma — the zero-copy path RMA takes on one
/// host — is unavailable. That is NIXL's path, so a passing tag test would mislead.
fn shared_ipc_without_pid_hint(report: &PairReport) -> Option<String> {
    if report.placement.locality != Locality::SameHost {
        return None;
    }
    let class = |c: &CaseResult| c.transport.as_ref().map(|t| t.data_path.class);
    let measured = || report.cases.iter().filter(|c| c.status == CaseStatus::Measured);
    let tag_over_shm = measured().any(|c| !c.test.is_rma() && class(c) == Some(TransportClass::SharedMemory));
    let rma_slow = measured()
        .any(|c| c.test.is_rma() && matches!(class(c), Some(TransportClass::Tcp | TransportClass::RmaEmulated)));
    (tag_over_shm && rma_slow).then(|| {
        "tag messages use shared memory but put/get (NIXL's operations) do not: the sides share IPC but not \
         PID namespaces, and cma needs both; add hostPID (or run both roles in one pod), or use RDMA"
            .to_string()
    })
}

/// When a side's `UCX_TLS` leaves UCX nothing but TCP, that setting is the cause of a TCP data
/// path, whatever the placement: say so, naming the side and the value.
fn tcp_only_tls_hint(report: &PairReport) -> Option<String> {
    let sides = [("prefill", &report.client), ("decode", &report.server)];
    let (side, value) = sides.iter().find_map(|(side, peer)| {
        let value = peer.env.get("UCX_TLS")?;
        tls_allows_only_tcp(value).then_some((*side, value.as_str()))
    })?;
    let instead = match report.placement.locality {
        Locality::SameHost => "sm,cma (same host) and cuda_copy,cuda_ipc (GPU memory)",
        Locality::DifferentHosts => "rc or dc (RDMA) and cuda_copy (GPU memory)",
    };
    Some(format!(
        "UCX_TLS={value} on the {side} side leaves UCX only TCP: allow {instead}, or unset UCX_TLS"
    ))
}

/// True for an explicit transport list (not the `^` exclusion form) with nothing but tcp and
/// helpers that cannot carry data between processes on their own (self, and the cuda_copy /
/// gdr_copy staging copies, which still hand the bytes to tcp).
pub(super) fn tls_allows_only_tcp(value: &str) -> bool {
    let value = value.trim();
    if value.is_empty() || value.starts_with('^') {
        return false;
    }
    let names: Vec<&str> = value.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    names.contains(&"tcp")
        && names
            .iter()
            .all(|n| matches!(*n, "tcp" | "self" | "cuda_copy" | "gdr_copy"))
}
