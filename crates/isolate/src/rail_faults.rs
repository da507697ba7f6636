//! Faults of emulated rails that a NIC's own counters would show, and the counter files that
//! show them. An emulated rail is a veth, so it has no RDMA counters: each node's recorded
//! rail-map tree ([`crate::write_rail_tree`]) carries the counter files of its `mlx5_k` port 1
//! (ib_core's `counters/`, mlx5's `hw_counters/`), all 0, and [`Fabric::drive_rail_counters`]
//! writes into them what the injected faults really did, read back from the kernel:
//!
//! - a **congested** rail ([`Fabric::congest_rail`]) is a real `tc tbf` both ways (as
//!   `limit_rail`); the packets the shaper held back (the qdisc's `overlimits`) stand for what
//!   DCQCN would count: held on the node's own send side → `rp_cnp_handled` (the sender was told
//!   to slow down), held on the switch port toward the node → `np_ecn_marked_roce_packets` and
//!   `np_cnp_sent` (marked packets arrived and the node answered with CNPs);
//! - a **lossy** rail ([`Fabric::make_rail_lossy`]) drops a random share of the rail's packets
//!   in the node (an `nft` rule with `numgen random` and a counter, both ways: the kernel has no
//!   netem here); the dropped counts stand for what the RoCE transport would count: packets the
//!   node sent and lost → `packet_seq_err` (the peer NAKed the gap), packets to it lost →
//!   `out_of_sequence`.
//!
//! What is emulated: the counter *names and files* (no veth has them) and the mapping above. What
//! is real: the slowdown and the drops (TCP retransmits them), and every count written.
//!
//! A rail can also be set to another MTU than its peers' ([`Fabric::set_rail_mtu`]): the
//! veth's real MTU, mirrored into the tree's netdev `mtu` file that readiness reads.

use crate::error::{IsolateError, Result};
use crate::fabric::Fabric;
use crate::rails::{rail_netdev, rail_port};
use crate::tools::{ip, locate, tc};
use std::path::Path;

/// The counter files of an emulated `mlx5_k` port, written 0 by [`write_counter_files`]: the
/// congestion, loss and link-fault counters of ib_core and mlx5 (not the request counters: an
/// emulated rail does no RDMA READ or WRITE, so those are absent, "not read").
const PORT_COUNTERS: &[&str] = &[
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "port_xmit_discards",
    "port_xmit_wait",
];
const HW_COUNTERS: &[&str] = &[
    "out_of_sequence",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "roce_adp_retrans",
    "np_cnp_sent",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
];

/// A fault injected into a rail of a node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RailFault {
    Congested,
    Lossy,
}

/// Writes every counter file of an `mlx5_k` port as 0 under `port` (`…/ports/1`).
pub(crate) fn write_counter_files(port: &Path) -> Result<()> {
    for (dir, names) in [("counters", PORT_COUNTERS), ("hw_counters", HW_COUNTERS)] {
        for name in names {
            write_count(&port.join(dir).join(name), 0)?;
        }
    }
    Ok(())
}

fn write_count(path: &Path, value: u64) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| IsolateError::io(format!("cannot create {}", dir.display()), e))?;
    }
    // Write then rename: a reader never sees a half-written count.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{value}\n"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| IsolateError::io(format!("cannot write {}", path.display()), e))
}

/// The nft table of node-side drops on rail `k`.
fn loss_table(k: usize) -> String {
    format!("icb_loss_{}", rail_netdev(k))
}

/// The `overlimits` of the tbf qdisc on `dev` in `netns` (`tc -s -j`); 0 without one.
fn tbf_overlimits(netns: &str, dev: &str) -> Result<u64> {
    let json = tc(&["-n", netns, "-s", "-j", "qdisc", "show", "dev", dev])?;
    let qdiscs: serde_json::Value = serde_json::from_str(&json).map_err(|e| IsolateError::Command {
        command: format!("tc -n {netns} -s -j qdisc show dev {dev}"),
        detail: format!("not JSON: {e}"),
    })?;
    Ok(qdiscs
        .as_array()
        .into_iter()
        .flatten()
        .filter(|q| q["kind"] == "tbf")
        .filter_map(|q| q["overlimits"].as_u64())
        .sum())
}

