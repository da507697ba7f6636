//! Two rules on the NIC list UCX is given (issue 25):
//!
//! * `env.ucx_net_devices.tcp`: a network interface (`eth0`, `ib0`) listed beside RDMA ports in
//!   `UCX_NET_DEVICES` while `UCX_TLS` leaves tcp on: UCX opens its tcp transport on it too, and
//!   rendezvous spreads a transfer over every usable lane, so part of the KV payload can go over
//!   TCP.
//! * `env.ucx_rndv_rails`: `UCX_MAX_RNDV_RAILS` below the number of RDMA NICs the same rank is
//!   given (its `UCX_NET_DEVICES` ports, else the pod's RDMA devices): one transfer uses at most
//!   that many, and the other NICs' bandwidth is left unused.

use super::backend::kv_path;
use super::mk;
use crate::mask::display_value;
use crate::model::RoleEnv;
use icb_core::checks::Check;
use icb_core::fabric::UcxTls;
use icb_core::model::Status;

pub(crate) fn role_checks(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    if !kv_path(r).ucx {
        return;
    }
    tcp_beside_rdma(r, scope, out);
    rndv_rails(r, scope, out);
}

/// `dev:port` (an RDMA port) rather than a network interface.
fn is_rdma_port(entry: &str) -> bool {
    entry
        .split_once(':')
        .is_some_and(|(dev, port)| !dev.is_empty() && port.parse::<u32>().is_ok())
}

/// `UCX_NET_DEVICES` entries, or `None` when unset, `all` or empty.
fn net_devices(r: &RoleEnv) -> Option<Vec<&str>> {
    let entries: Vec<&str> = r
        .literal("UCX_NET_DEVICES")?
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    (!entries.is_empty() && !entries.iter().any(|e| e.eq_ignore_ascii_case("all"))).then_some(entries)
}

fn shown(r: &RoleEnv, name: &str) -> String {
    r.var(name)
        .map(|v| format!("{name}={} [{}]", display_value(v), v.origin))
        .unwrap_or_default()
}

fn tcp_beside_rdma(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let Some(entries) = net_devices(r) else { return };
    let (rdma, netdevs): (Vec<&str>, Vec<&str>) = entries.iter().partition(|e| is_rdma_port(e));
    if rdma.is_empty() || netdevs.is_empty() {
        return;
    }
    let tcp_on = r.literal("UCX_TLS").is_none_or(|v| UcxTls::parse(v).allows("tcp"));
    let (status, detail, hint) = if tcp_on {
        (
            Status::Warn,
            format!(
                "{} lists network interface(s) {} beside RDMA ports: UCX's tcp transport opens them too, and a transfer is spread over every lane, so part of the KV payload can go over TCP",
                shown(r, "UCX_NET_DEVICES"),
                netdevs.join(", ")
            ),
            Some("list only the RDMA ports (dev:port) in UCX_NET_DEVICES, or leave tcp out of UCX_TLS"),
        )
    } else {
        (
            Status::Ok,
            format!(
                "{} also lists {}, but UCX_TLS leaves tcp out",
                shown(r, "UCX_NET_DEVICES"),
                netdevs.join(", ")
            ),
            None,
        )
    };
    out.push(mk("env.ucx_net_devices.tcp", status, detail, scope, hint));
}

/// RDMA NICs one rank is given: the RDMA ports UCX is told to use, else the pod's RDMA devices.
fn rank_nics(r: &RoleEnv) -> Option<(u32, String)> {
    if let Some(entries) = net_devices(r) {
        let n = entries.iter().filter(|e| is_rdma_port(e)).count() as u32;
        return (n > 0).then(|| (n, shown(r, "UCX_NET_DEVICES")));
    }
    let n: u32 = r
        .resources
        .rdma
        .values()
        .filter_map(|v| v.trim().parse::<u32>().ok())
        .sum();
    let list: Vec<String> = r.resources.rdma.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    (n > 0).then(|| (n, format!("RDMA devices {}", list.join(", "))))
}

fn rndv_rails(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let Some(value) = r.literal("UCX_MAX_RNDV_RAILS") else {
        return;
    };
    let Some((nics, given)) = rank_nics(r) else { return };
    let Ok(rails) = value.trim().parse::<u32>() else {
        out.push(mk(
            "env.ucx_rndv_rails",
            Status::Warn,
            format!("{}: not a number of rails", shown(r, "UCX_MAX_RNDV_RAILS")),
            scope,
            Some("UCX_MAX_RNDV_RAILS is a count (1..8)"),
        ));
        return;
    };
    if rails >= nics {
        out.push(mk(
            "env.ucx_rndv_rails",
            Status::Ok,
            format!("{} covers the {nics} NIC(s) of {given}", shown(r, "UCX_MAX_RNDV_RAILS")),
            scope,
            None,
        ));
        return;
    }
    out.push(mk(
        "env.ucx_rndv_rails",
        Status::Warn,
        format!(
            "{} is below the {nics} RDMA NIC(s) each rank is given ({given}): one transfer uses at most {rails}, the other NICs' bandwidth is left unused",
            shown(r, "UCX_MAX_RNDV_RAILS")
        ),
        scope,
        Some("raise UCX_MAX_RNDV_RAILS to the number of NICs per rank, or give each rank fewer NICs"),
    ));
}
