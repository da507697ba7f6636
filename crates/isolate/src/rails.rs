//! Emulated rails: K extra network devices per node (`rail0 … rail{K-1}`), wired rail-optimized
//! as on a GPU cluster: rail k of every node hangs off its own switch (a bridge `rbr{k}` in the
//! hub namespace), address 10.99.{k+1}.{node index + 1}/24, so rail k only reaches rail k.
//! Each node also gets a recorded rail-map tree ([`write_rail_tree`]): a minimal sysfs in which
//! rail k is the netdev of an RDMA NIC `mlx5_k`, so `icb_probe::rails::rail_map` (over
//! `LocalSource::replay`) runs unchanged on an emulated node, while the byte counters are read
//! from the node's own sysfs ([`Fabric::sys_root`]), where only the netdevs exist.

use crate::error::{IsolateError, Result};
use crate::fabric::{Fabric, Wiring, bridge_port, wait_until_running};
use crate::tools::{ip, tc};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// Most rails per node: 10.99.{k+1}.N leaves room for far more, but no node has more than 16
/// NICs, and every rail costs a veth and a bridge port per node.
pub const MAX_RAILS: usize = 16;

/// How a fabric is built: cabling and emulated rails per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FabricOptions {
    pub wiring: Wiring,
    /// Emulated rails per node (`rail0 …`); 0: none. With rails a hub always exists, so `eth0`
    /// of two nodes is bridged too (a cut then stalls traffic, as with [`Wiring::Bridge`]).
    pub rails: usize,
}

/// The network device of rail `k` on every node: `rail{k}`.
pub fn rail_netdev(k: usize) -> String {
    format!("rail{k}")
}

/// The switch of rail `k` in the hub namespace.
pub(crate) fn rail_bridge(k: usize) -> String {
    format!("rbr{k}")
}

/// Node `index`'s port on the switch of rail `k` (at most 7 characters, under IFNAMSIZ).
pub(crate) fn rail_port(k: usize, index: usize) -> String {
    format!("r{k}p{index}")
}

/// Rail `k`'s address on node `index`; bounded by MAX_RAILS and MAX_NODES, so both fit an octet.
pub(crate) fn rail_addr(k: usize, index: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, (k + 1) as u8, (index + 1) as u8)
}

pub(crate) fn check_rail_count(rails: usize) -> Result<()> {
    if rails > MAX_RAILS {
        return Err(IsolateError::TooManyRails {
            got: rails,
            max: MAX_RAILS,
        });
    }
    Ok(())
}

/// Cables every node's rails to the hub's per-rail switches and waits until each runs. Called
/// while building, so an error drops the fabric and removes what was made.
pub(crate) fn build_rails(fabric: &Fabric) -> Result<()> {
    let Some(hub) = &fabric.hub else {
        return Ok(());
    };
    for k in 0..fabric.rails {
        let bridge = rail_bridge(k);
        ip(&["-n", hub, "link", "add", &bridge, "type", "bridge"])?;
        ip(&["-n", hub, "link", "set", &bridge, "up"])?;
        let dev = rail_netdev(k);
        for (i, node) in fabric.nodes.iter().enumerate() {
            bridge_port(&node.netns, &dev, hub, &rail_port(k, i), &bridge)?;
            let cidr = format!("{}/24", rail_addr(k, i));
            ip(&["-n", &node.netns, "addr", "add", &cidr, "dev", &dev])?;
            ip(&["-n", &node.netns, "link", "set", &dev, "up"])?;
        }
    }
    // Like eth0: UCX skips a device without IFF_RUNNING, so hand out only running rails.
    for k in 0..fabric.rails {
        for (i, node) in fabric.nodes.iter().enumerate() {
            wait_until_running(&node.netns, &rail_netdev(k))?;
            wait_until_running(hub, &rail_port(k, i))?;
        }
    }
    Ok(())
}

/// Writes one recorded rail-map tree per node under a fresh per-fabric directory (named after
/// the run tag, so stale cleanup finds it) and returns that directory.
pub(crate) fn write_trees(fabric: &Fabric) -> Result<PathBuf> {
    let dir = rail_trees_dir(&fabric.tag.to_string());
    std::fs::create_dir(&dir).map_err(|e| IsolateError::io(format!("cannot create {}", dir.display()), e))?;
    let written = fabric
        .nodes
        .iter()
        .try_for_each(|node| write_rail_tree(&dir.join(&node.name), fabric.rails));
    if let Err(e) = written {
        // Not yet the fabric's: remove it here, or it would outlive the failed create.
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    Ok(dir)
}

/// Where a run's rail-map trees live: `{tmp}/{tag}-rails`.
pub(crate) fn rail_trees_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{tag}{RAIL_TREES_SUFFIX}"))
}

