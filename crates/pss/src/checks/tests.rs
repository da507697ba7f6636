//! Each control: one pod that passes it, one that fails it, with the wording checked.

use super::*;
use crate::{LevelVersion, forbidden_message};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// A pod that meets `restricted`: the starting point every test changes one field of.
fn clean() -> Value {
    json!({
        "metadata": {"name": "p"},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "bench", "image": "img",
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "scratch", "emptyDir": {}}]
        }
    })
}

fn pod(v: &Value) -> Pod {
    serde_json::from_value(v.clone()).expect("a pod")
}

/// The violations of `level` for `v`, as `reason (detail)` strings.
fn at(level: Level, v: &Value) -> Vec<String> {
    let p = pod(v);
    evaluate(level, &p.metadata, p.spec.as_ref().unwrap())
        .into_iter()
        .map(|v| format!("{} ({})", v.reason, v.detail))
        .collect()
}

/// Changes one field at `path` (JSON pointer of an object) and returns the pod.
fn with(path: &str, key: &str, value: Value) -> Value {
    let mut v = clean();
    v.pointer_mut(path)
        .expect(path)
        .as_object_mut()
        .unwrap()
        .insert(key.into(), value);
    v
}

const C0: &str = "/spec/containers/0";
const C0SC: &str = "/spec/containers/0/securityContext";
const PODSC: &str = "/spec/securityContext";

#[test]
fn the_clean_pod_meets_every_level() {
    assert!(at(Level::Restricted, &clean()).is_empty());
    let p = pod(&clean());
    assert_eq!(required_level(&p.metadata, p.spec.as_ref().unwrap()), Level::Restricted);
}

#[test]
fn host_namespaces() {
    let bad = with("/spec", "hostNetwork", json!(true));
    let mut both = bad.clone();
    both["spec"]["hostIPC"] = json!(true);
    assert_eq!(
        at(Level::Baseline, &both),
        ["host namespaces (hostNetwork=true, hostIPC=true)"]
    );
    assert!(at(Level::Baseline, &with("/spec", "hostNetwork", json!(false))).is_empty());
    assert!(at(Level::Privileged, &bad).is_empty(), "privileged allows everything");
}

#[test]
fn privileged_containers() {
    let bad = with(C0SC, "privileged", json!(true));
    assert_eq!(
        at(Level::Baseline, &bad),
        ["privileged (container \"bench\" must not set securityContext.privileged=true)"]
    );
    assert!(at(Level::Baseline, &with(C0SC, "privileged", json!(false))).is_empty());
}

#[test]
fn capabilities_at_baseline_allow_only_the_default_set() {
    let ipc_lock = with(C0SC, "capabilities", json!({"add": ["IPC_LOCK"]}));
    assert_eq!(
        at(Level::Baseline, &ipc_lock),
        [
            "non-default capabilities (container \"bench\" must not include \"IPC_LOCK\" in securityContext.capabilities.add)"
        ]
    );
    let chown = with(C0SC, "capabilities", json!({"add": ["CHOWN", "NET_BIND_SERVICE"]}));
    assert!(at(Level::Baseline, &chown).is_empty());
}

