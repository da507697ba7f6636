//! ic-bench's Kubernetes side.
//!
//! `ic-bench pair --prefill X --decode Y` tests the path between two workers exactly as Kubernetes
//! places and isolates them: this crate connects to the cluster the way kubectl does ([`access`]),
//! turns `node/NAME`, `pod/NAME`, `deployment/NAME`, `statefulset/NAME`, `lws/NAME`,
//! `dgd/NAME/COMPONENT` and label selectors into a node plus the transport-relevant spec of a
//! reference pod ([`target`], [`spec`]), decides the devices bench pods request on node targets
//! from what the node advertises ([`devices`]; as a DRA claim of a GPU and its rail NIC on nodes
//! that publish them as ResourceSlices, [`dra`]), builds the two bench pods
//! ([`podspec`], [`pair`]) with least privilege ([`hardening`]) and the per-run token Secret both
//! read ([`secret`]), drives pods with a deadline on every wait ([`lifecycle`]), follows a
//! pod's output from creation to its end ([`podrun`]), deletes leftovers by label ([`gc`]), and
//! writes a sweep's node verdicts as node labels for `sweep --label-nodes` ([`node_labels`]) and
//! as a node condition for `sweep --node-conditions` ([`node_conditions`]).
//! Every retry uses one backoff policy ([`retry`]). [`exec`] runs a command
//! in an existing pod for `probe node --pod`, and streams a file into one and follows a long
//! command there for `pair --in-place`.
//!
//! Every API call runs under a deadline ([`Cluster::call`]); kube-rs's own retries on 429/503/504
//! happen inside it, so no call can hang.
#![forbid(unsafe_code)]

pub mod access;
pub mod admission;
pub mod devices;
pub mod dra;
pub mod error;
pub mod exec;
pub mod fabric_matrix;
pub mod gc;
pub mod hardening;
pub mod killed;
pub mod lifecycle;
pub mod node_conditions;
pub mod node_labels;
pub mod nodes;
pub mod objects;
pub mod pair;
pub mod pod_options;
pub mod podrun;
pub mod podspec;
pub mod probe_pod;
pub mod probe_remote;
pub mod retry;
pub mod secret;
pub mod spec;
pub mod target;
pub mod template;
pub mod yaml;

/// The Kubernetes crates this one is built on, re-exported so users match their versions.
pub use k8s_openapi;
pub use kube;

pub use access::{Cluster, ClusterOptions, connect, load_config};
pub use error::KubeError;
pub use exec::ExecOutput;
pub use pod_options::PodOptions;
