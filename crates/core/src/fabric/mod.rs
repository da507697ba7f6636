//! The fabric vocabulary: the one place ic-bench spells the names that decide which transport a
//! process can use. Every crate asks here, so `probe env`, `pair` and the recipe rules cannot
//! judge the same pod differently.
//!
//! * [`env`](mod@env): which environment variables are transport settings, logging, GPU visibility or
//!   ic-bench's own, and the four sets callers read;
//! * [`resource`]: Kubernetes resource names as GPU (by vendor), RDMA NIC (by kind: shared HCA,
//!   SR-IOV VF, EFA, host device, …), other device, or not a device; ComputeDomain claim names;
//! * [`ucx`]: UCX transport names to their class and RDMA family, and `UCX_TLS` (`^` exclusion,
//!   aliases such as `sm`, `shm`, `ib`, `rc`, `cuda`, `all`);
//! * [`net_devices`]: `UCX_NET_DEVICES` entries and RDMA device names;
//! * [`quantity`]: Kubernetes quantities, exactly (milli-units) and as bytes;
//! * [`shm`]: `/dev/shm` and the emptyDir medium that makes it RAM-backed;
//! * [`privilege`]: capabilities as pod specs spell them.
//!
//! One table test (`tests.rs`) pins every name to its classification.

pub mod env;
pub mod net_devices;
pub mod privilege;
pub mod quantity;
pub mod resource;
pub mod shm;
pub mod ucx;

pub use env::{
    EnvClass, env_class, is_baseline_env, is_pod_transport_env, is_run_context_env, is_transport_env,
    is_transport_setting,
};
pub use resource::{
    GpuVendor, PCIE_ROOT_ATTRIBUTE, RdmaKind, ResourceClass, is_compute_domain_claim_name, is_device_resource,
    is_gpu_resource, is_rdma_resource, resource_class,
};
pub use ucx::{RdmaFamily, UcxTls, is_rdma_transport, rdma_family, transport_class};

#[cfg(test)]
mod tests;
