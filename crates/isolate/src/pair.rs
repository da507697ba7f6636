//! The four layouts of `ic-bench pair --local --isolation …`, each the CPU twin of a Kubernetes
//! placement (platform notes, "Reproducing pods and nodes"):
//!
//! | isolation  | network                         | IPC       | PID       | UCX picks         |
//! |------------|---------------------------------|-----------|-----------|-------------------|
//! | `none`     | host's (127.0.0.1)              | shared    | shared    | sysv/posix, cma   |
//! | `pod`      | one fresh emulated node, shared | separate  | separate  | tcp               |
//! | `host-ipc` | one fresh emulated node, shared | node's    | separate  | sysv (+tcp lane)  |
//! | `node`     | two emulated nodes, veth        | separate  | separate  | tcp over the veth |
//!
//! `pod` and `host-ipc` use a fresh node namespace rather than the host's, so the run never
//! depends on (or disturbs) the host's interfaces and both sides reach each other at 10.99.0.1.
//!
//! `node` can also have emulated rails ([`LocalPair::create_with_rails`]): whole-node mode runs
//! one pod per rail on each side, and reads each side's NIC counters from its node's sysfs.

use crate::error::{IsolateError, Result};
use crate::fabric::Fabric;
use crate::names::RunTag;
use crate::pod::PodSpec;
use crate::rails::FabricOptions;
use std::ffi::OsStr;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Isolation {
    /// Two plain processes.
    #[default]
    None,
    /// Two pods on one node: shared network, separate IPC and PID namespaces.
    Pod,
    /// Two pods on one node with hostIPC: shared network and IPC, separate PID namespaces.
    HostIpc,
    /// Two pods on two nodes: separate network (veth), IPC and PID namespaces.
    Node,
}

impl Isolation {
    pub const ALL: [Isolation; 4] = [Isolation::None, Isolation::Pod, Isolation::HostIpc, Isolation::Node];

    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::None => "none",
            Isolation::Pod => "pod",
            Isolation::HostIpc => "host-ipc",
            Isolation::Node => "node",
        }
    }

    /// One line saying what the layout reproduces.
    pub fn describe(self) -> &'static str {
        match self {
            Isolation::None => "two plain processes sharing network, IPC and PID namespaces",
            Isolation::Pod => {
                "two pods on one emulated node: shared network namespace, separate IPC and PID namespaces"
            }
            Isolation::HostIpc => {
                "two pods on one emulated node with hostIPC: shared network and IPC namespaces, separate PID namespaces"
            }
            Isolation::Node => {
                "two pods on two emulated nodes joined by a veth: separate network, IPC and PID namespaces"
            }
        }
    }

    pub fn needs_root(self) -> bool {
        self != Isolation::None
    }

    /// Whether the two sides sit on different (emulated) hosts.
    pub fn different_hosts(self) -> bool {
        self == Isolation::Node
    }
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Isolation {
    type Err = IsolateError;
    fn from_str(s: &str) -> Result<Self> {
        Isolation::ALL
            .into_iter()
            .find(|i| i.as_str() == s)
            .ok_or_else(|| IsolateError::BadIsolation(s.to_string()))
    }
}

/// Where one side of the pair runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairSide {
    /// Host name (`none`) or emulated node name.
    pub host: String,
    /// Pod name for layouts with pods (`decode`, `prefill`).
    pub pod: Option<String>,
    /// The `ip netns` name of the side's node, if not the host's.
    pub netns: Option<String>,
    /// The address this side is reachable at (what the server listens on).
    pub ip: IpAddr,
    pub host_ipc: bool,
    pub host_pid: bool,
}

/// Both sides of a local pair plus the namespaces behind them. Dropping it (or
/// [`LocalPair::teardown`]) kills anything left in its namespaces or carrying its run tag and
/// deletes the namespaces.
#[derive(Debug)]
pub struct LocalPair {
    isolation: Isolation,
    tag: RunTag,
    fabric: Option<Fabric>,
    decode: PairSide,
    prefill: PairSide,
    torn_down: bool,
}

impl LocalPair {
    /// Builds the layout. Modes other than `none` need root and fail first with
    /// "--isolation MODE needs root (namespaces): run as root or use --isolation none".
    pub fn create(isolation: Isolation, prefix: &str) -> Result<LocalPair> {
        Self::create_with_rails(isolation, prefix, 0)
    }

