//! Emulated nodes: one network namespace per node, each with `lo` up and an `eth0` holding a
//! private test address (10.99.0.N/24, only inside namespaces this crate creates). Two nodes share
//! one veth; one node or more than two hang off a bridge in a separate "hub" namespace. Nothing is
//! ever added to the host's own network namespace, so deleting the namespaces removes every veth.
//!
//! Each node also has an init process holding the node's own IPC, PID and mount namespaces (the
//! mount namespace shows the node's /sys and /proc): pods with hostIPC/hostPID join those, as on
//! a real node, while other pods get their own ([`crate::PodSpec::node`]). `ip netns exec`
//! mounts a fresh sysfs of the node's network namespace in that mount namespace, so
//! `/proc/{init}/root/sys` is the node's own sysfs ([`Fabric::sys_root`]).
//!
//! With rails ([`FabricOptions::rails`], module `rails`) every node also has `rail0 …`, each
//! rail on its own switch in the hub.

use crate::chain::Placement;
use crate::error::{IsolateError, Result};
use crate::holder::Holder;
use crate::names::{RunTag, validate_node};
use crate::procs::{kill_until_gone, netns_exists, netns_inode, pids_in_netns, tagged_pids};
use crate::rails::{FabricOptions, build_rails, check_rail_count, write_trees};
use crate::tools::{ip, tc};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Each node gets 10.99.0.(index + 1); the /24 caps the count well above any test's needs.
pub(crate) const MAX_NODES: usize = 200;
const SUBNET_PREFIX_LEN: u8 = 24;
/// The interface every node reaches the others through, as in a pod or on a node.
pub const NODE_IFACE: &str = "eth0";

/// How the nodes are cabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wiring {
    /// Two nodes share one veth; one node or more than two hang off a bridge.
    #[default]
    Auto,
    /// Every node hangs off a bridge in the hub namespace, as hosts off a switch; cutting a node
    /// takes its switch port down (a pulled cable: the node's `eth0` loses carrier and traffic
    /// stalls rather than failing at once).
    Bridge,
}

/// One emulated node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    /// The `ip netns` name: `ip netns exec <netns> …` runs something "on" the node.
    pub netns: String,
    /// The node's address on `eth0`.
    pub ip: Ipv4Addr,
    /// Pid of the node's init, holder of the node's IPC, PID and mount namespaces.
    pub init_pid: u32,
}

/// A set of emulated nodes, removed on [`Fabric::teardown`] or on drop (also while unwinding
/// from a panic). Creating and changing it calls `ip`, which blocks for a few milliseconds.
#[derive(Debug)]
pub struct Fabric {
    pub(crate) tag: RunTag,
    pub(crate) nodes: Vec<Node>,
    pub(crate) hub: Option<String>,
    /// Emulated rails per node.
    pub(crate) rails: usize,
    /// The nodes' recorded rail-map trees (one directory per node), if rails > 0.
    pub(crate) rail_dir: Option<PathBuf>,
    /// Faults injected into rails whose counters [`Fabric::drive_rail_counters`] drives:
    /// (node index, rail, fault).
    pub(crate) faults: std::sync::Mutex<Vec<(usize, usize, crate::rail_faults::RailFault)>>,
    /// Namespaces that exist because of us, in creation order: only these are ever deleted.
    created: Vec<String>,
    /// The nodes' init processes.
    inits: Vec<Holder>,
    torn_down: bool,
}

impl Fabric {
    /// Creates nodes named `nodes` (each 1-32 of a-z, 0-9, '-'), names prefixed with a fresh
    /// [`RunTag`] under `prefix`. Needs root. On error, whatever was created is removed again.
    pub fn create(prefix: &str, nodes: &[&str]) -> Result<Fabric> {
        let tag = RunTag::new(prefix)?;
        Self::create_tagged(tag, nodes)
    }

    /// Like [`Fabric::create`] with a tag chosen by the caller (to share it with pods' run tag).
    pub fn create_tagged(tag: RunTag, nodes: &[&str]) -> Result<Fabric> {
        Self::create_wired(tag, nodes, Wiring::Auto)
    }

