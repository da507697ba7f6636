//! Devices a node offers through Dynamic Resource Allocation (`resource.k8s.io/v1`, GA in
//! Kubernetes 1.34) rather than as extended resources: the ResourceSlices its DRA drivers publish
//! (NVIDIA's GPU driver `gpu.nvidia.com`; a NIC driver whose devices carry the standard
//! `resource.kubernetes.io/pcieRoot`), and the DeviceClasses that select them.
//!
//! A bench pod on such a node claims its devices through a ResourceClaimTemplate named like the
//! pod ([`template`]): one GPU and the NIC on the same PCIe root (its rail), by a `matchAttribute`
//! constraint, per GPU asked for; a rails node pod claims every GPU and NIC of the node. The
//! template is created right before its pod and deleted by name on every cleanup path
//! ([`delete_run`]); the claim made from it is owned by the pod, so Kubernetes collects it.

use crate::access::Cluster;
use crate::error::KubeError;
use crate::podspec::{Role, pod_name};
use k8s_openapi::api::resource::v1::{
    DeviceClaim, DeviceClass, DeviceConstraint, DeviceRequest, ExactDeviceRequest, ResourceClaimSpec,
    ResourceClaimTemplate, ResourceClaimTemplateSpec, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use std::collections::{BTreeMap, BTreeSet};

/// The driver of NVIDIA's GPU DRA driver.
pub const GPU_DRIVER: &str = "gpu.nvidia.com";
/// The standard attribute naming a device's PCIe root complex.
pub const PCIE_ROOT: &str = icb_core::fabric::PCIE_ROOT_ATTRIBUTE;
/// The name of the pod's claim (`spec.resourceClaims[].name`, the container's `resources.claims`).
pub const POD_CLAIM: &str = "devices";

/// What one node offers through DRA (empty when it publishes no slices).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraOffer {
    /// GPUs of [`GPU_DRIVER`], and the DeviceClass selecting them (`None`: no class does).
    pub gpus: usize,
    pub gpu_class: Option<String>,
    /// The NIC driver (devices with a PCIe root, not GPUs), its device count and class.
    pub nic_driver: Option<String>,
    pub nics: usize,
    pub nic_class: Option<String>,
    /// Every GPU and NIC names its PCIe root: rails can be matched.
    pub rooted: bool,
}

impl DraOffer {
    /// From the node's slices and the cluster's classes (pure, for tests).
    pub fn from_slices(slices: &[ResourceSlice], classes: &[DeviceClass]) -> DraOffer {
        let mut per_driver: BTreeMap<&str, (usize, bool)> = BTreeMap::new();
        for slice in slices {
            for device in slice.spec.devices.iter().flatten() {
                let entry = per_driver.entry(slice.spec.driver.as_str()).or_insert((0, true));
                entry.0 += 1;
                let rooted = device.attributes.as_ref().is_some_and(|a| a.contains_key(PCIE_ROOT));
                entry.1 &= rooted;
            }
        }
        let class_of = |driver: &str| class_for(classes, driver);
        let (gpus, gpu_rooted) = per_driver.get(GPU_DRIVER).copied().unwrap_or((0, false));
        // The NIC driver: another driver whose every device has a PCIe root (first by name).
        let nic = per_driver
            .iter()
            .find(|(d, (n, rooted))| **d != GPU_DRIVER && *n > 0 && *rooted)
            .map(|(d, (n, _))| (d.to_string(), *n));
        DraOffer {
            gpus,
            gpu_class: (gpus > 0).then(|| class_of(GPU_DRIVER)).flatten(),
            nic_class: nic.as_ref().and_then(|(d, _)| class_of(d)),
            nics: nic.as_ref().map_or(0, |(_, n)| *n),
            nic_driver: nic.map(|(d, _)| d),
            rooted: gpu_rooted,
        }
    }
}

/// Whether a CEL selector requires `device.driver == "D"` (either quote, any spacing) among
/// the terms it joins with `&&`.
fn requires_driver(expression: &str, driver: &str) -> bool {
    let wanted = format!("device.driver==\"{driver}\"");
    expression.split("&&").any(|term| {
        let term: String = term
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| if c == '\'' { '"' } else { c })
            .collect();
        term == wanted
    })
}

