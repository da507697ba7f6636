//! A serving recipe's role as a pod template, for bench pods of sides whose workers are not
//! running yet (`gate` before deployment): what `probe env` resolved for the role (every layer:
//! DGD envs, overlays, ConfigMaps, shell exports) written back as a `PodTemplateSpec`, which
//! [`TransportSpec::from_template`] then reads with the sanitizing a running pod gets (transport
//! env only, device resources only, capabilities, host namespaces, a memory /dev/shm). What a
//! template cannot carry is said in the notes. The names (GPU resources, `/dev/shm`) come from
//! `icb_core::fabric`, as for every other pod this crate builds.

use crate::pair::SideTemplates;
use crate::spec::TransportSpec;
use icb_core::fabric::resource::GpuVendor;
use icb_recipe::{ClaimSource, EnvValue, RoleEnv};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapKeySelector, Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodResourceClaim,
    PodSpec, PodTemplateSpec, ResourceClaim, ResourceFieldSelector, ResourceRequirements, SecretKeySelector,
    SecurityContext,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// The prefill and decode bench pod templates from the recipe roles that model them
/// (`icb_recipe::RecipeRoles::for_side` picks them).
pub fn side_templates(prefill: &RoleEnv, decode: &RoleEnv) -> SideTemplates {
    let spec = |r: &RoleEnv| {
        let source = format!("recipe {} {} ({})", r.sources.join("+"), r.role.as_str(), r.workload);
        let (template, notes) = from_role(r);
        let mut spec = TransportSpec::from_template(&template, &source);
        spec.not_copied.extend(notes);
        spec
    };
    SideTemplates {
        prefill: Some(spec(prefill)),
        decode: Some(spec(decode)),
    }
}