    /// Like [`LocalPair::create`], each node with `rails` emulated rails (`rail0 …`, see
    /// [`Fabric::create_with`]). Rails exist only between two nodes: any other isolation with
    /// `rails > 0` is [`IsolateError::RailsNeedNode`], checked before anything else.
    pub fn create_with_rails(isolation: Isolation, prefix: &str, rails: usize) -> Result<LocalPair> {
        if rails > 0 && isolation != Isolation::Node {
            return Err(IsolateError::RailsNeedNode(isolation.to_string()));
        }
        crate::rails::check_rail_count(rails)?;
        if isolation.needs_root() && !nix::unistd::geteuid().is_root() {
            return Err(IsolateError::NeedsRoot {
                mode: isolation.as_str().to_string(),
            });
        }
        let tag = RunTag::new(prefix)?;
        let side = |host: String, pod: &str, netns: Option<String>, ip: IpAddr| PairSide {
            host,
            pod: isolation.needs_root().then(|| pod.to_string()),
            netns,
            ip,
            host_ipc: matches!(isolation, Isolation::None | Isolation::HostIpc),
            host_pid: isolation == Isolation::None,
        };
        let (fabric, decode, prefill) = match isolation {
            Isolation::None => {
                let host = nix::unistd::gethostname()
                    .ok()
                    .and_then(|h| h.into_string().ok())
                    .unwrap_or_else(|| "localhost".to_string());
                let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
                (
                    None,
                    side(host.clone(), "decode", None, lo),
                    side(host, "prefill", None, lo),
                )
            }
            Isolation::Pod | Isolation::HostIpc => {
                let fabric = Fabric::create_tagged(tag.clone(), &["node-a"])?;
                let node = fabric.node("node-a")?.clone();
                let make = |pod| side(node.name.clone(), pod, Some(node.netns.clone()), IpAddr::V4(node.ip));
                let (decode, prefill) = (make("decode"), make("prefill"));
                (Some(fabric), decode, prefill)
            }
            Isolation::Node => {
                let opts = FabricOptions {
                    rails,
                    ..Default::default()
                };
                let fabric = Fabric::create_with(tag.clone(), &["node-a", "node-b"], opts)?;
                let (a, b) = (fabric.node("node-a")?.clone(), fabric.node("node-b")?.clone());
                let decode = side(a.name, "decode", Some(a.netns), IpAddr::V4(a.ip));
                let prefill = side(b.name, "prefill", Some(b.netns), IpAddr::V4(b.ip));
                (Some(fabric), decode, prefill)
            }
        };
        Ok(LocalPair {
            isolation,
            tag,
            fabric,
            decode,
            prefill,
            torn_down: false,
        })
    }

    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    pub fn tag(&self) -> &RunTag {
        &self.tag
    }

    pub fn fabric(&self) -> Option<&Fabric> {
        self.fabric.as_ref()
    }

    /// The decode side (runs `ic-bench serve`).
    pub fn decode(&self) -> &PairSide {
        &self.decode
    }

    /// The prefill side (runs `ic-bench connect`).
    pub fn prefill(&self) -> &PairSide {
        &self.prefill
    }

    /// A pod spec for `program` on `side`, tagged with this pair's run. On an emulated node, a
    /// hostIPC side joins that node's IPC namespace (held by the node's init), as on a real node.
    pub fn pod(&self, side: &PairSide, program: impl AsRef<OsStr>) -> PodSpec {
        let spec = PodSpec::new(program)
            .host_ipc(side.host_ipc)
            .host_pid(side.host_pid)
            .tag(&self.tag);
        let node = self
            .fabric
            .as_ref()
            .and_then(|f| f.nodes().iter().find(|n| Some(&n.netns) == side.netns.as_ref()));
        match (node, &side.netns) {
            (Some(node), _) => spec.node(node),
            (None, Some(ns)) => spec.netns(ns.clone()),
            (None, None) => spec,
        }
    }

    /// Limits both emulated nodes' links to `rate` (`tc … tbf`, e.g. `30mbit`): a degraded link
    /// between the two sides. Only `node` has a link of its own to limit.
    pub fn rate_limit(&self, rate: &str) -> Result<()> {
        match (&self.fabric, self.isolation) {
            (Some(fabric), Isolation::Node) => fabric.nodes().iter().try_for_each(|n| fabric.rate_limit(&n.name, rate)),
            _ => Err(IsolateError::NoLink(self.isolation.to_string())),
        }
    }

    /// Emulated rails per side (0 unless created with rails).
    pub fn rails(&self) -> usize {
        self.fabric.as_ref().map_or(0, Fabric::rails)
    }

    /// Where `side`'s node's own sysfs is readable from here (`<root>/class/net/rail0/…`):
    /// `/sys` for `none`, the node init's view for emulated nodes.
    pub fn sys_root(&self, side: &PairSide) -> Result<PathBuf> {
        match &self.fabric {
            Some(fabric) => fabric.sys_root(&side.host),
            None => Ok(PathBuf::from("/sys")),
        }
    }

    /// `side`'s recorded rail-map tree (for `LocalSource::replay`); `None` without rails.
    pub fn rail_tree(&self, side: &PairSide) -> Option<PathBuf> {
        self.fabric.as_ref()?.rail_tree(&side.host)
    }

    /// Limits `side`'s rail `k` to `rate` and drives its congestion counters from the shaper
    /// (see `Fabric::congest_rail`): a congested rail.
    pub fn congest_rail(&self, side: &PairSide, k: usize, rate: &str) -> Result<()> {
        self.rail_fabric()?.congest_rail(&side.host, k, rate)
    }

