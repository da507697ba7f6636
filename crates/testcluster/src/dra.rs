//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as the emulated cluster's scheduler does it:
//! the devices a node's DRA drivers publish (one ResourceSlice per node and driver), the device
//! classes, the part of CEL the emulated scheduler evaluates, and the allocator that picks devices
//! for a claim on one node.
//!
//! CEL: a selector is `&&`-joined comparisons `device.driver == "D"` or
//! `device.attributes["DOMAIN"].NAME == VALUE` (a string, a whole number or a boolean). A
//! claim or class using anything else is refused when created (422), never silently ignored.
//! Constraints: `matchAttribute` (every device of the named requests has the same value of that
//! fully-qualified attribute, e.g. `resource.kubernetes.io/pcieRoot`) and `distinctAttribute`.
//! Requests: `exactly` with `ExactCount` (count, default 1) or `All`; `firstAvailable` is refused.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, DeviceClass, DeviceRequest, DeviceSelector, ResourceClaimSpec, ResourceSlice,
};

/// The standard attribute of a device's PCIe root complex (`resource.kubernetes.io/pcieRoot`).
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";

/// One device a node's DRA driver publishes.
#[derive(Debug, Clone, PartialEq)]
pub struct DraDevice {
    pub driver: String,
    pub name: String,
    /// Attribute name (short, in the driver's domain, or fully qualified) → value.
    pub attributes: BTreeMap<String, DeviceAttribute>,
}

impl DraDevice {
    pub fn new(driver: &str, name: &str) -> Self {
        DraDevice {
            driver: driver.to_string(),
            name: name.to_string(),
            attributes: BTreeMap::new(),
        }
    }

    pub fn string(mut self, attribute: &str, value: &str) -> Self {
        self.attributes.insert(
            attribute.to_string(),
            DeviceAttribute {
                string: Some(value.to_string()),
                ..Default::default()
            },
        );
        self
    }

    /// The value of a fully-qualified attribute (`DOMAIN/NAME`): stored under that name, or
    /// under `NAME` when DOMAIN is the device's driver (the API's short form).
    pub fn attribute(&self, qualified: &str) -> Option<&DeviceAttribute> {
        if let Some(v) = self.attributes.get(qualified) {
            return Some(v);
        }
        let (domain, name) = qualified.rsplit_once('/')?;
        (domain == self.driver).then(|| self.attributes.get(name)).flatten()
    }
}

/// The ResourceSlices of one node: one per driver, pool named after the node.
pub fn node_slices(node: &str, devices: &[DraDevice]) -> Vec<ResourceSlice> {
    let drivers: BTreeSet<&str> = devices.iter().map(|d| d.driver.as_str()).collect();
    drivers
        .into_iter()
        .map(|driver| {
            let mut slice = ResourceSlice::default();
            slice.metadata.name = Some(format!("{node}-{}", driver.replace(['.', '/'], "-")));
            slice.spec.driver = driver.to_string();
            slice.spec.node_name = Some(node.to_string());
            slice.spec.pool.name = node.to_string();
            slice.spec.pool.generation = 1;
            slice.spec.pool.resource_slice_count = 1;
            slice.spec.devices = Some(
                devices
                    .iter()
                    .filter(|d| d.driver == driver)
                    .map(|d| Device {
                        name: d.name.clone(),
                        attributes: Some(d.attributes.clone()),
                        ..Default::default()
                    })
                    .collect(),
            );
            slice
        })
        .collect()
}

/// A DeviceClass selecting every device of `driver`, named after it (as NVIDIA's GPU driver
/// installs `gpu.nvidia.com`).
pub fn driver_class(driver: &str) -> DeviceClass {
    let mut class = DeviceClass::default();
    class.metadata.name = Some(driver.to_string());
    class.spec = Some(k8s_openapi::api::resource::v1::DeviceClassSpec {
        selectors: Some(vec![DeviceSelector {
            cel: Some(k8s_openapi::api::resource::v1::CELDeviceSelector {
                expression: format!("device.driver == \"{driver}\""),
            }),
        }]),
        ..Default::default()
    });
    class
}

