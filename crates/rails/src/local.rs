//! The rails seam on one machine: a local pair (`icb_isolate`) whose two sides are emulated
//! nodes with K rail NICs each (`--isolation node --rails K`), or this host's own network
//! devices (`--rail-devices` without isolation). Each row's two ranks are this binary pinned to
//! the row's devices; the counters are the nodes' own sysfs, read through their mount
//! namespaces; the rail map is computed by the probe's code from each emulated node's recorded
//! tree (or from this host's sysfs), exactly as on a real node.

use super::plan::NodeRailInfo;
use super::{RailRow, RailSeam};
use icb_core::rails::nic_health::HealthSnapshot;
use icb_core::rails::{CounterSnapshot, RailEnd};
use icb_isolate::{LocalPair, PairSide};
use icb_pair::SideRole;
use icb_pair::launcher::LaunchError;
use icb_pair::local::{LocalLauncher, LocalOptions, RankPinning, SidePinning};
use std::path::PathBuf;
use std::sync::Arc;

/// The namespaces of a local rails run, shared by every row; removed by [`LocalRails::cleanup`]
/// (or on drop).
pub struct LocalRails {
    opts: LocalOptions,
    pair: Option<Arc<LocalPair>>,
    /// Where each side's node shows its own sysfs: (prefill, decode).
    sys_roots: (PathBuf, PathBuf),
}

impl LocalRails {
    /// Builds the pair (`--isolation node` with `rails` emulated NICs per node; 0 for a run over
    /// named devices).
    pub fn create(opts: LocalOptions, rails: usize) -> Result<LocalRails, LaunchError> {
        let pair = LocalPair::create_with_rails(opts.isolation, icb_isolate::DEFAULT_PREFIX, rails)
            .map_err(|e| LaunchError::new(e.to_string()))?;
        let root = |side: &PairSide| pair.sys_root(side).map_err(|e| LaunchError::new(e.to_string()));
        let sys_roots = (root(pair.prefill())?, root(pair.decode())?);
        Ok(LocalRails {
            opts,
            pair: Some(Arc::new(pair)),
            sys_roots,
        })
    }

    fn pair(&self) -> Result<&Arc<LocalPair>, LaunchError> {
        self.pair
            .as_ref()
            .ok_or_else(|| LaunchError::new("the local rails were already cleaned up"))
    }

    fn side(&self, role: SideRole) -> Result<(PairSide, PathBuf), LaunchError> {
        let pair = self.pair()?;
        Ok(match role {
            SideRole::Prefill => (pair.prefill().clone(), self.sys_roots.0.clone()),
            SideRole::Decode => (pair.decode().clone(), self.sys_roots.1.clone()),
        })
    }

    /// One side's node for the planner: its rail map (from the node's recorded tree when it is
    /// emulated, else this host's sysfs) and, per rail, the device its counters show and what
    /// UCX can open here.
    pub fn node_info(&self, role: SideRole) -> Result<NodeRailInfo, LaunchError> {
        let (side, sys_root) = self.side(role)?;
        let tree = self.pair()?.rail_tree(&side);
        Ok(super::info::node_info(side.host, tree.as_deref(), &sys_root))
    }

    /// Limits rail `k` of one side's node (`tc tbf`), a slow rail.
    pub fn limit_rail(&self, role: SideRole, k: usize, rate: &str) -> Result<(), LaunchError> {
        let (side, _) = self.side(role)?;
        self.pair()?
            .limit_rail(&side, k, rate)
            .map_err(|e| LaunchError::new(e.to_string()))
    }

    /// Congests rail `k` of one side's node (`tc tbf` whose held packets its emulated CNP/ECN
    /// counters count).
    pub fn congest_rail(&self, role: SideRole, k: usize, rate: &str) -> Result<(), LaunchError> {
        let (side, _) = self.side(role)?;
        self.pair()?
            .congest_rail(&side, k, rate)
            .map_err(|e| LaunchError::new(e.to_string()))
    }

    /// Makes rail `k` of one side's node drop `per_mille` ‰ of its packets each way (its
    /// emulated sequence-error counters count them).
    pub fn make_rail_lossy(&self, role: SideRole, k: usize, per_mille: u32) -> Result<(), LaunchError> {
        let (side, _) = self.side(role)?;
        self.pair()?
            .make_rail_lossy(&side, k, per_mille)
            .map_err(|e| LaunchError::new(e.to_string()))
    }

    /// Takes rail `k` of one side's node down at its switch port: a dead rail.
    pub fn cut_rail(&self, role: SideRole, k: usize) -> Result<(), LaunchError> {
        let (side, _) = self.side(role)?;
        self.pair()?
            .cut_rail(&side, k)
            .map_err(|e| LaunchError::new(e.to_string()))
    }

    /// The host names of (prefill, decode).
    pub fn hosts(&self) -> Result<(String, String), LaunchError> {
        let pair = self.pair()?;
        Ok((pair.prefill().host.clone(), pair.decode().host.clone()))
    }

