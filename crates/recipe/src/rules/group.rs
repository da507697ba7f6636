//! Rules across the roles of one deployment: prefill/decode symmetry, cross-pod CUDA IPC
//! (the seed-002 trap), and placement.

use super::mk;
use crate::engine;
use crate::mask::display_value;
use crate::model::{EnvValue, Role, RoleEnv};
use icb_core::checks::Check;
use icb_core::fabric::{self, UcxTls};
use icb_core::model::Status;

pub(crate) fn group_checks(group: &str, members: &[&RoleEnv], out: &mut Vec<Check>) {
    let prefill: Vec<&RoleEnv> = members.iter().copied().filter(|r| r.role == Role::Prefill).collect();
    let decode: Vec<&RoleEnv> = members.iter().copied().filter(|r| r.role == Role::Decode).collect();
    if prefill.is_empty() || decode.is_empty() {
        return;
    }
    let mut sources: Vec<String> = Vec::new();
    for r in members {
        for s in &r.sources {
            if !sources.contains(s) {
                sources.push(s.clone());
            }
        }
    }
    let scope = format!("prefill+decode ({group}, {})", sources.join("+"));
    // Never empty (both lists were checked above), so the rules below may index pd[0].
    let pd: Vec<&RoleEnv> = prefill.iter().chain(decode.iter()).copied().collect();
    symmetry(&pd, &scope, out);
    cuda_ipc_xpod(&pd, &scope, out);
    super::alloc::allocator_trap(&pd, &scope, out);
    placement(&pd, &scope, out);
}

/// Transport variables as (name, raw value for comparing, masked value for printing): two
/// different secrets must count as a difference even though both print as `***`.
fn transport_view(r: &RoleEnv) -> Vec<(String, EnvValue, String)> {
    let mut v: Vec<(String, EnvValue, String)> = r
        .env
        .iter()
        // Settings that decide the transport; logging knobs may differ between roles.
        .filter(|e| fabric::is_transport_setting(&e.name))
        .map(|e| (e.name.clone(), e.value.clone(), display_value(e)))
        .collect();
    v.sort_by(|x, y| x.0.cmp(&y.0));
    v
}

fn backend_view(r: &RoleEnv) -> String {
    // kv_role legitimately differs between prefill and decode, so it is left out.
    let mut e = r.engine.clone();
    e.kv_role = None;
    e.role_hint = None;
    engine::describe_backend(&e).map(|b| b.text).unwrap_or_default()
}

fn symmetry(pd: &[&RoleEnv], scope: &str, out: &mut Vec<Check>) {
    let reference = pd[0];
    let ref_env = transport_view(reference);
    let mut diffs: Vec<String> = Vec::new();
    for other in &pd[1..] {
        let env = transport_view(other);
        let mut names: Vec<&String> = ref_env.iter().chain(env.iter()).map(|(n, _, _)| n).collect();
        names.sort();
        names.dedup();
        for n in names {
            let a = ref_env.iter().find(|(k, _, _)| k == n);
            let b = env.iter().find(|(k, _, _)| k == n);
            let shown =
                |x: Option<&(String, EnvValue, String)>| x.map(|(_, _, d)| d.clone()).unwrap_or("<unset>".into());
            if a.map(|x| &x.1) != b.map(|x| &x.1) {
                let (a, b) = (shown(a), shown(b));
                diffs.push(format!("{n} ({} {a} vs {} {b})", reference.component, other.component));
            }
        }
        if reference.image != other.image {
            diffs.push(format!(
                "image ({} {} vs {} {})",
                reference.component,
                reference.image.as_deref().unwrap_or("<unset>"),
                other.component,
                other.image.as_deref().unwrap_or("<unset>")
            ));
        }
        let (ba, bb) = (backend_view(reference), backend_view(other));
        if ba != bb {
            diffs.push(format!(
                "KV backend ({} `{ba}` vs {} `{bb}`)",
                reference.component, other.component
            ));
        }
    }
    diffs.dedup();
    if diffs.is_empty() {
        out.push(mk(
            "env.role_symmetry",
            Status::Ok,
            format!(
                "prefill and decode agree on {} transport variable(s), image and KV backend",
                ref_env.len()
            ),
            scope,
            None,
        ));
    } else {
        out.push(mk(
            "env.role_symmetry",
            Status::Warn,
            format!("prefill and decode differ: {}", diffs.join("; ")),
            scope,
            Some(
                "set the transport env on both roles and run the same image (mismatched UCX versions break transfers)",
            ),
        ));
    }
}

