//! The rules over one device's counter deltas ([`PortDeltas`]): a slow rail whose congestion
//! counters moved is congested; loss or link-fault counters moving mean a lossy link; the
//! target NIC's `rx_read_requests`/`rx_write_requests` confirm (or contradict) that a READ or
//! WRITE case went over RDMA. Decisions are on the vocabulary's [`Indicates`], never on names
//! typed twice.

use super::{Delta, Driver, Indicates, PortDeltas, lookup};
use serde::{Deserialize, Serialize};

/// What a finding says about the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthKind {
    /// A slow rail whose ECN/CNP/pause/credit-wait counters moved.
    Congested,
    /// Retransmits, sequence errors, drops or link errors moved.
    LossyLink,
    /// A rule could not be judged: none of its counters were read.
    NotRead,
}

/// One finding on one device, with the counters behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthFinding {
    pub kind: HealthKind,
    /// `mlx5_1:1`, `eth2`.
    pub device: String,
    /// What the rule is about (`congestion`, `loss`).
    pub about: Indicates,
    /// `(counter, delta)` of the counters that moved.
    #[serde(default)]
    pub counters: Vec<(String, u64)>,
    /// The rule's counters that were not read.
    #[serde(default)]
    pub not_read: Vec<String>,
    /// One line.
    pub reason: String,
    /// One line: what to check.
    pub fix: String,
}

fn shown(counters: &[(String, u64)]) -> String {
    counters
        .iter()
        .map(|(n, v)| format!("{n} +{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The QoS settings to check for congestion: RoCE's where an ECN/CNP (mlx5) or pause (netdev)
/// counter moved, the IB fabric's where only credit waits did.
fn qos_fix(pushed: &[(String, u64)]) -> String {
    let roce = pushed
        .iter()
        .any(|(n, _)| lookup(Driver::Mlx5, n).is_some() || lookup(Driver::Netdev, n).is_some());
    if roce {
        "check the switch's ECN marking and PFC on the RoCE priority, the NIC's trust mode and PFC (mlnx_qos --trust dscp --pfc), DCQCN (ecn/roce_np, roce_rp enable), and that UCX_IB_TRAFFIC_CLASS / NCCL_IB_TC select the lossless class on both sides".to_string()
    } else {
        "check the fabric's congestion control and adaptive routing (subnet manager / UFM) and what else shares these links".to_string()
    }
}

/// The findings on one device: `slow` is whether its rail (or case) was judged slow.
pub fn judge_port(d: &PortDeltas, slow: bool) -> Vec<HealthFinding> {
    let mut out = Vec::new();
    let mut lost = d.moved(Indicates::Loss);
    lost.extend(d.moved(Indicates::LinkFault));
    if !lost.is_empty() {
        out.push(HealthFinding {
            kind: HealthKind::LossyLink,
            device: d.device.clone(),
            about: Indicates::Loss,
            reason: format!("lossy link on {}: {}", d.device, shown(&lost)),
            counters: lost,
            not_read: Vec::new(),
            fix: format!(
                "check {}'s cable, transceiver and switch port (symbol errors, link flaps); on RoCE, a priority without PFC drops under load",
                d.device
            ),
        });
    } else if !d.any_read(Indicates::Loss) && !d.any_read(Indicates::LinkFault) {
        out.push(not_read(d, Indicates::Loss));
    }
    if slow {
        let pushed = d.moved(Indicates::Congestion);
        if !pushed.is_empty() {
            out.push(HealthFinding {
                kind: HealthKind::Congested,
                device: d.device.clone(),
                about: Indicates::Congestion,
                reason: format!("congested: {} on {}", shown(&pushed), d.device),
                fix: qos_fix(&pushed),
                counters: pushed,
                not_read: Vec::new(),
            });
        } else if !d.any_read(Indicates::Congestion) {
            out.push(not_read(d, Indicates::Congestion));
        }
    }
    out
}

fn not_read(d: &PortDeltas, about: Indicates) -> HealthFinding {
    let mut names = d.not_read(about);
    if about == Indicates::Loss {
        names.extend(d.not_read(Indicates::LinkFault));
    }
    let what = match about {
        Indicates::Congestion => "congestion",
        _ => "loss",
    };
    HealthFinding {
        kind: HealthKind::NotRead,
        device: d.device.clone(),
        about,
        reason: format!(
            "{what} not judged on {}: no counter read ({})",
            d.device,
            names.join(", ")
        ),
        counters: Vec::new(),
        not_read: names,
        fix: "read the port's counters and hw_counters (sysfs) from where the workers run".to_string(),
    }
}

/// An RDMA operation a case said it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RdmaOp {
    Read,
    Write,
}

/// What the target NIC's request counters say of a case's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RdmaEvidence {
    Confirmed,
    Contradicted,
    NotRead,
}

/// The attribution check of one case on its target NIC (the side read from for a READ, written
/// to for a WRITE).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RdmaAttribution {
    pub op: RdmaOp,
    pub device: String,
    pub evidence: RdmaEvidence,
    pub reason: String,
}

