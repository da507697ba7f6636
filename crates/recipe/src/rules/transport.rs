//! Per-role rules on the values that silently take RDMA or GPUDirect away: which NICs UCX and
//! NCCL are told to use (are they RDMA devices, do the two agree), `NCCL_NET=Socket`,
//! `UCX_IB_GPU_DIRECT_RDMA=no`, and UCX debug logging left on.

use super::backend::kv_path;
use super::{Ctx, mk};
use crate::mask::display_value;
use crate::model::RoleEnv;
use icb_core::checks::Check;
use icb_core::model::Status;

pub(crate) fn role_checks(r: &RoleEnv, ctx: &Ctx, out: &mut Vec<Check>) {
    let scope = r.scope();
    net_devices_rdma(r, ctx, &scope, out);
    nic_agreement(r, &scope, out);
    nccl_net(r, ctx, &scope, out);
    gpu_direct(r, ctx, &scope, out);
    ucx_log_level(r, &scope, out);
    super::rails::role_checks(r, &scope, out);
}

/// UCX names RDMA ports `dev:port` (`mlx5_0:1`, `efa_0:1`); a bare name (`eth0`, `ib0`) is a
/// network interface, which only UCX's tcp transport can use.
fn is_rdma_port(entry: &str) -> bool {
    entry
        .split_once(':')
        .is_some_and(|(dev, port)| !dev.is_empty() && port.parse::<u32>().is_ok())
}

/// The literal value of a variable with where it came from, for details.
fn shown(r: &RoleEnv, name: &str) -> Option<String> {
    let v = r.var(name)?;
    Some(format!("{name}={} [{}]", display_value(v), v.origin))
}

fn net_devices_rdma(r: &RoleEnv, ctx: &Ctx, scope: &str, out: &mut Vec<Check>) {
    if !kv_path(r).ucx {
        return;
    }
    let Some(value) = r.literal("UCX_NET_DEVICES") else {
        return;
    };
    let entries: Vec<&str> = value.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    if entries.is_empty() || entries.iter().any(|e| e.eq_ignore_ascii_case("all")) {
        return;
    }
    let show = shown(r, "UCX_NET_DEVICES").unwrap_or_default();
    if entries.iter().any(|e| is_rdma_port(e)) {
        out.push(mk(
            "env.ucx_net_devices.rdma",
            Status::Ok,
            format!("{show} names RDMA ports"),
            scope,
            None,
        ));
        return;
    }
    let (status, why) = if ctx.needs_fabric(r) && !ctx.cuda_ipc_colocated {
        (Status::Fail, "KV transfer between nodes goes over TCP")
    } else {
        (Status::Warn, "fine only while prefill and decode share a node")
    };
    out.push(mk(
        "env.ucx_net_devices.rdma",
        status,
        format!(
            "{show} names no RDMA port (dev:port), only network interfaces, which only UCX's tcp transport uses: {why}"
        ),
        scope,
        Some("list the HCA ports, e.g. UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1 (`ic-bench detect-env` prints them)"),
    ));
}

/// `NCCL_IB_HCA` entries as device names (`^`/`=` prefixes and `:port` dropped); `None` for an
/// exclusion list, which names what NOT to use.
fn nccl_hcas(value: &str) -> Option<(Vec<String>, bool)> {
    let v = value.trim();
    if v.starts_with('^') {
        return None;
    }
    let exact = v.starts_with('=');
    let list = v
        .trim_start_matches('=')
        .split(',')
        .map(|e| e.trim().split(':').next().unwrap_or("").to_string())
        .filter(|e| !e.is_empty())
        .collect();
    Some((list, exact))
}