/// The DeviceClass for `driver`'s devices: the one named after the driver (as NVIDIA's GPU
/// driver installs `gpu.nvidia.com`, whose selector also requires `type == 'gpu'`) if it
/// selects that driver, else the one whose selectors require the driver with the fewest terms.
fn class_for(classes: &[DeviceClass], driver: &str) -> Option<String> {
    let selecting = |c: &&DeviceClass| {
        c.spec.as_ref().and_then(|s| s.selectors.as_ref()).is_some_and(|sel| {
            sel.iter()
                .any(|s| s.cel.as_ref().is_some_and(|c| requires_driver(&c.expression, driver)))
        })
    };
    let terms = |c: &DeviceClass| -> usize {
        c.spec
            .iter()
            .flat_map(|s| s.selectors.iter().flatten())
            .filter_map(|s| s.cel.as_ref())
            .map(|c| c.expression.split("&&").count())
            .sum()
    };
    let candidates: Vec<&DeviceClass> = classes.iter().filter(selecting).collect();
    candidates
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(driver))
        .or_else(|| candidates.iter().min_by_key(|c| terms(c)))
        .and_then(|c| c.metadata.name.clone())
}

/// Reads what `node` offers through DRA: `Ok(None)` when the cluster does not serve
/// `resource.k8s.io/v1` (an older cluster), `Err` (a note) when it cannot be read.
pub async fn node_offer(cluster: &Cluster, node: &str) -> Result<Option<DraOffer>, KubeError> {
    Ok(node_offer_and_slices(cluster, node).await?.map(|(offer, _)| offer))
}

/// [`node_offer`], with the slices it was read from (their devices' attributes: the rails
/// check `resource.kubernetes.io/pcieRoot` against the node's own PCI tree).
pub async fn node_offer_and_slices(
    cluster: &Cluster,
    node: &str,
) -> Result<Option<(DraOffer, Vec<ResourceSlice>)>, KubeError> {
    let slices: kube::Api<ResourceSlice> = kube::Api::all(cluster.client().clone());
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let slices = match cluster
        .call(&format!("list resourceslices of node {node}"), || slices.list(&lp))
        .await
    {
        Ok(list) => list.items,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    if slices.is_empty() {
        return Ok(Some((DraOffer::default(), slices)));
    }
    let classes: kube::Api<DeviceClass> = kube::Api::all(cluster.client().clone());
    let all = ListParams::default();
    let classes = cluster.call("list deviceclasses", || classes.list(&all)).await?.items;
    Ok(Some((DraOffer::from_slices(&slices, &classes), slices)))
}

fn exactly(name: &str, class: &str, all: bool) -> DeviceRequest {
    DeviceRequest {
        name: name.to_string(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            allocation_mode: Some(if all { "All" } else { "ExactCount" }.to_string()),
            count: (!all).then_some(1),
            ..Default::default()
        }),
        first_available: None,
    }
}

/// A node offers GPUs through DRA but no DeviceClass selects them: nothing to claim them by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no DeviceClass selects `device.driver == \"{GPU_DRIVER}\"` devices")]
pub struct NoGpuClass;

/// `gpus` GPUs, each with the NIC on its PCIe root when the node has a NIC driver (`rail`):
/// requests `gpu-K` and `nic-K`, one `matchAttribute` constraint per pair.
pub fn rail_claim(offer: &DraOffer, gpus: usize, rail: bool) -> Result<ResourceClaimSpec, NoGpuClass> {
    let gpu_class = offer.gpu_class.as_deref().ok_or(NoGpuClass)?;
    let nic_class = if rail { offer.nic_class.as_deref() } else { None };
    let mut requests = Vec::new();
    let mut constraints = Vec::new();
    for k in 0..gpus {
        requests.push(exactly(&format!("gpu-{k}"), gpu_class, false));
        if let Some(nic) = nic_class {
            requests.push(exactly(&format!("nic-{k}"), nic, false));
            constraints.push(DeviceConstraint {
                match_attribute: Some(PCIE_ROOT.to_string()),
                requests: Some(vec![format!("gpu-{k}"), format!("nic-{k}")]),
                distinct_attribute: None,
            });
        }
    }
    Ok(claim(requests, constraints))
}

