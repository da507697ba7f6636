//! The emulated nodes' network and namespaces, from icb-isolate's one namespace layer: each node
//! is a network namespace with `eth0` (10.99.0.N/24, only inside namespaces the layer creates) and
//! an init process holding the node's IPC, PID and mount namespaces, which hostIPC/hostPID pods
//! join. Names carry the owner's pid and a random run id under [`NAME_PREFIX`], so parallel
//! clusters never meet and a later start removes what a crashed test process left
//! ([`icb_isolate::cleanup_stale`]).

use icb_isolate::{Fabric, FabricOptions, Node, RunTag, Wiring};
use std::path::PathBuf;

use crate::error::Error;

/// Every name (namespace, run tag) this crate's clusters create starts with `icbtc-`.
pub const NAME_PREFIX: &str = "icbtc";

/// The cluster's nodes, by their Kubernetes names.
pub struct NodeFabric {
    fabric: Fabric,
    /// (Kubernetes node name, emulated node) in configuration order.
    nodes: Vec<(String, Node)>,
}

/// A node's emulated name: Kubernetes names may hold '.', which network-namespace names here do not.
fn emulated_name(index: usize) -> String {
    format!("n{index}")
}

impl NodeFabric {
    /// Removes stale namespaces of dead test processes, then builds the nodes (blocking: `ip`
    /// calls, a few ms each). Call it from a thread that outlives the cluster: the node inits die
    /// with the thread that started them.
    /// `rails` emulated rail NICs per node (`rail0 …`, one switch per rail; 0: none).
    pub fn create(node_names: &[String], rails: usize) -> Result<NodeFabric, Error> {
        if let Err(e) = icb_isolate::cleanup_stale(NAME_PREFIX) {
            // The crate has no logger; a failed cleanup must not stop the test.
            eprintln!("icb-testcluster: could not remove leftovers of crashed test clusters: {e}");
        }
        let tag = RunTag::new(NAME_PREFIX).map_err(namespace_error)?;
        let emulated: Vec<String> = (0..node_names.len()).map(emulated_name).collect();
        let refs: Vec<&str> = emulated.iter().map(String::as_str).collect();
        // Always a switch, so cutting a node is a pulled cable (traffic stalls), as on a real one.
        let opts = FabricOptions {
            wiring: Wiring::Bridge,
            rails,
        };
        let fabric = Fabric::create_with(tag, &refs, opts).map_err(namespace_error)?;
        let nodes = node_names
            .iter()
            .zip(fabric.nodes())
            .map(|(name, node)| (name.clone(), node.clone()))
            .collect();
        Ok(NodeFabric { fabric, nodes })
    }

