//! One function per control of the standards. Each returns the violation as the admission plugin
//! words it (`reason`, `detail`), or nothing. Restricted replaces three baseline controls with
//! stricter ones (capabilities, seccomp, hostPath → volume types), as the plugin does.

use crate::policy::Level;
use k8s_openapi::api::core::v1::{
    Capabilities, ContainerPort, PodSecurityContext, PodSpec, SELinuxOptions, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// One failed control.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub reason: String,
    pub detail: String,
}

fn violation(reason: &str, detail: impl Into<String>) -> Option<Violation> {
    Some(Violation {
        reason: reason.into(),
        detail: detail.into(),
    })
}

/// What the controls read of one container (init, regular or ephemeral).
struct C<'a> {
    name: &'a str,
    sc: Option<&'a SecurityContext>,
    ports: &'a [ContainerPort],
}

fn containers(spec: &PodSpec) -> Vec<C<'_>> {
    let regular = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c| C {
            name: &c.name,
            sc: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
        });
    let ephemeral = spec.ephemeral_containers.iter().flatten().map(|c| C {
        name: &c.name,
        sc: c.security_context.as_ref(),
        ports: c.ports.as_deref().unwrap_or_default(),
    });
    regular.chain(ephemeral).collect()
}

/// `container "a"` or `containers "a", "b"`.
fn named(what: &str, names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    let plural = if names.len() == 1 { "" } else { "s" };
    format!("{what}{plural} {}", quoted.join(", "))
}

fn quoted(items: &[String]) -> String {
    items.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(", ")
}

/// The violations of `level` (empty: the pod is allowed). `privileged` allows everything. The
/// controls run in the order of the admission plugin's check IDs, so the message lists them as a
/// real server does.
pub fn evaluate(level: Level, meta: &ObjectMeta, spec: &PodSpec) -> Vec<Violation> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let cs = containers(spec);
    let pod_sc = spec.security_context.as_ref();
    let restricted = level == Level::Restricted;
    // (check ID, applies at this level, result); restricted replaces three baseline controls.
    let all = [
        ("allowPrivilegeEscalation", restricted, privilege_escalation(&cs)),
        ("appArmorProfile", true, app_armor(meta, pod_sc, &cs)),
        ("capabilities_baseline", !restricted, capabilities_baseline(&cs)),
        ("capabilities_restricted", restricted, capabilities_restricted(&cs)),
        ("hostNamespaces", true, host_namespaces(spec)),
        ("hostPathVolumes", !restricted, host_path_volumes(spec)),
        ("hostPorts", true, host_ports(&cs)),
        ("privileged", true, privileged(&cs)),
        ("procMount", true, proc_mount(&cs)),
        ("restrictedVolumes", restricted, volume_types(spec)),
        ("runAsNonRoot", restricted, run_as_non_root(pod_sc, &cs)),
        ("runAsUser", restricted, run_as_user(pod_sc, &cs)),
        ("seLinuxOptions", true, se_linux(pod_sc, &cs)),
        ("seccompProfile_baseline", !restricted, seccomp_baseline(pod_sc, &cs)),
        ("seccompProfile_restricted", restricted, seccomp_restricted(pod_sc, &cs)),
        ("sysctls", true, sysctls(pod_sc)),
    ];
    all.into_iter()
        .filter(|(_, applies, _)| *applies)
        .filter_map(|(_, _, v)| v)
        .collect()
}

/// The most closed level the pod meets.
pub fn required_level(meta: &ObjectMeta, spec: &PodSpec) -> Level {
    [Level::Restricted, Level::Baseline]
        .into_iter()
        .find(|l| evaluate(*l, meta, spec).is_empty())
        .unwrap_or(Level::Privileged)
}

fn host_namespaces(spec: &PodSpec) -> Option<Violation> {
    let set: Vec<&str> = [
        (spec.host_network, "hostNetwork=true"),
        (spec.host_pid, "hostPID=true"),
        (spec.host_ipc, "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(v, _)| *v == Some(true))
    .map(|(_, s)| s)
    .collect();
    (!set.is_empty())
        .then(|| violation("host namespaces", set.join(", ")))
        .flatten()
}

fn privileged(cs: &[C]) -> Option<Violation> {
    let bad: Vec<&str> = cs
        .iter()
        .filter(|c| c.sc.and_then(|s| s.privileged) == Some(true))
        .map(|c| c.name)
        .collect();
    (!bad.is_empty())
        .then(|| {
            violation(
                "privileged",
                format!(
                    "{} must not set securityContext.privileged=true",
                    named("container", &bad)
                ),
            )
        })
        .flatten()
}

/// What baseline lets a container add (the runtime's default set, less NET_RAW).
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn caps<'a>(c: &C<'a>) -> Option<&'a Capabilities> {
    c.sc.and_then(|s| s.capabilities.as_ref())
}

