//! UCX_TLS against what the role needs: an RDMA transport between pods (unless co-located pods
//! share CUDA IPC, seed 002's fix), the GPU-memory transports of its accelerator (cuda_*,
//! rocm_*, ze_*), and nothing at all when NIXL moves KV through LIBFABRIC.

use super::{Ctx, mk};
use crate::mask::display_value;
use crate::model::RoleEnv;
use icb_core::checks::Check;
use icb_core::fabric::UcxTls;
use icb_core::model::{Status, TransportClass};

/// UCX transports that recognise the accelerator's memory, by accelerator family (the item names
/// a recipe writes, aliases included; Level Zero's ze_* are not in UCX's main tree).
fn gpu_memory_tls(accelerator: &str) -> (&'static [&'static str], &'static str) {
    match accelerator {
        "rocm" => (
            &["rocm", "rocm_copy", "rocm_ipc", "rocm_gdr"],
            "rocm_copy/rocm_ipc (AMD ROCm)",
        ),
        "xpu" => (
            &["ze", "ze_copy", "ze_ipc", "ze_gdr"],
            "ze_copy/ze_ipc (Intel XPU, Level Zero)",
        ),
        _ => (&["cuda", "cuda_copy", "cuda_ipc"], "cuda_copy/cuda_ipc"),
    }
}

pub(crate) fn tls_checks(r: &RoleEnv, ctx: &Ctx, scope: &str, out: &mut Vec<Check>) {
    if super::backend::kv_path(r).libfabric_only() && r.var("UCX_TLS").is_some() {
        let d = "KV moves through NIXL's LIBFABRIC backend: UCX_TLS does not decide the KV path".to_string();
        out.push(mk("env.ucx_tls.tcp_only", Status::Ok, d.clone(), scope, None));
        out.push(mk("env.ucx_tls.cuda", Status::Ok, d, scope, None));
        return;
    }
    let accel = r.resources.accelerator.as_deref().unwrap_or("cuda");
    let (gpu_tls, gpu_tls_text) = gpu_memory_tls(accel);
    let Some(var) = r.var("UCX_TLS") else {
        let d = "UCX_TLS unset: UCX uses every transport it finds".to_string();
        out.push(mk("env.ucx_tls.tcp_only", Status::Ok, d.clone(), scope, None));
        out.push(mk("env.ucx_tls.cuda", Status::Ok, d, scope, None));
        return;
    };
    let Some(raw) = var.literal() else {
        let d = format!("UCX_TLS={} cannot be read from the recipe", display_value(var));
        out.push(mk("env.ucx_tls.tcp_only", Status::Warn, d.clone(), scope, None));
        out.push(mk("env.ucx_tls.cuda", Status::Warn, d, scope, None));
        return;
    };
    let tls = UcxTls::parse(raw);
    let value = display_value(var);
    let show = format!("UCX_TLS={value} [{}]", var.origin);
    if tls.exclude {
        // What is left must be a transport of this role's fabric: srd on EFA, IB/RoCE elsewhere.
        let rdma_excluded = !tls.allows_item(if r.is_efa() { "srd" } else { "ib" });
        if rdma_excluded {
            out.push(mk(
                "env.ucx_tls.tcp_only",
                Status::Fail,
                format!("{show} excludes every RDMA transport: KV transfer between pods falls back to TCP"),
                scope,
                Some("remove the RDMA transports from the exclusion list"),
            ));
        } else {
            out.push(mk(
                "env.ucx_tls.tcp_only",
                Status::Ok,
                format!("{show}: exclusion form keeps RDMA"),
                scope,
                None,
            ));
        }
        if tls.items.iter().any(|t| gpu_tls[..2].contains(&t.as_str())) {
            out.push(mk(
                "env.ucx_tls.cuda",
                Status::Fail,
                format!("{show} excludes {}: UCX will not recognise GPU buffers", gpu_tls[1]),
                scope,
                Some("do not exclude the GPU-memory transports"),
            ));
        } else {
            out.push(mk(
                "env.ucx_tls.cuda",
                Status::Ok,
                format!("{show}: exclusion form keeps cuda_*"),
                scope,
                None,
            ));
        }
        return;
    }
    if tls.allows_class(TransportClass::Rdma) {
        out.push(mk(
            "env.ucx_tls.tcp_only",
            Status::Ok,
            format!("{show} includes an RDMA transport"),
            scope,
            None,
        ));
    } else if ctx.cuda_ipc_colocated && tls.names("cuda_ipc") {
        // Seed 002's field fix: co-located prefill/decode pods that share IPC and see each
        // other's GPUs move KV over cuda_ipc (NVLink); tcp only carries the handshake.
        out.push(mk(
            "env.ucx_tls.tcp_only",
            Status::Warn,
            format!(
                "{show} lists no RDMA transport: KV can only move over cuda_ipc between pods on ONE node (hostIPC + GPU visibility are set); across nodes it goes over TCP"
            ),
            scope,
            Some("pin prefill and decode to the same node, or add rc (and the RDMA device) for cross-node KV"),
        ));
    } else {
        out.push(mk(
            "env.ucx_tls.tcp_only",
            Status::Fail,
            format!(
                "{show} lists no RDMA transport (rc/dc/ud/srd): KV transfer between pods goes over TCP (~98 s TTFT in Dynamo's guide)"
            ),
            scope,
            Some("use UCX_TLS=rc_x,rc,dc_x,dc,cuda_copy,cuda_ipc (srd,cuda_copy,tcp on EFA) and request the RDMA device"),
        ));
    }
    if tls.items.iter().any(|t| t == "all" || gpu_tls.contains(&t.as_str())) {
        out.push(mk(
            "env.ucx_tls.cuda",
            Status::Ok,
            format!("{show} includes {gpu_tls_text}"),
            scope,
            None,
        ));
    } else {
        out.push(mk(
            "env.ucx_tls.cuda",
            Status::Fail,
            format!("{show} lists no {gpu_tls_text}: UCX will not recognise GPU buffers"),
            scope,
            Some("add the GPU-memory transports to UCX_TLS (cuda_copy,cuda_ipc; rocm_copy,rocm_ipc on AMD; ze_copy,ze_ipc on Intel XPU)"),
        ));
    }
}