/// The pod can open a co-located peer's GPU memory with cuda_ipc: it names cuda_ipc, shares
/// the host IPC namespace and sees every GPU (seed 002's fix). hostPID is not required here:
/// see `cuda_ipc_xpod` for the UCX versions that also want it.
pub(crate) fn cuda_ipc_shared(r: &RoleEnv) -> bool {
    r.literal("UCX_TLS").is_some_and(|v| UcxTls::parse(v).names("cuda_ipc"))
        && !r.uses_rdma()
        && r.host_ipc
        && sees_all_gpus(r)
}

fn sees_all_gpus(r: &RoleEnv) -> bool {
    r.privileged
        || r.literal("NVIDIA_VISIBLE_DEVICES")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("all"))
}

/// Whether cuda_ipc works across PID namespaces depends on the UCX build (openucx/ucx #10968,
/// #11514; open ask #11978): UCX 1.22 logs the peer as unreachable with "different PID namespace
/// and FABRIC support" unless the GPUs offer fabric handles, while the seed-002 images (SGLang
/// 0.4.x) needed only hostIPC + GPU visibility.
const CUDA_IPC_PID_NOTE: &str = "with UCX releases that check PID namespaces for cuda_ipc (1.22 logs \"different PID namespace and FABRIC support\"), also set hostPID on both pods unless the GPUs support fabric handles; confirm with `ic-bench pair` on the node";

/// Pods in an MNNVL ComputeDomain do reach each other's GPUs over NVLink (through IMEX, not
/// same-node cuda_ipc): the same statement as pod.rdma_resource, whether cuda_ipc is named or
/// not. Says so and returns true.
fn in_compute_domain(pd: &[&RoleEnv], scope: &str, out: &mut Vec<Check>) -> bool {
    if pd.is_empty() || !pd.iter().all(|r| r.uses_compute_domain()) {
        return false;
    }
    out.push(mk(
        "pod.cuda_ipc_xpod",
        Status::Ok,
        "prefill and decode claim an MNNVL ComputeDomain: NVLink between the pods goes over the multi-node NVLink fabric (IMEX), not same-node cuda_ipc".into(),
        scope,
        None,
    ));
    true
}

fn cuda_ipc_xpod(pd: &[&RoleEnv], scope: &str, out: &mut Vec<Check>) {
    let naming: Vec<&RoleEnv> = pd
        .iter()
        .copied()
        .filter(|r| r.literal("UCX_TLS").is_some_and(|v| UcxTls::parse(v).names("cuda_ipc")))
        .collect();
    // With an RDMA device on both sides, cuda_ipc only serves intra-pod copies and rc carries
    // KV between pods; without one, cuda_ipc is the only fast path the recipe can be counting on.
    let expecting: Vec<&RoleEnv> = naming.iter().copied().filter(|r| !r.uses_rdma()).collect();
    if in_compute_domain(pd, scope, out) {
        return;
    }
    if naming.is_empty() {
        out.push(mk(
            "pod.cuda_ipc_xpod",
            Status::Ok,
            "cuda_ipc not named in UCX_TLS: no NVLink path between the pods is expected".into(),
            scope,
            None,
        ));
        return;
    }
    if expecting.is_empty() && pd.iter().all(|r| r.uses_rdma()) {
        out.push(mk(
            "pod.cuda_ipc_xpod",
            Status::Ok,
            "cuda_ipc is listed but every prefill/decode pod has RDMA, which carries KV between pods".into(),
            scope,
            None,
        ));
        return;
    }
    let expecting = if expecting.is_empty() { naming } else { expecting };
    let unsatisfied: Vec<String> = pd
        .iter()
        .filter(|r| !(r.host_ipc && sees_all_gpus(r)))
        .map(|r| {
            let mut missing = Vec::new();
            if !r.host_ipc {
                missing.push("hostIPC");
            }
            if !sees_all_gpus(r) {
                missing.push("visibility of the peer's GPUs");
            }
            format!("{} lacks {}", r.component, missing.join(", "))
        })
        .collect();
    let names: Vec<&str> = expecting.iter().map(|r| r.component.as_str()).collect();
    if unsatisfied.is_empty() {
        out.push(mk(
            "pod.cuda_ipc_xpod",
            Status::Ok,
            format!(
                "UCX_TLS on {} names cuda_ipc; every prefill/decode pod shares hostIPC and sees all GPUs (seed 002's working fix){}",
                names.join(", "),
                if pd.iter().all(|r| r.host_pid) { "; hostPID shared too" } else { "" }
            ),
            scope,
            (!pd.iter().all(|r| r.host_pid)).then_some(CUDA_IPC_PID_NOTE),
        ));
    } else {
        out.push(mk(
            "pod.cuda_ipc_xpod",
            Status::Warn,
            format!(
                "prefill and decode are separate pods without RDMA and UCX_TLS on {} counts on cuda_ipc (NVLink) between them, but {}: CUDA IPC cannot open another pod's GPU memory, so even on one NVLink node KV silently goes over tcp (seed 002: 365 MB/s on an 8xH20 node)",
                names.join(", "),
                unsatisfied.join("; ")
            ),
            scope,
            Some("rely on RDMA between pods (request rdma/*, IPC_LOCK), or give both pods hostIPC and all GPUs (privileged + CUDA_VISIBLE_DEVICES mapped to the allocated GPUs; hostPID too on UCX builds that refuse cuda_ipc across PID namespaces)"),
        ));
    }
}

