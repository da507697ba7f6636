//! Which devices a bench pod on a node target requests: `--gpus N`, `--rdma RESOURCE=N`,
//! `--resource NAME=QTY`, and the defaults read from what the node advertises (one GPU when it
//! has `nvidia.com/gpu`, one of its RDMA resources when it has one). A pod modelled on a reference
//! pod keeps the reference's devices; explicit flags override them entry by entry.
//!
//! Resource names are classified by `icb_core::fabric::resource` (the one vocabulary), so SR-IOV,
//! EFA, host-device and `rdma/*` resources are all found the same way the probes find them.

use crate::access::Cluster;
use icb_core::fabric::resource::{ResourceClass, resource_class};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// What [`crate::dra::node_offer`] read of a node.
pub type DraOfferRead = crate::dra::DraOffer;

/// The NVIDIA GPU resource a default GPU request uses.
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";

/// What the user asked for (all optional: unset means "the node's default").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceRequest {
    /// `--gpus N` (0: none, even when the node has GPUs).
    pub gpus: Option<u32>,
    /// `--rdma RESOURCE=N`; `--rdma none` is `Some(None)`.
    pub rdma: Option<Option<(String, u32)>>,
    /// `--resource NAME=QTY`, applied last.
    pub resources: Vec<(String, String)>,
}

impl DeviceRequest {
    /// Parses `--rdma RESOURCE=N` (or `none`).
    pub fn parse_rdma(raw: &str) -> Result<Option<(String, u32)>, String> {
        if raw.trim() == "none" {
            return Ok(None);
        }
        let (name, qty) =
            split_pair(raw, "--rdma", "RESOURCE=N, e.g. rdma/ib=1, or none").map_err(|e| e.to_string())?;
        if !resource_class(&name).is_rdma() {
            return Err(format!(
                "--rdma {raw}: '{name}' is not an RDMA resource name (rdma/*, SR-IOV, EFA, nvidia.com/hostdev …); use --resource for other devices"
            ));
        }
        let n: u32 = qty
            .parse()
            .map_err(|_| format!("--rdma {raw}: the count '{qty}' is not a whole number"))?;
        Ok(Some((name, n)))
    }

    /// Parses `--resource NAME=QTY`.
    pub fn parse_resource(raw: &str) -> Result<(String, String), DeviceFlagError> {
        let (name, qty) = split_pair(raw, "--resource", "NAME=QTY, e.g. example.com/fpga=1")?;
        if icb_core::fabric::quantity::parse_milli(&qty).is_none() {
            return Err(DeviceFlagError::Quantity {
                raw: raw.to_string(),
                qty,
            });
        }
        Ok((name, qty))
    }
}

/// A `--rdma` or `--resource` value that does not parse; the line names the flag and its form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceFlagError {
    #[error("{flag} {raw}: use {form}")]
    Form {
        flag: &'static str,
        raw: String,
        form: &'static str,
    },
    #[error("--resource {raw}: '{qty}' is not a Kubernetes quantity (e.g. 1, 500m, 8Gi)")]
    Quantity { raw: String, qty: String },
}

fn split_pair(raw: &str, flag: &'static str, form: &'static str) -> Result<(String, String), DeviceFlagError> {
    let refused = || DeviceFlagError::Form {
        flag,
        raw: raw.to_string(),
        form,
    };
    let (name, qty) = raw.split_once('=').ok_or_else(refused)?;
    let (name, qty) = (name.trim(), qty.trim());
    if name.is_empty() || qty.is_empty() || name.contains(char::is_whitespace) {
        return Err(refused());
    }
    Ok((name.to_string(), qty.to_string()))
}

/// What the node advertises (its allocatable, else its capacity).
pub async fn node_resources(cluster: &Cluster, node: &str) -> Result<BTreeMap<String, Quantity>, crate::KubeError> {
    let api: kube::Api<Node> = kube::Api::all(cluster.client().clone());
    let what = format!("get node {node}");
    let n = cluster.call(&what, || api.get(node)).await?;
    let status = n.status.unwrap_or_default();
    Ok(status.allocatable.or(status.capacity).unwrap_or_default())
}

/// The devices decided for one bench pod, applied on top of a modelled pod's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceChoice {
    /// Requests to set (a quantity of "0" removes the entry).
    pub requests: BTreeMap<String, Quantity>,
    /// `--rdma none`: remove every RDMA resource (also the model's).
    pub drop_rdma: bool,
    /// What was chosen by default, said to the user.
    pub notes: Vec<String>,
    /// Devices claimed through DRA (`crate::dra`): the spec of the pod's ResourceClaimTemplate.
    pub claim: Option<k8s_openapi::api::resource::v1::ResourceClaimSpec>,
}

