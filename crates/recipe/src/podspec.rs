//! Reads the Kubernetes pieces every recipe shape shares: env lists (list or map form),
//! `envFrom`, containers, pod specs, resources, security contexts and /dev/shm volumes.

use crate::engine;
use crate::model::{EnvFrom, EnvValue, EnvVar, RoleEnv};
use crate::yaml::{Kind, Node};
use icb_core::fabric::shm;

/// Describes a layer for `origin`: `spec.envs (deploy.yaml:12)`.
pub(crate) fn origin(layer: &str, source: &str, node: &Node) -> String {
    format!("{layer} ({source}:{})", node.line)
}

fn is_delete_directive(node: &Node) -> bool {
    node.str_at("$patch").is_some_and(|p| p.eq_ignore_ascii_case("delete"))
}

/// Applies an env block: a Kubernetes list (`- name: X` items, any key order) or a
/// provider-overlay map (`X: value`). Later entries win; `$patch: delete` removes.
pub(crate) fn apply_env(role: &mut RoleEnv, env: &Node, layer: &str, source: &str) {
    match &env.kind {
        Kind::Seq(_) => {
            for item in env.as_seq() {
                let Some(name) = item.str_at("name").filter(|n| !n.is_empty()) else {
                    continue;
                };
                if is_delete_directive(item) {
                    role.delete_var(name);
                    continue;
                }
                let value = match item.get("valueFrom") {
                    Some(vf) if vf.is_map() => value_from(vf),
                    _ => EnvValue::Literal {
                        value: item.str_at("value").unwrap_or_default().to_string(),
                    },
                };
                role.set_var(EnvVar {
                    name: name.to_string(),
                    value,
                    origin: origin(layer, source, item),
                    from_secret: false,
                });
            }
        }
        Kind::Map(_) => {
            for (name, v) in env.as_map() {
                if name.is_empty() || name.starts_with('$') {
                    continue;
                }
                if is_delete_directive(v) {
                    role.delete_var(name);
                    continue;
                }
                let value = match &v.kind {
                    Kind::Scalar(s) => EnvValue::Literal { value: s.clone() },
                    Kind::Null => EnvValue::Literal { value: String::new() },
                    Kind::Map(_) => match v.get("valueFrom") {
                        Some(vf) => value_from(vf),
                        None if v.get("value").is_some() => EnvValue::Literal {
                            value: v.str_at("value").unwrap_or_default().to_string(),
                        },
                        None => value_from(v),
                    },
                    Kind::Seq(_) => EnvValue::Unknown,
                };
                role.set_var(EnvVar {
                    name: name.clone(),
                    value,
                    origin: origin(layer, source, v),
                    from_secret: false,
                });
            }
        }
        _ => {}
    }
}

fn value_from(vf: &Node) -> EnvValue {
    let key_ref = |n: &Node| {
        (
            n.str_at("name").unwrap_or("?").to_string(),
            n.str_at("key").unwrap_or("?").to_string(),
        )
    };
    if let Some(s) = vf.get("secretKeyRef") {
        let (name, key) = key_ref(s);
        EnvValue::Secret { name, key }
    } else if let Some(c) = vf.get("configMapKeyRef") {
        let (name, key) = key_ref(c);
        EnvValue::ConfigMap { name, key }
    } else if let Some(f) = vf.get("fieldRef") {
        EnvValue::Field {
            path: f.str_at("fieldPath").unwrap_or("?").to_string(),
        }
    } else if let Some(r) = vf.get("resourceFieldRef") {
        EnvValue::Field {
            path: format!("resource:{}", r.str_at("resource").unwrap_or("?")),
        }
    } else {
        EnvValue::Unknown
    }
}