/// Containers adding something outside `allowed`, and every such capability.
fn added_outside(cs: &[C], allowed: &[&str]) -> (Vec<String>, Vec<String>) {
    let (mut names, mut added) = (Vec::new(), Vec::new());
    for c in cs {
        let bad: Vec<&String> = caps(c)
            .and_then(|k| k.add.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| !allowed.contains(&a.as_str()))
            .collect();
        if !bad.is_empty() {
            names.push(c.name.to_string());
        }
        for b in bad {
            if !added.contains(b) {
                added.push(b.clone());
            }
        }
    }
    (names, added)
}

fn capabilities_baseline(cs: &[C]) -> Option<Violation> {
    let (names, added) = added_outside(cs, BASELINE_CAPABILITIES);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    (!names.is_empty())
        .then(|| {
            violation(
                "non-default capabilities",
                format!(
                    "{} must not include {} in securityContext.capabilities.add",
                    named("container", &names),
                    quoted(&added)
                ),
            )
        })
        .flatten()
}

fn capabilities_restricted(cs: &[C]) -> Option<Violation> {
    let no_drop: Vec<&str> = cs
        .iter()
        .filter(|c| {
            !caps(c)
                .and_then(|k| k.drop.as_ref())
                .is_some_and(|d| d.iter().any(|x| x == "ALL"))
        })
        .map(|c| c.name)
        .collect();
    let (names, added) = added_outside(cs, &["NET_BIND_SERVICE"]);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut parts = Vec::new();
    if !no_drop.is_empty() {
        parts.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            named("container", &no_drop)
        ));
    }
    if !names.is_empty() {
        parts.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            named("container", &names),
            quoted(&added)
        ));
    }
    (!parts.is_empty())
        .then(|| violation("unrestricted capabilities", parts.join("; ")))
        .flatten()
}

/// Each volume's type: the one field set besides its name.
fn volume_types(spec: &PodSpec) -> Option<Violation> {
    const ALLOWED: &[&str] = &[
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    ];
    let (mut names, mut types) = (Vec::new(), Vec::new());
    for v in spec.volumes.iter().flatten() {
        let json = serde_json::to_value(v).unwrap_or_default();
        let kind = json
            .as_object()
            .and_then(|m| m.keys().find(|k| *k != "name").cloned())
            .unwrap_or_else(|| "unknown".into());
        if !ALLOWED.contains(&kind.as_str()) {
            names.push(v.name.as_str());
            if !types.contains(&kind) {
                types.push(kind);
            }
        }
    }
    if names.is_empty() {
        return None;
    }
    let (verb, noun) = if names.len() == 1 {
        ("uses", "type")
    } else {
        ("use", "types")
    };
    violation(
        "restricted volume types",
        format!(
            "{} {verb} restricted volume {noun} {}",
            named("volume", &names),
            quoted(&types)
        ),
    )
}

fn host_path_volumes(spec: &PodSpec) -> Option<Violation> {
    let bad: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.host_path.is_some())
        .map(|v| v.name.as_str())
        .collect();
    (!bad.is_empty())
        .then(|| violation("hostPath volumes", named("volume", &bad)))
        .flatten()
}

fn host_ports(cs: &[C]) -> Option<Violation> {
    let (mut names, mut ports) = (Vec::new(), Vec::new());
    for c in cs {
        let used: Vec<i32> = c.ports.iter().filter_map(|p| p.host_port).filter(|p| *p != 0).collect();
        if !used.is_empty() {
            names.push(c.name);
            ports.extend(used.iter().map(|p| p.to_string()));
        }
    }
    if names.is_empty() {
        return None;
    }
    let verb = if names.len() == 1 { "uses" } else { "use" };
    let plural = if ports.len() == 1 { "" } else { "s" };
    violation(
        "hostPort",
        format!(
            "{} {verb} hostPort{plural} {}",
            named("container", &names),
            ports.join(", ")
        ),
    )
}

const APPARMOR_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