/// What keeps a claim from being accepted (at create time, 422) or allocated (the scheduler's
/// message), by kind: what the emulation does not evaluate, or what does not exist (yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error(
        "the emulated cluster evaluates only `device.driver == \"D\"` and `device.attributes[\"DOMAIN\"].NAME == VALUE` joined by &&, not {0:?}"
    )]
    UnsupportedCel(String),
    #[error("a device selector without cel")]
    NoCel,
    #[error("spec.devices.requests[{0}]: the emulated cluster supports `exactly` requests only (not firstAvailable)")]
    NotExactly(String),
    #[error("spec.devices.requests[{0}].exactly.deviceClassName: Required value")]
    NoClassName(String),
    #[error("spec.devices.requests[{request}].exactly.allocationMode: Unsupported value: {mode:?}")]
    UnsupportedMode { request: String, mode: String },
    #[error("spec.devices.requests[{request}].exactly.selectors: {source}")]
    Selectors { request: String, source: Box<ClaimError> },
    #[error("request {request}: device class {class} does not exist")]
    NoSuchClass { request: String, class: String },
    #[error("resourceclaim \"{0}\" not found")]
    NoSuchClaim(String),
    #[error("resourceclaimtemplate \"{0}\" not found")]
    NoSuchTemplate(String),
    #[error("pod claim {0} names neither a claim nor a template")]
    Unnamed(String),
}

/// One comparison of the supported CEL subset.
#[derive(Debug, Clone, PartialEq)]
enum Term {
    Driver(String),
    Attribute { qualified: String, value: DeviceAttribute },
}

/// A parsed selector: every term must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector(Vec<Term>);

impl Selector {
    /// Parses the supported subset of a CEL device selector; `Err` says what is not supported.
    pub fn parse(expression: &str) -> Result<Selector, ClaimError> {
        let unsupported = || ClaimError::UnsupportedCel(expression.to_string());
        let mut terms = Vec::new();
        // CEL quotes strings either way; values with quotes inside are not supported anyway.
        let expression = expression.replace('\'', "\"");
        for part in expression.split("&&") {
            let (left, right) = part.split_once("==").ok_or_else(unsupported)?;
            let (left, right) = (left.trim(), right.trim());
            if left == "device.driver" {
                terms.push(Term::Driver(quoted(right).ok_or_else(unsupported)?));
                continue;
            }
            let rest = left.strip_prefix("device.attributes[\"").ok_or_else(unsupported)?;
            let (domain, name) = rest.split_once("\"].").ok_or_else(unsupported)?;
            if domain.is_empty() || name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(unsupported());
            }
            let value = match (quoted(right), right) {
                (Some(s), _) => DeviceAttribute {
                    string: Some(s),
                    ..Default::default()
                },
                (None, "true" | "false") => DeviceAttribute {
                    bool: Some(right == "true"),
                    ..Default::default()
                },
                (None, n) => DeviceAttribute {
                    int: Some(n.parse().map_err(|_| unsupported())?),
                    ..Default::default()
                },
            };
            terms.push(Term::Attribute {
                qualified: format!("{domain}/{name}"),
                value,
            });
        }
        Ok(Selector(terms))
    }

    pub fn matches(&self, device: &DraDevice) -> bool {
        self.0.iter().all(|t| match t {
            Term::Driver(d) => device.driver == *d,
            Term::Attribute { qualified, value } => device.attribute(qualified) == Some(value),
        })
    }
}

fn quoted(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('"')).then(|| inner.to_string())
}

fn parse_selectors(selectors: Option<&Vec<DeviceSelector>>) -> Result<Vec<Selector>, ClaimError> {
    selectors
        .into_iter()
        .flatten()
        .map(|s| match &s.cel {
            Some(cel) => Selector::parse(&cel.expression),
            None => Err(ClaimError::NoCel),
        })
        .collect()
}

/// Checks that a claim spec uses only what the emulated scheduler evaluates (at create time).
pub fn validate_spec(spec: &ResourceClaimSpec) -> Result<(), ClaimError> {
    let Some(devices) = &spec.devices else { return Ok(()) };
    for request in devices.requests.iter().flatten() {
        let Some(exact) = &request.exactly else {
            return Err(ClaimError::NotExactly(request.name.clone()));
        };
        if exact.device_class_name.is_empty() {
            return Err(ClaimError::NoClassName(request.name.clone()));
        }
        match exact.allocation_mode.as_deref() {
            None | Some("ExactCount") | Some("All") => {}
            Some(other) => {
                return Err(ClaimError::UnsupportedMode {
                    request: request.name.clone(),
                    mode: other.to_string(),
                });
            }
        }
        parse_selectors(exact.selectors.as_ref()).map_err(|e| ClaimError::Selectors {
            request: request.name.clone(),
            source: Box::new(e),
        })?;
    }
    Ok(())
}

/// One request made ready to match: its name, selectors (class's and its own), how many.
struct Wanted {
    name: String,
    selectors: Vec<Selector>,
    /// `None`: all matching devices.
    count: Option<usize>,
}