fn nic_agreement(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let (Some(ucx), Some(nccl)) = (r.literal("UCX_NET_DEVICES"), r.literal("NCCL_IB_HCA")) else {
        return;
    };
    let Some((hcas, exact)) = nccl_hcas(nccl) else { return };
    let ucx_devs: Vec<&str> = ucx
        .split(',')
        .filter_map(|e| e.trim().split_once(':').map(|(d, _)| d))
        .filter(|d| !d.is_empty())
        .collect();
    if ucx_devs.is_empty() || ucx.trim().eq_ignore_ascii_case("all") {
        return;
    }
    // NCCL matches HCA names by prefix unless the list starts with `=`.
    let covered = |d: &str| {
        hcas.iter()
            .any(|h| if exact { h == d } else { d.starts_with(h.as_str()) })
    };
    let missing: Vec<&str> = ucx_devs.iter().copied().filter(|d| !covered(d)).collect();
    let show = format!(
        "{} vs {}",
        shown(r, "UCX_NET_DEVICES").unwrap_or_default(),
        shown(r, "NCCL_IB_HCA").unwrap_or_default()
    );
    // One list a subset of the other is normal (KV may use more ports than collectives);
    // no HCA in common means the two were set from different node layouts.
    if missing.len() < ucx_devs.len() {
        let extra = if missing.is_empty() {
            String::new()
        } else {
            format!("; UCX also uses {}", missing.join(", "))
        };
        out.push(mk(
            "env.nic_agreement",
            Status::Ok,
            format!("UCX and NCCL share HCAs ({show}){extra}"),
            scope,
            None,
        ));
    } else {
        out.push(mk(
            "env.nic_agreement",
            Status::Warn,
            format!(
                "UCX_NET_DEVICES and NCCL_IB_HCA name different NICs ({show}): KV and collectives ride different ports, and a port on another fabric fails transfers with NIXL_ERR_REMOTE_DISCONNECT"
            ),
            scope,
            Some("set both from one list of the GPU-local HCAs (`ic-bench detect-env`), then `ic-bench probe node --recipe` checks them on the node"),
        ));
    }
}

fn nccl_net(r: &RoleEnv, ctx: &Ctx, scope: &str, out: &mut Vec<Check>) {
    let Some(value) = r.literal("NCCL_NET") else { return };
    let show = shown(r, "NCCL_NET").unwrap_or_default();
    if !value.trim().eq_ignore_ascii_case("socket") {
        out.push(mk(
            "env.nccl_net",
            Status::Ok,
            format!("{show}: NCCL uses that network plugin"),
            scope,
            None,
        ));
        return;
    }
    let rdma = r.uses_rdma() || ctx.needs_fabric(r);
    out.push(mk(
        "env.nccl_net",
        if rdma { Status::Fail } else { Status::Warn },
        format!("{show} forces NCCL onto TCP sockets (NET/Socket) even where RDMA is available"),
        scope,
        Some("remove NCCL_NET (NCCL picks IB/RoCE itself), or set NCCL_NET=IB"),
    ));
}

fn gpu_direct(r: &RoleEnv, ctx: &Ctx, scope: &str, out: &mut Vec<Check>) {
    let Some(value) = r.literal("UCX_IB_GPU_DIRECT_RDMA") else {
        return;
    };
    let show = shown(r, "UCX_IB_GPU_DIRECT_RDMA").unwrap_or_default();
    if !crate::rules::ucx::is_falsy(value) {
        out.push(mk(
            "env.gpu_direct",
            Status::Ok,
            format!("{show}: GPUDirect RDMA allowed"),
            scope,
            None,
        ));
        return;
    }
    let rdma = r.uses_rdma() || ctx.needs_fabric(r);
    out.push(mk(
        "env.gpu_direct",
        if rdma { Status::Fail } else { Status::Warn },
        format!("{show} turns GPUDirect RDMA off: every KV block is staged through host memory"),
        scope,
        Some("remove UCX_IB_GPU_DIRECT_RDMA (or set yes/try) and check the node's GPUDirect mode with `ic-bench probe node`"),
    ));
}

fn ucx_log_level(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let Some(value) = r.literal("UCX_LOG_LEVEL") else {
        return;
    };
    let slow = matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "debug" | "trace" | "req" | "data" | "async" | "func" | "poll"
    );
    let show = shown(r, "UCX_LOG_LEVEL").unwrap_or_default();
    if slow {
        out.push(mk(
            "env.ucx_log_level",
            Status::Warn,
            format!("{show}: UCX logs every operation at this level, which slows transfers and floods the logs"),
            scope,
            Some("remove it (or use warn/info) once debugging is done; UCX_PROTO_INFO=y shows the selected protocols without the cost"),
        ));
    } else {
        out.push(mk("env.ucx_log_level", Status::Ok, show, scope, None));
    }
}