fn app_armor(meta: &ObjectMeta, pod: Option<&PodSecurityContext>, cs: &[C]) -> Option<Violation> {
    let ok_value = |v: &str| v.is_empty() || v == "runtime/default" || v.starts_with("localhost/");
    let mut bad: Vec<String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, v)| k.starts_with(APPARMOR_ANNOTATION) && !ok_value(v))
        .map(|(k, v)| format!("{k:?}={v:?}"))
        .collect();
    let unconfined = |t: Option<&str>| t == Some("Unconfined");
    if unconfined(pod.and_then(|p| p.app_armor_profile.as_ref()).map(|a| a.type_.as_str())) {
        bad.push("pod must not set securityContext.appArmorProfile.type to \"Unconfined\"".into());
    }
    let containers: Vec<&str> = cs
        .iter()
        .filter(|c| {
            unconfined(
                c.sc.and_then(|s| s.app_armor_profile.as_ref())
                    .map(|a| a.type_.as_str()),
            )
        })
        .map(|c| c.name)
        .collect();
    if !containers.is_empty() {
        bad.push(format!(
            "{} must not set securityContext.appArmorProfile.type to \"Unconfined\"",
            named("container", &containers)
        ));
    }
    (!bad.is_empty())
        .then(|| violation("forbidden AppArmor profile", bad.join(", ")))
        .flatten()
}

fn se_linux(pod: Option<&PodSecurityContext>, cs: &[C]) -> Option<Violation> {
    const TYPES: &[&str] = &[
        "",
        "container_t",
        "container_init_t",
        "container_kvm_t",
        "container_engine_t",
    ];
    let mut fields: Vec<String> = Vec::new();
    let mut check = |o: &SELinuxOptions| {
        let mut bad = false;
        let t = o.type_.as_deref().unwrap_or("");
        if !TYPES.contains(&t) {
            fields.push(format!("type {t:?}"));
            bad = true;
        }
        for (name, v) in [("user", &o.user), ("role", &o.role)] {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                fields.push(format!("{name} {v:?}"));
                bad = true;
            }
        }
        bad
    };
    let pod_bad = pod.and_then(|p| p.se_linux_options.as_ref()).is_some_and(&mut check);
    let bad: Vec<&str> = cs
        .iter()
        .filter(|c| c.sc.and_then(|s| s.se_linux_options.as_ref()).is_some_and(&mut check))
        .map(|c| c.name)
        .collect();
    if !pod_bad && bad.is_empty() {
        return None;
    }
    let who = match (pod_bad, bad.is_empty()) {
        (true, true) => "pod".to_string(),
        (true, false) => format!("pod and {}", named("container", &bad)),
        _ => named("container", &bad),
    };
    fields.dedup();
    violation(
        "seLinuxOptions",
        format!(
            "{who} set forbidden securityContext.seLinuxOptions: {}",
            fields.join("; ")
        ),
    )
}

fn proc_mount(cs: &[C]) -> Option<Violation> {
    let mut kinds = Vec::new();
    let bad: Vec<&str> = cs
        .iter()
        .filter(|c| {
            let m = c.sc.and_then(|s| s.proc_mount.as_deref()).unwrap_or("Default");
            let bad = m != "Default";
            if bad && !kinds.contains(&m.to_string()) {
                kinds.push(m.to_string());
            }
            bad
        })
        .map(|c| c.name)
        .collect();
    (!bad.is_empty())
        .then(|| {
            violation(
                "procMount",
                format!(
                    "{} must not set securityContext.procMount to {}",
                    named("container", &bad),
                    quoted(&kinds)
                ),
            )
        })
        .flatten()
}

fn seccomp_type(p: Option<&SeccompProfile>) -> Option<&str> {
    p.map(|p| p.type_.as_str())
}

fn seccomp_baseline(pod: Option<&PodSecurityContext>, cs: &[C]) -> Option<Violation> {
    let mut parts = Vec::new();
    if seccomp_type(pod.and_then(|p| p.seccomp_profile.as_ref())) == Some("Unconfined") {
        parts.push("pod must not set securityContext.seccompProfile.type to \"Unconfined\"".to_string());
    }
    let bad: Vec<&str> = cs
        .iter()
        .filter(|c| seccomp_type(c.sc.and_then(|s| s.seccomp_profile.as_ref())) == Some("Unconfined"))
        .map(|c| c.name)
        .collect();
    if !bad.is_empty() {
        parts.push(format!(
            "{} must not set securityContext.seccompProfile.type to \"Unconfined\"",
            named("container", &bad)
        ));
    }
    (!parts.is_empty())
        .then(|| violation("seccompProfile", parts.join("; ")))
        .flatten()
}

