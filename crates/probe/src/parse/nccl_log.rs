//! `NCCL_DEBUG=INFO` logs: which network NCCL chose and whether its channels used GPUDirect RDMA.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcclLogSummary {
    /// `IB` or `Socket` (from `Using network X`).
    pub network: Option<String>,
    /// `mlx5_0:1/IB` entries from `NET/IB : Using […]`.
    pub ib_devices: Vec<String>,
    /// Channels over `NET/…/GDRDMA`.
    pub gdrdma_channels: usize,
    /// Channels over `NET/…` without GDRDMA (staged through host memory).
    pub staged_net_channels: usize,
    pub p2p_channels: usize,
    pub shm_channels: usize,
    pub nvls: bool,
    pub ib_disabled_by_env: bool,
    pub ib_no_device: bool,
    /// `Bootstrap : no socket interface found` (NCCL_SOCKET_IFNAME wrong).
    pub no_socket_interface: bool,
}

pub fn parse_nccl_log(text: &str) -> NcclLogSummary {
    let mut s = NcclLogSummary::default();
    for line in text.lines() {
        let Some(msg) = line
            .split_once("NCCL INFO ")
            .or_else(|| line.split_once("NCCL WARN "))
            .map(|(_, m)| m)
        else {
            continue;
        };
        let msg = msg.trim();
        if let Some(net) = msg.strip_prefix("Using network ") {
            s.network = Some(net.trim().to_string());
        } else if let Some(rest) = msg.strip_prefix("NET/IB : Using ") {
            for tok in rest.split_whitespace() {
                let dev = tok
                    .strip_prefix('[')
                    .and_then(|t| t.split_once(']'))
                    .map(|(_, d)| d.trim_end_matches(';'));
                if let Some(dev) = dev.filter(|d| !d.is_empty()) {
                    s.ib_devices.push(dev.to_string());
                }
            }
        } else if msg.starts_with("NET/IB : No device found") {
            s.ib_no_device = true;
        } else if msg.starts_with("NCCL_IB_DISABLE set by environment to 1") {
            s.ib_disabled_by_env = true;
        } else if msg.contains("no socket interface found") {
            s.no_socket_interface = true;
        } else if msg.starts_with("Channel ") {
            if let Some((_, via)) = msg.rsplit_once(" via ") {
                if via.starts_with("NET/") {
                    if via.contains("/GDRDMA") {
                        s.gdrdma_channels += 1;
                    } else {
                        s.staged_net_channels += 1;
                    }
                } else if via.starts_with("P2P/") {
                    s.p2p_channels += 1;
                } else if via.starts_with("SHM/") {
                    s.shm_channels += 1;
                }
            }
        } else if msg.starts_with("NVLS multicast support is available") || msg.starts_with("Connected NVLS") {
            s.nvls = true;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ib_with_and_without_gdr_and_socket_fallback() {
        let log = "n1:811:840 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.1.5<0>\nn1:811:840 [0] NCCL INFO Using network IB\nn1:811:840 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\nn1:811:840 [0] NCCL INFO Channel 01/0 : 8[0] -> 0[0] [receive] via NET/IB/1\nn1:811:840 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\nn1:811:840 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\nn1:811:840 [0] NCCL INFO NVLS multicast support is available on dev 0\n";
        let s = parse_nccl_log(log);
        assert_eq!(s.network.as_deref(), Some("IB"));
        assert_eq!(s.ib_devices, vec!["mlx5_0:1/IB", "mlx5_1:1/IB"]);
        assert_eq!(
            (s.gdrdma_channels, s.staged_net_channels, s.p2p_channels, s.shm_channels),
            (1, 1, 1, 1)
        );
        assert!(s.nvls);
        let sock = "n2:512:530 [0] NCCL INFO NET/IB : No device found.\nn2:512:530 [0] NCCL INFO Using network Socket\nn2:512:530 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\nn3:1:1 [0] NCCL WARN Bootstrap : no socket interface found\n";
        let s = parse_nccl_log(sock);
        assert_eq!(s.network.as_deref(), Some("Socket"));
        assert!(s.ib_no_device && s.ib_disabled_by_env && s.no_socket_interface);
    }
}
