//! The NIC counters that explain a slow RDMA path, named and explained as the kernel drivers
//! define them: ib_core's PortCounters attributes (`ports/N/counters/`, any IB or RoCE HCA;
//! IBA PortCounters), mlx5's `ports/N/hw_counters/` (drivers/infiniband/hw/mlx5/counters.c;
//! the same values `rdma statistic show` prints), EFA's port statistics
//! (`ports/N/hw_counters/`, drivers/infiniband/hw/efa/efa_verbs.c; `rdma statistic`), and an
//! Ethernet netdev's pause counters (`ethtool -S`; mlx5e names them, per priority for PFC).

use serde::{Deserialize, Serialize};

/// Which driver defines a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Driver {
    /// ib_core's PortCounters: every IB/RoCE HCA (mlx5 included).
    IbCore,
    Mlx5,
    Efa,
    /// An Ethernet netdev's driver statistics (mlx5e's names).
    Netdev,
}

/// Where a counter is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterPath {
    /// `/sys/class/infiniband/DEV/ports/N/counters/NAME`.
    PortCounters,
    /// `/sys/class/infiniband/DEV/ports/N/hw_counters/NAME` (mlx5, EFA; `rdma statistic`).
    HwCounters,
    /// `ethtool -S IF`'s `NAME: value` lines.
    Ethtool,
}

impl CounterPath {
    /// The directory under the port (`None`: not a sysfs file).
    pub fn dir(self) -> Option<&'static str> {
        match self {
            CounterPath::PortCounters => Some("counters"),
            CounterPath::HwCounters => Some("hw_counters"),
            CounterPath::Ethtool => None,
        }
    }
}

/// What a moving counter says about the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Indicates {
    /// The fabric pushed back: ECN marks, CNPs, pause frames, credit waits.
    Congestion,
    /// Packets were lost or retransmitted: sequence errors, timeouts, drops.
    Loss,
    /// The physical link itself: symbol errors, link down events, receive errors.
    LinkFault,
    /// Which operations reached the NIC: confirms what the engine said it did.
    Attribution,
}

/// One counter of the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterDef {
    /// The file or `ethtool -S` name; `{p}` stands for a priority 0-7 (PFC).
    pub name: &'static str,
    pub driver: Driver,
    pub path: CounterPath,
    pub meaning: &'static str,
    pub indicates: Indicates,
}

impl CounterDef {
    /// Whether `name` is this counter (a per-priority template matches every priority).
    pub fn matches(&self, name: &str) -> bool {
        match self.name.split_once("{p}") {
            None => self.name == name,
            Some((head, tail)) => name
                .strip_prefix(head)
                .and_then(|r| r.strip_suffix(tail))
                .is_some_and(|p| p.len() == 1 && p.chars().all(|c| ('0'..='7').contains(&c))),
        }
    }
}

const fn def(
    name: &'static str,
    driver: Driver,
    path: CounterPath,
    indicates: Indicates,
    meaning: &'static str,
) -> CounterDef {
    CounterDef {
        name,
        driver,
        path,
        meaning,
        indicates,
    }
}

use CounterPath::{Ethtool, HwCounters, PortCounters};
use Driver::{Efa, IbCore, Mlx5, Netdev};
use Indicates::{Attribution, Congestion, LinkFault, Loss};

