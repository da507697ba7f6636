//! Per-role pod rules: IPC_LOCK, RDMA device requests, /dev/shm size.

use super::{Ctx, mk};
use crate::model::RoleEnv;
use icb_core::checks::Check;
use icb_core::model::Status;

const GIB: u64 = 1 << 30;

pub(crate) fn role_checks(r: &RoleEnv, ctx: &Ctx, out: &mut Vec<Check>) {
    let scope = r.scope();
    ipc_lock(r, &scope, out);
    rdma_resource(r, ctx, &scope, out);
    shm(r, &scope, out);
}

fn rdma_list(r: &RoleEnv) -> String {
    let mut items: Vec<String> = r.resources.rdma.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    items.extend(r.resources.nic_claims().map(|c| format!("resourceClaim {c}")));
    if r.host_infiniband {
        items.push("hostPath /dev/infiniband".to_string());
    }
    if items.is_empty() && r.privileged && r.host_network {
        items.push("privileged + hostNetwork host devices".to_string());
    }
    items.join(", ")
}

fn ipc_lock(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let granted = r.privileged || r.has_capability("IPC_LOCK");
    let how = if r.privileged {
        "privileged"
    } else {
        "capabilities.add IPC_LOCK"
    };
    match (r.uses_rdma(), granted) {
        (true, true) => out.push(mk("pod.ipc_lock", Status::Ok, format!("{how} with RDMA ({})", rdma_list(r)), scope, None)),
        // Container runtimes often start pods with memlock unlimited (containerd's
        // LimitMEMLOCK=infinity), and NVIDIA's own Hopper recipes run without IPC_LOCK: whether
        // registration fails is a property of the node, so this warns and says how to confirm.
        (true, false) => out.push(mk(
            "pod.ipc_lock",
            Status::Warn,
            format!(
                "RDMA used ({}) without IPC_LOCK or privileged: memory registration fails (`ibv_create_cq() failed: Cannot allocate memory`) unless the node starts containers with memlock unlimited",
                rdma_list(r)
            ),
            scope,
            Some("confirm with `ic-bench probe node --pod POD` (node.memlock: `Max locked memory` unlimited in /proc/self/limits) or `ulimit -l` in the pod; else add securityContext.capabilities.add: [IPC_LOCK]"),
        )),
        (false, true) => out.push(mk("pod.ipc_lock", Status::Ok, format!("{how} (no RDMA device requested)"), scope, None)),
        (false, false) => out.push(mk("pod.ipc_lock", Status::Ok, "not needed: no RDMA device requested".into(), scope, None)),
    }
}

/// RDMA resources other than EFA requested beside EFA (`rdma/ib` and `vpc.amazonaws.com/efa`).
fn beside_efa(r: &RoleEnv) -> Vec<&str> {
    use icb_core::fabric::{RdmaKind, ResourceClass, resource_class};
    if !r.resources.has_efa() {
        return Vec::new();
    }
    r.resources
        .rdma
        .keys()
        .filter(|k| matches!(resource_class(k), ResourceClass::Rdma { kind } if kind != RdmaKind::Efa))
        .map(String::as_str)
        .collect()
}

/// `rdma/*` beside EFA: says so and returns true.
fn mixed_fabrics(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) -> bool {
    let mixed = beside_efa(r);
    if mixed.is_empty() {
        return false;
    }
    out.push(mk(
            "pod.rdma_resource",
            Status::Warn,
            format!(
                "{} requested beside EFA ({}): one pod on two fabrics; EFA nodes offer no such device (the pod stays Pending) and mixed fabrics fail KV transfer (NIXL_ERR_REMOTE_DISCONNECT)",
                mixed.join(", "),
                rdma_list(r)
            ),
            scope,
            Some("request only vpc.amazonaws.com/efa on EFA nodes (drop the rdma/* resource the base recipe carries)"),
        ));
    true
}

