//! The Kubernetes Pod Security Standards as checks on a pod spec, worded as the API server's
//! PodSecurity admission words them (kubernetes.io/docs/concepts/security/pod-security-standards,
//! `k8s.io/pod-security-admission`).
//!
//! Two users, one rule set: the emulated API server (`icb-testcluster`) enforces a namespace's
//! `pod-security.kubernetes.io/enforce` label with [`evaluate`] and answers a refusal exactly as a
//! real server does ([`forbidden_message`]); ic-bench itself computes the level its own pods need
//! ([`required_level`]) so that, when a namespace refuses them, it can say which label or flag
//! fixes it without reading the server's message text.
//!
//! Every control of the "latest" version of the standards is checked (host namespaces,
//! privileged, capabilities, hostPath volumes, host ports, AppArmor, SELinux, /proc mount type,
//! seccomp, sysctls; restricted: volume types, privilege escalation, running as non-root,
//! `runAsUser` 0, seccomp, capabilities). Pinned older versions (`enforce-version: v1.24`) are
//! evaluated as "latest": the checks only ever got stricter for pods like ours. Windows-only
//! fields (`hostProcess`) are not checked.
#![forbid(unsafe_code)]

mod checks;
mod policy;

pub use checks::{Violation, evaluate, required_level};
pub use policy::{AUDIT_LABEL, ENFORCE_LABEL, ENFORCE_VERSION_LABEL, Level, LevelVersion, NamespacePolicy, WARN_LABEL};

/// `reason (detail), reason (detail)`: the violations as the admission response lists them.
pub fn forbidden_detail(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            if v.detail.is_empty() {
                v.reason.clone()
            } else {
                format!("{} ({})", v.reason, v.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The message of the 403 a real API server answers when `enforce` refuses pod `name`:
/// `pods "NAME" is forbidden: violates PodSecurity "restricted:latest": …`.
pub fn forbidden_message(name: &str, enforce: &LevelVersion, violations: &[Violation]) -> String {
    format!(
        "pods \"{name}\" is forbidden: violates PodSecurity \"{enforce}\": {}",
        forbidden_detail(violations)
    )
}

/// The `Warning` header text for a pod the `warn` level would refuse (the pod is still created).
pub fn warning_message(warn: &LevelVersion, violations: &[Violation]) -> String {
    format!("would violate PodSecurity \"{warn}\": {}", forbidden_detail(violations))
}
