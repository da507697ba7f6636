//! The NIC health counters of one rail over one phase (`pair --rails`): each end's RDMA port,
//! read beside the byte counters before and after the phase, its deltas, and the findings of
//! [`super::rules`] (congested, lossy link, RDMA confirmed or contradicted). The pipeline fills
//! [`RailHealth::read`]; [`crate::rails::judge::judge_rails`] judges it once it knows whether
//! the rail was slow.

use super::rules::{HealthFinding, HealthKind, RdmaAttribution, RdmaOp, confirm_rdma, judge_port};
use super::{HealthSnapshot, PortDeltas, deltas};
use crate::rails::Phase;
use serde::{Deserialize, Serialize};

/// One end's health counters over a phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideHealth {
    /// The RDMA port read (`mlx5_0:1`): the rail NIC's port, whose counters explain its speed.
    pub device: String,
    /// What every counter did; absent: the port was in neither reading (`note` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deltas: Option<PortDeltas>,
    /// The rules' findings, `not_read` ones included (never a pass by absence).
    #[serde(default)]
    pub findings: Vec<HealthFinding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl SideHealth {
    /// `device`'s deltas from `before` to `after`; `note` says why when neither has it.
    pub fn read(device: &str, before: &HealthSnapshot, after: &HealthSnapshot) -> SideHealth {
        let deltas = deltas(before, after, device);
        let note = deltas
            .is_none()
            .then(|| match before.unreadable.as_deref().or(after.unreadable.as_deref()) {
                Some(why) => format!("health counters not read: {why}"),
                None => format!("health counters not read: no port {device} in the node's counters"),
            });
        SideHealth {
            device: device.to_string(),
            deltas,
            findings: Vec::new(),
            note,
        }
    }

    /// Whether not one counter of the port was read both times.
    pub fn nothing_read(&self) -> bool {
        self.deltas
            .as_ref()
            .is_none_or(|d| d.deltas.values().all(|x| x.read().is_none()))
    }

    /// The findings of one kind.
    pub fn of(&self, kind: HealthKind) -> impl Iterator<Item = &HealthFinding> {
        self.findings.iter().filter(move |f| f.kind == kind)
    }
}

/// Both ends' health counters of a rail over the phase its attribution comes from (the alone
/// phase when the rail ran alone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RailHealth {
    pub phase: Phase,
    pub prefill: SideHealth,
    pub decode: SideHealth,
    /// The attribution check: whether the target NIC's request counters saw the phase's RDMA
    /// READs (or WRITEs). Absent where the phase mixed reads and writes, or did no RDMA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<RdmaAttribution>,
    /// Whether the judge found the rail slow (below the rails' reference, or its own verdict
    /// failed): the counters then have something to explain, and none moving is "not
    /// explained", never `ok`. Absent: not slow (or a report written before it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slow: bool,
}

/// Which end an RDMA operation's requests arrive at: a READ is served by the side read from, a
/// WRITE lands on the side written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetEnd {
    Prefill,
    Decode,
}

impl RailHealth {
    /// Both ends read, not judged yet.
    pub fn read(
        phase: Phase,
        devices: (&str, &str),
        before: (&HealthSnapshot, &HealthSnapshot),
        after: (&HealthSnapshot, &HealthSnapshot),
    ) -> RailHealth {
        RailHealth {
            phase,
            prefill: SideHealth::read(devices.0, before.0, after.0),
            decode: SideHealth::read(devices.1, before.1, after.1),
            rdma: None,
            slow: false,
        }
    }

    /// Runs the port rules on both ends: `slow` is whether the rail was judged slow (the
    /// congestion rule only explains a slow rail).
    pub fn judge_ports(&mut self, slow: bool) {
        self.slow = slow;
        for side in [&mut self.prefill, &mut self.decode] {
            side.findings = side.deltas.as_ref().map(|d| judge_port(d, slow)).unwrap_or_default();
        }
    }

    /// The attribution check of the phase's one RDMA operation on the end its requests reach.
    pub fn check_rdma(&mut self, op: RdmaOp, end: TargetEnd) {
        let side = match end {
            TargetEnd::Prefill => &self.prefill,
            TargetEnd::Decode => &self.decode,
        };
        let unread = PortDeltas {
            device: side.device.clone(),
            ..Default::default()
        };
        self.rdma = Some(confirm_rdma(op, side.deltas.as_ref().unwrap_or(&unread)));
    }

    /// Every finding of both ends, prefill first.
    pub fn findings(&self) -> impl Iterator<Item = (&'static str, &HealthFinding)> {
        let p = self.prefill.findings.iter().map(|f| ("prefill", f));
        p.chain(self.decode.findings.iter().map(|f| ("decode", f)))
    }

    /// One cell for the table: `congested`, `lossy`, `not RDMA`, comma-joined; where none of
    /// them: `not read`, or on a slow rail `not explained` (no counter read says why it is
    /// slow: never `ok`), else `ok`, each with `(part not read)` where one end or rule was not.
    pub fn cell(&self) -> String {
        super::rules::health_cell(
            self.findings().map(|(_, f)| f),
            self.rdma.as_ref(),
            (self.prefill.nothing_read(), self.decode.nothing_read()),
            self.slow,
        )
    }
}