/// The role as a pod template, and what could not be written into one.
pub fn from_role(r: &RoleEnv) -> (PodTemplateSpec, Vec<String>) {
    let mut notes = Vec::new();
    let mut env = Vec::new();
    for v in &r.env {
        let (value, value_from) = match &v.value {
            EnvValue::Literal { value } => (Some(value.clone()), None),
            EnvValue::Secret { name, key } => (
                None,
                Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: name.clone(),
                        key: key.clone(),
                        optional: None,
                    }),
                    ..Default::default()
                }),
            ),
            EnvValue::ConfigMap { name, key } => (
                None,
                Some(EnvVarSource {
                    config_map_key_ref: Some(ConfigMapKeySelector {
                        name: name.clone(),
                        key: key.clone(),
                        optional: None,
                    }),
                    ..Default::default()
                }),
            ),
            EnvValue::Field { path } => match path.strip_prefix("resource:") {
                Some(resource) => (
                    None,
                    Some(EnvVarSource {
                        resource_field_ref: Some(ResourceFieldSelector {
                            resource: resource.to_string(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                ),
                None => (
                    None,
                    Some(EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            field_path: path.clone(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                ),
            },
            EnvValue::Computed { .. } | EnvValue::Derived { .. } | EnvValue::Unknown => {
                notes.push(format!(
                    "{} is computed when the worker starts ({}): not reproduced",
                    v.name, v.origin
                ));
                continue;
            }
        };
        env.push(EnvVar {
            name: v.name.clone(),
            value,
            value_from,
        });
    }
    for from in &r.env_from {
        notes.push(format!(
            "envFrom {} {} is not in the inputs: its variables are not copied",
            from.kind, from.name
        ));
    }
    let mut devices: BTreeMap<String, Quantity> = r
        .resources
        .rdma
        .iter()
        .map(|(k, v)| (k.clone(), Quantity(v.clone())))
        .collect();
    if let Some(gpus) = &r.resources.gpus {
        let accelerator = r.resources.accelerator.as_deref().unwrap_or("cuda");
        match GpuVendor::of_accelerator(accelerator).and_then(GpuVendor::resource_name) {
            Some(name) => {
                devices.insert(name.into(), Quantity(gpus.clone()));
            }
            None => notes.push(format!(
                "{gpus} {accelerator} GPU(s): the resource name is not known; pass --resource"
            )),
        }
    }
    let (pod_claims, container_claims) = engine_claims(r, &mut notes);
    if r.host_infiniband {
        notes.push("the hostPath /dev/infiniband mount is not copied".into());
    }
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    // Some(0): disabled; u64::MAX: no size limit; None: a size that did not parse.
    let shm_size = match &r.shm {
        None | Some((_, Some(0))) => None,
        Some((_, Some(u64::MAX))) => Some(None),
        Some((text, Some(_))) => Some(Some(Quantity(text.clone()))),
        Some((text, None)) => {
            notes.push(format!(
                "/dev/shm size '{text}' is not a quantity: copied without a limit"
            ));
            Some(None)
        }
    };
    if let Some(size_limit) = shm_size {
        let (volume, mount) = crate::podspec::dshm(size_limit);
        volumes.push(volume);
        mounts.push(mount);
    }
    let container = Container {
        name: if r.component.is_empty() {
            "engine".into()
        } else {
            r.component.to_ascii_lowercase()
        },
        image: r.image.clone(),
        env: (!env.is_empty()).then_some(env),
        resources: (!devices.is_empty() || !container_claims.is_empty()).then(|| ResourceRequirements {
            limits: (!devices.is_empty()).then(|| devices.clone()),
            requests: (!devices.is_empty()).then_some(devices),
            claims: (!container_claims.is_empty()).then_some(container_claims),
        }),
        security_context: Some(SecurityContext {
            privileged: r.privileged.then_some(true),
            capabilities: (!r.capabilities.is_empty()).then(|| Capabilities {
                add: Some(r.capabilities.clone()),
                drop: None,
            }),
            ..Default::default()
        }),
        volume_mounts: (!mounts.is_empty()).then_some(mounts),
        ..Default::default()
    };
    let spec = PodSpec {
        containers: vec![container],
        host_ipc: r.host_ipc.then_some(true),
        host_pid: r.host_pid.then_some(true),
        host_network: r.host_network.then_some(true),
        node_selector: (!r.placement.node_selector.is_empty()).then(|| r.placement.node_selector.clone()),
        volumes: (!volumes.is_empty()).then_some(volumes),
        resource_claims: (!pod_claims.is_empty()).then_some(pod_claims),
        ..Default::default()
    };
    (
        PodTemplateSpec {
            metadata: None,
            spec: Some(spec),
        },
        notes,
    )
}

/// The DRA claims the role's engine container uses, as the pod's entries and the container's
/// `resources.claims`: the same template (a fresh claim of the same devices) or the same shared
/// claim. A claim the pod does not define is said, not copied.
fn engine_claims(r: &RoleEnv, notes: &mut Vec<String>) -> (Vec<PodResourceClaim>, Vec<ResourceClaim>) {
    let mut pod = Vec::new();
    let mut container = Vec::new();
    for (name, source) in r.resources.engine_claims() {
        let (template, claim) = match source {
            Some(ClaimSource::Template(t)) => (Some(t), None),
            Some(ClaimSource::Claim(c)) => (None, Some(c)),
            None => {
                notes.push(format!(
                    "resource claim (DRA) {name} is not defined with a template or claim in the pod: not copied"
                ));
                continue;
            }
        };
        pod.push(PodResourceClaim {
            name: name.clone(),
            resource_claim_name: claim,
            resource_claim_template_name: template,
        });
        container.push(ResourceClaim { name, request: None });
    }
    (pod, container)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(yaml: &str) -> RoleEnv {
        let docs = icb_recipe::parse_bytes("t.yaml", yaml.as_bytes()).unwrap();
        icb_recipe::resolve(&docs).roles.remove(0)
    }

    #[test]
    fn what_a_template_cannot_carry_is_said() {
        let r = role(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      hostIPC: true
      nodeSelector: {pool: decode}
      containers:
      - name: engine
        image: sglang:1
        command: [sh, -c, "export UCX_NET_DEVICES=$(ls /sys/class/infiniband | head -1); exec python3 -m sglang.launch_server"]
        envFrom: [{configMapRef: {name: ucx-settings}}]
        env:
        - {name: UCX_TLS, value: "rc,sm"}
        - {name: UCX_IB_GID_INDEX, valueFrom: {configMapKeyRef: {name: net, key: gid}}}
        resources: {limits: {amd.com/gpu: "2", rdma/ib: "1"}}
        volumeMounts: [{name: shm, mountPath: /dev/shm}]
      volumes: [{name: shm, emptyDir: {medium: Memory}}]
"#,
        );
        let (t, notes) = from_role(&r);
        let spec = t.spec.unwrap();
        assert_eq!(spec.host_ipc, Some(true));
        assert_eq!(spec.node_selector.unwrap()["pool"], "decode");
        let c = &spec.containers[0];
        let env = c.env.clone().unwrap();
        assert_eq!(env[0].value.as_deref(), Some("rc,sm"));
        let gid = env.iter().find(|e| e.name == "UCX_IB_GID_INDEX").unwrap();
        assert_eq!(
            gid.value_from
                .as_ref()
                .unwrap()
                .config_map_key_ref
                .as_ref()
                .unwrap()
                .key,
            "gid"
        );
        let limits = c.resources.clone().unwrap().limits.unwrap();
        assert_eq!(limits["rdma/ib"].0, "1");
        assert_eq!(limits["amd.com/gpu"].0, "2", "{limits:?}");
        let shm = spec.volumes.unwrap()[0].empty_dir.clone().unwrap();
        assert_eq!(
            shm.size_limit, None,
            "a memory /dev/shm without a limit stays unlimited"
        );
        let notes = notes.join("\n");
        assert!(
            notes.contains("UCX_NET_DEVICES is computed when the worker starts"),
            "{notes}"
        );
        assert!(notes.contains("envFrom configMap ucx-settings"), "{notes}");
        // Through the same reader as a running pod: only transport variables survive.
        let one = PodSpec {
            containers: vec![c.clone()],
            ..Default::default()
        };
        let read = TransportSpec::from_template(
            &PodTemplateSpec {
                metadata: None,
                spec: Some(one),
            },
            "recipe t",
        );
        assert!(read.env.iter().all(|e| e.name.starts_with("UCX_")));
    }

    #[test]
    fn a_dra_workers_claims_are_copied_to_the_bench_pod() {
        let r = role(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: worker-gpu}
      - {name: nic, resourceClaimName: worker-nic}
      - {name: sidecar-only, resourceClaimTemplateName: other}
      containers:
      - name: engine
        image: vllm:1
        env: [{name: UCX_TLS, value: "rc,cuda_copy"}]
        resources: {claims: [{name: gpu}, {name: nic}, {name: undefined}]}
"#,
        );
        let (t, notes) = from_role(&r);
        let spec = t.spec.clone().unwrap();
        let pod_claims = spec.resource_claims.unwrap();
        let sources: Vec<_> = pod_claims
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.resource_claim_template_name.as_deref(),
                    c.resource_claim_name.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            sources,
            [("gpu", Some("worker-gpu"), None), ("nic", None, Some("worker-nic"))],
            "only the claims the engine uses, each from the same source"
        );
        let used: Vec<String> = spec.containers[0]
            .resources
            .clone()
            .unwrap()
            .claims
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(used, ["gpu", "nic"]);
        let notes = notes.join("\n");
        assert!(
            notes.contains("resource claim (DRA) undefined is not defined"),
            "{notes}"
        );
        assert!(!notes.contains("(DRA) gpu") && !notes.contains("(DRA) nic"), "{notes}");
        // Read back as a bench pod's model: the claims survive, and the report says so.
        let model = TransportSpec::from_template(&t, "recipe t decode");
        assert_eq!(model.resource_claims, pod_claims);
        assert_eq!(model.container_claims.len(), 2);
        let said = model.claims_note().unwrap();
        assert!(
            said.contains("gpu (a fresh claim from template worker-gpu)")
                && said.contains("nic (shares the claim worker-nic)"),
            "{said}"
        );
        let without = role(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: {spec: {containers: [{name: engine, image: x}]}}}\n",
        );
        let (t, _) = from_role(&without);
        assert!(t.spec.unwrap().resource_claims.is_none());
        assert!(
            TransportSpec::from_template(&from_role(&without).0, "x")
                .claims_note()
                .is_none()
        );
    }
}