fn wanted(request: &DeviceRequest, classes: &BTreeMap<String, DeviceClass>) -> Result<Wanted, ClaimError> {
    let exact = request
        .exactly
        .as_ref()
        .ok_or_else(|| ClaimError::NotExactly(request.name.clone()))?;
    let class = classes
        .get(&exact.device_class_name)
        .ok_or_else(|| ClaimError::NoSuchClass {
            request: request.name.clone(),
            class: exact.device_class_name.clone(),
        })?;
    let mut selectors = parse_selectors(class.spec.as_ref().and_then(|s| s.selectors.as_ref()))?;
    selectors.extend(parse_selectors(exact.selectors.as_ref())?);
    let count = match exact.allocation_mode.as_deref() {
        Some("All") => None,
        _ => Some(exact.count.unwrap_or(1).max(0) as usize),
    };
    Ok(Wanted {
        name: request.name.clone(),
        selectors,
        count,
    })
}

/// One allocated device: (request name, device index into the node's devices).
pub type Pick = (String, usize);

/// Devices of `node_devices` (minus `taken`) that satisfy every request and constraint of
/// `spec`, or `None`. A small backtracking search: nodes have tens of devices.
pub fn allocate(
    spec: &ResourceClaimSpec,
    node_devices: &[DraDevice],
    taken: &BTreeSet<usize>,
    classes: &BTreeMap<String, DeviceClass>,
) -> Result<Option<Vec<Pick>>, ClaimError> {
    let Some(claim) = &spec.devices else {
        return Ok(Some(Vec::new()));
    };
    let requests: Vec<Wanted> = claim
        .requests
        .iter()
        .flatten()
        .map(|r| wanted(r, classes))
        .collect::<Result<_, _>>()?;
    let constraints = claim.constraints.clone().unwrap_or_default();
    let free: Vec<usize> = (0..node_devices.len()).filter(|i| !taken.contains(i)).collect();
    // Each request's slots: `All` takes every matching free device, so it has exactly one choice.
    let mut slots: Vec<(usize, Vec<usize>)> = Vec::new();
    for (r, want) in requests.iter().enumerate() {
        let candidates: Vec<usize> = free
            .iter()
            .copied()
            .filter(|&i| want.selectors.iter().all(|s| s.matches(&node_devices[i])))
            .collect();
        match want.count {
            None if candidates.is_empty() => return Ok(None),
            None => candidates.iter().for_each(|&c| slots.push((r, vec![c]))),
            Some(n) => (0..n).for_each(|_| slots.push((r, candidates.clone()))),
        }
    }
    let mut chosen: Vec<(usize, usize)> = Vec::new();
    let consistent = |chosen: &[(usize, usize)]| {
        constraints.iter().all(|c| {
            let applies = |r: usize| {
                c.requests
                    .as_ref()
                    .is_none_or(|names| names.iter().any(|n| *n == requests[r].name))
            };
            let values = chosen.iter().filter(|(r, _)| applies(*r)).map(|(_, d)| {
                c.match_attribute
                    .as_deref()
                    .or(c.distinct_attribute.as_deref())
                    .and_then(|a| node_devices[*d].attribute(a))
            });
            let values: Vec<Option<&DeviceAttribute>> = values.collect();
            if c.match_attribute.is_some() {
                values.iter().all(|v| v.is_some() && *v == values[0])
            } else if c.distinct_attribute.is_some() {
                values.iter().all(Option::is_some) && values.iter().enumerate().all(|(i, v)| !values[..i].contains(v))
            } else {
                true
            }
        })
    };
    if search(&slots, &mut chosen, &consistent) {
        Ok(Some(
            chosen.into_iter().map(|(r, d)| (requests[r].name.clone(), d)).collect(),
        ))
    } else {
        Ok(None)
    }
}

/// (request index, device index) picks so far.
type Chosen = [(usize, usize)];