/// The packets the named nft counter dropped in `netns`.
fn dropped(netns: &str, table: &str, counter: &str) -> Result<u64> {
    let nft = locate("nft", "nftables")?;
    let nft = nft.to_string_lossy();
    let json = ip(&[
        "netns", "exec", netns, &nft, "-j", "list", "counter", "inet", table, counter,
    ])?;
    let parsed: serde_json::Value = serde_json::from_str(&json).map_err(|e| IsolateError::Command {
        command: format!("nft -j list counter inet {table} {counter}"),
        detail: format!("not JSON: {e}"),
    })?;
    Ok(parsed["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["counter"]["packets"].as_u64())
        .sum())
}

impl Fabric {
    /// A congested rail: node `name`'s rail `k` limited to `rate` both ways (`tc tbf`), whose
    /// held-back packets [`Fabric::drive_rail_counters`] writes as CNP/ECN counters.
    pub fn congest_rail(&self, name: &str, k: usize, rate: &str) -> Result<()> {
        self.limit_rail(name, k, rate)?;
        self.mark_fault(name, k, RailFault::Congested)
    }

    /// A lossy rail: node `name`'s rail `k` drops `per_mille` ‰ of its packets each way (an
    /// `nft` rule in the node, 1-500), which [`Fabric::drive_rail_counters`] writes as sequence
    /// error counters.
    pub fn make_rail_lossy(&self, name: &str, k: usize, per_mille: u32) -> Result<()> {
        if !(1..=500).contains(&per_mille) {
            let why = format!("a lossy rail drops 1-500 per mille of its packets; got {per_mille}");
            return Err(IsolateError::io("a lossy rail", std::io::Error::other(why)));
        }
        let node = &self.nodes[self.rail_index_of(name, k)?];
        let (table, dev) = (loss_table(k), rail_netdev(k));
        let nft = locate("nft", "nftables")?;
        let rules = format!(
            "table inet {table} {{\n\
             counter lost_out {{}}\n counter lost_in {{}}\n\
             chain out {{ type filter hook output priority 0; oifname \"{dev}\" numgen random mod 1000 < {per_mille} counter name lost_out drop; }}\n\
             chain in {{ type filter hook input priority 0; iifname \"{dev}\" numgen random mod 1000 < {per_mille} counter name lost_in drop; }}\n\
             }}\n"
        );
        let file = self
            .rail_dir
            .as_ref()
            .map(|d| d.join(format!("{}-{table}.nft", node.name)))
            .ok_or_else(|| IsolateError::io("a lossy rail", std::io::Error::other("the fabric has no rails")))?;
        std::fs::write(&file, rules).map_err(|e| IsolateError::io(format!("cannot write {}", file.display()), e))?;
        let loaded = ip(&[
            "netns",
            "exec",
            &node.netns,
            &nft.to_string_lossy(),
            "-f",
            &file.to_string_lossy(),
        ]);
        let _ = std::fs::remove_file(&file);
        loaded?;
        self.mark_fault(name, k, RailFault::Lossy)
    }

    /// A rail whose MTU differs from its peers': node `name`'s `rail{k}` set to `mtu` bytes
    /// (68-65535; `ip link set … mtu`), and its recorded tree's netdev `mtu` file with it, so the
    /// readiness read from the tree (`probe node`, `ic-bench rail-info`) sees what the kernel has.
    pub fn set_rail_mtu(&self, name: &str, k: usize, mtu: u32) -> Result<()> {
        if !(68..=65535).contains(&mtu) {
            let why = format!("an Ethernet MTU is 68-65535 bytes; got {mtu}");
            return Err(IsolateError::io("a rail's MTU", std::io::Error::other(why)));
        }
        let node = &self.nodes[self.rail_index_of(name, k)?];
        let dev = rail_netdev(k);
        ip(&["-n", &node.netns, "link", "set", &dev, "mtu", &mtu.to_string()])?;
        if let Some(dir) = &self.rail_dir {
            let file = dir.join(&node.name).join("sys/class/net").join(&dev).join("mtu");
            write_count(&file, u64::from(mtu))?;
        }
        Ok(())
    }

    /// Writes into node `name`'s recorded tree what its faulted rails' kernel counters say now
    /// (see the module's mapping). Rails without a fault keep their zeros.
    pub fn drive_rail_counters(&self, name: &str) -> Result<()> {
        let index = self.index_of(name)?;
        let (Some(dir), Some(hub)) = (&self.rail_dir, &self.hub) else {
            return Ok(());
        };
        let node = &self.nodes[index];
        let faults: Vec<(usize, RailFault)> = self
            .faults
            .lock()
            .map(|f| {
                f.iter()
                    .filter(|(i, _, _)| *i == index)
                    .map(|(_, k, f)| (*k, f.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for (k, fault) in faults {
            let port = dir
                .join(&node.name)
                .join(format!("sys/class/infiniband/mlx5_{k}/ports/1"));
            match fault {
                RailFault::Congested => {
                    let sent_held = tbf_overlimits(&node.netns, &rail_netdev(k))?;
                    let recv_held = tbf_overlimits(hub, &rail_port(k, index))?;
                    write_count(&port.join("hw_counters/rp_cnp_handled"), sent_held)?;
                    write_count(&port.join("hw_counters/np_ecn_marked_roce_packets"), recv_held)?;
                    write_count(&port.join("hw_counters/np_cnp_sent"), recv_held)?;
                }
                RailFault::Lossy => {
                    let table = loss_table(k);
                    let lost_out = dropped(&node.netns, &table, "lost_out")?;
                    let lost_in = dropped(&node.netns, &table, "lost_in")?;
                    write_count(&port.join("hw_counters/packet_seq_err"), lost_out)?;
                    write_count(&port.join("hw_counters/out_of_sequence"), lost_in)?;
                }
            }
        }
        Ok(())
    }

    fn mark_fault(&self, name: &str, k: usize, fault: RailFault) -> Result<()> {
        let index = self.rail_index_of(name, k)?;
        if let Ok(mut faults) = self.faults.lock() {
            faults.push((index, k, fault));
        }
        Ok(())
    }
}
