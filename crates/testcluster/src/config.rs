//! What a test asks for: the nodes, the images and how pods are isolated.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::dra::DraDevice;

/// The driver (and DeviceClass) name of NVIDIA's GPU DRA driver.
pub const DRA_GPU_DRIVER: &str = "gpu.nvidia.com";
/// The emulated NIC DRA driver (and its DeviceClass); its devices carry the standard
/// `resource.kubernetes.io/pcieRoot` attribute.
pub const DRA_NIC_DRIVER: &str = "nic.dra.example.com";

/// How pod processes are placed on the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Each node is a Linux network namespace (plus its own IPC/PID/mount namespaces) joined to the
    /// other nodes by a veth on a private bridge; each pod gets its own IPC and PID namespaces unless
    /// `hostIPC`/`hostPID`. Needs root.
    Namespaces,
    /// Pods run as plain local processes on the host; pod IP and node IP are 127.0.0.1. Needs no
    /// privileges; network cuts are refused.
    Host,
}

/// One emulated node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Resource name → quantity (`"8"`, `"500m"`, `"64Gi"`).
    pub capacity: BTreeMap<String, String>,
    /// Defaults to `capacity` for every resource not given here.
    pub allocatable: BTreeMap<String, String>,
    /// `(key, value, effect)`; pods need a matching toleration for `NoSchedule`/`NoExecute` taints.
    pub taints: Vec<(String, Option<String>, String)>,
    /// Environment this node's container runtime forces into every container started here, over
    /// the pod's own (as a runtime hook or a node-level injector would): a node fault on demand.
    pub runtime_env: BTreeMap<String, String>,
    /// Devices this node's DRA drivers publish as ResourceSlices (`resource.k8s.io/v1`), one
    /// slice per driver; claims are allocated from them (`crate::dra`).
    pub dra: Vec<DraDevice>,
}

impl NodeConfig {
    /// A node with room for ordinary pods (cpu 64, memory 512Gi, 110 pods) and no extended resources.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        let mut labels = BTreeMap::new();
        labels.insert("kubernetes.io/hostname".to_string(), name.clone());
        labels.insert("kubernetes.io/os".to_string(), "linux".to_string());
        let mut capacity = BTreeMap::new();
        capacity.insert("cpu".to_string(), "64".to_string());
        capacity.insert("memory".to_string(), "512Gi".to_string());
        capacity.insert("pods".to_string(), "110".to_string());
        NodeConfig {
            name,
            labels,
            capacity,
            allocatable: BTreeMap::new(),
            taints: Vec::new(),
            runtime_env: BTreeMap::new(),
            dra: Vec::new(),
        }
    }

    /// A DRA-only GPU node: no `nvidia.com/gpu` or `rdma/ib` capacity; NVIDIA's GPU DRA driver
    /// (`gpu.nvidia.com`) publishes `gpu-0 … gpu-{N-1}` and a NIC DRA driver ([`DRA_NIC_DRIVER`])
    /// `nic-0 …`, GPU k and NIC k on PCIe root `pci0000:{k:02x}` (each other's rail).
    pub fn dra_gpu(name: impl Into<String>, gpus: u32) -> Self {
        let mut node = Self::new(name);
        for k in 0..gpus {
            let root = format!("pci0000:{k:02x}");
            node.dra.push(
                DraDevice::new(DRA_GPU_DRIVER, &format!("gpu-{k}"))
                    .string("productName", "NVIDIA H100 80GB HBM3")
                    .string(crate::dra::PCIE_ROOT, &root),
            );
            node.dra.push(
                DraDevice::new(DRA_NIC_DRIVER, &format!("nic-{k}"))
                    .string("ifName", &format!("rail{k}"))
                    .string("rdmaDevice", &format!("mlx5_{k}"))
                    .string(crate::dra::PCIE_ROOT, &root),
            );
        }
        node
    }

    /// Adds one DRA device to this node's slices.
    pub fn dra_device(mut self, device: DraDevice) -> Self {
        self.dra.push(device);
        self
    }

    /// A node with `gpus` × `nvidia.com/gpu` and as many `rdma/ib`.
    pub fn gpu(name: impl Into<String>, gpus: u32) -> Self {
        Self::new(name)
            .capacity("nvidia.com/gpu", &gpus.to_string())
            .capacity("rdma/ib", &gpus.to_string())
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    pub fn capacity(mut self, resource: &str, quantity: &str) -> Self {
        self.capacity.insert(resource.to_string(), quantity.to_string());
        self
    }

    pub fn allocatable(mut self, resource: &str, quantity: &str) -> Self {
        self.allocatable.insert(resource.to_string(), quantity.to_string());
        self
    }

    /// Forces `key=value` into every container on this node (see [`NodeConfig::runtime_env`]).
    pub fn runtime_env(mut self, key: &str, value: &str) -> Self {
        self.runtime_env.insert(key.to_string(), value.to_string());
        self
    }

    /// The tcp-only fault: every container here gets `UCX_TLS=tcp`, whatever its pod says, so UCX
    /// on this node never uses shared memory, CMA or RDMA. Across emulated nodes that changes
    /// nothing (the veths carry tcp anyway); on one node it replaces shared memory with tcp.
    pub fn tcp_only(self) -> Self {
        self.runtime_env("UCX_TLS", "tcp")
    }

    pub fn taint(mut self, key: &str, value: Option<&str>, effect: &str) -> Self {
        self.taints
            .push((key.to_string(), value.map(str::to_string), effect.to_string()));
        self
    }
}