/// Every GPU and every NIC of the node (a `--rails` node pod).
pub fn whole_node_claim(offer: &DraOffer) -> Result<ResourceClaimSpec, NoGpuClass> {
    let gpu_class = offer.gpu_class.as_deref().ok_or(NoGpuClass)?;
    let mut requests = vec![exactly("gpus", gpu_class, true)];
    if let Some(nic) = &offer.nic_class {
        requests.push(exactly("nics", nic, true));
    }
    Ok(claim(requests, Vec::new()))
}

fn claim(requests: Vec<DeviceRequest>, constraints: Vec<DeviceConstraint>) -> ResourceClaimSpec {
    ResourceClaimSpec {
        devices: Some(DeviceClaim {
            requests: Some(requests),
            constraints: (!constraints.is_empty()).then_some(constraints),
            config: None,
        }),
    }
}

/// Whether a claim asks for a NIC (the pod then needs IPC_LOCK, as with an RDMA resource).
pub fn claims_nic(spec: &ResourceClaimSpec, gpu_class: Option<&str>) -> bool {
    spec.devices
        .iter()
        .flat_map(|d| d.requests.iter().flatten())
        .filter_map(|r| r.exactly.as_ref())
        .any(|e| Some(e.device_class_name.as_str()) != gpu_class && e.device_class_name != GPU_DRIVER)
}

/// The bench pod's ResourceClaimTemplate: named like the pod, labelled with the run's labels.
pub fn template(
    namespace: &str,
    name: &str,
    labels: BTreeMap<String, String>,
    spec: &ResourceClaimSpec,
) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(ResourceClaimTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels),
                ..Default::default()
            }),
            spec: Some(spec.clone()),
        }),
    }
}