pub(crate) const RAIL_TREES_SUFFIX: &str = "-rails";

/// The MTU a rail's veth is created with, and its tree's `mtu` file says.
pub(crate) const DEFAULT_RAIL_MTU: u32 = 1500;

impl Fabric {
    /// Emulated rails per node (0: none).
    pub fn rails(&self) -> usize {
        self.rails
    }

    /// Node `name`'s address on rail `k` (10.99.{k+1}.N).
    pub fn rail_ip(&self, name: &str, k: usize) -> Result<Ipv4Addr> {
        let index = self.rail_index(name, k)?;
        Ok(rail_addr(k, index))
    }

    /// Limits node `name`'s rail `k` to RATE both ways (`tc … tbf` on the node's `rail{k}`, what
    /// it sends, and on its switch port, what it receives; RATE as tc writes it, e.g. `200mbit`):
    /// a slow rail, whichever way the payload flows (put pushes into the decode node, get pulls
    /// out of it).
    pub fn limit_rail(&self, name: &str, k: usize, rate: &str) -> Result<()> {
        let index = self.rail_index(name, k)?;
        let hub = self.hub.as_deref().unwrap_or_default();
        let (netns, dev) = (&self.nodes[index].netns, rail_netdev(k));
        for (ns, dev) in [(netns.as_str(), dev), (hub, rail_port(k, index))] {
            let args = ["-n", ns, "qdisc", "replace", "dev", &dev, "root", "tbf", "rate", rate];
            tc(&[&args[..], &["burst", "64kb", "latency", "50ms"]].concat())?;
        }
        Ok(())
    }

    /// A dead rail: the switch port of node `name`'s rail `k` goes down (its `rail{k}` loses
    /// carrier, traffic over it stalls). The node's other rails and `eth0` keep running.
    pub fn cut_rail(&self, name: &str, k: usize) -> Result<()> {
        let index = self.rail_index(name, k)?;
        let hub = self.hub.as_deref().unwrap_or_default();
        ip(&["-n", hub, "link", "set", &rail_port(k, index), "down"])?;
        Ok(())
    }

    /// Undoes [`Fabric::cut_rail`] and waits until the rail runs again.
    pub fn restore_rail(&self, name: &str, k: usize) -> Result<()> {
        let index = self.rail_index(name, k)?;
        let hub = self.hub.as_deref().unwrap_or_default();
        let port = rail_port(k, index);
        ip(&["-n", hub, "link", "set", &port, "up"])?;
        wait_until_running(hub, &port)?;
        wait_until_running(&self.nodes[index].netns, &rail_netdev(k))
    }

    /// A host path under which node `name`'s own sysfs is readable
    /// (`<root>/class/net/rail0/statistics/tx_bytes`): the node's init holds a mount namespace
    /// made by `ip netns exec`, which mounts a sysfs of the node's network namespace.
    pub fn sys_root(&self, name: &str) -> Result<PathBuf> {
        let node = self.node(name)?;
        let root = PathBuf::from(format!("/proc/{}/root/sys", node.init_pid));
        // Why check: a dead init (killed from outside) would silently show nothing.
        if !root.join("class/net").join(crate::NODE_IFACE).exists() {
            return Err(IsolateError::io(
                format!("node {name}'s sysfs at {}", root.display()),
                std::io::Error::new(std::io::ErrorKind::NotFound, "its init is gone or shows no eth0"),
            ));
        }
        Ok(root)
    }

    /// Node `name`'s recorded rail-map tree (a root with `sys/…`, for `LocalSource::replay`);
    /// `None` without rails or for an unknown node.
    pub fn rail_tree(&self, name: &str) -> Option<PathBuf> {
        let dir = self.rail_dir.as_ref()?;
        self.node(name).ok().map(|n| dir.join(&n.name))
    }

    /// The node's index, once `k` is known to be one of its rails.
    pub(crate) fn rail_index_of(&self, name: &str, k: usize) -> Result<usize> {
        self.rail_index(name, k)
    }

    fn rail_index(&self, name: &str, k: usize) -> Result<usize> {
        let index = self.index_of(name)?;
        if k >= self.rails {
            let valid = match self.rails {
                0 => "this fabric has no rails (create it with FabricOptions { rails: K, .. })".to_string(),
                1 => "the only rail is 0".to_string(),
                n => format!("rails are 0 to {}", n - 1),
            };
            return Err(IsolateError::UnknownRail {
                node: name.to_string(),
                rail: k,
                valid,
            });
        }
        Ok(index)
    }
}

