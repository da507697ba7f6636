//! RDMA readiness: what `probe node` reads on one side (from the node, or from inside a worker
//! pod) that decides whether an RDMA transfer can run at full speed — per RDMA port the MTU, the
//! GID index and type traffic would use, the link layer and the firmware; the GPUDirect mode; and
//! the PCIe links of the NICs and GPUs — and the comparison of two sides (`prefill` and `decode`),
//! where a difference is a finding naming both values ([`compare`]). Data only and pure rules:
//! `icb_probe` reads sysfs into it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One side's readiness (`probe node`'s `readiness`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Readiness {
    /// Every RDMA port, in device then port order.
    #[serde(default)]
    pub ports: Vec<PortReadiness>,
    /// How GPU memory is registered with the NIC; absent where it could not be determined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gdr_mode: Option<GdrMode>,
    /// The PCIe links of the rail NICs and GPUs that sysfs shows.
    #[serde(default)]
    pub pcie_links: Vec<PcieLink>,
}

/// The GPUDirect RDMA mode of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GdrMode {
    /// `nvidia_peermem` (or the legacy `nv_peer_mem`): peer-memory registration.
    PeerMem,
    /// DMA-BUF: the open kernel module on a kernel ≥ 5.12.
    DmaBuf,
    /// Neither: GPU memory cannot be registered; transfers stage through host memory.
    None,
}

impl GdrMode {
    pub fn as_str(self) -> &'static str {
        match self {
            GdrMode::PeerMem => "peermem",
            GdrMode::DmaBuf => "dmabuf",
            GdrMode::None => "none",
        }
    }
}

/// One RDMA port as traffic would use it. Every field but `port` is absent when it could not be
/// read: absent is "not read", never a value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortReadiness {
    /// `mlx5_0:1`.
    pub port: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    /// `InfiniBand` or `Ethernet` (sysfs `link_layer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_layer: Option<String>,
    /// The port's active MTU in bytes (`ibv_devinfo`'s `active_mtu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_mtu: Option<u32>,
    /// The MTU of the port's netdev (`/sys/class/net/IF/mtu`), RoCE and IPoIB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev_mtu: Option<u32>,
    /// The GID index auto-selection would use: the lowest RoCE v2 IPv4-mapped entry on RoCE
    /// (what NCCL and KServe pick); absent on InfiniBand (routed by LID) and where none exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
    /// That entry's type (`RoCE v2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_type: Option<String>,
    /// The NIC's firmware version (`/sys/class/infiniband/DEV/fw_ver`, `28.39.1002`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<String>,
}

impl PortReadiness {
    /// The firmware family: the first component of the version (`28` is ConnectX-7's).
    pub fn firmware_family(&self) -> Option<&str> {
        self.firmware.as_deref().and_then(|f| f.split('.').next())
    }
}

/// A PCIe link as sysfs shows it (`current_link_width` … of the device, and the maximum of the
/// bridge above it: the link can train no wider or faster than either end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    /// `mlx5_0` or `GPU0`.
    pub device: String,
    pub pci: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_width: Option<u32>,
    /// GT/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_speed_gts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_speed_gts: Option<f64>,
    /// The upstream bridge's (switch downstream port or root port) PCI address and maxima.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_max_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_max_speed_gts: Option<f64>,
}

/// How a PCIe link compares with what it could train at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkTraining {
    /// Current width and speed at the most both ends allow.
    Full,
    /// Narrower than both ends allow: a downtrained link (a seating, riser or lane fault).
    WidthBelow,
    /// Slower than both ends allow. GPUs lower their link speed when idle, so on a GPU this
    /// says nothing by itself; on a NIC it is a downtrained link.
    SpeedBelow,
    /// At the bridge's maximum, below the device's: the slot caps it (a platform limit).
    CappedBySlot,
    /// A current or maximum value could not be read.
    Unknown,
}

impl PcieLink {
    /// The most the link can train at: the lower of the device's and the bridge's maxima (the
    /// device's where the bridge's is not read).
    pub fn trainable(&self) -> (Option<u32>, Option<f64>) {
        let width = match (self.max_width, self.bridge_max_width) {
            (Some(d), Some(b)) => Some(d.min(b)),
            (d, _) => d,
        };
        let speed = match (self.max_speed_gts, self.bridge_max_speed_gts) {
            (Some(d), Some(b)) => Some(d.min(b)),
            (d, _) => d,
        };
        (width, speed)
    }

    /// What the link trained at against what it can; width is judged before speed.
    pub fn training(&self) -> LinkTraining {
        let (width, speed) = self.trainable();
        let (Some(cw), Some(mw), Some(cs), Some(ms)) = (self.current_width, width, self.current_speed_gts, speed)
        else {
            return LinkTraining::Unknown;
        };
        if cw < mw {
            LinkTraining::WidthBelow
        } else if cs + 1e-6 < ms {
            LinkTraining::SpeedBelow
        } else if self.max_width.is_some_and(|d| cw < d) || self.max_speed_gts.is_some_and(|d| cs + 1e-6 < d) {
            LinkTraining::CappedBySlot
        } else {
            LinkTraining::Full
        }
    }