/// Creates a template; one already there from this same run (a retried create) is fine.
pub async fn create_template(cluster: &Cluster, template: &ResourceClaimTemplate) -> Result<(), KubeError> {
    let api: kube::Api<ResourceClaimTemplate> = kube::Api::namespaced(cluster.client().clone(), cluster.namespace());
    let name = template.metadata.name.clone().unwrap_or_default();
    let pp = PostParams::default();
    match cluster
        .call(&format!("create resourceclaimtemplate {name}"), || {
            api.create(&pp, template)
        })
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_already_exists() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes the templates `names` in `namespace` by name (no `list` needed); returns how many
/// were there. Gone already is fine.
pub async fn delete_named(cluster: &Cluster, namespace: &str, names: &BTreeSet<String>) -> Result<usize, KubeError> {
    let api: kube::Api<ResourceClaimTemplate> = kube::Api::namespaced(cluster.client().clone(), namespace);
    let dp = DeleteParams::default();
    let mut deleted = 0;
    for name in names {
        match cluster
            .call(&format!("delete resourceclaimtemplate {namespace}/{name}"), || {
                api.delete(name, &dp)
            })
            .await
        {
            Ok(_) => deleted += 1,
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

/// The template names of a pair run's two pods.
pub fn run_templates(run_id: &str) -> BTreeSet<String> {
    [Role::Server, Role::Client].map(|r| pod_name(run_id, r)).into()
}

/// Deletes a pair run's templates in the cluster's namespace.
pub async fn delete_run(cluster: &Cluster, run_id: &str) -> Result<usize, KubeError> {
    delete_named(cluster, cluster.namespace(), &run_templates(run_id)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{CELDeviceSelector, Device, DeviceAttribute, DeviceSelector};

    fn slice(driver: &str, devices: &[(&str, Option<&str>)]) -> ResourceSlice {
        let mut s = ResourceSlice::default();
        s.spec.driver = driver.into();
        s.spec.devices = Some(
            devices
                .iter()
                .map(|(name, root)| Device {
                    name: name.to_string(),
                    attributes: root.map(|r| {
                        [(
                            PCIE_ROOT.to_string(),
                            DeviceAttribute {
                                string: Some(r.into()),
                                ..Default::default()
                            },
                        )]
                        .into()
                    }),
                    ..Default::default()
                })
                .collect(),
        );
        s
    }

    fn class(name: &str, driver: &str) -> DeviceClass {
        let mut c = DeviceClass::default();
        c.metadata.name = Some(name.into());
        c.spec = Some(k8s_openapi::api::resource::v1::DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: format!("device.driver == \"{driver}\""),
                }),
            }]),
            ..Default::default()
        });
        c
    }

    #[test]
    fn the_offer_finds_gpus_the_rail_nic_driver_and_their_classes() {
        let slices = [
            slice(
                GPU_DRIVER,
                &[("gpu-0", Some("pci0000:00")), ("gpu-1", Some("pci0000:01"))],
            ),
            slice(
                "nic.example.com",
                &[("nic-0", Some("pci0000:00")), ("nic-1", Some("pci0000:01"))],
            ),
            slice("fpga.example.com", &[("f0", None)]),
        ];
        let classes = [class("gpu", GPU_DRIVER), class("rdma-nics", "nic.example.com")];
        let offer = DraOffer::from_slices(&slices, &classes);
        assert_eq!(offer.gpus, 2);
        assert_eq!(offer.gpu_class.as_deref(), Some("gpu"));
        assert_eq!(
            offer.nic_driver.as_deref(),
            Some("nic.example.com"),
            "fpga has no PCIe root"
        );
        assert_eq!((offer.nics, offer.nic_class.as_deref()), (2, Some("rdma-nics")));
        assert!(offer.rooted);
        // NVIDIA's own class: single quotes and a second term; a MIG class is not the GPU class.
        let mut nvidia = class(GPU_DRIVER, GPU_DRIVER);
        nvidia.spec.as_mut().unwrap().selectors.as_mut().unwrap()[0]
            .cel
            .as_mut()
            .unwrap()
            .expression =
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'".into();
        let mut mig = class("mig.nvidia.com", GPU_DRIVER);
        mig.spec.as_mut().unwrap().selectors.as_mut().unwrap()[0]
            .cel
            .as_mut()
            .unwrap()
            .expression =
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'".into();
        let offer = DraOffer::from_slices(&slices, &[mig, nvidia, class("rdma-nics", "nic.example.com")]);
        assert_eq!(offer.gpu_class.as_deref(), Some(GPU_DRIVER));
        assert!(!requires_driver("device.driver != 'gpu.nvidia.com'", GPU_DRIVER));
        let no_class = DraOffer::from_slices(&slices, &[]);
        assert_eq!(rail_claim(&no_class, 1, true), Err(NoGpuClass));
        assert!(NoGpuClass.to_string().contains("DeviceClass"));
    }

    #[test]
    fn a_rail_claim_pairs_each_gpu_with_the_nic_on_its_pcie_root() {
        let offer = DraOffer {
            gpus: 8,
            gpu_class: Some("gpu".into()),
            nic_driver: Some("nic".into()),
            nics: 8,
            nic_class: Some("nic".into()),
            rooted: true,
        };
        let spec = rail_claim(&offer, 2, true).unwrap();
        let devices = spec.devices.as_ref().unwrap();
        let names: Vec<&str> = devices.requests.iter().flatten().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["gpu-0", "nic-0", "gpu-1", "nic-1"]);
        let constraints = devices.constraints.as_ref().unwrap();
        assert_eq!(constraints.len(), 2);
        assert_eq!(constraints[1].match_attribute.as_deref(), Some(PCIE_ROOT));
        assert_eq!(constraints[1].requests.as_deref().unwrap(), ["gpu-1", "nic-1"]);
        assert!(claims_nic(&spec, Some("gpu")));
        let gpu_only = rail_claim(&offer, 1, false).unwrap();
        assert!(!claims_nic(&gpu_only, Some("gpu")));
        let whole = whole_node_claim(&offer).unwrap();
        let modes: Vec<_> = whole
            .devices
            .unwrap()
            .requests
            .unwrap()
            .into_iter()
            .map(|r| r.exactly.unwrap().allocation_mode.unwrap())
            .collect();
        assert_eq!(modes, ["All", "All"]);
    }
}
