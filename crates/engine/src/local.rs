//! What this process says about itself: host name, kernel boot id, transport-relevant environment,
//! CUDA availability (both engines' hellos are built from these), and the `ucx_info` of the UCX
//! it loads (`probe node`).

use icb_core::CudaInfo;
use std::collections::BTreeMap;

/// The host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `unknown`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

/// The kernel's boot id: two processes that see the same one run on the same host (containers and
/// pods share the host kernel, so this holds across namespaces too). Empty when unreadable.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The transport-relevant environment, with anything that looks like a secret masked: the fabric
/// vocabulary's run context (transport libraries, GPU visibility, `IC_BENCH_*`, `LD_LIBRARY_PATH`).
pub fn transport_env() -> BTreeMap<String, String> {
    filter_env(std::env::vars())
}

pub(crate) fn filter_env(vars: impl Iterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.filter(|(k, _)| icb_core::fabric::is_run_context_env(k))
        .take(200)
        .map(|(k, v)| {
            // Secret names, and credentials inside values (`http://user:pw@etcd:2379`).
            let v = icb_core::secrets::mask_value(&k, &v);
            let v = if v.chars().count() > 1024 {
                format!("{}…", v.chars().take(1024).collect::<String>())
            } else {
                v
            };
            (k, v)
        })
        .collect()
}

/// This host's NIC ceiling in bytes/s from sysfs, read once per process (see
/// `icb_probe::facts::line_rate_bps`).
pub fn line_rate_bps() -> Option<f64> {
    static RATE: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();
    *RATE.get_or_init(|| icb_probe::facts::line_rate_bps(&icb_probe::LocalSource::default()))
}

/// This side's RDMA readiness (`icb_probe::readiness::read_here`: the emulated node's tree in
/// `IC_BENCH_RAIL_TREE`, else this host), read once per process. [`prefetch_readiness`] starts
/// the read beside UCX's start-up; a call before it finishes waits for it.
pub fn readiness() -> icb_core::readiness::Readiness {
    readiness_cell()
        .get_or_init(|| {
            let tree = std::env::var_os(icb_probe::readiness::RAIL_TREE_ENV).map(std::path::PathBuf::from);
            icb_probe::readiness::read_here(tree.as_deref())
        })
        .clone()
}

fn readiness_cell() -> &'static std::sync::OnceLock<icb_core::readiness::Readiness> {
    static READINESS: std::sync::OnceLock<icb_core::readiness::Readiness> = std::sync::OnceLock::new();
    &READINESS
}

/// Reads [`readiness`] on a thread of its own, so that the hello does not wait for
/// `ibv_devinfo` after UCX has started.
pub fn prefetch_readiness() {
    if readiness_cell().get().is_none() {
        std::thread::spawn(|| {
            let _ = readiness();
        });
    }
}

/// This side's NIC health counters now (issue 40): every RDMA port of the emulated node's tree
/// (`IC_BENCH_RAIL_TREE`, whose counter files the emulation drives) or of this host's `/sys`,
/// the latter with each RoCE port's pause counters (`ethtool -S`, under its deadline). Read
/// around each case, so cheap: a few small files per port.
pub fn health_now() -> icb_core::rails::nic_health::HealthSnapshot {
    match std::env::var_os(icb_probe::readiness::RAIL_TREE_ENV) {
        // Not the pause counters: an emulated port's netdev is a veth without them.
        Some(tree) => icb_probe::counters::health_snapshot(&std::path::Path::new(&tree).join("sys")),
        None => icb_probe::counters::health_snapshot_with_pause(
            std::path::Path::new("/sys"),
            &icb_probe::counters::ethtool_stats,
        ),
    }
}

/// The `ucx_info` of the UCX that `serve`/`connect` would load here (`bin/ucx_info` beside its
/// `lib/`), run with that library directory first: the transports and memory types it lists
/// are then those a run would get, not those of whatever `ucx_info` is on `PATH`. Empty (PATH's
/// `ucx_info` is used) when no UCX loads or it ships no `ucx_info`.
pub fn ucx_info_of_loaded_ucx() -> BTreeMap<icb_probe::tools::Tool, icb_probe::tools::ToolAt> {
    let Ok(ucx) = ucx::Ucx::load(None) else {
        return BTreeMap::new();
    };
    let Some(at) = icb_probe::tools::ToolAt::ucx_info_beside(ucx.library_dir()) else {
        return BTreeMap::new();
    };
    tracing::info!(
        "probe node: using {} (beside the libucp ic-bench loads)",
        at.exe.display()
    );
    BTreeMap::from([(icb_probe::tools::Tool::UcxInfo, at)])
}

/// CUDA availability as the report states it.
pub fn cuda_info() -> CudaInfo {
    match icb_memory::cuda_status() {
        icb_memory::CudaStatus::Available {
            devices,
            driver_version,
        } => CudaInfo {
            available: true,
            detail: format!("CUDA driver {driver_version}"),
            devices: u32::try_from(devices).unwrap_or(u32::MAX),
        },
        icb_memory::CudaStatus::Unavailable { reason } => CudaInfo {
            available: false,
            detail: reason,
            devices: 0,
        },
    }
}

/// `no CUDA driver on the prefill side`, or the driver's own reason when it is something else.
pub fn no_cuda_reason(side: &str, cuda: &CudaInfo) -> String {
    if cuda.detail.is_empty() || cuda.detail == "no CUDA driver" {
        format!("no CUDA driver on the {side} side")
    } else {
        format!("CUDA unavailable on the {side} side: {}", cuda.detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_transport_variables_and_masks_secrets() {
        let vars = [
            ("UCX_TLS", "tcp"),
            ("NIXL_API_TOKEN", "hunter2"),
            ("HOME", "/root"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("NIXL_ETCD_ENDPOINTS", "http://user:pw@etcd:2379"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = filter_env(vars);
        assert_eq!(env.get("UCX_TLS").map(String::as_str), Some("tcp"));
        assert_eq!(env.get("NIXL_API_TOKEN").map(String::as_str), Some("***"));
        assert_eq!(env.get("CUDA_VISIBLE_DEVICES").map(String::as_str), Some("0,1"));
        assert!(!env.contains_key("HOME"));
        assert_eq!(
            env.get("NIXL_ETCD_ENDPOINTS").map(String::as_str),
            Some("http://***@etcd:2379")
        );
    }

    #[test]
    fn host_identity_is_readable_here() {
        assert!(!hostname().is_empty());
        // Linux always exposes a boot id; equal within one host.
        assert_eq!(boot_id(), boot_id());
    }
}
