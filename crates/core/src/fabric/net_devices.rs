//! `UCX_NET_DEVICES=mlx5_0:1,eth0|all`: which devices UCX may use. UCX names RDMA devices
//! `device:port` and network interfaces by their bare name, so a bare RDMA device name matches
//! nothing and UCX silently falls back to whatever else is left.

use serde::{Deserialize, Serialize};

/// One `UCX_NET_DEVICES` entry (also one `NCCL_IB_HCA` entry, which has the same shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetDevice {
    pub device: String,
    pub port: Option<u32>,
}

impl std::fmt::Display for NetDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}:{p}", self.device),
            None => f.write_str(&self.device),
        }
    }
}

/// What is wrong with one entry. The first three make the list unreadable; the last two are
/// readable but not what was meant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetDeviceProblem {
    #[error("empty entry")]
    EmptyEntry,
    #[error("`{0}`: bad device name")]
    BadName(String),
    #[error("`{0}`: port must be a number from 1")]
    BadPort(String),
    #[error("`{0}` has spaces")]
    Spaces(String),
    #[error("`{0}`: an RDMA device needs its port (`{0}:1`)")]
    RdmaDeviceWithoutPort(String),
}

impl NetDeviceProblem {
    /// The entry cannot be read at all (as opposed to read, but probably not meant).
    pub fn is_malformed(&self) -> bool {
        matches!(
            self,
            NetDeviceProblem::EmptyEntry | NetDeviceProblem::BadName(_) | NetDeviceProblem::BadPort(_)
        )
    }
}

/// A parsed list: the entries that could be read (trimmed) and every problem found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetDeviceList {
    pub entries: Vec<NetDevice>,
    pub problems: Vec<NetDeviceProblem>,
}

/// Kernel names of RDMA devices (`/sys/class/infiniband`): mlx4/mlx5 (NVIDIA), bnxt_re (Broadcom),
/// irdma (Intel), efa (AWS: `efa_0`, or `rdmap16s27` with predictable names), rocep… (predictable
/// RoCE names), qedr (Marvell), hfi1 (Omni-Path), erdma (Alibaba).
pub const RDMA_DEVICE_PREFIXES: &[&str] = &[
    "mlx4_", "mlx5_", "bnxt_re", "irdma", "efa_", "rdmap", "rocep", "qedr", "hfi1_", "erdma",
];

/// AWS EFA device names (`efa_0`, `rdmap16s27`).
pub fn is_efa_device(name: &str) -> bool {
    name.starts_with("efa") || name.starts_with("rdmap")
}

/// The name is an RDMA device's, not a network interface's.
pub fn looks_like_rdma_device(name: &str) -> bool {
    RDMA_DEVICE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// `None` for `all` (UCX's default); otherwise the list with its problems.
pub fn parse_ucx_net_devices(value: &str) -> Option<NetDeviceList> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("all") {
        return None;
    }
    let name_ok = |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    let mut list = NetDeviceList::default();
    for raw in v.split(',') {
        let e = raw.trim();
        if e.is_empty() {
            list.problems.push(NetDeviceProblem::EmptyEntry);
            continue;
        }
        if e != raw {
            list.problems.push(NetDeviceProblem::Spaces(raw.to_string()));
        }
        let (device, port) = match e.split_once(':') {
            Some((dev, _)) if !name_ok(dev) => {
                list.problems.push(NetDeviceProblem::BadName(e.to_string()));
                continue;
            }
            Some((dev, port)) => match port.parse::<u32>() {
                Ok(p) if p >= 1 => (dev, Some(p)),
                _ => {
                    list.problems.push(NetDeviceProblem::BadPort(e.to_string()));
                    continue;
                }
            },
            None if !name_ok(e) => {
                list.problems.push(NetDeviceProblem::BadName(e.to_string()));
                continue;
            }
            None => {
                if looks_like_rdma_device(e) {
                    list.problems
                        .push(NetDeviceProblem::RdmaDeviceWithoutPort(e.to_string()));
                }
                (e, None)
            }
        };
        list.entries.push(NetDevice {
            device: device.to_string(),
            port,
        });
    }
    Some(list)
}
