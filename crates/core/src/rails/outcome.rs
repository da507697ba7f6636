//! The per-rail section of a pair report (`pair --rails`, `rails` in `ic-bench.pair/v1`, additive;
//! see `docs/schema.md`): one row per rail pair with its figure concurrently and alone, which
//! NICs carried its bytes by their own counters, and its verdict; below it the node pair's
//! aggregate and the findings that name a rail and the fix.

use super::{GpuRef, NicRef, PcieRelation};
use crate::model::{Status, VerdictStatus};
use serde::{Deserialize, Serialize};

/// Which prefill rails are paired with which decode rails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RailPattern {
    /// Rail i of the prefill node with rail i of the decode node: the production shape.
    #[default]
    Aligned,
    /// Every prefill rail with every decode rail, in rounds of one partner each, to find a broken
    /// spine path or a cross-rail pair that cannot reach each other.
    Cross,
}

impl RailPattern {
    pub fn as_str(self) -> &'static str {
        match self {
            RailPattern::Aligned => "aligned",
            RailPattern::Cross => "cross",
        }
    }
}

/// One end of a rail: the node, its GPU (none for host-memory rails), the NIC port the rank was
/// pinned to and what the rank was told (`UCX_NET_DEVICES`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailEnd {
    /// The rail's number on its node, 0…K-1.
    pub rail: usize,
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRef>,
    pub nic: NicRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<PcieRelation>,
    /// The value the rank ran with: `mlx5_0:1`, or a network device for host rails (`rail0`).
    pub ucx_net_devices: String,
    /// The counter device whose bytes belong to this rail (`mlx5_0:1` or a netdev).
    pub counter_device: String,
}

/// One run of a rail pair: its figure, or why it has none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailRun {
    /// The rail's best bandwidth case (bytes/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_bps: Option<f64>,
    /// The rail's own pair verdict (floors, transport), as a pair run judges it.
    pub status: VerdictStatus,
    pub reason: String,
    /// Payload bytes the row moved, warm-up included where the engine reports it: what the NICs'
    /// counters should show before headers (an own-NIC share a little above 1 is healthy).
    pub app_bytes: u64,
    /// The transport that carried the bytes, as the cases' evidence says (`rc_mlx5`, `tcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_path: Option<String>,
    /// The run could not measure (a side failed, a deadline): the one line why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// When counters were compared with a rail's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// All rails at once: a device's bytes are its own rail's only when every rail kept to its
    /// device.
    Concurrent,
    /// The rail alone: every counted byte is this rail's.
    Alone,
}

/// What one device carried of a rail's bytes on one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceShare {
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    /// The rail whose device this is on this node; `None`: no rail's (the pod's `eth0`, a
    /// front-end NIC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<usize>,
    pub bytes: u64,
    /// `bytes` ÷ the rail's application bytes (a little above 1 by headers and ACKs).
    pub share: f64,
}

/// Whether the counters could tell where a rail's bytes went, on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttributionStatus {
    Counted,
    /// Counters unreadable, or far below the application's bytes: never a guess.
    NotAttributed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideAttribution {
    pub status: AttributionStatus,
    /// Devices that carried a noticeable part of the rail's bytes (≥ 1 %), largest first; in the
    /// concurrent phase only the rail's own device (others carry other rails' bytes).
    #[serde(default)]
    pub devices: Vec<DeviceShare>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Where a rail's bytes went by the NICs' own counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    pub phase: Phase,
    pub app_bytes: u64,
    pub prefill: SideAttribution,
    pub decode: SideAttribution,
}

/// One row of the per-rail table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailResult {
    /// Row number; for the aligned pattern the rail's number (0…K-1).
    pub index: usize,
    pub prefill: RailEnd,
    pub decode: RailEnd,
    pub concurrent: RailRun,
    /// Present when the rail also ran alone (slow or misattributed concurrently, or asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone: Option<RailRun>,
    /// The figure as a share of the slower NIC's line rate (sysfs `rate`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_rate_share: Option<f64>,
    /// The alone phase's when the rail ran alone, else the concurrent phase's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attribution>,
    /// The NICs' own error and congestion counters over the same phase as `attribution`;
    /// absent where the run read none (a seam that cannot read them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<super::nic_health::rail::RailHealth>,
    /// What the rail's two NIC ports disagree on before anything ran (MTU, GID index and
    /// type, link layer, firmware), each with both values; empty where they agree or were not
    /// read (older nodes' `rail-info` sends no readiness).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<crate::readiness::ReadinessMismatch>,
    pub status: VerdictStatus,
}

