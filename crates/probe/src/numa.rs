//! Where a process should run on this node: the NUMA nodes and their CPUs
//! (`/sys/devices/system/node/node*/cpulist`), and the node each GPU (PCI bus order, as
//! [`crate::rails`] numbers them) and each NIC (`/sys/class/infiniband/*/device/numa_node`,
//! `/sys/class/net/*/device/numa_node`) hangs off. Read through a [`NodeSource`], so recorded
//! trees replay; deciding what to do with it is the caller's (`icb_rails::cpus`).

use crate::facts::IB_CLASS;
use crate::source::NodeSource;
use serde::{Deserialize, Serialize};

pub const NODE_DIR: &str = "/sys/devices/system/node";
const NET_CLASS: &str = "/sys/class/net";

/// One NUMA node and the CPUs it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: Vec<u32>,
}

/// A NIC and its NUMA node (`None`: the kernel knows none, `-1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicNuma {
    pub name: String,
    pub numa_node: Option<u32>,
    /// An RDMA device (`/sys/class/infiniband`), else a physical netdev.
    pub rdma: bool,
    /// Whether it can carry anything: an RDMA port ACTIVE, a netdev's `operstate` up.
    pub up: bool,
}

/// What placement needs to know of a node (serialised: a bench pod reports its node's, `ic-bench
/// rail-info --cpus`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuTopology {
    /// By id; empty where sysfs shows no node directory.
    pub nodes: Vec<NumaNode>,
    /// Each GPU's node, by ordinal in PCI bus order.
    pub gpus: Vec<Option<u32>>,
    /// RDMA devices, then physical netdevs, each by name.
    pub nics: Vec<NicNuma>,
}

/// Reads the topology; anything unreadable is simply absent.
pub fn cpu_topology(src: &dyn NodeSource) -> CpuTopology {
    let mut nodes: Vec<NumaNode> = src
        .list(NODE_DIR)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| {
            let id = n.strip_prefix("node")?.parse::<u32>().ok()?;
            let cpus = parse_cpulist(&src.read(&format!("{NODE_DIR}/{n}/cpulist"))?)?;
            Some(NumaNode { id, cpus })
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    let numa = |path: String| src.read(&path).and_then(|t| t.trim().parse::<u32>().ok());
    let mut nics: Vec<NicNuma> = src
        .list(IB_CLASS)
        .unwrap_or_default()
        .into_iter()
        .map(|name| NicNuma {
            numa_node: numa(format!("{IB_CLASS}/{name}/device/numa_node")),
            up: src
                .list(&format!("{IB_CLASS}/{name}/ports"))
                .unwrap_or_default()
                .iter()
                .filter_map(|p| src.read(&format!("{IB_CLASS}/{name}/ports/{p}/state")))
                .any(|s| s.contains("ACTIVE")),
            name,
            rdma: true,
        })
        .collect();
    // Physical netdevs only: virtual ones (lo, veth, bridges) have no `device`.
    nics.extend(
        src.list(NET_CLASS)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| src.exists(&format!("{NET_CLASS}/{n}/device")))
            .map(|name| NicNuma {
                numa_node: numa(format!("{NET_CLASS}/{name}/device/numa_node")),
                up: src
                    .read(&format!("{NET_CLASS}/{name}/operstate"))
                    .is_some_and(|s| s.trim() == "up"),
                name,
                rdma: false,
            }),
    );
    CpuTopology {
        nodes,
        gpus: crate::rails::gpu_numa_nodes(src),
        nics,
    }
}

/// The kernel's CPU list format (`0-55,112-167`, `3`, empty); `None` for anything else.
pub fn parse_cpulist(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b) = (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?);
        // A reversed or absurd range is garbage, not a request for 4 billion CPUs.
        if b < a || b - a > 1 << 16 {
            return None;
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// The CPUs the calling thread may run on (its affinity, as the kernel lists it in
/// `/proc/thread-self/status`), ascending; what the processes it starts inherit. Empty when the
/// kernel does not say.
pub fn allowed_cpus() -> Vec<u32> {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|status| cpus_allowed(&status))
        .unwrap_or_default()
}

/// The `Cpus_allowed_list` of a `/proc/…/status` text.
fn cpus_allowed(status: &str) -> Option<Vec<u32>> {
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    parse_cpulist(list.trim())
}

/// CPUs as the kernel (and `taskset -c`) writes them: `0-3,8,10-11`.
pub fn format_cpulist(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process runs somewhere: its affinity names at least one CPU, ascending, each once,
    /// and written as a cpulist it reads back the same.
    #[test]
    fn this_process_may_run_on_an_ascending_set_of_cpus() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty(), "the kernel names no CPU for this process");
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "{cpus:?}");
        assert_eq!(parse_cpulist(&format_cpulist(&cpus)), Some(cpus));
        let status = "Name:\tx\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,8\nMems_allowed_list:\t0\n";
        assert_eq!(cpus_allowed(status), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(
            cpus_allowed("Name:\tx\n"),
            None,
            "a status without the list is not known"
        );
    }

    #[test]
    fn cpulists_parse_and_format_as_the_kernel_writes_them() {
        assert_eq!(parse_cpulist("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpulist(""), Some(vec![]));
        for bad in ["3-1", "a", "0-", "0-99999999"] {
            assert_eq!(parse_cpulist(bad), None, "{bad}");
        }
        assert_eq!(format_cpulist(&[11, 0, 1, 2, 3, 8, 10, 3]), "0-3,8,10-11");
        assert_eq!(format_cpulist(&[]), "");
    }
}
