//! The NIC health counters' part of a rail's verdict: a slow rail whose congestion counters
//! moved is congested (naming the counters and the QoS settings to check), loss counters moving
//! are a lossy link (naming the port), and the target NIC's request counters contradicting the
//! phase's RDMA operation say it did not go over RDMA. The rules are
//! [`super::nic_health::rules`]'s; here they become [`RailFinding`]s by their typed kinds. Beside
//! them, what the rail's two ports disagree on before the run (an MTU, a GID index) warns.

use super::judge::rail_name;
use super::nic_health::rules::{HealthKind, RdmaEvidence};
use super::outcome::*;
use crate::model::Status;

/// Judges `row`'s health counters (`slow`: the rail was judged slow) and pushes its findings.
pub(crate) fn health_findings(row: &mut RailResult, slow: bool, out: &mut Vec<RailFinding>) {
    let name = rail_name(row);
    let Some(health) = &mut row.health else {
        return;
    };
    health.judge_ports(slow);
    for (side, f) in health.findings() {
        let (kind, status) = match f.kind {
            HealthKind::Congested => (RailFindingKind::Congested, Status::Fail),
            HealthKind::LossyLink if slow => (RailFindingKind::LossyLink, Status::Fail),
            HealthKind::LossyLink => (RailFindingKind::LossyLink, Status::Warn),
            // Not read: said in the row's health section, never a finding (nor a pass).
            HealthKind::NotRead => continue,
        };
        out.push(RailFinding {
            kind,
            status,
            rail: Some(row.index),
            text: format!("{name}: {side} {}", f.reason),
            fix: Some(f.fix.clone()),
        });
    }
    if let Some(rdma) = &health.rdma
        && rdma.evidence == RdmaEvidence::Contradicted
    {
        out.push(RailFinding {
            kind: RailFindingKind::NotRdma,
            status: Status::Warn,
            rail: Some(row.index),
            text: format!("{name}: {}", rdma.reason),
            fix: Some(format!(
                "check which transport carried the rail (the data path column) and UCX_NET_DEVICES={} on {}",
                row.prefill.ucx_net_devices, row.prefill.node
            )),
        });
    }
}

/// Pushes a warning for each value the rail's two NIC ports disagree on (read before the run):
/// the rail may still keep up, but an MTU or GID difference caps or breaks RDMA on it.
pub(crate) fn mismatch_findings(row: &RailResult, out: &mut Vec<RailFinding>) {
    for m in &row.mismatches {
        out.push(RailFinding {
            kind: RailFindingKind::Mismatch,
            status: Status::Warn,
            rail: Some(row.index),
            text: format!("{}: {m}", rail_name(row)),
            fix: Some(m.field.fix().to_string()),
        });
    }
}

#[cfg(test)]
#[path = "judge_health_tests.rs"]
mod tests;