    /// Like [`Fabric::create_tagged`] with the cabling chosen by the caller.
    pub fn create_wired(tag: RunTag, nodes: &[&str], wiring: Wiring) -> Result<Fabric> {
        Self::create_with(tag, nodes, FabricOptions { wiring, rails: 0 })
    }

    /// Like [`Fabric::create_wired`], with `opts.rails` emulated rails per node (at most
    /// [`crate::MAX_RAILS`]): `rail0 …` on per-rail switches in the hub (which then always
    /// exists), a recorded rail-map tree per node ([`Fabric::rail_tree`]). Handed out once every
    /// rail runs.
    pub fn create_with(tag: RunTag, nodes: &[&str], opts: FabricOptions) -> Result<Fabric> {
        let FabricOptions { wiring, rails } = opts;
        check_rail_count(rails)?;
        let mut distinct = nodes.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        if nodes.is_empty() || nodes.len() > MAX_NODES || distinct.len() != nodes.len() {
            return Err(IsolateError::BadNodeSet {
                got: nodes.iter().map(|n| n.to_string()).collect(),
                max: MAX_NODES,
            });
        }
        for node in nodes {
            validate_node(node)?;
        }
        if !nix::unistd::geteuid().is_root() {
            return Err(IsolateError::NotRoot {
                what: "emulated nodes (network namespaces and veths)",
            });
        }
        let nodes: Vec<Node> = nodes
            .iter()
            .enumerate()
            .map(|(i, name)| Node {
                name: name.to_string(),
                netns: tag.node_netns(name),
                // Bounded by MAX_NODES (200), so i + 1 fits the last octet.
                ip: Ipv4Addr::new(10, 99, 0, (i + 1) as u8),
                init_pid: 0,
            })
            .collect();
        // Rails need switches, which live in the hub.
        let hub = (nodes.len() != 2 || wiring == Wiring::Bridge || rails > 0).then(|| tag.hub_netns());
        let mut fabric = Fabric {
            tag,
            nodes,
            hub,
            rails,
            rail_dir: None,
            faults: std::sync::Mutex::new(Vec::new()),
            created: Vec::new(),
            inits: Vec::new(),
            torn_down: false,
        };
        // Any error drops `fabric`, which deletes what was created so far.
        fabric.build()?;
        Ok(fabric)
    }