/// `rx_read_requests` moving for a READ, and not for a WRITE (while `rx_write_requests` moves),
/// confirms the operation went over RDMA through `target`.
pub fn confirm_rdma(op: RdmaOp, target: &PortDeltas) -> RdmaAttribution {
    let get = |n: &str| target.get(n).and_then(Delta::read);
    let (reads, writes) = (get("rx_read_requests"), get("rx_write_requests"));
    let dev = &target.device;
    let (evidence, reason) = match (op, reads, writes) {
        (RdmaOp::Read, Some(r), _) if r > 0 => (RdmaEvidence::Confirmed, format!("rx_read_requests +{r} on {dev}")),
        (RdmaOp::Read, Some(_), _) => (
            RdmaEvidence::Contradicted,
            format!("no RDMA READ request reached {dev} (rx_read_requests did not move)"),
        ),
        (RdmaOp::Write, Some(r), _) if r > 0 => (
            RdmaEvidence::Contradicted,
            format!("READ requests reached {dev} in a WRITE case (rx_read_requests +{r}): a get protocol, not a write"),
        ),
        (RdmaOp::Write, Some(_), Some(w)) if w > 0 => (
            RdmaEvidence::Confirmed,
            format!("rx_write_requests +{w} and no READ request on {dev}"),
        ),
        (RdmaOp::Write, Some(_), Some(_)) => (
            RdmaEvidence::Contradicted,
            format!("no RDMA WRITE request reached {dev} (rx_write_requests did not move)"),
        ),
        _ => (
            RdmaEvidence::NotRead,
            format!("rx_read_requests/rx_write_requests not read on {dev}: RDMA not confirmed"),
        ),
    };
    RdmaAttribution {
        op,
        device: dev.clone(),
        evidence,
        reason,
    }
}

/// One table cell from the counters of the two ends of a rail phase or a case (the rails' column
/// and the cases' `NIC` column say the same words): `congested`, `lossy`, `not RDMA`,
/// comma-joined; where none of them, `not read` when neither end read a counter, else `not
/// explained` on a slow rail or failed case (no counter read says why it is slow: never `ok`) or
/// `ok`, each with `(part not read)` where one end or one rule was not.
pub fn health_cell<'a>(
    findings: impl Iterator<Item = &'a HealthFinding>,
    rdma: Option<&RdmaAttribution>,
    nothing_read: (bool, bool),
    slow: bool,
) -> String {
    let kinds: Vec<HealthKind> = findings.map(|f| f.kind).collect();
    let any = |k: HealthKind| kinds.contains(&k);
    let mut words = Vec::new();
    if any(HealthKind::Congested) {
        words.push("congested");
    }
    if any(HealthKind::LossyLink) {
        words.push("lossy");
    }
    if rdma.is_some_and(|r| r.evidence == RdmaEvidence::Contradicted) {
        words.push("not RDMA");
    }
    let (p, d) = nothing_read;
    let part = p || d || any(HealthKind::NotRead);
    let quiet = if slow { "not explained" } else { "ok" };
    match (words.is_empty(), part) {
        (false, _) => words.join(", "),
        (true, true) if p && d => "not read".into(),
        (true, true) => format!("{quiet} (part not read)"),
        (true, false) => quiet.into(),
    }
}
