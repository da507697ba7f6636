//! Kubernetes resource names: which hand a pod a GPU, which an RDMA-capable NIC, which are
//! other devices, and which are not devices at all.
//!
//! Device plugins name their resources freely, so this is a vocabulary of the names the
//! operators in the field use (NVIDIA GPU and Network Operators, AMD and Intel GPU plugins, the
//! RDMA shared device plugin, the SR-IOV network device plugin, AWS EFA, GKE multi-networking)
//! plus a conservative reading of names in the same style.

/// Who made a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuVendor {
    Nvidia,
    Amd,
    Intel,
    /// A GPU resource of another domain (`example.com/gpu`).
    Other,
}

impl GpuVendor {
    /// The device plugin's resource name for a whole GPU of this vendor (the name a pod requests);
    /// `None` for a vendor whose plugin is not known.
    pub fn resource_name(self) -> Option<&'static str> {
        match self {
            GpuVendor::Nvidia => Some("nvidia.com/gpu"),
            GpuVendor::Amd => Some("amd.com/gpu"),
            GpuVendor::Intel => Some("gpu.intel.com/i915"),
            GpuVendor::Other => None,
        }
    }

    /// The vendor of a serving engine's accelerator setting (`cuda`, `rocm`, `xpu`); `None` for
    /// one this vocabulary does not know.
    pub fn of_accelerator(accelerator: &str) -> Option<GpuVendor> {
        match accelerator {
            "cuda" => Some(GpuVendor::Nvidia),
            "rocm" => Some(GpuVendor::Amd),
            "xpu" => Some(GpuVendor::Intel),
            _ => None,
        }
    }
}

/// How an RDMA-capable NIC reaches the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RdmaKind {
    /// `rdma/*`: the RDMA shared device plugin shares a whole HCA (IB or RoCE) between pods.
    SharedDevice,
    /// An SR-IOV virtual function (`*sriov*`: SR-IOV network device plugin, OpenShift).
    SriovVf,
    /// `vpc.amazonaws.com/efa`: AWS Elastic Fabric Adapter (libfabric / UCX srd).
    Efa,
    /// `nvidia.com/hostdev`: the NVIDIA Network Operator's host-device plugin hands over a whole
    /// RDMA NIC (PF) to the pod.
    HostDevice,
    /// `mellanox.com/*`: resources of the legacy Mellanox device plugins (always NICs).
    Mellanox,
    /// `networking.gke.io.networks/*`: GKE multi-networking, how GKE attaches its RDMA NICs.
    GkeNetwork,
    /// Another resource whose name says RDMA, InfiniBand, RoCE or HCA.
    Named,
}

/// What a resource name hands a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceClass {
    /// A GPU (MIG slices included: `nvidia.com/mig-1g.10gb`).
    Gpu { vendor: GpuVendor },
    /// An RDMA-capable NIC: IPC_LOCK is needed to pin memory for it.
    Rdma { kind: RdmaKind },
    /// Another extended resource (`example.com/fpga`).
    OtherDevice,
    /// Not a device: `cpu`, `memory`, `hugepages-*`, `ephemeral-storage`, `kubernetes.io/*`.
    NotADevice,
}

impl ResourceClass {
    pub fn is_gpu(self) -> bool {
        matches!(self, ResourceClass::Gpu { .. })
    }
    pub fn is_rdma(self) -> bool {
        matches!(self, ResourceClass::Rdma { .. })
    }
    /// Any extended (device-plugin) resource: what a bench pod copies from a reference pod.
    pub fn is_device(self) -> bool {
        self != ResourceClass::NotADevice
    }
}

/// Words in a resource's name (after the domain) that say it is an RDMA NIC.
const RDMA_NAME_WORDS: &[&str] = &["rdma", "ib", "infiniband", "roce", "hca", "mlnx", "efa"];

/// Classifies a resource name (case-insensitive; surrounding spaces ignored).
pub fn resource_class(name: &str) -> ResourceClass {
    let n = name.trim().to_ascii_lowercase();
    let Some((domain, res)) = n.split_once('/') else {
        // Dynamo's DGD writes `gpu: "1"`; its operator turns that into nvidia.com/gpu.
        return if n == "gpu" {
            ResourceClass::Gpu {
                vendor: GpuVendor::Nvidia,
            }
        } else {
            ResourceClass::NotADevice
        };
    };
    if domain == "kubernetes.io" || domain.ends_with(".kubernetes.io") {
        return ResourceClass::NotADevice;
    }
    if let Some(kind) = rdma_kind(domain, res) {
        return ResourceClass::Rdma { kind };
    }
    if let Some(vendor) = gpu_vendor(domain, res) {
        return ResourceClass::Gpu { vendor };
    }
    ResourceClass::OtherDevice
}

fn rdma_kind(domain: &str, res: &str) -> Option<RdmaKind> {
    let words = || res.split(['_', '-', '.']);
    Some(match domain {
        "rdma" => RdmaKind::SharedDevice,
        "vpc.amazonaws.com" if res == "efa" => RdmaKind::Efa,
        "nvidia.com" if res == "hostdev" => RdmaKind::HostDevice,
        "mellanox.com" => RdmaKind::Mellanox,
        "networking.gke.io.networks" => RdmaKind::GkeNetwork,
        _ if res.contains("sriov") => RdmaKind::SriovVf,
        _ if words().any(|w| w == "efa") => RdmaKind::Efa,
        _ if res.contains("rdma") || words().any(|w| RDMA_NAME_WORDS.contains(&w)) => RdmaKind::Named,
        _ => return None,
    })
}

fn gpu_vendor(domain: &str, res: &str) -> Option<GpuVendor> {
    let gpu_like = res.contains("gpu");
    match domain {
        "nvidia.com" if gpu_like || res.starts_with("mig-") => Some(GpuVendor::Nvidia),
        "amd.com" if gpu_like => Some(GpuVendor::Amd),
        // Intel's GPU plugin: gpu.intel.com/i915, gpu.intel.com/xe.
        "gpu.intel.com" => Some(GpuVendor::Intel),
        _ if gpu_like => Some(GpuVendor::Other),
        _ => None,
    }
}

pub fn is_gpu_resource(name: &str) -> bool {
    resource_class(name).is_gpu()
}

pub fn is_rdma_resource(name: &str) -> bool {
    resource_class(name).is_rdma()
}

pub fn is_device_resource(name: &str) -> bool {
    resource_class(name).is_device()
}

/// The standard DRA device attribute naming the PCIe root complex a device hangs off (KEP-4381):
/// a GPU and a NIC with equal values are each other's rail. ic-bench's own claims tie them by it,
/// and `probe env` asks a recipe's claim templates to.
pub const PCIE_ROOT_ATTRIBUTE: &str = "resource.kubernetes.io/pcieRoot";

/// A DRA resource claim (or claim template) name that says it is an NVIDIA MNNVL ComputeDomain
/// (IMEX) channel: an NVLink fabric across nodes, not a NIC. Used when the ComputeDomain object
/// itself was applied apart and only the name is known.
pub fn is_compute_domain_claim_name(name: &str) -> bool {
    let s = name.to_ascii_lowercase();
    s.contains("compute-domain") || s.contains("computedomain") || s.contains("imex")
}
