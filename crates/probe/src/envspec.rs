//! The transport variables a node probe cross-checks, and their device-list syntaxes:
//! `UCX_NET_DEVICES=mlx5_0:1,eth0|all` and `NCCL_IB_HCA=[^][=]mlx5_0[:1],…` (NCCL matches by
//! prefix unless the list starts with `=`, so `mlx5_1` also selects `mlx5_10`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Transport variables and where they came from (`environment`, `pod/NAME`, `recipe …`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportEnv {
    pub origin: String,
    pub vars: BTreeMap<String, String>,
}

impl TransportEnv {
    pub fn new(origin: impl Into<String>, vars: impl IntoIterator<Item = (String, String)>) -> Self {
        TransportEnv {
            origin: origin.into(),
            vars: vars.into_iter().filter(|(k, _)| is_transport_var(k)).collect(),
        }
    }

    /// This process's environment.
    pub fn from_process() -> Self {
        TransportEnv::new("environment", std::env::vars())
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// A GID index forced by NCCL/UCX/NVSHMEM (`-1` means auto and is not a force).
    pub fn forced_gid_index(&self) -> Option<(&'static str, i64)> {
        ["NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX", "NVSHMEM_IB_GID_INDEX"]
            .into_iter()
            .find_map(|k| {
                let v: i64 = self.get(k)?.parse().ok()?;
                (v >= 0).then_some((k, v))
            })
    }
}

/// The variables collected from an environment: the fabric vocabulary's pod set (transport
/// libraries and GPU visibility), the same a bench pod copies and `probe env` lists. Nothing
/// else is read, so no secret can be picked up and printed.
pub use icb_core::fabric::is_pod_transport_env as is_transport_var;

/// One `UCX_NET_DEVICES` / `NCCL_IB_HCA` entry (the fabric vocabulary's).
pub use icb_core::fabric::net_devices::NetDevice;

/// `None` for `all` (UCX's default); otherwise the entries, or the first one that cannot be read.
/// A bare RDMA device name is kept: the node checks compare it with the node's own devices.
pub fn parse_ucx_net_devices(value: &str) -> Result<Option<Vec<NetDevice>>, String> {
    let Some(list) = icb_core::fabric::net_devices::parse_ucx_net_devices(value) else {
        return Ok(None);
    };
    match list.problems.iter().find(|p| p.is_malformed()) {
        Some(p) => Err(format!("UCX_NET_DEVICES={}: {p}", value.trim())),
        None => Ok(Some(list.entries)),
    }
}

/// A parsed `NCCL_IB_HCA`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HcaSpec {
    pub exclude: bool,
    pub exact: bool,
    pub entries: Vec<NetDevice>,
}

pub fn parse_nccl_ib_hca(value: &str) -> HcaSpec {
    let mut v = value.trim();
    let exclude = v.starts_with('^');
    v = v.trim_start_matches('^');
    let exact = v.starts_with('=');
    v = v.trim_start_matches('=');
    let entries = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| match item.split_once(':') {
            Some((d, p)) => NetDevice {
                device: d.to_string(),
                port: p.parse().ok(),
            },
            None => NetDevice {
                device: item.to_string(),
                port: None,
            },
        })
        .collect();
    HcaSpec {
        exclude,
        exact,
        entries,
    }
}

impl HcaSpec {
    fn entry_matches(&self, e: &NetDevice, dev: &str, port: u32) -> bool {
        let name_ok = if self.exact {
            e.device == dev
        } else {
            dev.starts_with(&e.device)
        };
        name_ok && e.port.is_none_or(|p| p == port)
    }

    /// Whether NCCL would use `dev:port`.
    pub fn selects(&self, dev: &str, port: u32) -> bool {
        let hit = self.entries.iter().any(|e| self.entry_matches(e, dev, port));
        if self.exclude { !hit } else { hit }
    }

    /// Devices an entry selects by prefix beyond its own name (`mlx5_1` → `mlx5_10`).
    pub fn prefix_spill<'a>(&self, e: &NetDevice, devices: &'a [String]) -> Vec<&'a str> {
        if self.exact {
            return Vec::new();
        }
        devices
            .iter()
            .map(String::as_str)
            .filter(|d| *d != e.device && d.starts_with(&e.device))
            .collect()
    }
}

/// `NCCL_SOCKET_IFNAME` (same prefix / `^` / `=` syntax) against the node's interfaces.
pub fn socket_ifname_matches(value: &str, ifname: &str) -> bool {
    let spec = parse_nccl_ib_hca(value);
    let hit = spec.entries.iter().any(|e| {
        if spec.exact {
            e.device == ifname
        } else {
            ifname.starts_with(&e.device)
        }
    });
    if spec.exclude { !hit } else { hit }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ucx_net_devices_syntax() {
        let d = parse_ucx_net_devices("mlx5_0:1, mlx5_1:1,eth0").unwrap().unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(d[0].to_string(), "mlx5_0:1");
        assert_eq!(d[2].port, None);
        assert_eq!(parse_ucx_net_devices("all").unwrap(), None);
        assert!(parse_ucx_net_devices("mlx5_0:x").is_err());
        assert!(parse_ucx_net_devices("mlx5_0:1,,").is_err());
    }

    #[test]
    fn nccl_prefix_exact_and_exclude() {
        let s = parse_nccl_ib_hca("mlx5_1");
        assert!(s.selects("mlx5_1", 1) && s.selects("mlx5_10", 1) && !s.selects("mlx5_0", 1));
        let devs = vec!["mlx5_1".to_string(), "mlx5_10".to_string()];
        assert_eq!(s.prefix_spill(&s.entries[0], &devs), vec!["mlx5_10"]);
        let s = parse_nccl_ib_hca("=mlx5_1:1");
        assert!(s.selects("mlx5_1", 1) && !s.selects("mlx5_10", 1) && !s.selects("mlx5_1", 2));
        let s = parse_nccl_ib_hca("^mlx5_3");
        assert!(s.selects("mlx5_0", 1) && !s.selects("mlx5_3", 1));
        assert!(socket_ifname_matches("eth", "eth0"));
        assert!(!socket_ifname_matches("=eth", "eth0"));
        assert!(socket_ifname_matches("^lo,docker", "eth0"));
    }

    #[test]
    fn forced_gid_index_ignores_auto() {
        let env = TransportEnv::new("t", [("NCCL_IB_GID_INDEX".to_string(), "-1".to_string())]);
        assert_eq!(env.forced_gid_index(), None);
        let env = TransportEnv::new(
            "t",
            [
                ("UCX_IB_GID_INDEX".to_string(), "3".to_string()),
                ("HOME".into(), "/".into()),
            ],
        );
        assert_eq!(env.forced_gid_index(), Some(("UCX_IB_GID_INDEX", 3)));
        assert!(!env.vars.contains_key("HOME"));
    }
}