pub(crate) fn apply_env_from(role: &mut RoleEnv, list: &Node, layer: &str, source: &str) {
    for item in list.as_seq() {
        for (key, kind) in [("secretRef", "secret"), ("configMapRef", "configMap")] {
            if let Some(r) = item.get(key) {
                role.env_from.push(EnvFrom {
                    kind: kind.to_string(),
                    name: r.str_at("name").unwrap_or("?").to_string(),
                    origin: origin(layer, source, item),
                });
            }
        }
    }
}

/// GPU and RDMA NIC resource names, as the fabric vocabulary classifies them (the same the pair
/// spec cloner uses, so `probe env` and `pair` agree on a pod).
pub use icb_core::fabric::{is_gpu_resource, is_rdma_resource};

/// The accelerator family a device resource requests: `cuda` (NVIDIA), `rocm` (AMD), `xpu`
/// (Intel). Each has its own UCX GPU-memory transports (cuda_*, rocm_*, ze_*).
pub(crate) fn accelerator_of(name: &str) -> Option<&'static str> {
    use icb_core::fabric::{GpuVendor, ResourceClass, resource_class};
    match resource_class(name) {
        ResourceClass::Gpu {
            vendor: GpuVendor::Nvidia,
        } => Some("cuda"),
        ResourceClass::Gpu { vendor: GpuVendor::Amd } => Some("rocm"),
        ResourceClass::Gpu {
            vendor: GpuVendor::Intel,
        } => Some("xpu"),
        _ => None,
    }
}

/// Records GPU and RDMA requests from a `{limits, requests}` block. DGD blocks keep extended
/// resources under `custom`; plain Kubernetes puts them at the top level. Limits win.
pub(crate) fn apply_resources(role: &mut RoleEnv, res: &Node) {
    for section in ["requests", "limits"] {
        let Some(block) = res.get(section) else { continue };
        let mut entries: Vec<(&str, &Node)> = block.as_map().iter().map(|(k, v)| (k.as_str(), v)).collect();
        if let Some(custom) = block.get("custom") {
            entries.extend(custom.as_map().iter().map(|(k, v)| (k.as_str(), v)));
        }
        for (name, value) in entries {
            let Some(count) = value.as_str() else { continue };
            if let Some(accel) = accelerator_of(name) {
                role.resources.gpus = Some(count.trim().to_string());
                role.resources.accelerator = Some(accel.to_string());
            } else if is_rdma_resource(name) && count.trim() != "0" {
                role.resources.rdma.insert(name.to_string(), count.trim().to_string());
            }
        }
    }
    for claim in res.get("claims").map(Node::as_seq).unwrap_or_default() {
        if let Some(name) = claim.str_at("name") {
            push_unique(&mut role.resources.claims, name);
            push_unique(&mut role.resources.container_claims, name);
        }
    }
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|x| x == item) {
        list.push(item.to_string());
    }
}

pub(crate) fn apply_security_context(role: &mut RoleEnv, sc: &Node) {
    if let Some(p) = sc.get("privileged") {
        role.privileged = p.is_true();
    }
    for cap in sc.path(&["capabilities", "add"]).map(Node::as_seq).unwrap_or_default() {
        if let Some(c) = cap.as_str() {
            push_unique(&mut role.capabilities, c.trim());
        }
    }
    // Provider overlays write `capabilities: [IPC_LOCK]` without `add`.
    for cap in sc.get("capabilities").map(Node::as_seq).unwrap_or_default() {
        if let Some(c) = cap.as_str() {
            push_unique(&mut role.capabilities, c.trim());
        }
    }
}