fn rdma_resource(r: &RoleEnv, ctx: &Ctx, scope: &str, out: &mut Vec<Check>) {
    if mixed_fabrics(r, scope, out) {
        return;
    }
    if r.requests_rdma() {
        out.push(mk(
            "pod.rdma_resource",
            Status::Ok,
            format!("RDMA devices requested: {}", rdma_list(r)),
            scope,
            None,
        ));
    } else if r.uses_compute_domain() {
        out.push(mk(
            "pod.rdma_resource",
            Status::Ok,
            format!(
                "no RDMA NIC, but MNNVL ComputeDomain channel claimed ({}): KV moves over the multi-node NVLink fabric",
                r.resources.domain_claims.join(", ")
            ),
            scope,
            None,
        ));
    } else if r.host_infiniband && !r.privileged {
        out.push(mk(
            "pod.rdma_resource",
            Status::Warn,
            "/dev/infiniband is mounted from the node but not requested: without privileged the device cgroup denies the verbs devices".into(),
            scope,
            Some("request the RDMA device from its device plugin instead of a hostPath"),
        ));
    } else if r.host_rdma() && r.host_network {
        out.push(mk(
            "pod.rdma_resource",
            Status::Ok,
            format!(
                "RDMA through the node's devices ({}), outside device-plugin accounting",
                rdma_list(r)
            ),
            scope,
            None,
        ));
    } else if r.host_rdma() && ctx.needs_fabric(r) {
        out.push(mk(
            "pod.rdma_resource",
            Status::Warn,
            "no RDMA device requested; privileged exposes the node's verbs devices, which works on InfiniBand but not RoCE (its GIDs live in the host network namespace)".into(),
            scope,
            Some("request the RDMA device (rdma/…, SR-IOV VF), or add hostNetwork on RoCE"),
        ));
    } else if r.host_network {
        out.push(mk(
            "pod.rdma_resource",
            Status::Warn,
            "hostNetwork only: RDMA devices are not requested, /dev/infiniband may be missing in the container".into(),
            scope,
            Some("request the RDMA device (rdma/…, SR-IOV VF, vpc.amazonaws.com/efa) explicitly"),
        ));
    } else if ctx.needs_fabric(r) && !r.resources.gpu_claims.is_empty() {
        // The DRA form of the same finding: the GPUs come from a claim, so the NIC belongs in
        // the same claim, where a constraint can keep it on the GPU's PCIe root.
        out.push(mk(
            "pod.rdma_resource",
            Status::Fail,
            format!(
                "GPUs claimed through DRA ({}) but no RDMA NIC requested (none in the claim, no rdma/*, SR-IOV or EFA): KV transfer falls back to TCP",
                r.resources.gpu_claims.join(", ")
            ),
            scope,
            Some("add a NIC request to the GPU's ResourceClaimTemplate, tied by constraints: [{matchAttribute: resource.kubernetes.io/pcieRoot}] (or request rdma/…)"),
        ));
    } else if ctx.needs_fabric(r) {
        out.push(mk(
            "pod.rdma_resource",
            Status::Fail,
            "no RDMA device requested (rdma/*, SR-IOV, vpc.amazonaws.com/efa, networking.gke.io.networks/*, resourceClaims): KV transfer falls back to TCP".into(),
            scope,
            Some("request the NIC from the RDMA device plugin, e.g. resources.limits rdma/ib: \"1\""),
        ));
    } else {
        out.push(mk(
            "pod.rdma_resource",
            Status::Warn,
            "no RDMA device requested; fine for a single-node aggregated worker only".into(),
            scope,
            None,
        ));
    }
}

fn shm(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let trt = r.engine.framework.as_deref() == Some("trtllm");
    let (need, need_text) = if trt {
        (80 * GIB, "80Gi (TensorRT-LLM)")
    } else {
        (16 * GIB, "16Gi")
    };
    let hint = Some(if trt {
        "set sharedMemory.size: 80Gi (or an emptyDir medium: Memory at /dev/shm)"
    } else {
        "set sharedMemory.size: 16Gi (or an emptyDir medium: Memory, sizeLimit 16Gi, at /dev/shm)"
    });
    if r.host_ipc {
        out.push(mk(
            "pod.shm",
            Status::Ok,
            "hostIPC: /dev/shm is the node's".into(),
            scope,
            None,
        ));
        return;
    }
    let origin = r.shm_origin.clone().unwrap_or_default();
    match &r.shm {
        None if r.workload.starts_with("DynamoGraphDeployment/") => out.push(mk(
            "pod.shm",
            Status::Warn,
            format!("sharedMemory not set: the operator default applies; want at least {need_text}"),
            scope,
            hint,
        )),
        None => out.push(mk(
            "pod.shm",
            Status::Warn,
            format!("no memory-backed /dev/shm volume: the runtime default is 64Mi; want at least {need_text}"),
            scope,
            hint,
        )),
        Some((text, Some(bytes))) if *bytes >= need => out.push(mk(
            "pod.shm",
            Status::Ok,
            format!("/dev/shm {text} ({origin}) >= {need_text}"),
            scope,
            None,
        )),
        Some((text, _)) => out.push(mk(
            "pod.shm",
            Status::Warn,
            format!("/dev/shm {text} ({origin}) is below {need_text}"),
            scope,
            hint,
        )),
    }
}
