//! The allocator trap (issue 39): prefill/decode engines whose PyTorch allocator hands out
//! memory that legacy CUDA IPC cannot export (`expandable_segments:True`, `cudaMallocAsync`),
//! or whose own allocator holds the KV cache (vLLM `--enable-sleep-mode`, SGLang
//! `--enable-memory-saver`: `cuMemCreate`), where the KV path can go over cuda_ipc. UCX then needs VMM IPC (`pidfd_getfd`, ptrace rights
//! over the peer) or falls back to a transport hundreds of times slower (NIXL issue 1754).

use super::mk;
use crate::model::RoleEnv;
use icb_core::checks::Check;
use icb_core::fabric::UcxTls;
use icb_core::model::{CudaAllocMode, PYTORCH_ALLOC_CONF_VARS, Status, pytorch_alloc_mode};

/// The role's allocation mode and the setting that gave it (`NAME=VALUE`, or the engine's
/// flag); `None` where no allocator setting is written (PyTorch's default, `cudaMalloc`) or its
/// value is not known (a secret or a ConfigMap the inputs do not hold). The engine's own
/// allocator holds the KV cache whatever PyTorch's setting says, so its flag comes first.
pub(crate) fn role_alloc_mode(r: &RoleEnv) -> Option<(CudaAllocMode, String)> {
    if let Some(a) = r.engine.allocator {
        let setting = format!("{} ({} maps the KV cache with cuMemCreate)", a.flag(), a.allocator());
        return Some((CudaAllocMode::Vmm, setting));
    }
    let name = PYTORCH_ALLOC_CONF_VARS.into_iter().find(|n| r.var(n).is_some())?;
    let value = r.literal(name)?;
    Some((pytorch_alloc_mode(value), format!("{name}={value}")))
}

/// Whether the role's UCX may carry KV over cuda_ipc: `UCX_TLS` unset (UCX's `all`) or allowing it.
fn cuda_ipc_allowed(r: &RoleEnv) -> bool {
    r.literal("UCX_TLS").is_none_or(|v| UcxTls::parse(v).allows("cuda_ipc"))
}

/// One check over a deployment's prefill and decode roles: warn where a role allocates
/// non-legacy-IPC memory and its KV can go over cuda_ipc (prefill and decode on one node).
pub(crate) fn allocator_trap(pd: &[&RoleEnv], scope: &str, out: &mut Vec<Check>) {
    let trapped: Vec<String> = pd
        .iter()
        .filter(|r| cuda_ipc_allowed(r))
        .filter_map(|r| {
            let (mode, setting) = role_alloc_mode(r)?;
            (!mode.is_legacy()).then(|| format!("{} {setting} ({mode} memory)", r.component))
        })
        .collect();
    if trapped.is_empty() {
        return;
    }
    out.push(mk(
        "env.cuda_alloc",
        Status::Warn,
        format!(
            "{}: not legacy-IPC capable, so where prefill and decode share a node the KV path over cuda_ipc \
             needs UCX's VMM IPC, else it falls back to a far slower transport (~0.3 GB/s over TCP emulation \
             against ~200 GB/s, NIXL issue 1754)",
            trapped.join("; ")
        ),
        scope,
        Some(
            "measure it: `ic-bench gate` runs its pair step with this allocation (or `ic-bench pair --cuda-alloc vmm`); \
             for VMM IPC use a UCX whose cuda_ipc maps VMM memory, with SYS_PTRACE and hostPID (pidfd_getfd), or drop \
             expandable_segments:True; the engines' own allocators (--enable-sleep-mode, --enable-memory-saver) request \
             no shareable handle, so VMM IPC has none to pass either: drop the flag where prefill and decode share a node",
        ),
    ));
}