impl DeviceChoice {
    /// Applies the choice to `base` (the model's devices, or empty).
    pub fn apply(&self, base: &mut BTreeMap<String, Quantity>) {
        if self.drop_rdma {
            base.retain(|name, _| !resource_class(name).is_rdma());
        }
        for (name, qty) in &self.requests {
            if qty.0.trim() == "0" {
                base.remove(name);
            } else {
                base.insert(name.clone(), qty.clone());
            }
        }
    }
}

/// The devices a bench pod on a node with `advertised` resources requests. `advertised` is `None`
/// when the node was not read (only explicit flags apply then); `modelled` pods get no defaults.
pub fn decide(req: &DeviceRequest, advertised: Option<&BTreeMap<String, Quantity>>, modelled: bool) -> DeviceChoice {
    let mut out = DeviceChoice::default();
    let has = |name: &str| advertised.and_then(|a| a.get(name)).is_some_and(|q| q.0.trim() != "0");
    match req.gpus {
        Some(n) => {
            out.requests.insert(NVIDIA_GPU.to_string(), Quantity(n.to_string()));
        }
        None if !modelled && has(NVIDIA_GPU) => {
            out.requests.insert(NVIDIA_GPU.to_string(), Quantity("1".into()));
            out.notes.push(format!(
                "requesting 1 {NVIDIA_GPU} (the node advertises it; --gpus N to change)"
            ));
        }
        None => {}
    }
    match &req.rdma {
        Some(Some((name, n))) => {
            out.requests.insert(name.clone(), Quantity(n.to_string()));
        }
        Some(None) => out.drop_rdma = true,
        None if !modelled => {
            if let Some(name) = default_rdma(advertised) {
                out.notes.push(format!(
                    "requesting 1 {name} (an RDMA resource the node advertises; --rdma RESOURCE=N or --rdma none to change)"
                ));
                out.requests.insert(name, Quantity("1".into()));
            }
        }
        None => {}
    }
    for (name, qty) in &req.resources {
        out.requests.insert(name.clone(), Quantity(qty.clone()));
    }
    out
}

/// On a node that offers its GPUs through DRA and not as `nvidia.com/gpu` (`offer`), moves the
/// GPU request into a claim: each GPU with the NIC on its PCIe root, unless `--rdma` chose an
/// RDMA resource or none. `--gpus 0` claims nothing. `Err` when no DeviceClass selects the GPUs.
pub fn apply_dra(
    choice: &mut DeviceChoice,
    req: &DeviceRequest,
    offer: &crate::dra::DraOffer,
) -> Result<(), crate::dra::NoGpuClass> {
    if offer.gpus == 0 {
        return Ok(());
    }
    let gpus = match req.gpus {
        Some(0) => return Ok(()),
        Some(n) => n as usize,
        None => 1,
    };
    choice.requests.remove(NVIDIA_GPU);
    choice.notes.retain(|n| !n.contains(NVIDIA_GPU));
    let rdma_chosen = choice.requests.keys().any(|k| resource_class(k).is_rdma());
    let rail = req.rdma.is_none() && !rdma_chosen && offer.nic_class.is_some() && offer.rooted;
    choice.claim = Some(crate::dra::rail_claim(offer, gpus, rail)?);
    choice.notes.push(if rail {
        format!(
            "claiming {gpus} GPU(s) of {} and the NIC of {} on each one's PCIe root through DRA (the node offers its GPUs as ResourceSlices, not {NVIDIA_GPU})",
            crate::dra::GPU_DRIVER,
            offer.nic_driver.as_deref().unwrap_or("?")
        )
    } else {
        format!(
            "claiming {gpus} GPU(s) of {} through DRA (the node offers its GPUs as ResourceSlices, not {NVIDIA_GPU}); no rail NIC claimed",
            crate::dra::GPU_DRIVER
        )
    });
    Ok(())
}

