//! The devices of a rails bench pod as extended resources: a whole node's GPUs and RDMA
//! resources, what a pod requests, how many GPUs that is.

use icb_core::fabric::quantity::parse_milli;
use icb_kube::devices::DeviceRequest;
use icb_kube::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use icb_kube::podspec::{BenchPod, Role};
use std::collections::BTreeMap;

/// Every GPU and RDMA resource `advertised` (a node's allocatable), with its whole quantity.
pub fn whole_node_devices(advertised: &BTreeMap<String, Quantity>) -> BTreeMap<String, Quantity> {
    use icb_core::fabric::resource::resource_class;
    advertised
        .iter()
        .filter(|(name, q)| {
            let class = resource_class(name);
            (class.is_gpu() || class.is_rdma()) && q.0.trim() != "0"
        })
        .map(|(name, q)| (name.clone(), q.clone()))
        .collect()
}

/// What one side's pod requests on a node advertising `advertised`: every GPU and RDMA device
/// (`request` is `None`: the whole node), or what `--gpus`/`--rdma`/`--resource` decide there.
pub(super) fn devices_of(
    request: Option<&DeviceRequest>,
    advertised: &BTreeMap<String, Quantity>,
) -> BTreeMap<String, Quantity> {
    match request {
        None => whole_node_devices(advertised),
        Some(request) => {
            let mut devices = BTreeMap::new();
            icb_kube::devices::decide(request, Some(advertised), false).apply(&mut devices);
            devices
        }
    }
}

impl super::kube::PodDevices {
    /// One side's request (`None`: the whole node).
    pub(super) fn for_role(&self, role: Role) -> Option<&DeviceRequest> {
        match self {
            super::kube::PodDevices::WholeNode => None,
            super::kube::PodDevices::Requested(prefill, _) if role == Role::Client => Some(prefill),
            super::kube::PodDevices::Requested(_, decode) => Some(decode),
        }
    }
}

/// What a bench pod requests: its model's devices with its own choice applied (as it builds).
pub(super) fn pod_devices(bench: &BenchPod) -> BTreeMap<String, Quantity> {
    let mut devices = bench.model.as_ref().map(|m| m.devices.clone()).unwrap_or_default();
    bench.devices.apply(&mut devices);
    devices
}

/// The GPUs among `devices` (whole units; a fractional or unreadable quantity counts none).
pub(super) fn gpu_count(devices: &BTreeMap<String, Quantity>) -> u32 {
    use icb_core::fabric::resource::resource_class;
    devices
        .iter()
        .filter(|(name, _)| resource_class(name).is_gpu())
        .filter_map(|(_, q)| parse_milli(&q.0))
        .map(|m| u32::try_from(m / 1000).unwrap_or(0))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_node_takes_every_gpu_and_rdma_device_and_nothing_else() {
        let q = |s: &str| Quantity(s.into());
        let advertised: BTreeMap<String, Quantity> = [
            ("cpu", "64"),
            ("memory", "512Gi"),
            ("nvidia.com/gpu", "8"),
            ("rdma/ib", "8"),
            ("amd.com/gpu", "0"),
            ("example.com/fpga", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), q(v)))
        .collect();
        let got = whole_node_devices(&advertised);
        let names: Vec<&str> = got.keys().map(String::as_str).collect();
        assert_eq!(names, ["nvidia.com/gpu", "rdma/ib"]);
        assert_eq!(got["nvidia.com/gpu"], q("8"));
        // The KV ranks are pinned round robin over the pod's GPUs: the RDMA devices are none.
        assert_eq!(gpu_count(&got), 8);
        assert_eq!(gpu_count(&BTreeMap::from([("rdma/ib".to_string(), q("8"))])), 0);
    }
}
