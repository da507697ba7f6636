//! Network faults of the emulated nodes: a node cut off or slowed, a rail slowed, dead, congested,
//! lossy or at another MTU, and where a node's recorded rail-map tree is (Isolation::Namespaces
//! only).

use crate::TestCluster;
use crate::cluster::lock;
use crate::error::{Error, Result};
use crate::fabric::NodeFabric;
use std::path::PathBuf;

impl TestCluster {
    /// Pulls the node's cable: its port on the fabric's bridge goes down, so traffic stalls.
    pub fn cut_node_network(&self, node: &str) -> Result<()> {
        self.on_fabric("network cuts", |f| f.set_link(node, false))
    }

    pub fn restore_node_network(&self, node: &str) -> Result<()> {
        self.on_fabric("network cuts", |f| f.set_link(node, true))
    }

    /// Slows the node's link to `rate` both ways (tc tbf, e.g. `200mbit`): a degraded node.
    pub fn rate_limit_node(&self, node: &str, rate: &str) -> Result<()> {
        self.on_fabric("rate limits", |f| f.rate_limit(node, rate))
    }

    /// Slows rail `k` of `node` to `rate` both ways (tc tbf on its `rail{k}` and its switch
    /// port, e.g. `200mbit`).
    pub fn limit_rail(&self, node: &str, k: usize, rate: &str) -> Result<()> {
        self.on_fabric("rails", |f| f.limit_rail(node, k, rate))
    }

    /// Takes rail `k` of `node` down at its switch port (traffic over it stalls).
    pub fn cut_rail(&self, node: &str, k: usize) -> Result<()> {
        self.on_fabric("rails", |f| f.cut_rail(node, k))
    }

    /// Congests rail `k` of `node`: limited to `rate` both ways (tc tbf), the packets held back
    /// counted by its emulated `mlx5_k` port's CNP/ECN counters.
    pub fn congest_rail(&self, node: &str, k: usize, rate: &str) -> Result<()> {
        self.on_fabric("rails", |f| f.congest_rail(node, k, rate))
    }

    /// Makes rail `k` of `node` lossy: `per_mille` ‰ (1-500) of its packets dropped each way,
    /// counted by its emulated `mlx5_k` port's sequence-error counters.
    pub fn make_rail_lossy(&self, node: &str, k: usize, per_mille: u32) -> Result<()> {
        self.on_fabric("rails", |f| f.make_rail_lossy(node, k, per_mille))
    }

    /// Sets rail `k` of `node` to MTU `mtu` (its veth and its tree's netdev `mtu` file).
    pub fn set_rail_mtu(&self, node: &str, k: usize, mtu: u32) -> Result<()> {
        self.on_fabric("rails", |f| f.set_rail_mtu(node, k, mtu))
    }

    /// The recorded rail-map tree of `node` (what its containers get in [`crate::RAIL_TREE_ENV`]).
    pub fn rail_tree(&self, node: &str) -> Option<PathBuf> {
        lock(&self.shared.fabric).as_ref()?.rail_tree(node)
    }

    /// Runs `change` on the nodes' fabric. `ip`/`tc` block for a few ms; the lock is only held
    /// by the cluster's own teardown.
    fn on_fabric(&self, what: &str, change: impl FnOnce(&NodeFabric) -> Result<()>) -> Result<()> {
        let fabric = lock(&self.shared.fabric);
        let fabric = fabric
            .as_ref()
            .ok_or_else(|| Error::Config(format!("{what} need Isolation::Namespaces")))?;
        change(fabric)
    }
}