/// What a container image means on this machine: the program its entrypoint runs.
#[derive(Debug, Clone)]
pub struct ImageConfig {
    /// The entrypoint (used when the container has no `command`) and what `command[0]` resolves to
    /// when it names the program (`ic-bench` or `/usr/local/bin/ic-bench`, compared by file name).
    pub program: PathBuf,
    /// Environment baked into the image (like Dockerfile `ENV`); the pod's env overrides it.
    pub env: BTreeMap<String, String>,
    /// Host environment variables copied into every container of this image, by name prefix
    /// (the test process's build-time settings such as `IC_BENCH_UCX_LIB` live there).
    pub inherit_env_prefixes: Vec<String>,
    /// Whether the image has a shell: exec of `sh`, `bash`, … in a container of an image without
    /// one fails as a container runtime says it (`executable file not found in $PATH`), like a
    /// distroless image.
    pub shell: bool,
}

impl ImageConfig {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        ImageConfig {
            program: program.into(),
            env: BTreeMap::new(),
            inherit_env_prefixes: vec![
                "IC_BENCH_".to_string(),
                "RUST_BACKTRACE".to_string(),
                "RUST_LOG".to_string(),
                "LLVM_PROFILE_FILE".to_string(),
            ],
            shell: true,
        }
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.insert(key.to_string(), value.to_string());
        self
    }

    pub fn inherit_env_prefix(mut self, prefix: &str) -> Self {
        self.inherit_env_prefixes.push(prefix.to_string());
        self
    }

    /// Inherits nothing from the test process: the image's own env and the pod's only (a worker
    /// image that must not see the test's `IC_BENCH_UCX_LIB`).
    pub fn inherit_nothing(mut self) -> Self {
        self.inherit_env_prefixes.clear();
        self
    }

    /// A distroless-like image: no shell to exec.
    pub fn without_shell(mut self) -> Self {
        self.shell = false;
        self
    }
}

/// Test-only: the recorded rail-map tree (a root holding `sys/…`) of the node a container runs
/// on, set by the emulated node's runtime when the cluster has rails; honoured only by
/// `ic-bench rail-info` (a real node's `/sys` shows its NICs, an emulated node's shows veths).
pub const RAIL_TREE_ENV: &str = "IC_BENCH_RAIL_TREE";

