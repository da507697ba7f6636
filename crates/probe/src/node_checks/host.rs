//! The host's limits and UCX build: locked memory and the transports UCX was built with.

use super::*;

pub(super) fn memlock(f: &NodeFacts) -> Check {
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

/// The RDMA transports that carry a transfer's bulk data (rc, dc, srd): a UCX with only ud
/// (UCX's wireup datagrams) or gga still falls back to TCP between hosts.
pub(super) fn is_rdma_tl(name: &str) -> bool {
    icb_core::fabric::rdma_family(name).is_some_and(icb_core::fabric::RdmaFamily::is_reliable)
}

pub(super) fn ucx_tl(f: &NodeFacts) -> Check {
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