fn search(
    slots: &[(usize, Vec<usize>)],
    chosen: &mut Vec<(usize, usize)>,
    consistent: &dyn Fn(&Chosen) -> bool,
) -> bool {
    let Some((request, candidates)) = slots.get(chosen.len()) else {
        return true;
    };
    for &device in candidates {
        if chosen.iter().any(|(_, d)| *d == device) {
            continue;
        }
        chosen.push((*request, device));
        if consistent(chosen) && search(slots, chosen, consistent) {
            return true;
        }
        chosen.pop();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{DeviceClaim, DeviceConstraint, ExactDeviceRequest};

    fn node() -> Vec<DraDevice> {
        // gpu-0 and nic-1 share root 0; gpu-1 and nic-0 share root 1.
        vec![
            DraDevice::new("gpu.nvidia.com", "gpu-0").string(PCIE_ROOT, "pci0000:00"),
            DraDevice::new("gpu.nvidia.com", "gpu-1").string(PCIE_ROOT, "pci0000:01"),
            DraDevice::new("dra.net", "nic-0").string(PCIE_ROOT, "pci0000:01"),
            DraDevice::new("dra.net", "nic-1").string(PCIE_ROOT, "pci0000:00"),
        ]
    }

    fn classes() -> BTreeMap<String, DeviceClass> {
        ["gpu.nvidia.com", "dra.net"]
            .map(|d| (d.to_string(), driver_class(d)))
            .into()
    }

    fn request(name: &str, class: &str, selector: Option<&str>) -> DeviceRequest {
        DeviceRequest {
            name: name.into(),
            exactly: Some(ExactDeviceRequest {
                device_class_name: class.into(),
                selectors: selector.map(|s| {
                    vec![DeviceSelector {
                        cel: Some(k8s_openapi::api::resource::v1::CELDeviceSelector { expression: s.into() }),
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn rail_claim() -> ResourceClaimSpec {
        ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![
                    request("gpu", "gpu.nvidia.com", None),
                    request("nic", "dra.net", None),
                ]),
                constraints: Some(vec![DeviceConstraint {
                    match_attribute: Some(PCIE_ROOT.into()),
                    requests: Some(vec!["gpu".into(), "nic".into()]),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_gpu_and_its_rail_nic_share_a_pcie_root() {
        let devices = node();
        let got = allocate(&rail_claim(), &devices, &BTreeSet::new(), &classes())
            .unwrap()
            .unwrap();
        let names: Vec<&str> = got.iter().map(|(_, d)| devices[*d].name.as_str()).collect();
        assert_eq!(names, ["gpu-0", "nic-1"], "nic-0 is on another root");
        // gpu-0 taken: gpu-1 with nic-0.
        let got = allocate(&rail_claim(), &devices, &[0].into(), &classes())
            .unwrap()
            .unwrap();
        let names: Vec<&str> = got.iter().map(|(_, d)| devices[*d].name.as_str()).collect();
        assert_eq!(names, ["gpu-1", "nic-0"]);
        // gpu-0 and nic-0 taken: gpu-1's rail NIC is gone, and nic-1 is on another root.
        assert_eq!(
            allocate(&rail_claim(), &devices, &[0, 2].into(), &classes()).unwrap(),
            None
        );
    }

    #[test]
    fn selectors_match_attributes_exactly_and_refuse_what_they_cannot_evaluate() {
        let devices = node();
        let spec = ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![request(
                    "gpu",
                    "gpu.nvidia.com",
                    Some("device.attributes[\"resource.kubernetes.io\"].pcieRoot == \"pci0000:01\""),
                )]),
                ..Default::default()
            }),
        };
        let got = allocate(&spec, &devices, &BTreeSet::new(), &classes())
            .unwrap()
            .unwrap();
        assert_eq!(devices[got[0].1].name, "gpu-1");
        assert!(Selector::parse("device.attributes[\"x\"].y > 3").is_err());
        assert!(Selector::parse("device.driver == \"a\" && device.attributes[\"a\"].n == 3").is_ok());
        let single = Selector::parse(
            "device.driver == 'gpu.nvidia.com' && device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:01'",
        )
        .unwrap();
        assert!(
            single.matches(&devices[1]) && !single.matches(&devices[0]),
            "CEL's single quotes"
        );
        let mut bad = spec.clone();
        bad.devices.as_mut().unwrap().requests.as_mut().unwrap()[0] = request(
            "gpu",
            "gpu.nvidia.com",
            Some("device.capacity[\"x\"].memory.compareTo(quantity(\"1Gi\")) >= 0"),
        );
        let e = validate_spec(&bad).unwrap_err();
        assert!(
            matches!(&e, ClaimError::Selectors { source, .. } if matches!(**source, ClaimError::UnsupportedCel(_))),
            "{e}"
        );
        assert!(e.to_string().contains("evaluates only"), "{e}");
        let missing_class = ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![request("gpu", "nope", None)]),
                ..Default::default()
            }),
        };
        assert_eq!(
            allocate(&missing_class, &devices, &BTreeSet::new(), &classes()),
            Err(ClaimError::NoSuchClass {
                request: "gpu".into(),
                class: "nope".into()
            })
        );
    }

    #[test]
    fn all_takes_every_matching_device_and_slices_are_per_driver() {
        let devices = node();
        let mut spec = rail_claim();
        let claim = spec.devices.as_mut().unwrap();
        claim.constraints = None;
        for r in claim.requests.as_mut().unwrap() {
            r.exactly.as_mut().unwrap().allocation_mode = Some("All".into());
        }
        let got = allocate(&spec, &devices, &BTreeSet::new(), &classes())
            .unwrap()
            .unwrap();
        assert_eq!(got.len(), 4);
        let slices = node_slices("n1", &devices);
        assert_eq!(slices.len(), 2);
        assert_eq!(slices[0].spec.driver, "dra.net");
        assert_eq!(slices[0].spec.pool.name, "n1");
    }
}
