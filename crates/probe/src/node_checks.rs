//! The `node.*` checks: each a pure function of [`NodeFacts`] and the transport variables, so
//! a replayed node gives the same verdict as the live one.

use crate::envspec::{TransportEnv, parse_nccl_ib_hca, parse_ucx_net_devices, socket_ifname_matches};
use crate::facts::{NodeFacts, PortFacts};
use crate::parse::{DeviceList, LimitValue, Link, LinkLayer, procfs::has_cap_ipc_lock};
use crate::tools::Tool;
use icb_core::Status;
use icb_core::checks::Check;
use std::collections::{BTreeMap, BTreeSet};

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

fn rdma_devs(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.rdma_devs";
    let bad = if x.expects_rdma() { Status::Fail } else { Status::Warn };
    let uverbs: Vec<String> = f
        .dev_infiniband
        .iter()
        .flatten()
        .filter(|n| n.starts_with("uverbs"))
        .cloned()
        .collect();
    if f.devices.is_empty() {
        let seen = match &f.device_list {
            Some(DeviceList::NoDevices) => "; ibv_devinfo: No IB devices found",
            _ => "",
        };
        return check(
            id,
            bad,
            format!("no RDMA devices in /sys/class/infiniband{seen}: cross-node KV transfer would use TCP"),
        )
        .hint("request an RDMA resource (rdma/ib, SR-IOV VF, vpc.amazonaws.com/efa) or check the device plugin");
    }
    let devs = list(&f.devices, 4);
    if uverbs.is_empty() {
        return check(id, bad, format!("{devs} in sysfs but no /dev/infiniband/uverbs*: this container cannot open them"))
            .hint("request the RDMA device resource in the pod (rdma/ib or the SR-IOV resource) so /dev/infiniband is mounted");
    }
    if let Some(DeviceList::Devices(v)) = &f.device_list {
        let missing: Vec<String> = f.devices.iter().filter(|d| !v.contains(d)).cloned().collect();
        if !missing.is_empty() {
            return check(
                id,
                Status::Warn,
                format!("{devs} in sysfs, but ibv_devinfo does not list {}", list(&missing, 4)),
            );
        }
    }
    check(
        id,
        Status::Ok,
        format!(
            "{} RDMA device(s): {devs}; {} uverbs node(s)",
            f.devices.len(),
            uverbs.len()
        ),
    )
}

fn port_state(f: &NodeFacts) -> Check {
    let id = "node.port_state";
    if f.ports.is_empty() {
        let why = if f.devices.is_empty() {
            "no RDMA devices"
        } else {
            "RDMA devices show no ports"
        };
        return check(id, Status::Skipped, why);
    }
    let from = if f.ports.iter().all(|p| p.from == "ibstat") {
        " (from ibstat)"
    } else {
        ""
    };
    let up: Vec<String> = f.up_ports().map(PortFacts::name).collect();
    let down: Vec<String> = f
        .ports
        .iter()
        .filter(|p| !p.is_up())
        .map(|p| format!("{} {}", p.name(), p.state_text()))
        .collect();
    let init_linkup = f.ports.iter().any(|p| {
        !p.is_up()
            && p.state == Some(crate::parse::PortState::Init)
            && p.phys_state == Some(crate::parse::PhysState::LinkUp)
    });
    let hint = if init_linkup {
        "INIT with LinkUp: the cable is fine but no subnet manager configured the port (check opensm/UFM)"
    } else {
        "check cabling, switch port and subnet manager; only ACTIVE + LinkUp carries traffic"
    };
    if down.is_empty() {
        check(
            id,
            Status::Ok,
            format!(
                "{}/{} port(s) ACTIVE+LinkUp{from}: {}",
                up.len(),
                f.ports.len(),
                list(&up, 4)
            ),
        )
    } else if up.is_empty() {
        check(
            id,
            Status::Fail,
            format!("no port is ACTIVE+LinkUp{from}: {}", list(&down, 4)),
        )
        .hint(hint)
    } else {
        check(
            id,
            Status::Warn,
            format!(
                "{}/{} port(s) up{from}; not up: {}",
                up.len(),
                f.ports.len(),
                list(&down, 4)
            ),
        )
        .hint(hint)
    }
}