    /// Removes the namespaces. Every row's launcher must be gone (they hold the pair too).
    pub fn cleanup(&mut self) -> Result<String, LaunchError> {
        let Some(pair) = self.pair.take() else {
            return Ok(String::new());
        };
        let pair =
            Arc::try_unwrap(pair).map_err(|_| LaunchError::new("a rail's launcher still holds the local pair"))?;
        let what = format!("every rank and the namespaces of --isolation {}", pair.isolation());
        pair.teardown().map_err(|e| LaunchError::new(e.to_string()))?;
        Ok(what)
    }
}

/// The CPUs of a NUMA node, as `taskset -c` takes them; `None` when sysfs does not say.
fn numa_cpus(node: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/cpulist")).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// A rank's environment: its NIC (`UCX_NET_DEVICES`) and its GPU (`CUDA_VISIBLE_DEVICES`, bus
/// order).
pub fn rank_env(end: &RailEnd) -> Vec<(String, String)> {
    let mut env = Vec::new();
    // Empty: the rank is told nothing and UCX chooses (what a recipe without UCX_NET_DEVICES
    // does; `gate --rails` measures that).
    if !end.ucx_net_devices.is_empty() {
        env.push(("UCX_NET_DEVICES".to_string(), end.ucx_net_devices.clone()));
    }
    if let Some(gpu) = &end.gpu {
        env.push(("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()));
        env.push(("CUDA_VISIBLE_DEVICES".into(), gpu.ordinal.to_string()));
    }
    env
}

/// The NUMA node whose CPUs a rank runs on: its GPU's, else its NIC's.
pub fn rank_numa(end: &RailEnd) -> Option<u32> {
    end.gpu.as_ref().and_then(|g| g.numa_node).or(end.nic.numa_node)
}

/// A rank's pinning here: [`rank_env`] and [`rank_numa`]'s CPUs.
pub fn pinning(end: &RailEnd) -> SidePinning {
    SidePinning {
        env: rank_env(end),
        cpus: rank_numa(end).and_then(numa_cpus),
    }
}

impl RailSeam for LocalRails {
    type L = LocalLauncher;

    fn launcher(&mut self, row: &RailRow) -> Result<LocalLauncher, LaunchError> {
        let rank = RankPinning {
            row: row.index,
            prefill: pinning(&row.prefill),
            decode: pinning(&row.decode),
        };
        Ok(LocalLauncher::for_rank(self.opts.clone(), self.pair()?.clone(), rank))
    }

    async fn health(&mut self, side: SideRole) -> HealthSnapshot {
        self.read_health(side).await
    }

    async fn counters(&mut self, side: SideRole) -> CounterSnapshot {
        let root = match side {
            SideRole::Prefill => self.sys_roots.0.clone(),
            SideRole::Decode => self.sys_roots.1.clone(),
        };
        // A few hundred small sysfs reads: off the async threads.
        match tokio::task::spawn_blocking(move || icb_probe::counters::snapshot(&root)).await {
            Ok(s) => s,
            Err(e) => CounterSnapshot {
                counters: Vec::new(),
                unreadable: vec![icb_core::rails::Unreadable::all(format!(
                    "reading the counters failed: {e}"
                ))],
            },
        }
    }
}

impl LocalRails {
    /// Where one side's NIC health counters are read: an emulated node's recorded tree (its
    /// `mlx5_k` ports' counter files, which the emulation drives), else this host's sysfs.
    fn health_root(&self, side: SideRole) -> Result<(PairSide, PathBuf), LaunchError> {
        let (pair_side, sys_root) = self.side(side)?;
        let root = match self.pair()?.rail_tree(&pair_side) {
            Some(tree) => tree.join("sys"),
            None => sys_root,
        };
        Ok((pair_side, root))
    }

    /// One side's health counters now: on emulated nodes the emulation first writes what its
    /// injected faults did into the counter files (see `icb_isolate::Fabric::drive_rail_counters`).
    async fn read_health(&mut self, side: SideRole) -> HealthSnapshot {
        let (pair_side, root) = match self.health_root(side) {
            Ok(at) => at,
            Err(e) => return HealthSnapshot::unread(e.to_string()),
        };
        let pair = match self.pair() {
            Ok(p) => Arc::clone(p),
            Err(e) => return HealthSnapshot::unread(e.to_string()),
        };
        let read = tokio::task::spawn_blocking(move || {
            // Not the netdevs' pause counters: `ethtool -S` here would read this host's
            // devices, and the rails' netdevs live in the nodes' namespaces.
            pair.drive_rail_counters(&pair_side)
                .map(|()| icb_probe::counters::health_snapshot(&root))
                .unwrap_or_else(|e| HealthSnapshot::unread(format!("driving the emulated counters: {e}")))
        });
        read.await
            .unwrap_or_else(|e| HealthSnapshot::unread(format!("reading the health counters failed: {e}")))
    }
}

impl Drop for LocalRails {
    fn drop(&mut self) {
        if self.pair.is_some()
            && let Err(e) = self.cleanup()
        {
            tracing::warn!("cleaning up the local rails: {e}");
        }
    }
}