fn placement(pd: &[&RoleEnv], scope: &str, out: &mut Vec<Check>) {
    let advice = pd.iter().find_map(|r| r.placement.advice.clone());
    let unconstrained: Vec<&str> = pd
        .iter()
        .filter(|r| !r.placement.is_constrained())
        .map(|r| r.component.as_str())
        .collect();
    let first = &pd[0].placement;
    let differ: Vec<&str> = pd
        .iter()
        .filter(|r| r.placement.node_selector != first.node_selector || r.placement.affinity != first.affinity)
        .map(|r| r.component.as_str())
        .collect();
    let templates: Vec<&Vec<String>> = pd.iter().map(|r| &r.resources.claim_templates).collect();
    let any_domain = templates.iter().any(|t| !t.is_empty());
    let split_domain = any_domain && templates.iter().any(|t| *t != templates[0]);
    let hint = advice
        .as_deref()
        .unwrap_or("pin prefill and decode to one node pool (and one ComputeDomain for MNNVL)");
    let shared_domain = pd.iter().all(|r| r.uses_compute_domain()) && !split_domain;
    let tied: Vec<String> = pd
        .iter()
        .flat_map(|r| {
            r.placement
                .pod_affinity
                .iter()
                .map(move |a| format!("{}: {a}", r.component))
        })
        .collect();
    if split_domain {
        out.push(mk(
            "pod.placement",
            Status::Warn,
            "prefill and decode use different resource claim templates: an MNNVL ComputeDomain split across cliques serves `content: null`".into(),
            scope,
            Some(hint),
        ));
    } else if shared_domain {
        out.push(mk(
            "pod.placement",
            Status::Ok,
            format!(
                "prefill and decode share one ComputeDomain ({})",
                templates[0].join(", ")
            ),
            scope,
            advice.as_deref(),
        ));
    } else if !tied.is_empty() {
        out.push(mk(
            "pod.placement",
            Status::Ok,
            format!(
                "prefill and decode are tied together by required pod affinity ({})",
                tied.join("; ")
            ),
            scope,
            advice.as_deref(),
        ));
    } else if !unconstrained.is_empty() {
        out.push(mk(
            "pod.placement",
            Status::Warn,
            format!(
                "{} not pinned by nodeSelector/affinity: prefill and decode may land in different pools or fabrics",
                unconstrained.join(", ")
            ),
            scope,
            Some(hint),
        ));
    } else if !differ.is_empty() {
        out.push(mk(
            "pod.placement",
            Status::Warn,
            format!(
                "placement differs between {} and {}: they may land in different pools",
                pd[0].component,
                differ.join(", ")
            ),
            scope,
            Some(hint),
        ));
    } else {
        let mut what: Vec<String> = first.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        what.extend(first.affinity.iter().cloned());
        out.push(mk(
            "pod.placement",
            Status::Ok,
            format!("prefill and decode share placement: {}", what.join(", ")),
            scope,
            advice.as_deref(),
        ));
    }
}
