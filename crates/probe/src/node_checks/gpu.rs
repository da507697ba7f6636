//! The GPU side of the path: GPUDirect RDMA, gdrcopy, GPU↔NIC affinity, NVLink, and UCX's
//! GPU memory support.

use super::*;

pub(super) fn gdr_mode(f: &NodeFacts) -> Check {
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

pub(super) fn gdrcopy(f: &NodeFacts) -> Check {
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

pub(super) fn affinity(f: &NodeFacts, x: &NodeExpectations) -> Check {
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

pub(super) fn nvlink(f: &NodeFacts) -> Check {
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

pub(super) fn ucx_gpumem(f: &NodeFacts) -> Check {
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
