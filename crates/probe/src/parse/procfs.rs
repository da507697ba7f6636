//! Small `/proc` files: `self/limits`, `self/status` (CapEff), `driver/nvidia/version`,
//! `sys/kernel/osrelease`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitValue {
    Unlimited,
    Bytes(u64),
}

impl std::fmt::Display for LimitValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitValue::Unlimited => f.write_str("unlimited"),
            LimitValue::Bytes(b) if *b >= 1 << 20 && b % (1 << 20) == 0 => write!(f, "{} MiB", b >> 20),
            LimitValue::Bytes(b) if *b >= 1 << 10 && b % (1 << 10) == 0 => write!(f, "{} KiB", b >> 10),
            LimitValue::Bytes(b) => write!(f, "{b} bytes"),
        }
    }
}

fn limit_value(s: &str) -> Option<LimitValue> {
    if s == "unlimited" {
        Some(LimitValue::Unlimited)
    } else {
        s.parse().ok().map(LimitValue::Bytes)
    }
}

/// Soft and hard `Max locked memory` from `/proc/<pid>/limits`.
pub fn parse_memlock(limits: &str) -> Option<(LimitValue, LimitValue)> {
    let line = limits.lines().find(|l| l.starts_with("Max locked memory"))?;
    let mut f = line.trim_start_matches("Max locked memory").split_whitespace();
    Some((limit_value(f.next()?)?, limit_value(f.next()?)?))
}

/// `CapEff:` from `/proc/<pid>/status`.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

pub const CAP_IPC_LOCK_BIT: u32 = 14;

pub fn has_cap_ipc_lock(cap_eff: u64) -> bool {
    cap_eff & (1 << CAP_IPC_LOCK_BIT) != 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvidiaDriver {
    pub version: Option<String>,
    /// The open GPU kernel module (needed for DMA-BUF GPUDirect RDMA without nvidia_peermem).
    pub open_kernel_module: bool,
}

/// `/proc/driver/nvidia/version`: `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build …`.
pub fn parse_nvidia_version(text: &str) -> Option<NvidiaDriver> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let version = line
        .split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_string);
    Some(NvidiaDriver {
        version,
        open_kernel_module: line.contains("Open Kernel Module"),
    })
}

/// `5.15.0-91-generic` → (5, 15).
pub fn parse_kernel_release(text: &str) -> Option<(u32, u32)> {
    let t = text.trim();
    let mut parts = t.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memlock_and_caps() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1048576              1048576              files     \nMax locked memory         8388608              8388608              bytes     \n";
        assert_eq!(
            parse_memlock(limits),
            Some((LimitValue::Bytes(8 << 20), LimitValue::Bytes(8 << 20)))
        );
        assert_eq!(LimitValue::Bytes(8 << 20).to_string(), "8 MiB");
        let unl = "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(parse_memlock(unl), Some((LimitValue::Unlimited, LimitValue::Unlimited)));
        assert_eq!(parse_memlock("garbage"), None);
        let status = "Name:\tic-bench\nCapInh:\t0000000000000000\nCapEff:\t00000000a80c75fb\n";
        let eff = parse_cap_eff(status).unwrap();
        assert!(has_cap_ipc_lock(eff));
        assert!(!has_cap_ipc_lock(parse_cap_eff("CapEff:\t00000000a80425fb\n").unwrap()));
    }

    #[test]
    fn driver_and_kernel() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\nGCC version:  gcc version 12.3.0\n";
        let d = parse_nvidia_version(open).unwrap();
        assert!(d.open_kernel_module);
        assert_eq!(d.version.as_deref(), Some("550.54.15"));
        let prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n";
        assert!(!parse_nvidia_version(prop).unwrap().open_kernel_module);
        assert_eq!(parse_kernel_release("5.15.0-91-generic\n"), Some((5, 15)));
        assert_eq!(parse_kernel_release("6.8.0"), Some((6, 8)));
        assert_eq!(parse_kernel_release("weird"), None);
    }
}