    fn build(&mut self) -> Result<()> {
        let names: Vec<String> = self
            .nodes
            .iter()
            .map(|n| n.netns.clone())
            .chain(self.hub.clone())
            .collect();
        for ns in &names {
            ip(&["netns", "add", ns])?;
            self.created.push(ns.clone());
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        match &self.hub {
            None => {
                let (a, b) = (&self.nodes[0].netns, &self.nodes[1].netns);
                ip(&[
                    "-n", a, "link", "add", NODE_IFACE, "type", "veth", "peer", "name", NODE_IFACE, "netns", b,
                ])?;
            }
            Some(hub) => {
                ip(&["-n", hub, "link", "add", "br0", "type", "bridge"])?;
                ip(&["-n", hub, "link", "set", "br0", "up"])?;
                for (i, node) in self.nodes.iter().enumerate() {
                    bridge_port(&node.netns, NODE_IFACE, hub, &hub_port(i), "br0")?;
                }
            }
        }
        for node in &self.nodes {
            let cidr = format!("{}/{SUBNET_PREFIX_LEN}", node.ip);
            ip(&["-n", &node.netns, "addr", "add", &cidr, "dev", NODE_IFACE])?;
            ip(&["-n", &node.netns, "link", "set", NODE_IFACE, "up"])?;
        }
        let tag = self.tag.to_string();
        for node in &mut self.nodes {
            let placement = Placement {
                netns: Some(node.netns.clone()),
                ..Default::default()
            };
            let init = Holder::start(&placement, &tag, format!("init of node {}", node.name))?;
            node.init_pid = init.pid();
            self.inits.push(init);
        }
        for (i, node) in self.nodes.iter().enumerate() {
            wait_until_running(&node.netns, NODE_IFACE)?;
            if let Some(hub) = &self.hub {
                wait_until_running(hub, &hub_port(i))?;
            }
        }
        if self.rails > 0 {
            build_rails(self)?;
            self.rail_dir = Some(write_trees(self)?);
        }
        Ok(())
    }

    /// The run tag every name of this fabric starts with; give it to pods ([`crate::PodSpec::tag`]).
    pub fn tag(&self) -> &RunTag {
        &self.tag
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, name: &str) -> Result<&Node> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .ok_or_else(|| IsolateError::UnknownNode {
                name: name.to_string(),
                known: self
                    .nodes
                    .iter()
                    .map(|n| n.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    pub fn node_ip(&self, name: &str) -> Result<Ipv4Addr> {
        Ok(self.node(name)?.ip)
    }

    /// The `ip netns` name of a node.
    pub fn netns(&self, name: &str) -> Result<&str> {
        Ok(&self.node(name)?.netns)
    }

    /// Every namespace this fabric created (nodes, then the hub if any).
    pub fn namespaces(&self) -> &[String] {
        &self.created
    }

    /// Cuts a node off the network: with a bridge its switch port goes down (a pulled cable:
    /// traffic to and from it stalls), with a direct veth its `eth0` goes down (connections fail).
    /// Processes on it keep running.
    pub fn cut(&self, name: &str) -> Result<()> {
        self.set_link(name, "down")
    }

    /// Undoes [`Fabric::cut`] and waits until the link runs again.
    pub fn restore(&self, name: &str) -> Result<()> {
        self.set_link(name, "up")
    }

    /// Limits the rate a node sends at on its `eth0` (`tc … tbf`, RATE as tc writes it, e.g.
    /// `30mbit`): a degraded link. netem does not work on every kernel; tbf does.
    pub fn rate_limit(&self, name: &str, rate: &str) -> Result<()> {
        let netns = &self.node(name)?.netns;
        let args = [
            "-n", netns, "qdisc", "replace", "dev", NODE_IFACE, "root", "tbf", "rate", rate,
        ];
        tc(&[&args[..], &["burst", "64kb", "latency", "50ms"]].concat())?;
        Ok(())
    }

    /// Limits a node's link to `rate` both ways, as a slow NIC or cable is: what it sends (its
    /// `eth0`) and what it receives (its switch port on the hub's bridge; with a direct veth, the
    /// other node's `eth0`, which only leads to it). [`Fabric::rate_limit`] limits only the first.
    pub fn rate_limit_both_ways(&self, name: &str, rate: &str) -> Result<()> {
        let index = self.index_of(name)?;
        let inbound = match &self.hub {
            Some(hub) => (hub.as_str(), hub_port(index)),
            None => match self.nodes.iter().find(|n| n.name != name) {
                Some(other) => (other.netns.as_str(), NODE_IFACE.to_string()),
                None => return self.rate_limit(name, rate),
            },
        };
        let outbound = (self.nodes[index].netns.as_str(), NODE_IFACE.to_string());
        for (ns, dev) in [outbound, inbound] {
            let args = ["-n", ns, "qdisc", "replace", "dev", &dev, "root", "tbf", "rate", rate];
            tc(&[&args[..], &["burst", "64kb", "latency", "50ms"]].concat())?;
        }
        Ok(())
    }

    fn set_link(&self, name: &str, state: &str) -> Result<()> {
        let index = self.index_of(name)?;
        let netns = &self.nodes[index].netns;
        match &self.hub {
            Some(hub) => ip(&["-n", hub, "link", "set", &hub_port(index), state])?,
            None => ip(&["-n", netns, "link", "set", NODE_IFACE, state])?,
        };
        if state == "up" {
            wait_until_running(netns, NODE_IFACE)?;
            if let Some(hub) = &self.hub {
                wait_until_running(hub, &hub_port(index))?;
            }
        }
        Ok(())
    }

    pub(crate) fn index_of(&self, name: &str) -> Result<usize> {
        let node = self.node(name)?;
        Ok(self.nodes.iter().position(|n| n == node).unwrap_or_default())
    }

    /// Kills every process inside the fabric's namespaces or carrying its run tag, then deletes
    /// the namespaces (and with them every veth and the bridge). Reports the first problem after
    /// trying everything.
    pub fn teardown(mut self) -> Result<()> {
        self.teardown_inner()
    }

    fn teardown_inner(&mut self) -> Result<()> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        for init in &mut self.inits {
            init.stop();
        }
        self.inits.clear();
        let tag = self.tag.to_string();
        let mut result = remove_namespaces(&self.created, &format!("run {tag}"), |t| t == tag);
        self.created.clear();
        if let Some(dir) = self.rail_dir.take()
            && let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
            && result.is_ok()
        {
            result = Err(IsolateError::io(format!("cannot remove {}", dir.display()), e));
        }
        result
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        if let Err(e) = self.teardown_inner() {
            tracing::warn!("cleaning up emulated nodes: {e}");
        }
    }
}

/// Waits until a node's `eth0` is operationally up. The kernel's link watcher reports carrier
/// changes with up to a second's delay, and until then `eth0` lacks IFF_RUNNING: UCX started in
/// that window skips the device ("no active messages transport … tcp/lo"), so a fabric is handed
/// out only once every link runs.
pub(crate) fn wait_until_running(netns: &str, dev: &str) -> Result<()> {
    const DEADLINE: Duration = Duration::from_secs(5);
    let started = Instant::now();
    loop {
        let state = ip(&["-n", netns, "-o", "link", "show", "dev", dev])?;
        if state.contains("state UP") {
            return Ok(());
        }
        if started.elapsed() > DEADLINE {
            return Err(IsolateError::Command {
                command: format!("ip -n {netns} link show dev {dev}"),
                detail: format!(
                    "{dev} not operationally up after {} s: {}",
                    DEADLINE.as_secs(),
                    state.trim()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A node's veth end on the hub's bridge.
fn hub_port(index: usize) -> String {
    format!("p{index}")
}

/// Empties and deletes named network namespaces, and kills processes whose run tag matches
/// `tag_matches` wherever they run. Shared by teardown and stale-run cleanup.
pub(crate) fn remove_namespaces(namespaces: &[String], what: &str, tag_matches: impl Fn(&str) -> bool) -> Result<()> {
    let inodes: Vec<u64> = namespaces.iter().filter_map(|ns| netns_inode(ns)).collect();
    let mut first_error = kill_until_gone(what, || {
        let mut pids = pids_in_netns(&inodes);
        pids.extend(tagged_pids(&tag_matches).into_iter().map(|(pid, _)| pid));
        pids.sort_unstable();
        pids.dedup();
        pids
    })
    .err();
    for ns in namespaces {
        if netns_exists(ns)
            && let Err(e) = ip(&["netns", "delete", ns])
        {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// A rate as `tc` reads it, limited to bit units: NUMBER followed by bit, kbit, mbit, gbit
/// (`--link-rate`, `--slow-rail`); the rate lower-cased, or a one-line refusal.
pub fn parse_rate(s: &str) -> std::result::Result<String, String> {
    let unit_at = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (number, unit) = s.split_at(unit_at);
    let positive = number.parse::<f64>().is_ok_and(|n| n.is_finite() && n > 0.0);
    if positive && ["bit", "kbit", "mbit", "gbit"].contains(&unit.to_ascii_lowercase().as_str()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(format!(
            "bad rate {s:?}: use a positive number and bit, kbit, mbit or gbit, e.g. 30mbit"
        ))
    }
}

/// Wires `dev` of a node's namespace `netns` to `bridge` in the `hub` namespace: a veth pair
/// whose peer `port` lands in the hub, enslaved to the bridge and up (the node pair's link and
/// each rail's).
pub(crate) fn bridge_port(netns: &str, dev: &str, hub: &str, port: &str, bridge: &str) -> Result<()> {
    ip(&[
        "-n", netns, "link", "add", dev, "type", "veth", "peer", "name", port, "netns", hub,
    ])?;
    ip(&["-n", hub, "link", "set", port, "master", bridge])?;
    ip(&["-n", hub, "link", "set", port, "up"])?;
    Ok(())
}