/// Applies one container: env, envFrom, resources, securityContext, image and engine args.
/// Returns its volume mounts as (volume name, mount path).
pub(crate) fn apply_container(role: &mut RoleEnv, c: &Node, layer: &str, source: &str) -> Vec<(String, String)> {
    if let Some(from) = c.get("envFrom") {
        apply_env_from(role, from, &format!("{layer}.envFrom"), source);
    }
    if let Some(env) = c.get("env") {
        apply_env(role, env, &format!("{layer}.env"), source);
    }
    if let Some(res) = c.get("resources") {
        apply_resources(role, res);
    }
    if let Some(sc) = c.get("securityContext") {
        apply_security_context(role, sc);
    }
    if let Some(image) = c.str_at("image").filter(|i| !i.is_empty()) {
        role.image = Some(image.to_string());
    }
    let mut words: Vec<String> = Vec::new();
    for key in ["command", "args"] {
        match c.get(key).map(|n| &n.kind) {
            Some(Kind::Seq(_)) => words.extend(
                c.get(key)
                    .map(Node::as_seq)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(Node::as_str)
                    .map(str::to_string),
            ),
            Some(Kind::Scalar(s)) => words.push(s.clone()),
            _ => {}
        }
    }
    if !words.is_empty() {
        engine::read_args(&mut role.engine, &words);
        for v in crate::shell::shell_vars(&words) {
            let how = if v.exported { "export" } else { "inline assignment" };
            let value = if v.computed() {
                EnvValue::Computed {
                    script: v.value.clone(),
                }
            } else {
                EnvValue::Literal { value: v.value.clone() }
            };
            role.shell_env.retain(|e| e.name != v.name);
            role.shell_env.push(EnvVar {
                name: v.name,
                value,
                origin: origin(&format!("{layer}.command ({how})"), source, c),
                from_secret: false,
            });
        }
    }
    c.get("volumeMounts")
        .map(Node::as_seq)
        .unwrap_or_default()
        .iter()
        .filter_map(|m| {
            Some((
                m.str_at("name")?.to_string(),
                m.str_at("mountPath")?.trim_end_matches('/').to_string(),
            ))
        })
        .collect()
}

/// The engine container of a pod: `main` by name, else the first asking for GPUs, else the first.
pub(crate) fn main_container(containers: &[Node]) -> Option<&Node> {
    containers
        .iter()
        .find(|c| c.str_at("name") == Some("main"))
        .or_else(|| {
            containers.iter().find(|c| {
                ["limits", "requests"].iter().any(|s| {
                    c.path(&["resources", s])
                        .is_some_and(|b| b.as_map().iter().any(|(k, _)| is_gpu_resource(k)))
                })
            })
        })
        .or_else(|| containers.first())
}

