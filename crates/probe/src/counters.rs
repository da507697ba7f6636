//! NIC byte counters read straight from a sysfs root: what each NIC of a node says it moved.
//! `pair --rails` snapshots them before and after a rail case on both sides
//! ([`icb_core::rails::CounterSnapshot::traffic_until`]) to attribute the bytes to NICs, with
//! evidence independent of UCX's own account.
//!
//! Pure readers over a root path (the live `/sys`, an emulated node's `/proc/PID/root/sys`, a
//! recorded tree), so fixtures test them without root. The files, as the kernel defines them:
//! - IB and RoCE ports: `class/infiniband/DEV/ports/N/counters/port_xmit_data` and
//!   `port_rcv_data` (ib_core's PortCounters attributes), counting data octets divided by 4,
//!   so multiplied back by 4 here;
//! - EFA ports: `class/infiniband/DEV/ports/N/hw_counters/tx_bytes` and `rx_bytes`, the port
//!   statistics of the EFA driver that count every byte the port sent/received (send, RDMA
//!   read/write alike; `send_bytes`, `rdma_read_bytes` … are subsets);
//! - network devices: `class/net/IF/statistics/tx_bytes` and `rx_bytes`, bytes as counted by
//!   the netdev (TCP, and an emulated rail's traffic; RDMA bypasses them on a real NIC).

use crate::rails::is_pci_address;
use icb_core::rails::NicRef;
use icb_core::rails::counters::{CounterKind, CounterSnapshot, NicCounter, Unreadable};
use icb_core::rails::nic_health::{self, Driver, HealthSnapshot, PortHealth};
use std::path::Path;

const IB_CLASS: &str = "class/infiniband";
const NET_CLASS: &str = "class/net";
/// `port_xmit_data`/`port_rcv_data` count 32-bit words (IBA PortCounters).
const IB_WORD_BYTES: u64 = 4;

/// The files of one kind of counter: (directory under the port or netdev, tx file, rx file,
/// multiplier to bytes).
struct CounterFiles {
    kind: CounterKind,
    dir: &'static str,
    tx: &'static str,
    rx: &'static str,
    scale: u64,
}

const IB_PORT: CounterFiles = CounterFiles {
    kind: CounterKind::IbPort,
    dir: "counters",
    tx: "port_xmit_data",
    rx: "port_rcv_data",
    scale: IB_WORD_BYTES,
};
const EFA_HW: CounterFiles = CounterFiles {
    kind: CounterKind::EfaHw,
    dir: "hw_counters",
    tx: "tx_bytes",
    rx: "rx_bytes",
    scale: 1,
};
const NETDEV: CounterFiles = CounterFiles {
    kind: CounterKind::Netdev,
    dir: "statistics",
    tx: "tx_bytes",
    rx: "rx_bytes",
    scale: 1,
};

/// Every readable byte counter under `sys_root` (a directory laid out as `/sys`): each RDMA port
/// (`mlx5_0:1`, IB/RoCE port counters, else EFA hw_counters) and each network device except
/// `lo`. A counter that exists but cannot be read or parsed goes to `unreadable` with why; a
/// port or device without counters is simply absent. Never fails: an unreadable root gives an
/// empty snapshot.
pub fn snapshot(sys_root: &Path) -> CounterSnapshot {
    let mut snap = CounterSnapshot::default();
    let ib = sys_root.join(IB_CLASS);
    for dev in names_in(&ib) {
        let pci = pci_of(&ib.join(&dev).join("device"));
        let ports = ib.join(&dev).join("ports");
        for port in names_in(&ports) {
            let device = format!("{dev}:{port}");
            let at = ports.join(&port);
            // An mlx5 port also has hw_counters (without tx_bytes): the port counters win, and
            // EFA (no PortCounters) falls through to its hw_counters.
            let read = read_counters(&at, &IB_PORT).or_else(|| read_counters(&at, &EFA_HW));
            push(&mut snap, device, pci.clone(), read);
        }
    }
    let net = sys_root.join(NET_CLASS);
    for dev in names_in(&net).into_iter().filter(|d| d != "lo") {
        let at = net.join(&dev);
        let pci = pci_of(&at.join("device"));
        let read = read_counters(&at, &NETDEV);
        push(&mut snap, dev, pci, read);
    }
    snap
}

