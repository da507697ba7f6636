//! A container's securityContext applied to its process, as the kubelet and the container
//! runtime apply it: the user and group (container over pod), the supplementary groups (`fsGroup`,
//! `supplementalGroups`), the capabilities (drop, then add), and `allowPrivilegeEscalation: false`
//! as `no_new_privs`. A privileged container keeps every capability. The emptyDir volumes a
//! non-root user writes to are created world-writable, as the kubelet creates them.

use icb_isolate::Credentials;
use k8s_openapi::api::core::v1::{Container, PodSpec};

/// The credentials the container's process runs with.
pub(super) fn credentials(pod: &PodSpec, c: &Container) -> Credentials {
    let psc = pod.security_context.as_ref();
    let csc = c.security_context.as_ref();
    let id = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
    let uid = id(csc.and_then(|s| s.run_as_user).or(psc.and_then(|s| s.run_as_user)));
    let gid = id(csc.and_then(|s| s.run_as_group).or(psc.and_then(|s| s.run_as_group)));
    let mut groups: Vec<u32> = psc.and_then(|s| id(s.fs_group)).into_iter().collect();
    for g in psc.and_then(|s| s.supplemental_groups.clone()).unwrap_or_default() {
        if let Some(g) = id(Some(g))
            && !groups.contains(&g)
        {
            groups.push(g);
        }
    }
    let privileged = csc.and_then(|s| s.privileged).unwrap_or(false);
    let caps = csc.and_then(|s| s.capabilities.as_ref()).filter(|_| !privileged);
    let drop = caps.and_then(|c| c.drop.clone()).unwrap_or_default();
    let drop_all = drop.iter().any(|d| d.eq_ignore_ascii_case("ALL"));
    Credentials {
        uid,
        gid,
        groups,
        drop_all,
        drop: drop.into_iter().filter(|d| !d.eq_ignore_ascii_case("ALL")).collect(),
        add: caps.and_then(|c| c.add.clone()).unwrap_or_default(),
        no_new_privs: csc.and_then(|s| s.allow_privilege_escalation) == Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Capabilities, PodSecurityContext, SecurityContext};

    #[test]
    fn a_restricted_bench_pod_becomes_an_unprivileged_process() {
        let pod = PodSpec {
            security_context: Some(PodSecurityContext {
                run_as_user: Some(65532),
                run_as_group: Some(65532),
                fs_group: Some(65532),
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = Container {
            security_context: Some(SecurityContext {
                allow_privilege_escalation: Some(false),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".into()]),
                    add: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            credentials(&pod, &c),
            Credentials {
                uid: Some(65532),
                gid: Some(65532),
                groups: vec![65532],
                drop_all: true,
                no_new_privs: true,
                ..Default::default()
            }
        );
    }

    #[test]
    fn the_container_overrides_the_pod_and_privileged_keeps_every_capability() {
        let pod = PodSpec {
            security_context: Some(PodSecurityContext {
                run_as_user: Some(1000),
                supplemental_groups: Some(vec![5, 6]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = Container {
            security_context: Some(SecurityContext {
                run_as_user: Some(2000),
                privileged: Some(true),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".into()]),
                    add: Some(vec!["IPC_LOCK".into()]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let creds = credentials(&pod, &c);
        assert_eq!(
            (creds.uid, creds.gid, creds.groups.as_slice()),
            (Some(2000), None, &[5, 6][..])
        );
        assert!(
            !creds.drop_all && creds.add.is_empty() && !creds.no_new_privs,
            "{creds:?}"
        );
        // No securityContext at all: nothing changes (root, the runtime's capabilities).
        assert!(credentials(&PodSpec::default(), &Container::default()).is_noop());
    }
}
