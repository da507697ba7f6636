//! The NIC health counters of each case of a plain `pair` in every format (issue 40 item 1): the
//! table's `NIC` column (where any case read a counter), the findings under the table (every
//! moved counter per case and side with `-o wide`), JUnit properties and Prometheus samples.
//! Where nothing was read it says "not read", never a zero or an `ok`.

use crate::format::View;
use crate::wrap::push_wrapped;
use icb_core::model::{CaseResult, PairReport};
use icb_core::rails::nic_health::Delta;
use icb_core::rails::nic_health::case::{CaseHealth, CaseSideHealth};
use icb_core::rails::nic_health::rules::{HealthKind, RdmaEvidence};
use icb_core::units::format_size;

/// Whether any case read a counter on either side: only then has the table a `NIC` column.
pub(crate) fn any_read(r: &PairReport) -> bool {
    r.cases
        .iter()
        .any(|c| c.nic_health.as_deref().is_some_and(CaseHealth::any_read))
}

/// The `NIC` cell of a case: the rules' word (`congested`, `lossy`, `not RDMA`, `ok`, `not
/// explained`), `not read` where the case has no reading.
pub(crate) fn cell(c: &CaseResult) -> String {
    match c.nic_health.as_deref() {
        Some(h) => h.cell(),
        None if c.status == icb_core::model::CaseStatus::Measured => "not read".to_string(),
        None => "-".to_string(),
    }
}

fn case_name(c: &CaseResult) -> String {
    format!("{} {} {}", c.operation(), c.memory, format_size(c.size))
}

/// `mlx5_1:1 np_cnp_sent +120, rx_write_requests +4000`: what moved on one side (`-o wide`).
fn moved_on(side: &CaseSideHealth) -> Vec<String> {
    side.ports
        .iter()
        .filter_map(|p| {
            let moved: Vec<String> = p
                .deltas
                .as_ref()?
                .deltas
                .iter()
                .filter_map(|(n, d)| match d {
                    Delta::Moved { by } if *by > 0 => Some(format!("{n} +{by}")),
                    Delta::WentBack => Some(format!("{n} went back")),
                    _ => None,
                })
                .collect();
            (!moved.is_empty()).then(|| format!("{} {}", p.device, moved.join(", ")))
        })
        .collect()
}

/// The lines under the table: each case's findings with their fix, the attribution check where
/// it contradicts RDMA, a side not read; with `-o wide` every counter that moved.
pub(crate) fn push_lines(out: &mut String, r: &PairReport, view: View) {
    if !r.cases.iter().any(|c| c.nic_health.is_some()) {
        return;
    }
    let mut unread: Vec<String> = Vec::new();
    for c in &r.cases {
        let Some(h) = c.nic_health.as_deref() else { continue };
        let name = case_name(c);
        for (side, f) in h.findings().filter(|(_, f)| f.kind != HealthKind::NotRead) {
            push_wrapped(out, &format!("nic[{name}]: {side} {}; fix: {}", f.reason, f.fix), view);
        }
        if let Some(rdma) = h.rdma.as_ref().filter(|r| r.evidence == RdmaEvidence::Contradicted) {
            push_wrapped(out, &format!("nic[{name}]: {}", rdma.reason), view);
        }
        for why in [&h.prefill.not_read, &h.decode.not_read].into_iter().flatten() {
            if !unread.contains(why) {
                unread.push(why.clone());
            }
        }
        if view.wide {
            for (side, s) in [("prefill", &h.prefill), ("decode", &h.decode)] {
                let moved = moved_on(s);
                if !moved.is_empty() {
                    push_wrapped(out, &format!("nic[{name}]: {side} moved: {}", moved.join("; ")), view);
                }
            }
            if let Some(rdma) = &h.rdma {
                push_wrapped(out, &format!("nic[{name}]: attribution: {}", rdma.reason), view);
            }
        }
    }
    for why in unread {
        push_wrapped(out, &format!("NIC counters not read: {why}"), view);
    }
}

/// JUnit properties of a case: its `NIC` word and each finding (`nic.prefill.congested`, ...).
pub(crate) fn properties(c: &CaseResult) -> Vec<(String, String)> {
    let Some(h) = c.nic_health.as_deref() else {
        return Vec::new();
    };
    let mut out = vec![("nic".to_string(), h.cell())];
    for (side, f) in h.findings() {
        let kind = serde_json::to_value(f.kind).ok();
        let kind = kind.as_ref().and_then(|k| k.as_str()).unwrap_or("finding");
        out.push((format!("nic.{side}.{kind}"), f.reason.clone()));
    }
    if let Some(rdma) = &h.rdma {
        out.push(("nic.rdma".to_string(), rdma.reason.clone()));
    }
    out
}

/// Per case, side, port and counter: the delta of every congestion, loss and link-fault counter
/// that was read (zero included; a counter not read has no sample, never a 0), as the rails'
/// `rail_nic_counter_delta` does.
pub(crate) fn samples(c: &CaseResult) -> Vec<(&'static str, String, String, u64)> {
    use icb_core::rails::nic_health::Indicates;
    let Some(h) = c.nic_health.as_deref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (side, s) in [("prefill", &h.prefill), ("decode", &h.decode)] {
        for p in &s.ports {
            let Some(d) = &p.deltas else { continue };
            for what in [Indicates::Congestion, Indicates::Loss, Indicates::LinkFault] {
                for (counter, by) in d.read_of(what) {
                    out.push((side, p.device.clone(), counter, by));
                }
            }
        }
    }
    out
}