/// Everything [`crate::TestCluster::start`] needs.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub nodes: Vec<NodeConfig>,
    /// Image name → program. A key without a tag matches every tag of that repository.
    pub images: BTreeMap<String, ImageConfig>,
    /// Used for every image not in `images`; `None` makes such pods fail with `ErrImagePull`.
    pub default_image: Option<ImageConfig>,
    /// Namespaces that exist; the first is the kubeconfig context's namespace.
    pub namespaces: Vec<String>,
    /// Labels of namespaces (Pod Security admission reads `pod-security.kubernetes.io/*`).
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// ResourceQuotas: `(namespace, quota name, hard limits such as limits.cpu=4)`.
    pub quotas: Vec<(String, String, BTreeMap<String, String>)>,
    pub isolation: Isolation,
    /// Delay between `ErrImagePull` and `ImagePullBackOff`, and between crash-loop restarts
    /// (Kubernetes uses 10 s and more; tests want it short).
    pub backoff: Duration,
    /// Upper bound on a graceful deletion's wait before SIGKILL (Kubernetes default grace is 30 s).
    pub max_grace: Duration,
    /// Fallback for pods whose container image maps to nothing and no default: when `true` the
    /// container command runs as given (handy for `sh -c` test pods with any image name).
    pub run_unknown_images_as_is: bool,
    /// How many pod events a watch can resume across; older versions get an in-stream 410 Expired.
    pub watch_history: usize,
    /// Emulated rail NICs per node (`rail0 … rail{K-1}`, rail k of every node on switch k; needs
    /// [`Isolation::Namespaces`]); 0: none. See [`ClusterConfig::rails`].
    pub rails: usize,
    /// `(node, rail, rate)`: rails limited with `tc tbf` from the start.
    pub slow_rails: Vec<(String, usize, String)>,
    /// `(node, rail)`: rails whose switch port is down from the start.
    pub dead_rails: Vec<(String, usize)>,
    /// `(node, rail, rate)`: congested rails from the start (a `tc tbf` whose held-back packets
    /// the emulated NIC's CNP/ECN counters count). See [`ClusterConfig::congested_rail`].
    pub congested_rails: Vec<(String, usize, String)>,
    /// `(node, rail, per mille)`: lossy rails from the start (packets really dropped, counted by
    /// the emulated NIC's sequence-error counters). See [`ClusterConfig::lossy_rail`].
    pub lossy_rails: Vec<(String, usize, u32)>,
    /// `(node, rail, mtu)`: rails whose MTU differs from the default 1500 from the start. See
    /// [`ClusterConfig::rail_mtu`].
    pub rail_mtus: Vec<(String, usize, u32)>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            nodes: Vec::new(),
            images: BTreeMap::new(),
            default_image: None,
            namespaces: vec!["default".to_string()],
            namespace_labels: BTreeMap::new(),
            quotas: Vec::new(),
            isolation: Isolation::Namespaces,
            backoff: Duration::from_millis(300),
            max_grace: Duration::from_secs(2),
            run_unknown_images_as_is: true,
            watch_history: 4096,
            rails: 0,
            slow_rails: Vec::new(),
            dead_rails: Vec::new(),
            congested_rails: Vec::new(),
            lossy_rails: Vec::new(),
            rail_mtus: Vec::new(),
        }
    }
}

impl ClusterConfig {
    /// No nodes yet, namespace `default`, namespace isolation.
    pub fn new() -> Self {
        Self::default()
    }

    /// Two GPU nodes `gpu-1`, `gpu-2` with 8 `nvidia.com/gpu` and 8 `rdma/ib` each.
    pub fn two_gpu_nodes() -> Self {
        Self::new()
            .node(NodeConfig::gpu("gpu-1", 8))
            .node(NodeConfig::gpu("gpu-2", 8))
    }

    pub fn node(mut self, node: NodeConfig) -> Self {
        self.nodes.push(node);
        self
    }

    /// Every image not listed with [`Self::image`] runs `program` (e.g. `env!("CARGO_BIN_EXE_ic-bench")`).
    pub fn program(mut self, program: impl Into<PathBuf>) -> Self {
        self.default_image = Some(ImageConfig::new(program));
        self
    }

    pub fn default_image(mut self, image: ImageConfig) -> Self {
        self.default_image = Some(image);
        self
    }

    pub fn image(mut self, name: &str, image: ImageConfig) -> Self {
        self.images.insert(name.to_string(), image);
        self
    }

    /// Adds a namespace (`default` always exists unless [`Self::default_namespace`] moved it).
    pub fn namespace(mut self, name: &str) -> Self {
        if !self.namespaces.iter().any(|n| n == name) {
            self.namespaces.push(name.to_string());
        }
        self
    }

    /// Adds a namespace with labels, e.g. `pod-security.kubernetes.io/enforce=restricted`: pods
    /// created in it go through Pod Security admission as on a real API server.
    pub fn namespace_labels(mut self, name: &str, labels: &[(&str, &str)]) -> Self {
        self = self.namespace(name);
        let entry = self.namespace_labels.entry(name.to_string()).or_default();
        for (k, v) in labels {
            entry.insert(k.to_string(), v.to_string());
        }
        self
    }

    /// Adds a ResourceQuota to `namespace` (created too): `hard` as in its spec (`limits.cpu`,
    /// `requests.memory`, `cpu`, `memory`, `pods`). Pods then must specify what it tracks.
    pub fn resource_quota(mut self, namespace: &str, name: &str, hard: &[(&str, &str)]) -> Self {
        self = self.namespace(namespace);
        let hard = hard.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.quotas.push((namespace.to_string(), name.to_string(), hard));
        self
    }