    /// Drops `per_mille` ‰ of `side`'s rail `k` packets and drives its sequence-error counters
    /// from the drops (see `Fabric::make_rail_lossy`): a lossy rail.
    pub fn make_rail_lossy(&self, side: &PairSide, k: usize, per_mille: u32) -> Result<()> {
        self.rail_fabric()?.make_rail_lossy(&side.host, k, per_mille)
    }

    /// Writes what `side`'s faulted rails did into its recorded tree's counter files; nothing
    /// without emulated rails.
    pub fn drive_rail_counters(&self, side: &PairSide) -> Result<()> {
        match &self.fabric {
            Some(fabric) if fabric.rails() > 0 => fabric.drive_rail_counters(&side.host),
            _ => Ok(()),
        }
    }

    /// `side`'s address on rail `k`.
    pub fn rail_ip(&self, side: &PairSide, k: usize) -> Result<Ipv4Addr> {
        self.rail_fabric()?.rail_ip(&side.host, k)
    }

    /// Limits what `side` sends on rail `k` (tc tbf, e.g. `200mbit`): a slow rail.
    pub fn limit_rail(&self, side: &PairSide, k: usize, rate: &str) -> Result<()> {
        self.rail_fabric()?.limit_rail(&side.host, k, rate)
    }

    /// Takes `side`'s switch port of rail `k` down: a dead rail.
    pub fn cut_rail(&self, side: &PairSide, k: usize) -> Result<()> {
        self.rail_fabric()?.cut_rail(&side.host, k)
    }

    /// Undoes [`LocalPair::cut_rail`] and waits until the rail runs.
    pub fn restore_rail(&self, side: &PairSide, k: usize) -> Result<()> {
        self.rail_fabric()?.restore_rail(&side.host, k)
    }

    fn rail_fabric(&self) -> Result<&Fabric> {
        match (&self.fabric, self.isolation) {
            (Some(fabric), Isolation::Node) => Ok(fabric),
            _ => Err(IsolateError::RailsNeedNode(self.isolation.to_string())),
        }
    }

    /// Kills what is left of the run and deletes its namespaces, reporting the first problem.
    pub fn teardown(mut self) -> Result<()> {
        self.teardown_inner()
    }

    fn teardown_inner(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.torn_down, true) {
            return Ok(());
        }
        match self.fabric.take() {
            Some(fabric) => fabric.teardown(),
            None => {
                // `none` has no namespaces, but its pods still carry the tag.
                let tag = self.tag.to_string();
                crate::fabric::remove_namespaces(&[], &format!("run {tag}"), |t| t == tag)
            }
        }
    }
}

impl Drop for LocalPair {
    fn drop(&mut self) {
        if let Err(e) = self.teardown_inner() {
            tracing::warn!("cleaning up local pair: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolation_names_round_trip() {
        for i in Isolation::ALL {
            assert_eq!(i.as_str().parse::<Isolation>().unwrap(), i);
        }
        let err = "pods".parse::<Isolation>().unwrap_err().to_string();
        assert_eq!(err, "bad isolation 'pods': use none, pod, host-ipc or node");
        assert!(Isolation::Node.different_hosts());
        assert!(!Isolation::HostIpc.different_hosts());
        assert!(!Isolation::None.needs_root());
    }

    #[test]
    fn none_needs_no_root_and_uses_loopback() {
        let pair = LocalPair::create(Isolation::None, "icb").unwrap();
        assert!(pair.fabric().is_none());
        assert_eq!(pair.decode().ip, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(pair.decode().host_ipc && pair.decode().host_pid && pair.decode().netns.is_none());
        assert!(!pair.pod(pair.decode(), "true").needs_root());
        assert_eq!(pair.rails(), 0);
        assert_eq!(pair.sys_root(pair.decode()).unwrap(), PathBuf::from("/sys"));
        assert!(pair.rail_tree(pair.decode()).is_none());
        let err = pair.rail_ip(pair.decode(), 0).unwrap_err().to_string();
        assert_eq!(
            err,
            "rails need --isolation node (two emulated nodes), not --isolation none"
        );
        pair.teardown().unwrap();
    }

    #[test]
    fn rails_need_two_nodes_and_a_sane_count_before_anything_is_made() {
        for isolation in [Isolation::None, Isolation::Pod, Isolation::HostIpc] {
            let err = LocalPair::create_with_rails(isolation, "icb", 2).unwrap_err();
            assert!(
                matches!(&err, IsolateError::RailsNeedNode(m) if m == isolation.as_str()),
                "{err}"
            );
        }
        let err = LocalPair::create_with_rails(Isolation::Node, "icb", 17).unwrap_err();
        assert!(matches!(err, IsolateError::TooManyRails { got: 17, max: 16 }), "{err}");
    }
}
