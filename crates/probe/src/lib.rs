//! Read-only probes of what decides the disaggregated-serving transport before any traffic:
//! the node's RDMA ports, GID tables, GPUDirect mode, memlock, GPU↔NIC topology and UCX build
//! (`probe node`), the NIXL install (`probe nixl`), and KServe-style detection of
//! `NCCL_IB_HCA` / GID index / `UCX_NET_DEVICES` (`detect-env`).
//!
//! The layers are kept apart so every verdict can be replayed: pure parsers ([`parse`]) for each
//! tool and sysfs format; a [`source::NodeSource`] that reads the live node, a replayed root, or
//! the output of the read-only script run in a pod ([`remote`]); [`facts::gather`] which turns a
//! source into [`facts::NodeFacts`]; and pure check functions ([`node_checks`]) producing the
//! `icb_core::checks` contract. Nothing here writes anywhere, and nothing here talks to
//! Kubernetes: running the script in a pod (exec or the node-probe pod) is `icb_kube`'s job, and
//! its output comes back here as text.
#![forbid(unsafe_code)]

pub mod counters;
pub mod detect;
pub mod envspec;
pub mod facts;
pub mod nixl;
pub mod node_checks;
pub mod numa;
pub mod parse;
pub mod rails;
pub mod readiness;
pub mod remote;
pub mod replay;
pub mod request;
pub mod shell;
pub mod source;
pub mod tools;
pub mod vantage;

pub use detect::{DetectedEnv, detect_env};
pub use envspec::TransportEnv;
pub use facts::{GatherOptions, NodeFacts, gather};
pub use nixl::{NixlOptions, engine_check, probe_nixl, probe_nixl_with_engine};
pub use node_checks::{NodeExpectations, node_checks};
pub use replay::{ReplayDirs, ReplayError};
pub use source::{LocalSource, NodeSource, Snapshot};
pub use vantage::Vantage;

use icb_core::checks::ProbeReport;

/// `probe node`: gathers the facts from `src`, rolls the checks up into a report and adds the
/// rail map (absent where `src` shows no PCI tree).
pub fn probe_node(src: &dyn NodeSource, opts: &GatherOptions, expect: &NodeExpectations) -> (ProbeReport, NodeFacts) {
    let facts = gather(src, opts);
    let rail_map = rails::rail_map(src, &facts);
    let pcie = readiness::gather(src, &facts, rail_map.as_ref());
    let mut checks = node_checks(&facts, expect);
    checks.extend(readiness::checks::readiness_checks(&pcie));
    let next = match facts.target.strip_prefix("pod/") {
        Some(pod) => vec![format!("ic-bench probe nixl --pod {pod}")],
        None if facts.target == "local" => vec!["ic-bench probe nixl".to_string()],
        None => Vec::new(),
    };
    let mut report = ProbeReport::new("node", &facts.target, checks, next);
    report.readiness = Some(readiness::readiness(src, &facts, &pcie));
    report.rail_map = rail_map;
    (report, facts)
}