    /// `x8 16 GT/s`, `x? ? GT/s` for what was not read.
    pub fn current_text(&self) -> String {
        link_text(self.current_width, self.current_speed_gts)
    }

    /// The most the link could train at, as [`PcieLink::current_text`] writes it.
    pub fn trainable_text(&self) -> String {
        let (w, s) = self.trainable();
        link_text(w, s)
    }
}

fn link_text(width: Option<u32>, speed: Option<f64>) -> String {
    let w = width.map_or("?".to_string(), |w| w.to_string());
    let s = speed.map_or("?".to_string(), |s| format!("{s}"));
    format!("x{w} {s} GT/s")
}

/// A readiness value two sides must agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadinessField {
    ActiveMtu,
    NetdevMtu,
    GidIndex,
    GidType,
    LinkLayer,
    FirmwareFamily,
    Firmware,
    GdrMode,
}

impl ReadinessField {
    pub fn label(self) -> &'static str {
        match self {
            ReadinessField::ActiveMtu => "MTU",
            ReadinessField::NetdevMtu => "netdev MTU",
            ReadinessField::GidIndex => "GID index",
            ReadinessField::GidType => "GID type",
            ReadinessField::LinkLayer => "link layer",
            ReadinessField::FirmwareFamily => "firmware family",
            ReadinessField::Firmware => "firmware",
            ReadinessField::GdrMode => "GPUDirect mode",
        }
    }

    /// What makes the two sides agree on this value: one line, the same wherever a mismatch
    /// is reported (a rail's two ports, a pair's or a gate's two nodes).
    pub fn fix(self) -> &'static str {
        match self {
            ReadinessField::ActiveMtu | ReadinessField::NetdevMtu => {
                "set one MTU on both ports and every switch port between them (ip link set IF mtu …; the IB MTU on the subnet manager's partition)"
            }
            ReadinessField::GidIndex | ReadinessField::GidType => {
                "give both sides the same RoCE v2 GID index (UCX_IB_GID_INDEX / NCCL_IB_GID_INDEX), or fix the CNI that gives one pod another address family"
            }
            ReadinessField::LinkLayer => "pair ports of one link layer: InfiniBand with InfiniBand, RoCE with RoCE",
            ReadinessField::FirmwareFamily | ReadinessField::Firmware => {
                "run one NIC firmware across the nodes of a rail pair (mlxfwmanager / the vendor's bundle)"
            }
            ReadinessField::GdrMode => {
                "load the same GPUDirect RDMA module on both nodes (nvidia_peermem, or DMA-BUF with the open kernel module)"
            }
        }
    }
}

/// One value the two sides disagree on (`port` absent for node-wide values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadinessMismatch {
    pub field: ReadinessField,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// `(role, value)` of each side.
    pub a: (String, String),
    pub b: (String, String),
}

impl fmt::Display for ReadinessMismatch {
    /// `prefill mlx5_1:1 MTU 4096, decode mlx5_1:1 MTU 1024`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let port = self.port.as_deref().map(|p| format!("{p} ")).unwrap_or_default();
        let l = self.field.label();
        write!(
            f,
            "{} {port}{l} {}, {} {port}{l} {}",
            self.a.0, self.a.1, self.b.0, self.b.1
        )
    }
}

/// What comparing two sides gave: the values that differ, and what could not be compared
/// because a side did not read it (never counted as agreeing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadinessComparison {
    pub mismatches: Vec<ReadinessMismatch>,
    /// One line each: `decode mlx5_1 MTU not read`, `decode has no mlx5_3:1`.
    pub not_compared: Vec<String>,
}

/// `pair`'s two sides compared before the transfer (the report's `readiness`): what each side
/// read where it runs (sent in its hello; absent from a peer that reads none), and what
/// [`compare`] found. A side not read compares nothing: `not_compared` then says
/// `not read on decode`, never an agreement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairReadiness {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<Readiness>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<Readiness>,
    /// Each value the two sides differ on (`a` the prefill side, `b` the decode side).
    #[serde(default)]
    pub mismatches: Vec<ReadinessMismatch>,
    /// What could not be compared, one line each.
    #[serde(default)]
    pub not_compared: Vec<String>,
}

impl PairReadiness {
    /// Compares what the prefill and decode sides read (either may be absent).
    pub fn of(prefill: Option<Readiness>, decode: Option<Readiness>) -> PairReadiness {
        let (mismatches, not_compared) = match (&prefill, &decode) {
            (Some(p), Some(d)) => {
                let c = compare("prefill", p, "decode", d);
                (c.mismatches, c.not_compared)
            }
            _ => {
                let unread: Vec<&str> = [("prefill", &prefill), ("decode", &decode)]
                    .iter()
                    .filter(|(_, r)| r.is_none())
                    .map(|(role, _)| *role)
                    .collect();
                (Vec::new(), vec![format!("not read on {}", unread.join(" and "))])
            }
        };
        PairReadiness {
            prefill,
            decode,
            mismatches,
            not_compared,
        }
    }

