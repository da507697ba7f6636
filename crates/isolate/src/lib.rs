//! icb-isolate: Linux namespaces that reproduce, on one machine and as root, how Kubernetes
//! isolates the two sides of a KV-cache transfer — two containers, two pods on one node, hostIPC,
//! two nodes — so UCX's transport choice (shared memory, cma, or the silent TCP fallback) can be
//! seen for real without a cluster. It is ic-bench's one namespace layer: `ic-bench pair --local
//! --isolation …` ([`LocalPair`]), the emulated cluster's node agents (icb-testcluster, test
//! support) and `ic-bench gc --local` ([`cleanup_stale`]) are all built on it.
//!
//! The recipe is the one measured in the platform notes: a node is a network namespace
//! (`ip netns`) plus an init process holding the node's own IPC, PID and mount namespaces; nodes
//! are joined by veths (or a bridge) with private 10.99.0.N/24 addresses; a pod is
//! `ip netns exec NODE unshare -i -p -f --kill-child --mount-proc PROGRAM`, and a pod with
//! hostIPC/hostPID joins its node's namespaces with `nsenter` instead, as on a real node. It needs
//! `ip` (iproute2) and `unshare`, `nsenter`, `setpriv` (util-linux).
//!
//! # Public API
//!
//! ```text
//! // Emulated nodes (blocking; each call runs `ip`, a few ms)
//! Fabric::create(prefix: &str, nodes: &[&str]) -> Result<Fabric>        // root; names [a-z0-9-]{1,32}
//! Fabric::create_tagged(tag: RunTag, nodes: &[&str]) -> Result<Fabric>
//! Fabric::create_wired(tag, nodes, Wiring::{Auto, Bridge}) -> Result<Fabric>
//! Fabric::create_with(tag, nodes, FabricOptions { wiring, rails }) -> Result<Fabric>  // Default: Auto, 0
//! fabric.tag() -> &RunTag;  fabric.nodes() -> &[Node];  fabric.node(name) -> Result<&Node>
//! fabric.node_ip(name) -> Result<Ipv4Addr>;  fabric.netns(name) -> Result<&str>
//! fabric.cut(name) -> Result<()>;  fabric.restore(name) -> Result<()>   // switch port / eth0 down, up
//! fabric.namespaces() -> &[String];  fabric.teardown(self) -> Result<()> // also on Drop
//! fabric.rate_limit(name, rate) -> Result<()>                           // tc tbf on eth0, e.g. "30mbit"
//! fabric.sys_root(name) -> Result<PathBuf>   // /proc/{init}/root/sys: the node's own sysfs (its netdevs' counters)
//! Node { name, netns, ip: Ipv4Addr, init_pid: u32 }                      // interface: NODE_IFACE ("eth0")
//!
//! // Emulated rails (rails = K, 1..=MAX_RAILS (16); a hub always exists): rail k of every node
//! // is netdev rail_netdev(k) = "rail{k}" at 10.99.{k+1}.{node index + 1}/24 on its own switch
//! fabric.rails() -> usize;  fabric.rail_ip(name, k) -> Result<Ipv4Addr>
//! fabric.limit_rail(name, k, rate) -> Result<()>                          // tc tbf on rail{k}: a slow rail
//! fabric.cut_rail(name, k) / fabric.restore_rail(name, k) -> Result<()>  // its switch port down/up: a dead rail
//! fabric.rail_tree(name) -> Option<PathBuf>   // recorded rail-map root (sys/…: mlx5_k ↔ rail{k}), None if K = 0
//! write_rail_tree(dir, K) -> Result<()>       // that tree, anywhere, without root (NIC k on PCIe root rail_pcie_root(k))
//! write_rail_gpus(dir, G) -> Result<()>       // + G GPUs, GPU k beside NIC k (same root port)
//!   // unknown k: IsolateError::UnknownRail (names the valid range); K > 16: TooManyRails
//!
//! // Pods (tokio; own process group, kill_on_drop, stdout/stderr piped, stdin null)
//! PodSpec::new(program)            // own IPC + PID namespaces, host network
//! PodSpec::plain(program)          // no namespaces at all
//!   .arg(a) .args(it) .env(k, v) .envs(it) .env_clear() .current_dir(d) .merge_output(bool)
//!   .node(&Node) .netns(ns) .host_ipc(bool) .host_pid(bool) .share_ipc_with(pid) .tag(&RunTag)
//!   .needs_root() -> bool;  .command_line() -> Result<Vec<OsString>>;  .spawn() -> Result<Pod>
//! pod.pid() -> u32;  pod.main_pid(limit).await -> Option<u32>;  pod.tag() -> &str
//! pod.take_stdout() / take_stderr() / take_output();  pod.child_mut()
//! pod.wait().await;  pod.try_wait();  pod.kill().await -> Result<()>;  pod.start_kill()
//!   // killing (or dropping) a pod kills its whole process tree
//! Sandbox::start(netns, tag) -> Result<Sandbox>;  sandbox.pid()   // an IPC namespace for a pod's containers
//! enter_pod(main pid, cwd) / enter_node(netns) -> Result<Vec<OsString>>  // argv prefixes (exec, probes)
//!
//! // The four layouts of `pair --local`
//! Isolation::{None, Pod, HostIpc, Node}  (FromStr/Display: none|pod|host-ipc|node)
//! LocalPair::create(Isolation, prefix) -> Result<LocalPair>  // non-root: IsolateError::NeedsRoot
//! LocalPair::create_with_rails(Isolation::Node, prefix, K)    // other isolation + K > 0: RailsNeedNode
//! pair.decode() / pair.prefill() -> &PairSide { host, pod, netns, ip, host_ipc, host_pid }
//! pair.pod(&side, program) -> PodSpec  // any number per side (one per rail);  pair.tag();  pair.fabric()
//! pair.rate_limit(rate);  pair.teardown(self)
//! pair.rails();  pair.sys_root(&side) -> Result<PathBuf>  ("/sys" for none);  pair.rail_tree(&side)
//! pair.rail_ip(&side, k);  pair.limit_rail(&side, k, rate);  pair.cut_rail(&side, k);  pair.restore_rail(&side, k)
//!
//! // Leftovers, helpers
//! cleanup_stale(prefix) -> Result<Leftovers { namespaces, processes, rail_trees }>  // owner dead only; root
//! find_stale(prefix) -> Result<Leftovers>            // what cleanup_stale would remove (dry run)
//! leftovers_of(prefix, owner pid) -> Leftovers       // what a run (dead or alive) still has
//! run_in_netns(netns, FnOnce() -> T) -> Result<T>   // e.g. bind/connect sockets "on" a node
//! live_processes(tag: &str) -> Vec<u32>;  netns_exists(name) -> bool;  pid_alive(pid) -> bool
//! RunTag::new(prefix) -> Result<RunTag>  (Display: "{prefix}-{owner pid}-{8 hex}")
//! privileged_tests_enabled(test_name) -> bool;  is_root() -> bool
//! DEFAULT_PREFIX = "icb";  RUN_TAG_ENV = "ICB_ISOLATE_RUN"
//! ```
//!
//! A fabric is handed out (and `restore`/`restore_rail` return) only once every `eth0` and rail is
//! operationally up: the
//! kernel reports veth carrier with up to a second's delay, and UCX started in that window skips
//! the device and fails with "Destination is unreachable" (measured: half the runs).
//!
//! Cleanup: every object that creates something removes it on drop, also while unwinding from a
//! panic. A SIGINT/SIGTERM would kill the process before any drop runs, so the binary's one signal
//! handler cancels a token that the pair pipeline (`icb_pair`) watches; it drops its guards and
//! then exits. A SIGKILLed owner runs no drop at all:
//! every pod, node init and sandbox is started behind `setpriv --pdeathsig KILL`, re-armed after
//! each forking wrapper, so the kernel kills them with the owner (within milliseconds, measured);
//! PR_SET_PDEATHSIG follows the spawning *thread*, so spawn from one that outlives the pod. Only
//! the namespaces and the rail-map trees (`$TMPDIR/{run tag}-rails`) stay; their names carry the
//! dead owner's pid, and [`cleanup_stale`] (the next run, `ic-bench gc --local`) removes them.
#![forbid(unsafe_code)]

mod chain;
mod creds;
mod error;
mod fabric;
mod gate;
mod holder;
mod names;
mod netns;
mod pair;
mod pod;
mod procs;
mod rail_faults;
mod rails;
mod stale;
mod tools;

pub use chain::{enter_node, enter_pod};
pub use creds::Credentials;
pub use error::{IsolateError, Result};
pub use fabric::{Fabric, NODE_IFACE, Node, Wiring, parse_rate};
pub use gate::{is_root, privileged_tests_enabled};
pub use holder::Sandbox;
pub use names::{DEFAULT_PREFIX, RUN_TAG_ENV, RunTag};
pub use netns::run_in_netns;
pub use pair::{Isolation, LocalPair, PairSide};
pub use pod::{Pod, PodSpec};
pub use procs::{live_processes, netns_exists, pid_alive};
pub use rails::{
    FabricOptions, MAX_RAILS, rail_gpu_pci, rail_netdev, rail_nic_pci, rail_pcie_root, write_rail_gpus, write_rail_tree,
};
pub use stale::{Leftovers, cleanup_stale, find_stale, leftovers_of};