    /// The emulated node behind Kubernetes node `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|(n, _)| n == name).map(|(_, node)| node)
    }

    /// The run tag every process and namespace of this cluster carries.
    pub fn tag(&self) -> &RunTag {
        self.fabric.tag()
    }

    /// Every network namespace of the cluster.
    pub fn namespaces(&self) -> Vec<String> {
        self.fabric.namespaces().to_vec()
    }

    /// Pulls the node's cable (`up = false`: its switch port goes down) or plugs it back in.
    pub fn set_link(&self, node: &str, up: bool) -> Result<(), Error> {
        let emulated = self
            .node(node)
            .ok_or_else(|| Error::Config(format!("no node named {node:?}")))?;
        let result = match up {
            true => self.fabric.restore(&emulated.name),
            false => self.fabric.cut(&emulated.name),
        };
        result.map_err(namespace_error)
    }

    /// Limits the node's link to `rate` both ways (`tc … tbf` on its side and on the side that
    /// leads to it; RATE as tc writes it, e.g. `200mbit`), so put toward a slow node is as slow
    /// as get from it. netem does not work on this kernel; tbf does.
    pub fn rate_limit(&self, node: &str, rate: &str) -> Result<(), Error> {
        let emulated = self.emulated(node)?;
        self.fabric
            .rate_limit_both_ways(&emulated, rate)
            .map_err(|e| Error::Namespace(format!("tc tbf on node {node}: {e}")))
    }

    /// Node `name`'s recorded rail-map tree (`None` without rails).
    pub fn rail_tree(&self, node: &str) -> Option<PathBuf> {
        self.fabric.rail_tree(&self.node(node)?.name)
    }

    /// A slow rail: node `name`'s rail `k` sends at most `rate` (`tc tbf`, e.g. `200mbit`).
    pub fn limit_rail(&self, node: &str, k: usize, rate: &str) -> Result<(), Error> {
        let emulated = self.emulated(node)?;
        self.fabric.limit_rail(&emulated, k, rate).map_err(namespace_error)
    }

    /// A dead rail: node `name`'s rail `k` loses its switch port (traffic over it stalls).
    pub fn cut_rail(&self, node: &str, k: usize) -> Result<(), Error> {
        let emulated = self.emulated(node)?;
        self.fabric.cut_rail(&emulated, k).map_err(namespace_error)
    }

    /// A congested rail: node `name`'s rail `k` limited to `rate` both ways, its emulated NIC's
    /// CNP/ECN counters counting what the shaper held back (`icb_isolate::Fabric::congest_rail`).
    pub fn congest_rail(&self, node: &str, k: usize, rate: &str) -> Result<(), Error> {
        let emulated = self.emulated(node)?;
        self.fabric.congest_rail(&emulated, k, rate).map_err(namespace_error)
    }

    /// A lossy rail: node `name`'s rail `k` drops `per_mille` ‰ of its packets each way, its
    /// emulated NIC's sequence-error counters counting them (`icb_isolate::Fabric::make_rail_lossy`).
    pub fn make_rail_lossy(&self, node: &str, k: usize, per_mille: u32) -> Result<(), Error> {
        let emulated = self.emulated(node)?;
        self.fabric
            .make_rail_lossy(&emulated, k, per_mille)
            .map_err(namespace_error)
    }

    /// Node `name`'s rail `k` at MTU `mtu`, its tree's netdev `mtu` file with it
    /// (`icb_isolate::Fabric::set_rail_mtu`).
    pub fn set_rail_mtu(&self, node: &str, k: usize, mtu: u32) -> Result<(), Error> {
        let emulated = self.emulated(node)?;
        self.fabric.set_rail_mtu(&emulated, k, mtu).map_err(namespace_error)
    }

    /// Writes into node `name`'s recorded tree what its congested and lossy rails' kernel
    /// counters say now (`icb_isolate::Fabric::drive_rail_counters`); a node without such a rail
    /// keeps its zeros.
    pub fn drive_rail_counters(&self, node: &str) -> Result<(), Error> {
        let emulated = self.emulated(node)?;
        self.fabric.drive_rail_counters(&emulated).map_err(namespace_error)
    }

    /// Applies the configured slow, dead, congested and lossy rails and rail MTUs; on an error
    /// the fabric is removed.
    pub fn with_rail_faults(self, config: &crate::ClusterConfig) -> Result<NodeFabric, Error> {
        let applied = config
            .slow_rails
            .iter()
            .try_for_each(|(node, k, rate)| self.limit_rail(node, *k, rate))
            .and_then(|()| {
                config
                    .dead_rails
                    .iter()
                    .try_for_each(|(node, k)| self.cut_rail(node, *k))
            })
            .and_then(|()| {
                config
                    .congested_rails
                    .iter()
                    .try_for_each(|(node, k, rate)| self.congest_rail(node, *k, rate))
            })
            .and_then(|()| {
                config
                    .lossy_rails
                    .iter()
                    .try_for_each(|(node, k, per_mille)| self.make_rail_lossy(node, *k, *per_mille))
            })
            .and_then(|()| {
                config
                    .rail_mtus
                    .iter()
                    .try_for_each(|(node, k, mtu)| self.set_rail_mtu(node, *k, *mtu))
            });
        match applied {
            Ok(()) => Ok(self),
            Err(e) => {
                let _ = self.destroy();
                Err(e)
            }
        }
    }

    fn emulated(&self, node: &str) -> Result<String, Error> {
        self.node(node)
            .map(|n| n.name.clone())
            .ok_or_else(|| Error::Config(format!("no node named {node:?}")))
    }

    /// Kills every process of the cluster's run and deletes its namespaces.
    pub fn destroy(self) -> Result<(), Error> {
        self.fabric.teardown().map_err(namespace_error)
    }
}

fn namespace_error(e: icb_isolate::IsolateError) -> Error {
    Error::Namespace(e.to_string())
}