    /// The sides whose readiness was not read (`prefill`, `decode`).
    pub fn unread_sides(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.prefill.is_none() {
            out.push("prefill");
        }
        if self.decode.is_none() {
            out.push("decode");
        }
        out
    }
}

/// Compares two sides' readiness: ports by name (the pair's two sides name the rail ports they
/// use), then the node-wide GPUDirect mode. Pure.
pub fn compare(a_role: &str, a: &Readiness, b_role: &str, b: &Readiness) -> ReadinessComparison {
    let mut out = ReadinessComparison::default();
    for pa in &a.ports {
        let Some(pb) = b.ports.iter().find(|p| p.port == pa.port) else {
            out.not_compared.push(format!("{b_role} has no {}", pa.port));
            continue;
        };
        compare_fields(&mut out, Some(&pa.port), (a_role, pa), (b_role, pb));
    }
    for pb in b.ports.iter().filter(|p| !a.ports.iter().any(|pa| pa.port == p.port)) {
        out.not_compared.push(format!("{a_role} has no {}", pb.port));
    }
    let mode = |r: &Readiness| r.gdr_mode.map(|m| m.as_str().to_string());
    push_field(
        &mut out,
        ReadinessField::GdrMode,
        None,
        (a_role, mode(a)),
        (b_role, mode(b)),
    );
    out
}

/// Compares one port of each side: a rail's two ends, whose names may differ. `a` and `b` name
/// each side with its port (`prefill mlx5_1:1`), so a mismatch reads `prefill mlx5_1:1 netdev
/// MTU 9000, decode mlx5_3:1 netdev MTU 1500`. The port fields of [`compare`]; the node-wide
/// GPUDirect mode is not a port's.
pub fn compare_ports(a: &str, pa: &PortReadiness, b: &str, pb: &PortReadiness) -> ReadinessComparison {
    let mut out = ReadinessComparison::default();
    compare_fields(&mut out, None, (a, pa), (b, pb));
    out
}

/// Every field two ports must agree on, into `out` (`port`: the name both share, if they do).
fn compare_fields(
    out: &mut ReadinessComparison,
    port: Option<&str>,
    (a_role, pa): (&str, &PortReadiness),
    (b_role, pb): (&str, &PortReadiness),
) {
    let fields: [(ReadinessField, Option<String>, Option<String>); 7] = [
        (ReadinessField::LinkLayer, pa.link_layer.clone(), pb.link_layer.clone()),
        (ReadinessField::ActiveMtu, num(pa.active_mtu), num(pb.active_mtu)),
        (ReadinessField::NetdevMtu, num(pa.netdev_mtu), num(pb.netdev_mtu)),
        (ReadinessField::GidIndex, num(pa.gid_index), num(pb.gid_index)),
        (ReadinessField::GidType, pa.gid_type.clone(), pb.gid_type.clone()),
        (
            ReadinessField::FirmwareFamily,
            pa.firmware_family().map(str::to_string),
            pb.firmware_family().map(str::to_string),
        ),
        (ReadinessField::Firmware, pa.firmware.clone(), pb.firmware.clone()),
    ];
    let ethernet = |p: &PortReadiness| p.link_layer.as_deref() == Some("Ethernet");
    let mut family_differs = false;
    for (field, va, vb) in fields {
        let gid = matches!(field, ReadinessField::GidIndex | ReadinessField::GidType);
        if gid && !(ethernet(pa) && ethernet(pb)) {
            continue; // InfiniBand routes by LID: no GID index to agree on.
        }
        if field == ReadinessField::Firmware && family_differs {
            continue; // Another NIC model: the version differing says nothing more.
        }
        let differs = push_field(out, field, port, (a_role, va), (b_role, vb));
        family_differs |= differs && field == ReadinessField::FirmwareFamily;
    }
}

fn num(v: Option<u32>) -> Option<String> {
    v.map(|v| v.to_string())
}

/// Records a mismatch (true) or a value a side did not read; equal values record nothing.
fn push_field(
    out: &mut ReadinessComparison,
    field: ReadinessField,
    port: Option<&str>,
    (a_role, a): (&str, Option<String>),
    (b_role, b): (&str, Option<String>),
) -> bool {
    let at = port.map(|p| format!(" {p}")).unwrap_or_default();
    match (a, b) {
        (Some(a), Some(b)) if a != b => {
            out.mismatches.push(ReadinessMismatch {
                field,
                port: port.map(str::to_string),
                a: (a_role.to_string(), a),
                b: (b_role.to_string(), b),
            });
            return true;
        }
        (Some(_), Some(_)) => {}
        (None, None) => out
            .not_compared
            .push(format!("{a_role} and {b_role}{at} {} not read", field.label())),
        (None, Some(_)) => out
            .not_compared
            .push(format!("{a_role}{at} {} not read", field.label())),
        (Some(_), None) => out
            .not_compared
            .push(format!("{b_role}{at} {} not read", field.label())),
    }
    false
}

#[cfg(test)]
#[path = "readiness_tests.rs"]
mod tests;