/// Writes, under `dir` (created if missing), a minimal sysfs tree `dir/sys/…` in which each of
/// `rails` rails is an RDMA NIC `mlx5_k` (port 1 ACTIVE/LinkUp, 100 Gb/s, Ethernet, with its
/// congestion and loss counter files at 0: [`crate::rail_faults`]) at [`rail_nic_pci`]`(k)`, on
/// its own PCI bus behind the root port of PCIe root complex [`rail_pcie_root`]`(k)`, NUMA node
/// 0, whose netdev is `rail{k}`; no GPUs ([`write_rail_gpus`] adds them). Links are relative, as
/// the kernel writes them. Needs no root.
pub fn write_rail_tree(dir: &Path, rails: usize) -> Result<()> {
    check_rail_count(rails)?;
    let tree = Tree { root: dir };
    for k in 0..rails {
        let port = rail_root_port(k);
        tree.pci(&port, "0x8086", "0x060400")?;
        let nic = format!("{port}/{}", rail_nic_pci(k));
        tree.pci(&nic, "0x15b3", "0x020000")?;
        let ib = format!("{nic}/infiniband/mlx5_{k}");
        tree.write(&format!("{ib}/ports/1/state"), "4: ACTIVE")?;
        tree.write(&format!("{ib}/ports/1/phys_state"), "5: LinkUp")?;
        tree.write(&format!("{ib}/ports/1/rate"), "100 Gb/sec (4X EDR)")?;
        tree.write(&format!("{ib}/ports/1/link_layer"), "Ethernet")?;
        crate::rail_faults::write_counter_files(&tree.at(&format!("{ib}/ports/1")))?;
        tree.link(&format!("{ib}/device"), &nic)?;
        tree.link(&format!("/sys/class/infiniband/mlx5_{k}"), &ib)?;
        let net = format!("{nic}/net/{}", rail_netdev(k));
        tree.write(&format!("{net}/operstate"), "up")?;
        // A veth's MTU, until `Fabric::set_rail_mtu` changes both.
        tree.write(&format!("{net}/mtu"), &DEFAULT_RAIL_MTU.to_string())?;
        tree.link(&format!("{net}/device"), &nic)?;
        tree.link(&format!("/sys/class/net/{}", rail_netdev(k)), &net)?;
    }
    Ok(())
}

/// The PCIe root complex (host bridge) of rail `k`'s NIC and GPU: `pci0000:{k}`, the value a DRA
/// driver publishes as `resource.kubernetes.io/pcieRoot`.
pub fn rail_pcie_root(k: usize) -> String {
    format!("pci0000:{k:02x}")
}

/// Rail `k`'s NIC's PCI address (bus 0x11 + k).
pub fn rail_nic_pci(k: usize) -> String {
    format!("0000:{:02x}:00.0", 0x11 + k)
}

/// GPU `k`'s PCI address (bus 0x41 + k: after every NIC, so GPU order is rail order).
pub fn rail_gpu_pci(k: usize) -> String {
    format!("0000:{:02x}:00.0", 0x41 + k)
}

/// The root port under rail `k`'s host bridge that its NIC and GPU hang off.
fn rail_root_port(k: usize) -> String {
    format!("/sys/devices/{}/0000:{k:02x}:01.0", rail_pcie_root(k))
}

/// Adds `gpus` NVIDIA GPUs (3D controllers, NUMA node 0) to a tree [`write_rail_tree`] wrote:
/// GPU k at [`rail_gpu_pci`]`(k)` beside rail k's NIC on the same root port (`PIX`), so the rail
/// map pairs GPU k with `mlx5_k`, as a DRA driver would by their common PCIe root. Needs no root.
pub fn write_rail_gpus(dir: &Path, gpus: usize) -> Result<()> {
    check_rail_count(gpus)?;
    let tree = Tree { root: dir };
    for k in 0..gpus {
        let port = rail_root_port(k);
        // Rail k's NIC brought its root port already, where the tree has that rail.
        if !tree.at(&format!("{port}/vendor")).exists() {
            tree.pci(&port, "0x8086", "0x060400")?;
        }
        tree.pci(&format!("{port}/{}", rail_gpu_pci(k)), "0x10de", "0x030200")?;
    }
    Ok(())
}

/// A tree under `root`, addressed by node paths (`/sys/…`).
struct Tree<'a> {
    root: &'a Path,
}