fn seccomp_restricted(pod: Option<&PodSecurityContext>, cs: &[C]) -> Option<Violation> {
    let valid = |t: &str| t == "RuntimeDefault" || t == "Localhost";
    let pod_type = seccomp_type(pod.and_then(|p| p.seccomp_profile.as_ref()));
    let mut parts = Vec::new();
    if let Some(t) = pod_type.filter(|t| !valid(t)) {
        parts.push(format!("pod must not set securityContext.seccompProfile.type to {t:?}"));
    }
    let mut explicit: Vec<&str> = Vec::new();
    let mut types: Vec<String> = Vec::new();
    let mut implicit: Vec<&str> = Vec::new();
    for c in cs {
        match seccomp_type(c.sc.and_then(|s| s.seccomp_profile.as_ref())) {
            Some(t) if !valid(t) => {
                explicit.push(c.name);
                if !types.contains(&t.to_string()) {
                    types.push(t.to_string());
                }
            }
            Some(_) => {}
            None if pod_type.is_none() => implicit.push(c.name),
            None => {}
        }
    }
    if !explicit.is_empty() {
        parts.push(format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            named("container", &explicit),
            quoted(&types)
        ));
    }
    if !implicit.is_empty() {
        parts.push(format!(
            "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            named("container", &implicit)
        ));
    }
    (!parts.is_empty())
        .then(|| violation("seccompProfile", parts.join("; ")))
        .flatten()
}

fn sysctls(pod: Option<&PodSecurityContext>) -> Option<Violation> {
    const SAFE: &[&str] = &[
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    ];
    let bad: Vec<&str> = pod
        .and_then(|p| p.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .filter(|n| !SAFE.contains(n))
        .collect();
    (!bad.is_empty())
        .then(|| violation("forbidden sysctls", bad.join(", ")))
        .flatten()
}

fn privilege_escalation(cs: &[C]) -> Option<Violation> {
    let bad: Vec<&str> = cs
        .iter()
        .filter(|c| c.sc.and_then(|s| s.allow_privilege_escalation) != Some(false))
        .map(|c| c.name)
        .collect();
    (!bad.is_empty())
        .then(|| {
            violation(
                "allowPrivilegeEscalation != false",
                format!(
                    "{} must set securityContext.allowPrivilegeEscalation=false",
                    named("container", &bad)
                ),
            )
        })
        .flatten()
}

fn run_as_non_root(pod: Option<&PodSecurityContext>, cs: &[C]) -> Option<Violation> {
    let pod_value = pod.and_then(|p| p.run_as_non_root);
    let mut parts = Vec::new();
    if pod_value == Some(false) {
        parts.push("pod must not set securityContext.runAsNonRoot=false".to_string());
    }
    let explicit: Vec<&str> = cs
        .iter()
        .filter(|c| c.sc.and_then(|s| s.run_as_non_root) == Some(false))
        .map(|c| c.name)
        .collect();
    if !explicit.is_empty() {
        parts.push(format!(
            "{} must not set securityContext.runAsNonRoot=false",
            named("container", &explicit)
        ));
    }
    let implicit: Vec<&str> = cs
        .iter()
        .filter(|c| c.sc.and_then(|s| s.run_as_non_root).is_none() && pod_value != Some(true))
        .map(|c| c.name)
        .collect();
    if !implicit.is_empty() && pod_value != Some(false) {
        parts.push(format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            named("container", &implicit)
        ));
    }
    (!parts.is_empty())
        .then(|| violation("runAsNonRoot != true", parts.join("; ")))
        .flatten()
}

fn run_as_user(pod: Option<&PodSecurityContext>, cs: &[C]) -> Option<Violation> {
    let mut parts = Vec::new();
    if pod.and_then(|p| p.run_as_user) == Some(0) {
        parts.push("pod must not set runAsUser=0".to_string());
    }
    let bad: Vec<&str> = cs
        .iter()
        .filter(|c| c.sc.and_then(|s| s.run_as_user) == Some(0))
        .map(|c| c.name)
        .collect();
    if !bad.is_empty() {
        parts.push(format!("{} must not set runAsUser=0", named("container", &bad)));
    }
    (!parts.is_empty())
        .then(|| violation("runAsUser=0", parts.join("; ")))
        .flatten()
}

#[cfg(test)]
mod tests;