/// The device whose counters carry a rail NIC's bytes under `sys_root`: the RDMA port
/// (`mlx5_0:1`) when its port counters (IB or EFA) read as numbers, else the first of its
/// netdevs whose statistics do (an emulated NIC exists only as a netdev in the node's real
/// sysfs), else `None` (then the rail is "not attributed").
pub fn counter_device(sys_root: &Path, nic: &NicRef) -> Option<String> {
    let port = sys_root
        .join(IB_CLASS)
        .join(&nic.name)
        .join("ports")
        .join(nic.port.to_string());
    let readable = |r: Option<Result<Counts, FileError>>| matches!(r, Some(Ok(_)));
    if readable(read_counters(&port, &IB_PORT)) || readable(read_counters(&port, &EFA_HW)) {
        return Some(nic.port_name());
    }
    nic.netdevs
        .iter()
        .find(|nd| readable(read_counters(&sys_root.join(NET_CLASS).join(nd), &NETDEV)))
        .cloned()
}

/// Every RDMA port's health counters under `sys_root` (the vocabulary of
/// [`icb_core::rails::nic_health`]): ib_core's `counters/` on IB and RoCE ports, mlx5's
/// `hw_counters/` on `mlx5_*` devices, EFA's `hw_counters/` on EFA devices. A counter file that
/// is absent is left out (the delta says "not read"); one that cannot be read or parsed is
/// recorded with why. Netdev pause counters come from `ethtool -S`, not sysfs: see
/// [`health_snapshot_with_pause`].
pub fn health_snapshot(sys_root: &Path) -> HealthSnapshot {
    let mut snap = HealthSnapshot::default();
    let ib = sys_root.join(IB_CLASS);
    for dev in names_in(&ib) {
        let drivers = if icb_core::fabric::net_devices::is_efa_device(&dev) {
            vec![Driver::Efa]
        } else if dev.starts_with("mlx5") {
            vec![Driver::IbCore, Driver::Mlx5]
        } else {
            vec![Driver::IbCore]
        };
        let ports = ib.join(&dev).join("ports");
        for port in names_in(&ports) {
            let mut health = PortHealth {
                device: format!("{dev}:{port}"),
                drivers: drivers.clone(),
                ..Default::default()
            };
            for def in nic_health::vocabulary::for_drivers(&drivers) {
                let Some(dir) = def.path.dir() else { continue };
                let path = ports.join(&port).join(dir).join(def.name);
                if !path.exists() {
                    continue;
                }
                match read_count(&path) {
                    Ok(v) => {
                        health.values.insert(def.name.to_string(), v);
                    }
                    Err(why) => {
                        let why = format!("{dir}/{}: {why}", def.name);
                        health.unreadable.insert(def.name.to_string(), why);
                    }
                }
            }
            snap.ports.push(health);
        }
    }
    snap
}

/// How long one `ethtool -S` may take: it reads the driver's statistics, milliseconds.
const ETHTOOL_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Why `ethtool -S IF` gave no statistics (one line).
#[derive(Debug, thiserror::Error)]
pub enum EthtoolError {
    #[error("ethtool is not installed")]
    NotInstalled,
    #[error("ethtool -S {netdev}: {line}")]
    Failed { netdev: String, line: String },
    #[error(transparent)]
    Run(icb_proc::RunError),
}

/// `ethtool -S IF` on this host under [`ETHTOOL_LIMIT`]: its output, or why there is none
/// (not installed, no such device, timed out).
pub fn ethtool_stats(netdev: &str) -> Result<String, EthtoolError> {
    let mut cmd = std::process::Command::new("ethtool");
    cmd.args(["-S", netdev]);
    match icb_proc::run(&mut cmd, ETHTOOL_LIMIT) {
        Ok(out) if out.status.success() => Ok(out.stdout_text()),
        Ok(out) => Err(EthtoolError::Failed {
            netdev: netdev.to_string(),
            line: out.stderr_line(),
        }),
        Err(e) if e.is_not_found() => Err(EthtoolError::NotInstalled),
        Err(e) => Err(EthtoolError::Run(e)),
    }
}