impl Tree<'_> {
    fn at(&self, node_path: &str) -> PathBuf {
        self.root.join(node_path.trim_start_matches('/'))
    }

    fn write(&self, node_path: &str, text: &str) -> Result<()> {
        let p = self.at(node_path);
        mkdir_parent(&p)?;
        std::fs::write(&p, format!("{text}\n"))
            .map_err(|e| IsolateError::io(format!("cannot write {}", p.display()), e))
    }

    /// A PCI device (vendor, class, numa_node 0) listed in `/sys/bus/pci/devices`.
    fn pci(&self, node_path: &str, vendor: &str, class: &str) -> Result<()> {
        self.write(&format!("{node_path}/vendor"), vendor)?;
        self.write(&format!("{node_path}/class"), class)?;
        self.write(&format!("{node_path}/numa_node"), "0")?;
        let addr = node_path.rsplit('/').next().unwrap_or_default();
        self.link(&format!("/sys/bus/pci/devices/{addr}"), node_path)
    }

    /// A relative symlink at `node_link` to `node_target`.
    fn link(&self, node_link: &str, node_target: &str) -> Result<()> {
        let p = self.at(node_link);
        mkdir_parent(&p)?;
        let from: Vec<&str> = node_link.split('/').filter(|s| !s.is_empty()).collect();
        let to: Vec<&str> = node_target.split('/').filter(|s| !s.is_empty()).collect();
        let parent = &from[..from.len().saturating_sub(1)];
        let common = parent.iter().zip(&to).take_while(|(a, b)| a == b).count();
        let mut rel: Vec<&str> = vec![".."; parent.len() - common];
        rel.extend(&to[common..]);
        std::os::unix::fs::symlink(rel.join("/"), &p)
            .map_err(|e| IsolateError::io(format!("cannot link {}", p.display()), e))
    }
}

fn mkdir_parent(p: &Path) -> Result<()> {
    match p.parent() {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| IsolateError::io(format!("cannot create {}", dir.display()), e))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses_follow_the_rail_and_the_node() {
        assert_eq!(rail_netdev(3), "rail3");
        assert_eq!(rail_addr(0, 0), Ipv4Addr::new(10, 99, 1, 1));
        assert_eq!(rail_addr(15, 199), Ipv4Addr::new(10, 99, 16, 200));
        assert!(rail_port(MAX_RAILS - 1, 199).len() <= 15, "IFNAMSIZ");
        let err = check_rail_count(MAX_RAILS + 1).unwrap_err().to_string();
        assert_eq!(err, "a node has at most 16 emulated rails; got 17");
    }

    #[test]
    fn a_rail_tree_has_relative_links_into_the_pci_tree() {
        let dir = std::env::temp_dir().join(format!("icb-rail-tree-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_rail_tree(&dir, 2).unwrap();
        let link = std::fs::read_link(dir.join("sys/class/net/rail1")).unwrap();
        assert_eq!(
            link,
            PathBuf::from("../../devices/pci0000:01/0000:01:01.0/0000:12:00.0/net/rail1")
        );
        let device = std::fs::canonicalize(dir.join("sys/class/infiniband/mlx5_1/device")).unwrap();
        assert!(
            device.ends_with("sys/devices/pci0000:01/0000:01:01.0/0000:12:00.0"),
            "{device:?}"
        );
        let state = std::fs::read_to_string(dir.join("sys/class/infiniband/mlx5_0/ports/1/state")).unwrap();
        assert_eq!(state, "4: ACTIVE\n");
        // Every emulated congestion and loss counter exists and reads 0 (healthy until a fault
        // drives it); the request counters are absent (no RDMA here: "not read").
        let hw = dir.join("sys/class/infiniband/mlx5_1/ports/1/hw_counters");
        for name in ["np_cnp_sent", "rp_cnp_handled", "out_of_sequence", "packet_seq_err"] {
            assert_eq!(std::fs::read_to_string(hw.join(name)).unwrap(), "0\n", "{name}");
        }
        let symbol = dir.join("sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error");
        assert_eq!(std::fs::read_to_string(symbol).unwrap(), "0\n");
        assert!(!hw.join("rx_read_requests").exists());
        assert!(write_rail_tree(&dir, 17).is_err());
        // GPUs beside the NICs: GPU 1 on rail 1's root port, and one more GPU than rails.
        write_rail_gpus(&dir, 3).unwrap();
        let gpu = std::fs::canonicalize(dir.join("sys/bus/pci/devices").join(rail_gpu_pci(1))).unwrap();
        assert!(
            gpu.ends_with("sys/devices/pci0000:01/0000:01:01.0/0000:42:00.0"),
            "{gpu:?}"
        );
        let class = std::fs::read_to_string(dir.join("sys/bus/pci/devices/0000:43:00.0/class")).unwrap();
        assert_eq!(class, "0x030200\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