/// One RDMA resource of the node: an `rdma/*` shared device first, then any other (stable order).
fn default_rdma(advertised: Option<&BTreeMap<String, Quantity>>) -> Option<String> {
    let rdma: Vec<&String> = advertised?
        .iter()
        .filter(|(name, q)| resource_class(name).is_rdma() && q.0.trim() != "0")
        .map(|(name, _)| name)
        .collect();
    rdma.iter()
        .find(|n| {
            resource_class(n)
                == ResourceClass::Rdma {
                    kind: icb_core::fabric::resource::RdmaKind::SharedDevice,
                }
        })
        .or(rdma.first())
        .map(|n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(entries: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    #[test]
    fn defaults_follow_what_the_node_advertises() {
        let gpu_node = node(&[("cpu", "64"), ("nvidia.com/gpu", "8"), ("rdma/ib", "8")]);
        let d = decide(&DeviceRequest::default(), Some(&gpu_node), false);
        assert_eq!(d.requests, node(&[("nvidia.com/gpu", "1"), ("rdma/ib", "1")]));
        assert_eq!(d.notes.len(), 2);
        let efa = node(&[("vpc.amazonaws.com/efa", "4"), ("rdma/zz", "0")]);
        let d = decide(&DeviceRequest::default(), Some(&efa), false);
        assert_eq!(d.requests, node(&[("vpc.amazonaws.com/efa", "1")]));
        let plain = node(&[("cpu", "4")]);
        assert!(
            decide(&DeviceRequest::default(), Some(&plain), false)
                .requests
                .is_empty()
        );
        assert!(decide(&DeviceRequest::default(), None, false).requests.is_empty());
        // A modelled pod keeps its own devices: no defaults added.
        assert!(
            decide(&DeviceRequest::default(), Some(&gpu_node), true)
                .requests
                .is_empty()
        );
    }

    #[test]
    fn flags_override_and_zero_removes() {
        let gpu_node = node(&[("nvidia.com/gpu", "8"), ("rdma/ib", "8")]);
        let req = DeviceRequest {
            gpus: Some(0),
            rdma: Some(None),
            resources: vec![("example.com/fpga".into(), "2".into())],
        };
        let d = decide(&req, Some(&gpu_node), false);
        let mut base = node(&[("nvidia.com/gpu", "2"), ("rdma/ib", "1")]);
        d.apply(&mut base);
        assert_eq!(base, node(&[("example.com/fpga", "2")]));
    }

    #[test]
    fn flag_parsing_names_the_fix() {
        assert_eq!(
            DeviceRequest::parse_rdma("rdma/hca_shared_devices_a=2").unwrap(),
            Some(("rdma/hca_shared_devices_a".into(), 2))
        );
        assert_eq!(DeviceRequest::parse_rdma("none").unwrap(), None);
        let e = DeviceRequest::parse_rdma("nvidia.com/gpu=1").unwrap_err();
        assert!(e.contains("not an RDMA resource"), "{e}");
        assert!(DeviceRequest::parse_rdma("rdma/ib").unwrap_err().contains("RESOURCE=N"));
        assert!(
            DeviceRequest::parse_rdma("rdma/ib=x")
                .unwrap_err()
                .contains("whole number")
        );
        assert_eq!(
            DeviceRequest::parse_resource("example.com/fpga=1").unwrap(),
            ("example.com/fpga".into(), "1".into())
        );
        assert!(DeviceRequest::parse_resource("a=lots").is_err());
    }

    #[test]
    fn a_dra_only_node_gets_its_gpu_request_as_a_rail_claim() {
        let offer = crate::dra::DraOffer {
            gpus: 8,
            gpu_class: Some("gpu.nvidia.com".into()),
            nic_driver: Some("nic.example.com".into()),
            nics: 8,
            nic_class: Some("nic".into()),
            rooted: true,
        };
        let cpu_only = node(&[("cpu", "64")]);
        let mut choice = decide(&DeviceRequest::default(), Some(&cpu_only), false);
        apply_dra(&mut choice, &DeviceRequest::default(), &offer).unwrap();
        let names: Vec<String> = choice
            .claim
            .as_ref()
            .unwrap()
            .devices
            .as_ref()
            .unwrap()
            .requests
            .iter()
            .flatten()
            .map(|r| r.name.clone())
            .collect();
        assert_eq!(names, ["gpu-0", "nic-0"]);
        assert!(
            choice.notes.iter().any(|n| n.contains("through DRA")),
            "{:?}",
            choice.notes
        );
        // --gpus 2 on a DRA node: no nvidia.com/gpu request the node cannot satisfy.
        let two = DeviceRequest {
            gpus: Some(2),
            ..Default::default()
        };
        let mut choice = decide(&two, Some(&cpu_only), false);
        apply_dra(&mut choice, &two, &offer).unwrap();
        assert!(!choice.requests.contains_key(NVIDIA_GPU));
        assert_eq!(choice.claim.unwrap().devices.unwrap().constraints.unwrap().len(), 2);
        // --rdma none: the GPU alone; --gpus 0: nothing claimed.
        let no_rdma = DeviceRequest {
            rdma: Some(None),
            ..Default::default()
        };
        let mut choice = decide(&no_rdma, Some(&cpu_only), false);
        apply_dra(&mut choice, &no_rdma, &offer).unwrap();
        assert_eq!(choice.claim.unwrap().devices.unwrap().requests.unwrap().len(), 1);
        let none = DeviceRequest {
            gpus: Some(0),
            ..Default::default()
        };
        let mut choice = decide(&none, Some(&cpu_only), false);
        apply_dra(&mut choice, &none, &offer).unwrap();
        assert!(choice.claim.is_none());
    }
}