/// Applies pod-level fields: host namespaces, placement, claims and /dev/shm volumes. The
/// caller applies the main container first and passes the volumes it mounts at /dev/shm.
pub(crate) fn apply_pod_fields(role: &mut RoleEnv, spec: &Node, mounts: &[(String, String)], layer: &str) {
    for (key, flag) in [("hostIPC", 0), ("hostPID", 1), ("hostNetwork", 2)] {
        if let Some(v) = spec.get(key) {
            let on = v.is_true();
            match flag {
                0 => role.host_ipc = on,
                1 => role.host_pid = on,
                _ => role.host_network = on,
            }
        }
    }
    for (k, v) in spec.get("nodeSelector").map(Node::as_map).unwrap_or_default() {
        if let Some(v) = v.as_str() {
            role.placement.node_selector.insert(k.clone(), v.to_string());
        }
    }
    let terms = spec
        .path(&[
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        ])
        .map(Node::as_seq)
        .unwrap_or_default();
    for term in terms {
        for expr in term.get("matchExpressions").map(Node::as_seq).unwrap_or_default() {
            let mut values: Vec<&str> = expr
                .get("values")
                .map(Node::as_seq)
                .unwrap_or_default()
                .iter()
                .filter_map(Node::as_str)
                .collect();
            values.sort();
            let rendered = format!(
                "{} {} [{}]",
                expr.str_at("key").unwrap_or("?"),
                expr.str_at("operator").unwrap_or("?"),
                values.join(",")
            );
            if !role.placement.affinity.contains(&rendered) {
                role.placement.affinity.push(rendered);
            }
        }
    }
    // Required pod affinity ties the pod to where its peers run (same node or same block):
    // that pins prefill and decode together as firmly as a node selector does.
    for term in spec
        .path(&[
            "affinity",
            "podAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
        ])
        .map(Node::as_seq)
        .unwrap_or_default()
    {
        let mut labels: Vec<String> = term
            .path(&["labelSelector", "matchLabels"])
            .map(Node::as_map)
            .unwrap_or_default()
            .iter()
            .filter_map(|(k, v)| Some(format!("{k}={}", v.as_str()?)))
            .collect();
        for expr in term
            .path(&["labelSelector", "matchExpressions"])
            .map(Node::as_seq)
            .unwrap_or_default()
        {
            let values: Vec<&str> = expr
                .get("values")
                .map(Node::as_seq)
                .unwrap_or_default()
                .iter()
                .filter_map(Node::as_str)
                .collect();
            labels.push(format!(
                "{} {} [{}]",
                expr.str_at("key").unwrap_or("?"),
                expr.str_at("operator").unwrap_or("?"),
                values.join(",")
            ));
        }
        labels.sort();
        let rendered = format!(
            "podAffinity {} with pods {}",
            term.str_at("topologyKey").unwrap_or("?"),
            labels.join(",")
        );
        if !role.placement.pod_affinity.contains(&rendered) {
            role.placement.pod_affinity.push(rendered);
        }
    }
    role.placement.affinity.sort();
    for claim in spec.get("resourceClaims").map(Node::as_seq).unwrap_or_default() {
        if let Some(name) = claim.str_at("name") {
            push_unique(&mut role.resources.claims, name);
            push_unique(&mut role.resources.pod_claims, name);
        }
        let template = claim.str_at("resourceClaimTemplateName").or_else(|| {
            claim
                .path(&["source", "resourceClaimTemplateName"])
                .and_then(Node::as_str)
        });
        if let (Some(t), Some(name)) = (template, claim.str_at("name")) {
            push_unique(&mut role.resources.claim_templates, t);
            role.resources.template_of.insert(name.to_string(), t.to_string());
        }
    }
    for vol in spec.get("volumes").map(Node::as_seq).unwrap_or_default() {
        let Some(name) = vol.str_at("name") else { continue };
        let mounted_at = |path: &str| mounts.iter().any(|(n, p)| n == name && p == path);
        let host_path = vol
            .path(&["hostPath", "path"])
            .and_then(Node::as_str)
            .map(|p| p.trim_end_matches('/'));
        if host_path == Some("/dev/infiniband") && mounts.iter().any(|(n, _)| n == name) {
            role.host_infiniband = true;
        }
        let Some(ed) = vol.get("emptyDir") else { continue };
        if shm::is_memory_medium(ed.str_at("medium")) && mounted_at(shm::DEV_SHM) {
            let text = ed.str_at("sizeLimit").unwrap_or("unlimited (pod memory)").to_string();
            let bytes = ed.str_at("sizeLimit").and_then(parse_quantity);
            role.shm = Some((text, bytes.or(Some(u64::MAX))));
            role.shm_origin = Some(format!("{layer} emptyDir {name} (medium: Memory)"));
        }
    }
}

/// Applies a whole pod spec (main container + pod fields).
pub(crate) fn apply_pod_spec(role: &mut RoleEnv, spec: &Node, layer: &str, source: &str) {
    let containers = spec.get("containers").map(Node::as_seq).unwrap_or_default();
    let mounts = match main_container(containers) {
        Some(c) => {
            let name = c.str_at("name").unwrap_or("container");
            apply_container(role, c, &format!("{layer}.containers[{name}]"), source)
        }
        None => Vec::new(),
    };
    apply_pod_fields(role, spec, &mounts, layer);
}

/// Kubernetes quantity (`16Gi`, `80G`, `512Mi`, `1e9`) in bytes.
pub use icb_core::fabric::quantity::parse_bytes as parse_quantity;