/// What a finding is about, for callers that act on it (sweep blame, exit codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RailFindingKind {
    /// The rail's run failed: nothing measured.
    Failed,
    /// The rail's own pair verdict failed (a floor, the transport).
    Verdict,
    /// More than the margin below the median of the rails, alone too: a bad rail.
    BelowMedian,
    /// Below the median only while all rails ran: contention (a shared PCIe switch, a NUMA
    /// funnel), not the rail.
    Contention,
    /// The rail's bytes left through another rail's NIC (wrong or ignored `UCX_NET_DEVICES`).
    WrongNic,
    /// The rail's own NIC carried ~0 bytes.
    IdleNic,
    /// The rail's bytes went through a device that is no rail's (the pod's `eth0`).
    OffRail,
    /// The counters could not attribute the rail's bytes.
    NotAttributed,
    /// The aggregate is far below the sum of the rails alone.
    Funnel,
    /// A slow rail whose NIC's ECN/CNP/pause/credit-wait counters moved: the fabric pushed back.
    Congested,
    /// Retransmits, sequence errors, drops or link errors moved on a rail's NIC.
    LossyLink,
    /// The target NIC's request counters contradict the RDMA operation the rail said it did.
    NotRdma,
    /// The rail's two NIC ports disagree on a value both sides must share (an MTU, the GID
    /// index or type, the link layer, the firmware).
    Mismatch,
}

/// One finding, worst first in the report; the first failing one is the verdict's reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailFinding {
    pub kind: RailFindingKind,
    pub status: Status,
    /// The row it is about; `None`: the node pair as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<usize>,
    /// One line: what was seen, naming the rail, its GPU and NIC.
    pub text: String,
    /// One line: what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The `rails` section of a pair report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailsOutcome {
    pub pattern: RailPattern,
    pub rails: Vec<RailResult>,
    /// Σ of the rails' concurrent figures (bytes/s).
    pub aggregate_bps: f64,
    /// Σ of the rails' figures alone, when every rail also ran alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum_alone_bps: Option<f64>,
    /// The median of the rails' concurrent figures, the relative rule's reference.
    pub median_bps: f64,
    /// The relative rule: a rail more than this fraction below the median fails.
    pub margin: f64,
    #[serde(default)]
    pub findings: Vec<RailFinding>,
}

impl RailsOutcome {
    /// A wrong-NIC control the counters did not catch (issue 35): no counter attribution of this
    /// run is trusted. Every row's attribution becomes not attributed, saying `why`, and one
    /// `not_attributed` finding about the node pair says so among the findings (after the
    /// failing ones). The findings already drawn are kept: the verdict's reason names the control.
    pub fn distrust_counters(&mut self, why: &str) {
        let note = format!("counter attribution not trusted for this run: {why}");
        let distrusted = |side: &mut SideAttribution| {
            side.status = AttributionStatus::NotAttributed;
            side.note = Some(note.clone());
        };
        for row in &mut self.rails {
            if let Some(a) = &mut row.attribution {
                distrusted(&mut a.prefill);
                distrusted(&mut a.decode);
            }
        }
        let at = self
            .findings
            .iter()
            .position(|f| f.status < Status::Fail)
            .unwrap_or(self.findings.len());
        let finding = RailFinding {
            kind: RailFindingKind::NotAttributed,
            status: Status::Warn,
            rail: None,
            text: format!("every rail's bytes: not attributed ({why})"),
            fix: Some(
                "check that the NICs' counters count this traffic (RDMA port counters, not netdev ones) and that \
                 each rank's UCX_NET_DEVICES is honoured"
                    .into(),
            ),
        };
        self.findings.insert(at, finding);
    }

    /// aggregate ÷ Σ(rail alone): 1.0 when running together costs nothing.
    pub fn scaling(&self) -> Option<f64> {
        self.sum_alone_bps.filter(|s| *s > 0.0).map(|s| self.aggregate_bps / s)
    }
}