#[test]
fn capabilities_at_restricted_drop_all_and_add_only_net_bind_service() {
    let ok = with(
        C0SC,
        "capabilities",
        json!({"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
    );
    assert!(at(Level::Restricted, &ok).is_empty());
    let bad = with(C0SC, "capabilities", json!({"add": ["IPC_LOCK"]}));
    assert_eq!(
        at(Level::Restricted, &bad),
        [
            "unrestricted capabilities (container \"bench\" must set securityContext.capabilities.drop=[\"ALL\"]; container \"bench\" must not include \"IPC_LOCK\" in securityContext.capabilities.add)"
        ]
    );
}

#[test]
fn host_path_volumes_at_baseline_and_volume_types_at_restricted() {
    let host = with(
        "/spec",
        "volumes",
        json!([{"name": "sys", "hostPath": {"path": "/sys"}}]),
    );
    assert_eq!(at(Level::Baseline, &host), ["hostPath volumes (volume \"sys\")"]);
    assert_eq!(
        at(Level::Restricted, &host),
        ["restricted volume types (volume \"sys\" uses restricted volume type \"hostPath\")"]
    );
    let allowed = with(
        "/spec",
        "volumes",
        json!([{"name": "a", "emptyDir": {"medium": "Memory"}}, {"name": "b", "secret": {"secretName": "s"}},
               {"name": "c", "projected": {"sources": []}}]),
    );
    assert!(at(Level::Restricted, &allowed).is_empty());
    let nfs = with(
        "/spec",
        "volumes",
        json!([{"name": "n", "nfs": {"server": "x", "path": "/"}}]),
    );
    assert!(at(Level::Baseline, &nfs).is_empty(), "baseline only forbids hostPath");
    assert_eq!(at(Level::Restricted, &nfs).len(), 1);
}

#[test]
fn host_ports() {
    let bad = with(C0, "ports", json!([{"containerPort": 80, "hostPort": 8080}]));
    assert_eq!(
        at(Level::Baseline, &bad),
        ["hostPort (container \"bench\" uses hostPort 8080)"]
    );
    assert!(at(Level::Baseline, &with(C0, "ports", json!([{"containerPort": 80}]))).is_empty());
}

#[test]
fn app_armor() {
    let mut bad = clean();
    bad["metadata"]["annotations"] = json!({"container.apparmor.security.beta.kubernetes.io/bench": "unconfined"});
    assert_eq!(at(Level::Baseline, &bad).len(), 1);
    assert!(at(Level::Baseline, &bad)[0].starts_with("forbidden AppArmor profile"));
    let field = with(C0SC, "appArmorProfile", json!({"type": "Unconfined"}));
    assert_eq!(at(Level::Baseline, &field).len(), 1);
    let ok = with(C0SC, "appArmorProfile", json!({"type": "RuntimeDefault"}));
    assert!(at(Level::Baseline, &ok).is_empty());
}

#[test]
fn se_linux() {
    let bad = with(PODSC, "seLinuxOptions", json!({"type": "spc_t"}));
    assert_eq!(
        at(Level::Baseline, &bad),
        ["seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"spc_t\")"]
    );
    let ok = with(C0SC, "seLinuxOptions", json!({"type": "container_t", "level": "s0:c1"}));
    assert!(at(Level::Baseline, &ok).is_empty());
}

#[test]
fn proc_mount() {
    let bad = with(C0SC, "procMount", json!("Unmasked"));
    assert_eq!(
        at(Level::Baseline, &bad),
        ["procMount (container \"bench\" must not set securityContext.procMount to \"Unmasked\")"]
    );
    assert!(at(Level::Baseline, &with(C0SC, "procMount", json!("Default"))).is_empty());
}

#[test]
fn seccomp_at_baseline_forbids_only_unconfined() {
    let bad = with(PODSC, "seccompProfile", json!({"type": "Unconfined"}));
    assert_eq!(
        at(Level::Baseline, &bad),
        ["seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"]
    );
    let mut unset = clean();
    unset["spec"]["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("seccompProfile");
    assert!(at(Level::Baseline, &unset).is_empty());
    assert_eq!(
        at(Level::Restricted, &unset),
        [
            "seccompProfile (pod or container \"bench\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        ]
    );
    let container_level = with(
        C0SC,
        "seccompProfile",
        json!({"type": "Localhost", "localhostProfile": "p.json"}),
    );
    assert!(at(Level::Restricted, &container_level).is_empty());
}

#[test]
fn sysctls() {
    let bad = with(PODSC, "sysctls", json!([{"name": "kernel.msgmax", "value": "1"}]));
    assert_eq!(at(Level::Baseline, &bad), ["forbidden sysctls (kernel.msgmax)"]);
    let ok = with(
        PODSC,
        "sysctls",
        json!([{"name": "net.ipv4.ip_local_port_range", "value": "1 2"}]),
    );
    assert!(at(Level::Baseline, &ok).is_empty());
}

#[test]
fn privilege_escalation() {
    let mut bad = clean();
    bad["spec"]["containers"][0]["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("allowPrivilegeEscalation");
    assert_eq!(
        at(Level::Restricted, &bad),
        [
            "allowPrivilegeEscalation != false (container \"bench\" must set securityContext.allowPrivilegeEscalation=false)"
        ]
    );
    assert!(at(Level::Baseline, &bad).is_empty());
}

#[test]
fn run_as_non_root() {
    let mut unset = clean();
    unset["spec"]["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("runAsNonRoot");
    assert_eq!(
        at(Level::Restricted, &unset),
        ["runAsNonRoot != true (pod or container \"bench\" must set securityContext.runAsNonRoot=true)"]
    );
    let container_level = {
        let mut v = unset.clone();
        v["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = json!(true);
        v
    };
    assert!(at(Level::Restricted, &container_level).is_empty());
    let explicit = with(C0SC, "runAsNonRoot", json!(false));
    assert_eq!(
        at(Level::Restricted, &explicit),
        ["runAsNonRoot != true (container \"bench\" must not set securityContext.runAsNonRoot=false)"]
    );
}

#[test]
fn run_as_user_zero() {
    let bad = with(C0SC, "runAsUser", json!(0));
    assert_eq!(
        at(Level::Restricted, &bad),
        ["runAsUser=0 (container \"bench\" must not set runAsUser=0)"]
    );
    assert!(at(Level::Restricted, &with(C0SC, "runAsUser", json!(1000))).is_empty());
}

#[test]
fn the_refusal_reads_as_a_real_api_server_words_it() {
    let v = json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "x", "image": "nginx"}]}});
    let p = pod(&v);
    let violations = evaluate(Level::Restricted, &p.metadata, p.spec.as_ref().unwrap());
    let enforce = LevelVersion {
        level: Level::Restricted,
        version: "latest".into(),
    };
    assert_eq!(
        forbidden_message("x", &enforce, &violations),
        "pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false \
         (container \"x\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities \
         (container \"x\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or \
         container \"x\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"x\" must \
         set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
    assert_eq!(required_level(&p.metadata, p.spec.as_ref().unwrap()), Level::Baseline);
}

#[test]
fn two_containers_are_named_together() {
    let mut v = clean();
    let second = json!({"name": "side", "image": "img", "securityContext": {"privileged": true}});
    v["spec"]["containers"].as_array_mut().unwrap().push(second);
    v["spec"]["containers"][0]["securityContext"]["privileged"] = json!(true);
    assert_eq!(
        at(Level::Baseline, &v),
        ["privileged (containers \"bench\", \"side\" must not set securityContext.privileged=true)"]
    );
}