fn port_rate(f: &NodeFacts) -> Check {
    let id = "node.port_rate";
    let rated: Vec<(&PortFacts, f64)> = f
        .up_ports()
        .filter_map(|p| p.rate.as_ref().map(|r| (p, r.gbps)))
        .collect();
    if rated.is_empty() {
        return check(id, Status::Skipped, "no up port with a readable rate");
    }
    // The most common rate is what this node's ports should all run at.
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for (_, r) in &rated {
        *counts.entry((r * 10.0) as u64).or_default() += 1;
    }
    let mode = counts
        .iter()
        .max_by_key(|(rate, n)| (**n, **rate))
        .map(|(r, _)| *r as f64 / 10.0)
        .unwrap_or(0.0);
    let slow: Vec<String> = rated
        .iter()
        .filter(|(_, r)| *r < mode)
        .map(|(p, r)| format!("{} {r} Gb/s", p.name()))
        .collect();
    if slow.is_empty() {
        check(id, Status::Ok, format!("{} up port(s) at {mode} Gb/s", rated.len()))
    } else {
        check(
            id,
            Status::Warn,
            format!("below the node's {mode} Gb/s: {}", list(&slow, 4)),
        )
        .hint("a port that trained at a lower speed: reseat or replace the cable/transceiver")
    }
}

