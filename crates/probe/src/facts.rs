//! Gathering what a node shows (sysfs, devfs, procfs, tool outputs) into [`NodeFacts`]. The
//! tools run on a second thread while the files are read.

use crate::parse::*;
use crate::source::{NodeSource, natural_cmp};
use crate::tools::{Tool, ToolRun};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

pub const IB_CLASS: &str = "/sys/class/infiniband";

/// Error counters read from `counters/` and `hw_counters/`.
pub const ERROR_COUNTERS: [&str; 6] = [
    "counters/link_downed",
    "counters/symbol_error",
    "counters/link_error_recovery",
    "counters/port_rcv_errors",
    "counters/local_link_integrity_errors",
    "hw_counters/out_of_sequence",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GidFacts {
    pub index: u32,
    pub gid: String,
    pub gid_type: Option<GidType>,
    /// Backing netdev (`gid_attrs/ndevs/<i>`), RoCE only.
    pub ndev: Option<String>,
}

impl GidFacts {
    /// What NCCL and KServe want on RoCE: a RoCE v2 entry with an IPv4-mapped address.
    pub fn is_roce_v2_ipv4(&self) -> bool {
        self.gid_type == Some(GidType::RoceV2) && sysfs::gid_is_ipv4_mapped(&self.gid)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortFacts {
    pub device: String,
    pub port: u32,
    pub state: Option<PortState>,
    pub phys_state: Option<PhysState>,
    pub rate: Option<Rate>,
    pub link_layer: Option<LinkLayer>,
    pub gids: Vec<GidFacts>,
    pub counters: BTreeMap<String, u64>,
    /// `sysfs` or `ibstat` (fallback when sysfs shows no ports).
    pub from: String,
}

impl PortFacts {
    pub fn name(&self) -> String {
        format!("{}:{}", self.device, self.port)
    }

    pub fn is_up(&self) -> bool {
        port_is_up(self.state.as_ref(), self.phys_state.as_ref())
    }

    pub fn is_ethernet(&self) -> bool {
        self.link_layer == Some(LinkLayer::Ethernet)
    }

    /// `ACTIVE/LinkUp`, `INIT/LinkUp`, `?/?`.
    pub fn state_text(&self) -> String {
        format!(
            "{}/{}",
            self.state.as_ref().map_or("?", |s| s.as_str()),
            self.phys_state.as_ref().map_or("?", |s| s.as_str())
        )
    }

    /// Valid RoCE v2 IPv4-mapped GID indices, lowest first.
    pub fn roce_v2_ipv4_indices(&self) -> Vec<u32> {
        self.gids
            .iter()
            .filter(|g| g.is_roce_v2_ipv4())
            .map(|g| g.index)
            .collect()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFacts {
    pub target: String,
    /// RDMA devices in `/sys/class/infiniband`.
    pub devices: Vec<String>,
    /// Entries of `/dev/infiniband` (`None`: the directory is absent).
    pub dev_infiniband: Option<Vec<String>>,
    pub ports: Vec<PortFacts>,
    /// Counters read a second time, per port (`None`: not resampled).
    pub counters_later: Option<BTreeMap<String, BTreeMap<String, u64>>>,
    pub counter_interval_s: f64,
    pub modules: Option<Vec<Module>>,
    /// `/sys/kernel/mm/memory_peers/nv_mem` (legacy nv_peer_mem interface).
    pub memory_peers_nv_mem: bool,
    pub nvidia: Option<NvidiaDriver>,
    pub kernel_release: Option<String>,
    pub memlock: Option<(LimitValue, LimitValue)>,
    pub cap_eff: Option<u64>,
    pub gdrdrv: bool,
    pub netdevs: Option<Vec<String>>,
    pub device_list: Option<DeviceList>,
    pub topo: Option<Topo>,
    pub ucx: Option<UcxInfo>,
    /// Why a tool gave nothing usable, per tool.
    pub tool_gaps: BTreeMap<Tool, String>,
    /// `ibv_devinfo`'s `active_mtu` per port (`mlx5_0:1`), where it ran.
    #[serde(default)]
    pub active_mtu: BTreeMap<String, u32>,
    /// `ibv_devinfo`'s `fw_ver` per device, where it ran (sysfs `fw_ver` is read too).
    #[serde(default)]
    pub devinfo_fw: BTreeMap<String, String>,
}

impl NodeFacts {
    pub fn up_ports(&self) -> impl Iterator<Item = &PortFacts> {
        self.ports.iter().filter(|p| p.is_up())
    }

    pub fn port(&self, dev: &str, port: u32) -> Option<&PortFacts> {
        self.ports.iter().find(|p| p.device == dev && p.port == port)
    }

    pub fn kernel(&self) -> Option<(u32, u32)> {
        self.kernel_release.as_deref().and_then(parse_kernel_release)
    }

    pub fn module_loaded(&self, name: &str) -> Option<bool> {
        self.modules.as_ref().map(|m| module_loaded(m, name))
    }

    /// EFA devices (`efa_0`, `rdmap16s27`) or the efa module.
    pub fn has_efa(&self) -> bool {
        self.devices
            .iter()
            .any(|d| icb_core::fabric::net_devices::is_efa_device(d))
            || (!self.devices.is_empty() && self.module_loaded("efa") == Some(true))
    }
}

#[derive(Debug, Clone)]
pub struct GatherOptions {
    pub tool_timeout: Duration,
    /// Pause between two readings of the error counters on a live node (zero: read once).
    pub counter_interval: Duration,
}

impl Default for GatherOptions {
    fn default() -> Self {
        GatherOptions {
            tool_timeout: Duration::from_secs(10),
            counter_interval: Duration::from_secs(1),
        }
    }
}

fn read_trim(src: &dyn NodeSource, path: &str) -> Option<String> {
    src.read(path).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn read_port(src: &dyn NodeSource, dev: &str, port: u32) -> PortFacts {
    let base = format!("{IB_CLASS}/{dev}/ports/{port}");
    let mut gids = Vec::new();
    let mut idx: Vec<String> = src.list(&format!("{base}/gid_attrs/types")).unwrap_or_default();
    if idx.is_empty() {
        idx = src.list(&format!("{base}/gids")).unwrap_or_default();
    }
    idx.sort_by(|a, b| natural_cmp(a, b));
    for i in idx {
        let Ok(index) = i.parse::<u32>() else { continue };
        let Some(gid) = src.read(&format!("{base}/gids/{i}")).and_then(|g| sysfs::parse_gid(&g)) else {
            continue;
        };
        let gid_type = src
            .read(&format!("{base}/gid_attrs/types/{i}"))
            .and_then(|t| GidType::parse(&t));
        if sysfs::gid_is_zero(&gid) && gid_type.is_none() {
            continue;
        }
        let ndev = read_trim(src, &format!("{base}/gid_attrs/ndevs/{i}"));
        gids.push(GidFacts {
            index,
            gid,
            gid_type,
            ndev,
        });
    }
    let counters = ERROR_COUNTERS
        .iter()
        .filter_map(|c| {
            src.read(&format!("{base}/{c}"))
                .and_then(|v| sysfs::parse_counter(&v))
                .map(|v| (c.to_string(), v))
        })
        .collect();
    PortFacts {
        device: dev.to_string(),
        port,
        state: src.read(&format!("{base}/state")).and_then(|s| PortState::parse(&s)),
        phys_state: src
            .read(&format!("{base}/phys_state"))
            .and_then(|s| PhysState::parse(&s)),
        rate: src.read(&format!("{base}/rate")).and_then(|s| sysfs::parse_rate(&s)),
        link_layer: src
            .read(&format!("{base}/link_layer"))
            .and_then(|s| LinkLayer::parse(&s)),
        gids,
        counters,
        from: "sysfs".into(),
    }
}

/// The most this host can send to another host, bytes/s: the sysfs rates of its up RDMA ports
/// plus the speeds of its up network interfaces that sit on a device (not loopback, bridges or
/// veths). A RoCE port and its netdev are both counted: this is a ceiling for the physics check,
/// so counting too much only makes it less sensitive, never wrong. `None` when nothing is rated.
pub fn line_rate_bps(src: &dyn NodeSource) -> Option<f64> {
    let (_, ports) = read_ports(src);
    let rdma_gbps: f64 = ports
        .iter()
        .filter(|p| p.is_up())
        .filter_map(|p| p.rate.as_ref().map(|r| r.gbps))
        .sum();
    let net_gbps: f64 = src
        .list("/sys/class/net")
        .unwrap_or_default()
        .iter()
        .filter(|dev| src.exists(&format!("/sys/class/net/{dev}/device")))
        .filter(|dev| read_trim(src, &format!("/sys/class/net/{dev}/operstate")).as_deref() == Some("up"))
        // Mb/s; virtual and down links say -1 or nothing.
        .filter_map(|dev| {
            read_trim(src, &format!("/sys/class/net/{dev}/speed"))?
                .parse::<f64>()
                .ok()
        })
        .filter(|mbps| mbps.is_finite() && *mbps > 0.0)
        .map(|mbps| mbps / 1000.0)
        .sum();
    let gbps = rdma_gbps + net_gbps;
    (gbps > 0.0).then_some(gbps * 1e9 / 8.0)
}

/// Reads the RDMA ports from sysfs only (what `detect-env` needs).
pub fn read_ports(src: &dyn NodeSource) -> (Vec<String>, Vec<PortFacts>) {
    let devices = src.list(IB_CLASS).unwrap_or_default();
    let mut ports = Vec::new();
    for dev in &devices {
        let mut nums: Vec<u32> = src
            .list(&format!("{IB_CLASS}/{dev}/ports"))
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        nums.sort_unstable();
        ports.extend(nums.into_iter().map(|n| read_port(src, dev, n)));
    }
    (devices, ports)
}

/// Everything `probe node` looks at.
pub fn gather(src: &dyn NodeSource, opts: &GatherOptions) -> NodeFacts {
    let tools = [
        Tool::Ibstat,
        Tool::IbvDevinfo,
        Tool::NvidiaSmiTopo,
        Tool::UcxInfo,
        Tool::Lsmod,
    ];
    gather_with(src, opts, &tools)
}

/// [`gather`] running only `tools` (the files are all read): what a caller that needs only part
/// of the facts pays for (a pair side's readiness runs `ibv_devinfo` alone).
pub fn gather_with(src: &dyn NodeSource, opts: &GatherOptions, tools: &[Tool]) -> NodeFacts {
    let (mut facts, runs) = std::thread::scope(|s| {
        let runner = s.spawn(|| src.tools(tools, opts.tool_timeout));
        let facts = gather_files(src);
        let runs = runner.join().unwrap_or_default();
        (facts, runs)
    });
    facts.target = src.target();
    let runs: BTreeMap<Tool, ToolRun> = runs.into_iter().collect();
    for (tool, run) in &runs {
        let usable = matches!(run, ToolRun::Ran { stdout, stderr, .. } if !stdout.trim().is_empty() || !stderr.trim().is_empty());
        if let Some(why) = run.unloadable(*tool) {
            facts.tool_gaps.insert(*tool, why);
        } else if !usable {
            facts.tool_gaps.insert(*tool, run.why_not(*tool));
        }
    }
    // A tool that cannot load says nothing about the node: its output is not parsed.
    let text = |t: Tool| {
        runs.get(&t)
            .filter(|r| r.unloadable(t).is_none())
            .and_then(ToolRun::text)
            .filter(|s| !s.trim().is_empty())
    };
    if let Some(out) = text(Tool::IbvDevinfo) {
        let hcas = parse_ibv_devinfo(&out);
        for h in &hcas {
            if let Some(fw) = &h.fw_ver {
                facts.devinfo_fw.insert(h.name.clone(), fw.clone());
            }
            for p in &h.ports {
                if let Some(mtu) = p.active_mtu {
                    facts.active_mtu.insert(format!("{}:{}", h.name, p.number), mtu);
                }
            }
        }
        facts.device_list = Some(if hcas.is_empty() {
            parse_ibv_devinfo_list("", &out)
        } else {
            DeviceList::Devices(hcas.iter().map(|h| h.name.clone()).collect())
        });
    }
    if facts.ports.is_empty()
        && let Some(out) = text(Tool::Ibstat)
    {
        facts.ports = ports_from_ibstat(&parse_ibstat(&out));
        if facts.devices.is_empty() {
            facts.devices = parse_ibstat(&out).into_iter().map(|c| c.name).collect();
        }
    }
    if facts.modules.is_none() {
        facts.modules = text(Tool::Lsmod).map(|t| parse_modules(&t));
    }
    match text(Tool::NvidiaSmiTopo).map(|t| parse_topo(&t)) {
        Some(t) if !t.devices.is_empty() => facts.topo = Some(t),
        Some(_) => {
            // Say why (e.g. "NVIDIA-SMI has failed because it couldn't communicate with the driver").
            let first = text(Tool::NvidiaSmiTopo)
                .and_then(|t| t.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string));
            let said = first
                .map(|l| format!(": {}", l.chars().take(120).collect::<String>()))
                .unwrap_or_default();
            facts.tool_gaps.insert(
                Tool::NvidiaSmiTopo,
                format!("nvidia-smi topo -m printed no matrix{said}"),
            );
        }
        None => {}
    }
    match text(Tool::UcxInfo).map(|t| parse_ucx_info(&t)) {
        Some(u) if !u.memory_domains.is_empty() => facts.ucx = Some(u),
        Some(_) => {
            facts
                .tool_gaps
                .insert(Tool::UcxInfo, "ucx_info -d listed no memory domain".into());
        }
        None => {}
    }
    resample_counters(src, &mut facts, opts.counter_interval);
    facts
}

fn gather_files(src: &dyn NodeSource) -> NodeFacts {
    let (devices, ports) = read_ports(src);
    NodeFacts {
        devices,
        ports,
        dev_infiniband: src.list("/dev/infiniband"),
        modules: src.read("/proc/modules").map(|m| parse_modules(&m)),
        memory_peers_nv_mem: src.exists("/sys/kernel/mm/memory_peers/nv_mem"),
        nvidia: src
            .read("/proc/driver/nvidia/version")
            .and_then(|v| parse_nvidia_version(&v)),
        kernel_release: read_trim(src, "/proc/sys/kernel/osrelease"),
        memlock: src.read("/proc/self/limits").and_then(|l| parse_memlock(&l)),
        cap_eff: src.read("/proc/self/status").and_then(|s| parse_cap_eff(&s)),
        gdrdrv: src.exists("/dev/gdrdrv"),
        netdevs: src.list("/sys/class/net"),
        ..Default::default()
    }
}

fn ports_from_ibstat(cas: &[IbstatCa]) -> Vec<PortFacts> {
    cas.iter()
        .flat_map(|ca| {
            ca.ports.iter().map(|p| PortFacts {
                device: ca.name.clone(),
                port: p.number,
                state: p.state.clone(),
                phys_state: p.phys_state.clone(),
                rate: p.rate.clone(),
                link_layer: p.link_layer.clone(),
                gids: Vec::new(),
                counters: BTreeMap::new(),
                from: "ibstat".into(),
            })
        })
        .collect()
}

fn resample_counters(src: &dyn NodeSource, facts: &mut NodeFacts, interval: Duration) {
    facts.counter_interval_s = interval.as_secs_f64();
    let keys: Vec<(String, String, String)> = facts
        .up_ports()
        .filter(|p| p.from == "sysfs")
        .flat_map(|p| {
            p.counters.keys().map(move |c| {
                (
                    p.name(),
                    c.clone(),
                    format!("{IB_CLASS}/{}/ports/{}/{c}", p.device, p.port),
                )
            })
        })
        .collect();
    if keys.is_empty() || interval.is_zero() {
        return;
    }
    let paths: Vec<String> = keys.iter().map(|k| k.2.clone()).collect();
    let Some(values) = src.resample(&paths, interval) else {
        return;
    };
    let mut later: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for ((port, counter, _), v) in keys.into_iter().zip(values) {
        if let Some(v) = v.and_then(|v| sysfs::parse_counter(&v)) {
            later.entry(port).or_default().insert(counter, v);
        }
    }
    facts.counters_later = Some(later);
}