/// The vocabulary: every counter the health rules read.
pub const VOCABULARY: &[CounterDef] = &[
    def(
        "symbol_error",
        IbCore,
        PortCounters,
        LinkFault,
        "minor link errors detected on a physical lane",
    ),
    def(
        "link_downed",
        IbCore,
        PortCounters,
        LinkFault,
        "times the link failed to recover from errors and went down",
    ),
    def(
        "link_error_recovery",
        IbCore,
        PortCounters,
        LinkFault,
        "times the link recovered from errors by retraining",
    ),
    def(
        "port_rcv_errors",
        IbCore,
        PortCounters,
        LinkFault,
        "received packets with errors (CRC, malformed)",
    ),
    def(
        "port_xmit_discards",
        IbCore,
        PortCounters,
        Loss,
        "outbound packets discarded (port down or congestion)",
    ),
    def(
        "port_xmit_wait",
        IbCore,
        PortCounters,
        Congestion,
        "ticks the port had data but no credits/was paused",
    ),
    def(
        "out_of_sequence",
        Mlx5,
        HwCounters,
        Loss,
        "packets received out of sequence (a packet was lost before them)",
    ),
    def(
        "packet_seq_err",
        Mlx5,
        HwCounters,
        Loss,
        "NAKs for sequence errors received: the peer saw a gap",
    ),
    def(
        "implied_nak_seq_err",
        Mlx5,
        HwCounters,
        Loss,
        "implied NAK sequence errors: READ/atomic responses lost",
    ),
    def(
        "local_ack_timeout_err",
        Mlx5,
        HwCounters,
        Loss,
        "ACK timeouts on the sender: retransmitted after a timeout",
    ),
    def(
        "rnr_nak_retry_err",
        Mlx5,
        HwCounters,
        Loss,
        "receiver-not-ready NAKs retried past the limit",
    ),
    def(
        "roce_adp_retrans",
        Mlx5,
        HwCounters,
        Loss,
        "adaptive retransmissions (RoCE)",
    ),
    def(
        "np_cnp_sent",
        Mlx5,
        HwCounters,
        Congestion,
        "CNPs sent by this receiver for ECN-marked packets",
    ),
    def(
        "rp_cnp_handled",
        Mlx5,
        HwCounters,
        Congestion,
        "CNPs handled by this sender: it slowed down (DCQCN)",
    ),
    def(
        "np_ecn_marked_roce_packets",
        Mlx5,
        HwCounters,
        Congestion,
        "RoCE packets received with ECN marks",
    ),
    def(
        "rx_read_requests",
        Mlx5,
        HwCounters,
        Attribution,
        "RDMA READ requests received (this NIC was read from)",
    ),
    def(
        "rx_write_requests",
        Mlx5,
        HwCounters,
        Attribution,
        "RDMA WRITE requests received (this NIC was written to)",
    ),
    def(
        "rx_drops",
        Efa,
        HwCounters,
        Loss,
        "packets the EFA device dropped on receive",
    ),
    def(
        "retrans_pkts",
        Efa,
        HwCounters,
        Loss,
        "packets the EFA device retransmitted (SRD)",
    ),
    def(
        "retrans_timeout_events",
        Efa,
        HwCounters,
        Loss,
        "retransmission timeouts (SRD)",
    ),
    def(
        "unresponsive_remote_events",
        Efa,
        HwCounters,
        Loss,
        "remotes that stopped responding",
    ),
    def(
        "impaired_remote_conn_events",
        Efa,
        HwCounters,
        Loss,
        "connections to a remote marked impaired",
    ),
    def(
        "rdma_read_wrs",
        Efa,
        HwCounters,
        Attribution,
        "RDMA READ work requests posted",
    ),
    def(
        "rdma_write_recv_bytes",
        Efa,
        HwCounters,
        Attribution,
        "bytes received by RDMA WRITE",
    ),
    def(
        "rx_pause_ctrl_phy",
        Netdev,
        Ethtool,
        Congestion,
        "global pause frames received (link-level flow control)",
    ),
    def(
        "tx_pause_ctrl_phy",
        Netdev,
        Ethtool,
        Congestion,
        "global pause frames sent",
    ),
    def(
        "rx_prio{p}_pause",
        Netdev,
        Ethtool,
        Congestion,
        "PFC pause frames received for priority p",
    ),
    def(
        "tx_prio{p}_pause",
        Netdev,
        Ethtool,
        Congestion,
        "PFC pause frames sent for priority p",
    ),
];

/// The vocabulary entry for `name` as `driver` spells it.
pub fn lookup(driver: Driver, name: &str) -> Option<&'static CounterDef> {
    VOCABULARY.iter().find(|d| d.driver == driver && d.matches(name))
}

/// The counters a port of this kind has, in table order.
pub fn for_drivers(drivers: &[Driver]) -> impl Iterator<Item = &'static CounterDef> + '_ {
    VOCABULARY.iter().filter(move |d| drivers.contains(&d.driver))
}