fn net_devices(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.net_devices";
    let ucx = x.env.get("UCX_NET_DEVICES");
    let nccl = x.env.get("NCCL_IB_HCA");
    if ucx.is_none() && nccl.is_none() {
        return check(
            id,
            Status::Skipped,
            "UCX_NET_DEVICES and NCCL_IB_HCA are unset: UCX and NCCL pick devices themselves",
        )
        .scope(&x.env.origin);
    }
    let mut problems: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut chosen: Vec<&PortFacts> = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    if let Some(v) = ucx {
        shown.push(format!("UCX_NET_DEVICES={v}"));
        match parse_ucx_net_devices(v) {
            Err(e) => problems.push(e),
            Ok(None) => chosen.extend(f.up_ports()),
            Ok(Some(entries)) => {
                for e in entries {
                    if e.port.is_none() && f.devices.contains(&e.device) {
                        // UCX names RDMA devices `dev:port`; a bare name matches nothing.
                        problems.push(format!("{e} lacks :PORT (UCX calls it {e}:1)"));
                        continue;
                    }
                    let ports: Vec<&PortFacts> = f
                        .ports
                        .iter()
                        .filter(|p| p.device == e.device && e.port.is_none_or(|n| n == p.port))
                        .collect();
                    if ports.is_empty() {
                        if f.devices.contains(&e.device) {
                            problems.push(format!("{e}: no such port"));
                        } else if f.netdevs.as_ref().is_some_and(|n| n.contains(&e.device)) {
                            warnings.push(format!("{e} is a network interface (TCP), not an RDMA device"));
                        } else {
                            problems.push(format!("{e}: no such device"));
                        }
                    } else {
                        for p in ports {
                            if p.is_up() {
                                chosen.push(p);
                            } else {
                                problems.push(format!("{} is {}", p.name(), p.state_text()));
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(v) = nccl {
        shown.push(format!("NCCL_IB_HCA={v}"));
        let spec = parse_nccl_ib_hca(v);
        if !spec.exclude {
            for e in &spec.entries {
                let one = crate::envspec::HcaSpec {
                    exclude: false,
                    exact: spec.exact,
                    entries: vec![e.clone()],
                };
                let matched: Vec<&PortFacts> = f.ports.iter().filter(|p| one.selects(&p.device, p.port)).collect();
                if matched.is_empty() {
                    problems.push(format!("NCCL_IB_HCA entry {e} matches no device"));
                } else if !matched.iter().any(|p| p.is_up()) {
                    problems.push(format!(
                        "NCCL_IB_HCA entry {e}: {}",
                        matched
                            .iter()
                            .map(|p| format!("{} is {}", p.name(), p.state_text()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                let spill = spec.prefix_spill(e, &f.devices);
                if !spill.is_empty() {
                    warnings.push(format!(
                        "NCCL_IB_HCA entry {} also selects {} (prefix match; start the list with '=' for exact names)",
                        e.device,
                        spill.join(", ")
                    ));
                }
            }
        }
        let selected: Vec<&PortFacts> = f.up_ports().filter(|p| spec.selects(&p.device, p.port)).collect();
        if selected.is_empty() && !f.ports.is_empty() {
            problems.push("NCCL_IB_HCA selects no ACTIVE port".into());
        }
        chosen.extend(selected);
    }
    let layers: BTreeSet<&str> = chosen
        .iter()
        .filter_map(|p| p.link_layer.as_ref().map(LinkLayer::as_str))
        .collect();
    let scope = x.env.origin.clone();
    let shown = shown.join(" ");
    if !problems.is_empty() {
        return check(id, Status::Fail, format!("{shown}: {}", list(&problems, 3)))
            .hint("name only ports that are ACTIVE+LinkUp on this node (ic-bench detect-env prints them)")
            .scope(scope);
    }
    if layers.len() > 1 {
        warnings.push(format!(
            "mixes link layers ({})",
            layers.iter().copied().collect::<Vec<_>>().join(" + ")
        ));
    }
    if !warnings.is_empty() {
        return check(id, Status::Warn, format!("{shown}: {}", list(&warnings, 3)))
            .hint("pin devices of one fabric: mixing InfiniBand and RoCE gives NIXL_ERR_REMOTE_DISCONNECT")
            .scope(scope);
    }
    let layer = layers.iter().next().copied().unwrap_or("unknown link layer");
    check(
        id,
        Status::Ok,
        format!("{shown}: all named ports exist and are ACTIVE+LinkUp ({layer})"),
    )
    .scope(scope)
}

fn socket_ifname(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.socket_ifname";
    let Some(v) = x.env.get("NCCL_SOCKET_IFNAME") else {
        return check(
            id,
            Status::Skipped,
            "NCCL_SOCKET_IFNAME unset (NCCL picks an interface)",
        )
        .scope(&x.env.origin);
    };
    let Some(netdevs) = &f.netdevs else {
        return check(id, Status::Skipped, "/sys/class/net not readable").scope(&x.env.origin);
    };
    let hits: Vec<String> = netdevs
        .iter()
        .filter(|n| socket_ifname_matches(v, n))
        .cloned()
        .collect();
    if hits.is_empty() {
        check(
            id,
            Status::Fail,
            format!(
                "NCCL_SOCKET_IFNAME={v} matches no interface here ({})",
                list(netdevs, 6)
            ),
        )
        .hint("NCCL bootstrap will fail with 'no socket interface found': name an interface that exists in the pod")
        .scope(&x.env.origin)
    } else {
        check(
            id,
            Status::Ok,
            format!("NCCL_SOCKET_IFNAME={v} matches {}", list(&hits, 4)),
        )
        .scope(&x.env.origin)
    }
}

fn gid(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.gid";
    let up: Vec<&PortFacts> = f.up_ports().collect();
    if up.is_empty() {
        return check(id, Status::Skipped, "no up RDMA port");
    }
    let forced = x.env.forced_gid_index();
    let roce: Vec<&PortFacts> = up.iter().copied().filter(|p| p.is_ethernet()).collect();
    if roce.is_empty() {
        return match forced {
            Some((k, v)) => check(id, Status::Warn, format!("{k}={v} is set on an InfiniBand fabric"))
                .hint("InfiniBand routes by LID: leave the GID index unset"),
            None => check(id, Status::Ok, "InfiniBand: no GID index needed"),
        };
    }
    if roce.iter().all(|p| p.gids.is_empty()) {
        return check(
            id,
            Status::Skipped,
            "RoCE ports but no readable GID table (gid_attrs/types)",
        );
    }
    let none: Vec<String> = roce
        .iter()
        .filter(|p| p.roce_v2_ipv4_indices().is_empty())
        .map(|p| p.name())
        .collect();
    if let Some((k, v)) = forced {
        let bad: Vec<String> = roce
            .iter()
            .filter(|p| !p.roce_v2_ipv4_indices().contains(&(v as u32)) || v > u32::MAX as i64)
            .map(|p| {
                let what = p
                    .gids
                    .iter()
                    .find(|g| i64::from(g.index) == v)
                    .map_or("empty".to_string(), |g| {
                        format!("{} {}", g.gid_type.as_ref().map_or("?", |t| t.as_str()), g.gid)
                    });
                format!("{} [{v}]={what}", p.name())
            })
            .collect();
        if !bad.is_empty() {
            return check(
                id,
                Status::Fail,
                format!("{k}={v} is not RoCE v2 + IPv4-mapped on {}", list(&bad, 3)),
            )
            .hint("unset the GID index (NCCL auto-selects per HCA) or force one that is RoCE v2 IPv4 on every HCA");
        }
        return check(
            id,
            Status::Ok,
            format!("{k}={v} is RoCE v2 + IPv4-mapped on all {} RoCE port(s)", roce.len()),
        );
    }
    if !none.is_empty() {
        return check(
            id,
            Status::Fail,
            format!("no RoCE v2 IPv4-mapped GID on {}", list(&none, 4)),
        )
        .hint("give the port's netdev an IPv4 address (the RoCE v2 GID appears with it)");
    }
    let firsts: BTreeMap<String, u32> = roce
        .iter()
        .filter_map(|p| p.roce_v2_ipv4_indices().first().map(|i| (p.name(), *i)))
        .collect();
    let distinct: BTreeSet<u32> = firsts.values().copied().collect();
    if distinct.len() > 1 {
        let per: Vec<String> = firsts.iter().map(|(p, i)| format!("{p}→{i}")).collect();
        return check(
            id,
            Status::Warn,
            format!("HCAs disagree on the RoCE v2 IPv4 GID index: {}", list(&per, 4)),
        )
        .hint("leave NCCL_IB_GID_INDEX unset (auto per HCA); one forced index would break the others");
    }
    let i = distinct.into_iter().next().unwrap_or_default();
    check(
        id,
        Status::Ok,
        format!(
            "RoCE v2 IPv4-mapped GID at index {i} on all {} RoCE port(s)",
            roce.len()
        ),
    )
}

fn gdr_mode(f: &NodeFacts) -> Check {
    let id = "node.gdr_mode";
    let peermem = f.module_loaded("nvidia_peermem") == Some(true) || f.module_loaded("nv_peer_mem") == Some(true);
    if peermem || f.memory_peers_nv_mem {
        let how = if peermem {
            "nvidia_peermem loaded"
        } else {
            "memory_peers/nv_mem present"
        };
        return check(id, Status::Ok, format!("GPUDirect RDMA via peer memory ({how})"));
    }
    let Some(drv) = &f.nvidia else {
        return check(
            id,
            Status::Skipped,
            "no NVIDIA driver visible (/proc/driver/nvidia/version)",
        );
    };
    let kernel = f.kernel();
    let ktext = f.kernel_release.clone().unwrap_or_else(|| "unknown".into());
    let version = drv.version.clone().unwrap_or_else(|| "?".into());
    if drv.open_kernel_module && kernel.is_some_and(|k| k >= (5, 12)) {
        return check(
            id,
            Status::Ok,
            format!(
                "GPUDirect RDMA via DMA-BUF (open kernel module {version}, kernel {ktext}); nvidia_peermem not needed"
            ),
        );
    }
    if f.devices.is_empty() {
        return check(id, Status::Skipped, "no RDMA devices: GPUDirect RDMA not applicable");
    }
    let modules = if f.modules.is_none() {
        " (module list unreadable)"
    } else {
        ""
    };
    let why = if drv.open_kernel_module {
        format!("open kernel module but kernel {ktext} < 5.12 (no DMA-BUF) and nvidia_peermem not loaded{modules}")
    } else {
        format!("nvidia_peermem not loaded{modules} and proprietary kernel module {version} (no DMA-BUF)")
    };
    check(
        id,
        Status::Warn,
        format!("no GPUDirect RDMA: {why}; GPU memory is staged through host"),
    )
    .hint("load nvidia-peermem (GPU operator: driver.rdma.enabled) or use the open kernel module on kernel ≥ 5.12")
}

fn gdrcopy(f: &NodeFacts) -> Check {
    let id = "node.gdrcopy";
    if f.gdrdrv || f.module_loaded("gdrdrv") == Some(true) {
        let how = if f.gdrdrv {
            "/dev/gdrdrv present"
        } else {
            "gdrdrv module loaded (no /dev/gdrdrv in this container)"
        };
        return check(id, if f.gdrdrv { Status::Ok } else { Status::Warn }, how);
    }
    if f.nvidia.is_none() {
        return check(id, Status::Skipped, "no NVIDIA driver visible: GDRCopy not applicable");
    }
    check(
        id,
        Status::Warn,
        "GDRCopy absent (optional: UCX uses it for small GPU messages)",
    )
    .hint("install gdrdrv on the node and mount /dev/gdrdrv if small-message latency matters")
}

fn memlock(f: &NodeFacts) -> Check {
    let id = "node.memlock";
    let cap = f.cap_eff.map(has_cap_ipc_lock);
    match (f.memlock, cap) {
        (Some((LimitValue::Unlimited, _)), _) => check(id, Status::Ok, "max locked memory unlimited"),
        (_, Some(true)) => check(id, Status::Ok, "CAP_IPC_LOCK held (locked-memory limit does not apply)"),
        (Some((soft, _)), _) => {
            let status = if f.devices.is_empty() {
                Status::Warn
            } else {
                Status::Fail
            };
            check(id, status, format!("max locked memory {soft} and no CAP_IPC_LOCK: RDMA registrations will fail"))
                .hint("add capabilities IPC_LOCK to the container (or memlock unlimited): ibv_create_cq() fails with 'Cannot allocate memory'")
        }
        (None, _) => check(id, Status::Skipped, "/proc/self/limits not readable"),
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

fn affinity(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.affinity";
    let Some(topo) = &f.topo else {
        return tool_gap(f, id, Tool::NvidiaSmiTopo, "no topology");
    };
    let gpus = topo.gpus();
    if gpus.is_empty() {
        return check(id, Status::Skipped, "nvidia-smi topo -m shows no GPU");
    }
    let chosen = chosen_devices(f, x);
    let nics: Vec<(&str, &str)> = chosen
        .iter()
        .filter_map(|d| topo.nic_for_device(d).map(|n| (n, d.as_str())))
        .collect();
    if nics.is_empty() {
        let why = if chosen.is_empty() {
            "no up RDMA port".to_string()
        } else {
            format!("{} not in the topo NIC legend", list(&chosen, 4))
        };
        return check(id, Status::Skipped, why);
    }
    let mut worst = Status::Ok;
    let mut per: Vec<String> = Vec::new();
    for g in &gpus {
        let best = nics
            .iter()
            .filter_map(|(n, d)| topo.link(g, n).map(|l| (l, *d)))
            .min_by_key(|(l, _)| l.rank());
        let Some((link, dev)) = best else { continue };
        let s = match link {
            Link::Pix | Link::Pxb | Link::NvLink(_) | Link::SelfLink => Status::Ok,
            Link::Phb | Link::Node => Status::Warn,
            Link::Sys | Link::Other(_) => Status::Fail,
        };
        worst = worst.max(s);
        per.push(format!("{g}→{dev} {}", link.as_string()));
    }
    if per.is_empty() {
        return check(
            id,
            Status::Skipped,
            "topo has no GPU↔NIC entries for the chosen devices",
        );
    }
    let detail = list(&per, 4);
    match worst {
        Status::Ok => check(id, Status::Ok, format!("every GPU has a PIX/PXB NIC: {detail}")),
        Status::Warn => check(
            id,
            Status::Warn,
            format!("a GPU's nearest chosen NIC crosses the host bridge: {detail}"),
        )
        .hint("pin each GPU's rail NIC (PIX/PXB) in UCX_NET_DEVICES / NCCL_IB_HCA"),
        _ => check(
            id,
            Status::Fail,
            format!("a GPU's nearest chosen NIC is across NUMA nodes (SYS): {detail}"),
        )
        .hint("GPUDirect RDMA across the SMP interconnect is slow or disabled: use the NIC on the GPU's PCIe switch"),
    }
}

fn nvlink(f: &NodeFacts) -> Check {
    let id = "node.nvlink";
    let Some(topo) = &f.topo else {
        return tool_gap(f, id, Tool::NvidiaSmiTopo, "no topology");
    };
    let gpus = topo.gpus();
    if gpus.len() < 2 {
        return check(
            id,
            Status::Skipped,
            format!("{} GPU visible: NVLink not applicable", gpus.len()),
        );
    }
    let mut nv = Vec::new();
    let mut pcie = Vec::new();
    for (i, a) in gpus.iter().enumerate() {
        for b in &gpus[i + 1..] {
            match topo.link(a, b) {
                Some(Link::NvLink(n)) => nv.push(*n),
                Some(l) => pcie.push(format!("{a}↔{b} {}", l.as_string())),
                None => pcie.push(format!("{a}↔{b} ?")),
            }
        }
    }
    if pcie.is_empty() {
        let min = nv.iter().min().copied().unwrap_or_default();
        check(
            id,
            Status::Ok,
            format!("NVLink between all {} GPUs (≥ NV{min})", gpus.len()),
        )
    } else {
        check(id, Status::Warn, format!("PCIe-only GPU pairs: {}", list(&pcie, 4)))
            .hint("tensor parallelism across these GPUs runs over PCIe; keep TP groups on NVLink-connected GPUs")
    }
}

/// The RDMA transports that carry a transfer's bulk data (rc, dc, srd): a UCX with only ud
/// (UCX's wireup datagrams) or gga still falls back to TCP between hosts.
fn is_rdma_tl(name: &str) -> bool {
    icb_core::fabric::rdma_family(name).is_some_and(icb_core::fabric::RdmaFamily::is_reliable)
}

fn ucx_tl(f: &NodeFacts) -> Check {
    let id = "node.ucx_tl";
    let Some(u) = &f.ucx else {
        return tool_gap(f, id, Tool::UcxInfo, "no ucx_info output");
    };
    let mut rdma: Vec<String> = u
        .transports()
        .filter(|t| is_rdma_tl(&t.name))
        .map(|t| t.name.clone())
        .collect();
    rdma.sort();
    rdma.dedup();
    let cuda = u.has_transport(|t| t == "cuda_copy");
    let rdma_s = if rdma.is_empty() {
        "no rc/dc/srd".to_string()
    } else {
        list(&rdma, 4)
    };
    let cuda_s = if cuda { "cuda_copy" } else { "no cuda_copy" };
    let detail = format!("ucx_info -d: {rdma_s}; {cuda_s}");
    let rdma_bad = rdma.is_empty();
    let cuda_bad = !cuda;
    match (rdma_bad, cuda_bad) {
        (false, false) => check(id, Status::Ok, detail),
        // UCX lists transports for the devices it finds: on a node with neither an RDMA device
        // nor an NVIDIA driver their absence says nothing about how UCX was built.
        (true, true) if f.devices.is_empty() && f.nvidia.is_none() => check(
            id,
            Status::Warn,
            format!("{detail}; this node has no RDMA device and no NVIDIA driver"),
        )
        .hint("no RDMA or CUDA transport can appear here: probe a GPU/RDMA node"),
        (true, true) => check(id, Status::Fail, detail)
            .hint("this UCX has neither RDMA nor CUDA transports: use a UCX built with verbs and CUDA"),
        (true, false) if !f.devices.is_empty() => {
            check(id, Status::Fail, format!("{detail}, although RDMA devices exist")).hint(
                "UCX was built without verbs/mlx5 (or cannot open /dev/infiniband): KV transfer falls back to TCP",
            )
        }
        (true, false) => check(id, Status::Warn, detail).hint("no RDMA transport: cross-node KV transfer uses TCP"),
        (false, true) if f.nvidia.is_some() => check(
            id,
            Status::Fail,
            format!("{detail}, although an NVIDIA driver is present"),
        )
        .hint("UCX's CUDA module did not load (libcuda not found?) or UCX lacks CUDA: GPU buffers are not recognised"),
        (false, true) => check(id, Status::Warn, detail).hint("no CUDA transport: GPU buffers are not recognised"),
    }
}

fn ucx_gpumem(f: &NodeFacts) -> Check {
    let id = "node.ucx_gpumem";
    let Some(u) = &f.ucx else {
        return tool_gap(f, id, Tool::UcxInfo, "no ucx_info output");
    };
    let ib: Vec<_> = u
        .memory_domains
        .iter()
        .filter(|m| m.component.as_deref().is_some_and(|c| c.eq_ignore_ascii_case("ib")) && !m.no_devices)
        .collect();
    if ib.is_empty() {
        return check(id, Status::Skipped, "no RDMA (ib) memory domain in ucx_info -d");
    }
    let with_cuda: Vec<String> = ib
        .iter()
        .filter(|m| m.memory_types.iter().any(|t| t == "cuda"))
        .map(|m| m.name.clone())
        .collect();
    if with_cuda.len() == ib.len() {
        check(
            id,
            Status::Ok,
            format!("RDMA memory domains register cuda memory: {}", list(&with_cuda, 4)),
        )
    } else {
        let host: Vec<String> = ib
            .iter()
            .filter(|m| !with_cuda.contains(&m.name))
            .map(|m| m.name.clone())
            .collect();
        check(
            id,
            Status::Warn,
            format!("RDMA memory domains register host memory only: {}", list(&host, 4)),
        )
        .hint("GPUDirect RDMA unavailable to UCX: load nvidia_peermem or use DMA-BUF (open kernel module, UCX ≥ 1.14)")
    }
}

fn link_errors(f: &NodeFacts) -> Check {
    let id = "node.link_errors";
    let ports: Vec<&PortFacts> = f.up_ports().filter(|p| !p.counters.is_empty()).collect();
    if ports.is_empty() {
        return check(id, Status::Skipped, "no error counters on up ports");
    }
    let totals: Vec<String> = ports
        .iter()
        .flat_map(|p| {
            p.counters
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(move |(c, v)| format!("{} {}={v}", p.name(), short(c)))
        })
        .collect();
    let Some(later) = &f.counters_later else {
        let since = if totals.is_empty() {
            "all zero".to_string()
        } else {
            format!("since reset: {}", list(&totals, 3))
        };
        return check(
            id,
            Status::Ok,
            format!("{} port(s), one reading ({since}); not sampled twice", ports.len()),
        );
    };
    let mut rising = Vec::new();
    for p in &ports {
        let Some(l) = later.get(&p.name()) else { continue };
        for (c, v) in &p.counters {
            if let Some(v2) = l.get(c)
                && v2 > v
            {
                rising.push(format!("{} {} +{}", p.name(), short(c), v2 - v));
            }
        }
    }
    if rising.is_empty() {
        check(
            id,
            Status::Ok,
            format!("stable over {} s on {} port(s)", f.counter_interval_s, ports.len()),
        )
    } else {
        check(
            id,
            Status::Warn,
            format!("rising over {} s: {}", f.counter_interval_s, list(&rising, 3)),
        )
        .hint("a flapping or dirty link: check the cable, transceiver and switch port")
    }
}

fn short(counter: &str) -> &str {
    counter.rsplit('/').next().unwrap_or(counter)
}

fn efa_kernel(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.efa_kernel";
    if !f.has_efa() {
        return check(id, Status::Skipped, "no EFA device");
    }
    let k = f.kernel_release.clone().unwrap_or_else(|| "unknown".into());
    let scheme = x.env.get("UCX_RNDV_SCHEME");
    let thresh0 = x.env.get("UCX_RNDV_THRESH") == Some("0");
    let get_zcopy = scheme == Some("get_zcopy") || thresh0;
    let new_kernel = f.kernel().is_some_and(|v| v >= (6, 8));
    if new_kernel && get_zcopy {
        let what = if scheme == Some("get_zcopy") {
            "UCX_RNDV_SCHEME=get_zcopy"
        } else {
            "UCX_RNDV_THRESH=0"
        };
        return check(
            id,
            Status::Fail,
            format!("EFA on kernel {k} with {what}: 'remote invalid RD request' / NIXL_ERR_BACKEND"),
        )
        .hint("on EFA use UCX_RNDV_SCHEME=put_zcopy (or leave it unset) and no RNDV_THRESH=0")
        .scope(&x.env.origin);
    }
    check(
        id,
        Status::Ok,
        format!("EFA on kernel {k}; rendezvous scheme {}", scheme.unwrap_or("default")),
    )
    .scope(&x.env.origin)
}
