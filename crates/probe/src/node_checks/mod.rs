//! The `node.*` checks: each a pure function of [`NodeFacts`] and the transport variables, so
//! a replayed node gives the same verdict as the live one.

use crate::envspec::{TransportEnv, parse_nccl_ib_hca, parse_ucx_net_devices, socket_ifname_matches};
use crate::facts::{NodeFacts, PortFacts};
use crate::parse::{DeviceList, LimitValue, Link, LinkLayer, procfs::has_cap_ipc_lock};
use crate::tools::Tool;
use icb_core::Status;
use icb_core::checks::Check;
use std::collections::{BTreeMap, BTreeSet};

mod gpu;
mod host;
mod ports;
mod selection;

use gpu::*;
use host::*;
use ports::*;
use selection::*;

pub(crate) fn check(id: &str, status: Status, detail: impl Into<String>) -> Check {
    Check {
        id: id.into(),
        status,
        detail: detail.into(),
        scope: None,
        hint: None,
    }
}

pub(crate) trait CheckExt {
    fn hint(self, hint: impl Into<String>) -> Self;
    fn scope(self, scope: impl Into<String>) -> Self;
}

impl CheckExt for Check {
    fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }
}

/// Shortens long lists in one-line details.
pub(crate) fn list(items: &[String], max: usize) -> String {
    if items.len() <= max {
        items.join(", ")
    } else {
        format!("{}, … ({} in all)", items[..max].join(", "), items.len())
    }
}

/// What the probe was told about the deployment beyond the node itself.
#[derive(Debug, Clone, Default)]
pub struct NodeExpectations {
    pub env: TransportEnv,
    /// RDMA is required (a flag, or a recipe that requests RDMA devices).
    pub rdma_required: bool,
}

impl NodeExpectations {
    fn expects_rdma(&self) -> bool {
        self.rdma_required
            || self.env.get("NCCL_IB_HCA").is_some()
            || self.env.get("UCX_NET_DEVICES").is_some_and(|v| v != "all")
    }
}

pub fn node_checks(f: &NodeFacts, x: &NodeExpectations) -> Vec<Check> {
    let mut checks = vec![
        rdma_devs(f, x),
        port_state(f),
        port_rate(f),
        net_devices(f, x),
        socket_ifname(f, x),
        gid(f, x),
        gdr_mode(f),
        gdrcopy(f),
        memlock(f),
        affinity(f, x),
        nvlink(f),
        ucx_tl(f),
        ucx_gpumem(f),
        link_errors(f),
        efa_kernel(f, x),
    ];
    blame_down_ports(f, &mut checks);
    checks
}

/// A GPU whose nearest NIC has its port down falls back to a far NIC, and the affinity check
/// fails; the cause is the port. The port check then fails too, so "fix first" names it.
fn blame_down_ports(f: &NodeFacts, checks: &mut [Check]) {
    let Some(topo) = &f.topo else { return };
    let mut orphaned: Vec<String> = Vec::new();
    for port in f.ports.iter().filter(|p| !p.is_up()) {
        let Some(nic) = topo.nic_for_device(&port.device) else {
            continue;
        };
        for gpu in topo.gpus() {
            if matches!(topo.link(gpu, nic), Some(Link::Pix | Link::Pxb))
                && !orphaned
                    .iter()
                    .any(|o| o.starts_with(&format!("{gpu}→{} ", port.name())))
            {
                orphaned.push(format!("{gpu}→{} {}", port.name(), port.state_text()));
            }
        }
    }
    let affinity_failed = checks
        .iter()
        .any(|c| c.id == "node.affinity" && c.status == Status::Fail);
    if orphaned.is_empty() || !affinity_failed {
        return;
    }
    for c in checks.iter_mut() {
        match c.id.as_str() {
            "node.port_state" if c.status == Status::Warn => {
                c.status = Status::Fail;
                c.detail = format!("{}; the nearest NIC of a GPU is down: {}", c.detail, list(&orphaned, 4));
            }
            "node.affinity" => {
                c.detail = format!("{} (caused by a down port: see node.port_state)", c.detail);
            }
            _ => {}
        }
    }
}

/// The RDMA devices traffic should use: those named by the env, else every up port's device.
fn chosen_devices(f: &NodeFacts, x: &NodeExpectations) -> Vec<String> {
    if let Some(Ok(Some(entries))) = x.env.get("UCX_NET_DEVICES").map(parse_ucx_net_devices) {
        let mut v: Vec<String> = entries
            .into_iter()
            .map(|e| e.device)
            .filter(|d| f.devices.contains(d))
            .collect();
        v.dedup();
        if !v.is_empty() {
            return v;
        }
    }
    if let Some(h) = x.env.get("NCCL_IB_HCA") {
        let spec = parse_nccl_ib_hca(h);
        let mut v: Vec<String> = f
            .up_ports()
            .filter(|p| spec.selects(&p.device, p.port))
            .map(|p| p.device.clone())
            .collect();
        v.dedup();
        if !v.is_empty() {
            return v;
        }
    }
    let mut v: Vec<String> = f.up_ports().map(|p| p.device.clone()).collect();
    v.dedup();
    v
}

/// The skipped check for a tool whose output is missing, with the reason the tool run recorded
/// (not installed, timed out, failed) or `fallback`.
fn tool_gap(f: &NodeFacts, id: &str, tool: Tool, fallback: &str) -> Check {
    let why = f.tool_gaps.get(&tool).cloned().unwrap_or_else(|| fallback.to_string());
    check(id, Status::Skipped, why)
}