/// [`health_snapshot`] with each RoCE port's pause counters (PFC per priority, global pause)
/// from its netdev's driver statistics (`stats`: `ethtool -S IF`'s output, or why not; the
/// netdev from `class/infiniband/DEV/device/net/`), merged into the port's reading under the
/// `netdev` driver: pause frames are how a lossless RoCE class shows congestion on the Ethernet
/// side. A port whose statistics could not be had records why for the global pause counters:
/// "not read", never zero. Run where the netdevs are (the node itself, or a pod in its network
/// namespace): another host's netdev of the same name is another device.
pub fn health_snapshot_with_pause(
    sys_root: &Path,
    stats: &dyn Fn(&str) -> Result<String, EthtoolError>,
) -> HealthSnapshot {
    let mut snap = health_snapshot(sys_root);
    let ib = sys_root.join(IB_CLASS);
    for port in &mut snap.ports {
        let Some((dev, number)) = port.device.split_once(':') else {
            continue;
        };
        let link_layer = std::fs::read_to_string(ib.join(dev).join("ports").join(number).join("link_layer"));
        if !link_layer.is_ok_and(|l| l.trim() == "Ethernet") {
            continue;
        }
        let Some(netdev) = names_in(&ib.join(dev).join("device/net")).into_iter().next() else {
            continue;
        };
        port.drivers.push(Driver::Netdev);
        match stats(&netdev) {
            Ok(text) => {
                let pause = crate::parse::ethtool::parse_ethtool_pause(&netdev, &text);
                port.values.extend(pause.values);
                port.unreadable.extend(pause.unreadable);
            }
            Err(why) => {
                let global = nic_health::VOCABULARY
                    .iter()
                    .filter(|d| d.driver == Driver::Netdev && !d.name.contains("{p}"));
                for def in global {
                    port.unreadable.insert(def.name.to_string(), format!("{netdev}: {why}"));
                }
            }
        }
    }
    snap
}

/// Why a counter file gives no count.
#[derive(Debug, thiserror::Error)]
enum CountError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// What it reads instead (its first line, bounded).
    #[error("reads {0:?}, not a count")]
    NotACount(String),
    #[error("{words} × {scale} overflows 64 bits")]
    Overflow { words: u64, scale: u64 },
}

/// A counter file (`counters/port_rcv_data`) that gives no count, and why; recorded as the
/// snapshot's `unreadable` text.
#[derive(Debug)]
struct FileError {
    file: String,
    source: CountError,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `counters/port_rcv_data reads "n/a", not a count`; `counters/port_rcv_data: <io error>`.
        let sep = if matches!(self.source, CountError::NotACount(_)) {
            " "
        } else {
            ": "
        };
        write!(f, "{}{sep}{}", self.file, self.source)
    }
}

/// A port's or netdev's byte counters: which kind, transmitted and received bytes.
type Counts = (CounterKind, u64, u64);

fn read_count(path: &Path) -> Result<u64, CountError> {
    let text = std::fs::read_to_string(path)?;
    text.trim().parse().map_err(|_| CountError::NotACount(one_line(&text)))
}

fn push(snap: &mut CounterSnapshot, device: String, pci: Option<String>, read: Option<Result<Counts, FileError>>) {
    match read {
        None => {}
        Some(Ok((kind, tx_bytes, rx_bytes))) => snap.counters.push(NicCounter {
            device,
            pci,
            kind,
            tx_bytes,
            rx_bytes,
        }),
        Some(Err(why)) => snap.unreadable.push(Unreadable {
            device: Some(device),
            why: why.to_string(),
        }),
    }
}

/// `None` when neither counter file exists under `at/DIR`; otherwise both values in bytes, or
/// why they cannot be had (one file missing, unreadable, not a number, too large).
fn read_counters(at: &Path, files: &CounterFiles) -> Option<Result<Counts, FileError>> {
    let dir = at.join(files.dir);
    let (tx, rx) = (dir.join(files.tx), dir.join(files.rx));
    if !tx.exists() && !rx.exists() {
        return None;
    }
    let value = |path: &Path, name: &str| {
        let bytes = read_count(path).and_then(|words| {
            words.checked_mul(files.scale).ok_or(CountError::Overflow {
                words,
                scale: files.scale,
            })
        });
        bytes.map_err(|source| FileError {
            file: format!("{}/{name}", files.dir),
            source,
        })
    };
    Some(value(&tx, files.tx).and_then(|t| Ok((files.kind, t, value(&rx, files.rx)?))))
}

/// At most 40 characters of the first line, for a one-line reason.
fn one_line(text: &str) -> String {
    text.trim()
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(40)
        .collect()
}

/// The PCI address a `device` link resolves to, if it is one.
fn pci_of(link: &Path) -> Option<String> {
    let target = std::fs::canonicalize(link).ok()?;
    let name = target.file_name()?.to_str()?;
    is_pci_address(name).then(|| name.to_ascii_lowercase())
}

/// The entries of a directory, sorted; empty when it cannot be read.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    names.sort_by(|a, b| crate::source::natural_cmp(a, b));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_reasons_stay_short() {
        assert_eq!(one_line("  12x\nmore\n"), "12x");
        assert_eq!(one_line(&"9".repeat(100)).len(), 40);
        assert_eq!(one_line(""), "");
    }

    #[test]
    fn a_missing_root_is_an_empty_snapshot() {
        let snap = snapshot(Path::new("/nonexistent/icb-counters"));
        assert_eq!(snap, CounterSnapshot::default());
    }
}
