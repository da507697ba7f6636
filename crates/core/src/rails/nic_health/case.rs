//! The NIC health counters of one case of a plain `pair` (issue 40 item 1): each side reads
//! every RDMA port of its node (the reader of `pair --rails`, [`super::HealthSnapshot`]) when the
//! case's buffers are ready and again when it finished, so each port's deltas cover the case's
//! phases. A plain pair does not know which port UCX chose, so every port of each side is judged
//! by the rails' rules ([`super::rules`]); the attribution check (`rx_read_requests` moving for a
//! READ and not for a WRITE) runs on the target side of an RMA case UCX reported as RDMA.

use super::rail::SideHealth;
use super::rules::{RdmaAttribution, RdmaEvidence, RdmaOp, confirm_rdma};
use super::{HealthSnapshot, PortDeltas};
use serde::{Deserialize, Serialize};

/// One side's ports over one case.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseSideHealth {
    /// Every RDMA port either reading had, in the reading's order.
    #[serde(default)]
    pub ports: Vec<SideHealth>,
    /// Why nothing was read on this side (no reading sent, the reading failed, no RDMA port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_read: Option<String>,
}

impl CaseSideHealth {
    /// Both readings of one side (`None`: the side sent none; `who` names it in the note).
    pub fn read(who: &str, before: Option<&HealthSnapshot>, after: Option<&HealthSnapshot>) -> CaseSideHealth {
        let (Some(before), Some(after)) = (before, after) else {
            return CaseSideHealth::unread(format!("the {who} side sent no counter reading"));
        };
        if let Some(why) = before.unreadable.as_deref().or(after.unreadable.as_deref()) {
            return CaseSideHealth::unread(format!("{who}: {why}"));
        }
        let mut devices: Vec<&str> = before.ports.iter().map(|p| p.device.as_str()).collect();
        for p in &after.ports {
            if !devices.contains(&p.device.as_str()) {
                devices.push(&p.device);
            }
        }
        if devices.is_empty() {
            return CaseSideHealth::unread(format!("no RDMA port on the {who} side"));
        }
        CaseSideHealth {
            ports: devices
                .into_iter()
                .map(|d| SideHealth::read(d, before, after))
                .collect(),
            not_read: None,
        }
    }

    fn unread(why: String) -> CaseSideHealth {
        CaseSideHealth {
            ports: Vec::new(),
            not_read: Some(why),
        }
    }

    /// Whether not one counter of any port was read both times.
    pub fn nothing_read(&self) -> bool {
        self.ports.iter().all(SideHealth::nothing_read)
    }
}

/// Both sides' NIC health counters over one case, and what the rules found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseHealth {
    pub prefill: CaseSideHealth,
    pub decode: CaseSideHealth,
    /// The attribution check of an RMA case UCX reported as RDMA, on its target (decode) side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<RdmaAttribution>,
    /// Whether the case's verdict failed: congestion counters then explain it, and none moving
    /// is "not explained", never `ok`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slow: bool,
}

impl CaseHealth {
    /// Both sides' readings, not judged yet.
    pub fn read(
        prefill: (Option<&HealthSnapshot>, Option<&HealthSnapshot>),
        decode: (Option<&HealthSnapshot>, Option<&HealthSnapshot>),
    ) -> CaseHealth {
        CaseHealth {
            prefill: CaseSideHealth::read("prefill", prefill.0, prefill.1),
            decode: CaseSideHealth::read("decode", decode.0, decode.1),
            rdma: None,
            slow: false,
        }
    }

    /// Runs the port rules on every port of both sides (`slow`: the case failed), and the
    /// attribution check of `op` (an RMA case that went over RDMA) on the decode side, the side
    /// both a READ (served there) and a WRITE (landing there) reach.
    pub fn judge(&mut self, slow: bool, op: Option<RdmaOp>) {
        self.slow = slow;
        for port in self.prefill.ports.iter_mut().chain(self.decode.ports.iter_mut()) {
            port.findings = port
                .deltas
                .as_ref()
                .map(|d| super::rules::judge_port(d, slow))
                .unwrap_or_default();
        }
        self.rdma = op.map(|op| attribution(op, &self.decode));
    }

    /// Every finding of both sides, prefill first.
    pub fn findings(&self) -> impl Iterator<Item = (&'static str, &super::rules::HealthFinding)> {
        let p = self
            .prefill
            .ports
            .iter()
            .flat_map(|p| p.findings.iter().map(|f| ("prefill", f)));
        p.chain(
            self.decode
                .ports
                .iter()
                .flat_map(|p| p.findings.iter().map(|f| ("decode", f))),
        )
    }

    /// One table cell, the words of the rails' column: `congested`, `lossy`, `not RDMA`
    /// (comma-joined); else `not read`, or `not explained` on a failed case, or `ok`, each with
    /// `(part not read)` where one side or one rule was not.
    pub fn cell(&self) -> String {
        super::rules::health_cell(
            self.findings().map(|(_, f)| f),
            self.rdma.as_ref(),
            (self.prefill.nothing_read(), self.decode.nothing_read()),
            self.slow,
        )
    }

    /// Whether any counter of any port was read on either side.
    pub fn any_read(&self) -> bool {
        !(self.prefill.nothing_read() && self.decode.nothing_read())
    }
}

/// The attribution check over every port of the target side: confirmed where one port saw the
/// operation's requests (UCX may use any of them), contradicted where every port read says it
/// did not, else not read.
fn attribution(op: RdmaOp, target: &CaseSideHealth) -> RdmaAttribution {
    let checks: Vec<RdmaAttribution> = target
        .ports
        .iter()
        .map(|p| {
            let unread = PortDeltas {
                device: p.device.clone(),
                ..Default::default()
            };
            confirm_rdma(op, p.deltas.as_ref().unwrap_or(&unread))
        })
        .collect();
    let pick = |e: RdmaEvidence| checks.iter().find(|c| c.evidence == e).cloned();
    pick(RdmaEvidence::Confirmed)
        .or_else(|| pick(RdmaEvidence::Contradicted))
        .or_else(|| pick(RdmaEvidence::NotRead))
        .unwrap_or_else(|| RdmaAttribution {
            op,
            device: String::new(),
            evidence: RdmaEvidence::NotRead,
            reason: format!(
                "rx_read_requests/rx_write_requests not read: {}",
                target.not_read.as_deref().unwrap_or("no port on the decode side")
            ),
        })
}

#[cfg(test)]
#[path = "case_tests.rs"]
mod tests;