    /// Makes `name` the kubeconfig context's namespace.
    pub fn default_namespace(mut self, name: &str) -> Self {
        self.namespaces.retain(|n| n != name);
        self.namespaces.insert(0, name.to_string());
        self
    }

    pub fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    pub fn watch_history(mut self, events: usize) -> Self {
        self.watch_history = events.max(1);
        self
    }

    /// Every node gets `k` rail NICs (`rail0 …`, 10.99.{k+1}.N/24, rail k of every node on its own
    /// switch) and a recorded rail-map tree in which rail k is the netdev of an RDMA NIC `mlx5_k`.
    /// The node's runtime sets [`RAIL_TREE_ENV`] to that tree in every container of the node, so
    /// `ic-bench rail-info` computes the node's rail map with the unchanged rail-map code; the
    /// byte counters stay the node's real `/sys/class/net/rail{k}/statistics`.
    pub fn rails(mut self, k: usize) -> Self {
        self.rails = k;
        self
    }

    /// Rail `k` of `node` sends at most `rate` (tc tbf, e.g. `200mbit`): a slow rail.
    pub fn slow_rail(mut self, node: &str, k: usize, rate: &str) -> Self {
        self.slow_rails.push((node.to_string(), k, rate.to_string()));
        self
    }

    /// Rail `k` of `node` is down at its switch port: a dead rail.
    pub fn dead_rail(mut self, node: &str, k: usize) -> Self {
        self.dead_rails.push((node.to_string(), k));
        self
    }

    /// Rail `k` of `node` is congested: limited to `rate` both ways (tc tbf, e.g. `200mbit`), and
    /// the packets the shaper holds back move its emulated `mlx5_k` port's CNP/ECN counters
    /// (`np_cnp_sent`, `rp_cnp_handled`, `np_ecn_marked_roce_packets`; see
    /// `icb_isolate::Fabric::congest_rail`).
    pub fn congested_rail(mut self, node: &str, k: usize, rate: &str) -> Self {
        self.congested_rails.push((node.to_string(), k, rate.to_string()));
        self
    }

    /// Rail `k` of `node` is lossy: `per_mille` ‰ (1-500) of its packets dropped each way (nft),
    /// counted by its emulated `mlx5_k` port's sequence-error counters (`packet_seq_err`,
    /// `out_of_sequence`; see `icb_isolate::Fabric::make_rail_lossy`).
    pub fn lossy_rail(mut self, node: &str, k: usize, per_mille: u32) -> Self {
        self.lossy_rails.push((node.to_string(), k, per_mille));
        self
    }

    /// Rail `k` of `node` runs at MTU `mtu` (68-65535; the others at 1500): its veth and its
    /// tree's netdev `mtu` file, so `rail-info` and `probe node` read the difference.
    pub fn rail_mtu(mut self, node: &str, k: usize, mtu: u32) -> Self {
        self.rail_mtus.push((node.to_string(), k, mtu));
        self
    }

    pub fn max_grace(mut self, grace: Duration) -> Self {
        self.max_grace = grace;
        self
    }

    /// The image config for `image`, if any.
    pub(crate) fn resolve_image(&self, image: &str) -> Option<&ImageConfig> {
        if let Some(found) = self.images.get(image) {
            return Some(found);
        }
        let repo = image_repository(image);
        self.images.get(repo).or(self.default_image.as_ref())
    }
}

/// `repo/name:tag` or `repo/name@sha256:…` → `repo/name` (a registry port's colon is kept).
fn image_repository(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    match without_digest.rfind(':') {
        Some(colon) if !without_digest[colon..].contains('/') => &without_digest[..colon],
        _ => without_digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_keys_match_any_tag() {
        assert_eq!(image_repository("ghcr.io/x/ic-bench:0.1"), "ghcr.io/x/ic-bench");
        assert_eq!(image_repository("localhost:5000/ic-bench"), "localhost:5000/ic-bench");
        assert_eq!(image_repository("ic-bench@sha256:abc"), "ic-bench");
        let cfg = ClusterConfig::new().image("ic-bench", ImageConfig::new("/bin/true"));
        assert!(cfg.resolve_image("ic-bench:latest").is_some());
        assert!(cfg.resolve_image("other").is_none());
    }
}
