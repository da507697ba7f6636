//! Per-role env rules: resolution, backend, UCX_TLS, UCX_NET_DEVICES, rendezvous, NCCL, GID, EFA.

use super::ucx;
use super::{Ctx, mk};
use crate::engine;
use crate::mask::display_value;
use crate::model::{EnvValue, Role, RoleEnv};
use icb_core::checks::Check;
use icb_core::fabric;
use icb_core::model::Status;

/// NCCL variables documented as debugging aids: they override NCCL's topology-based choices.
pub const NCCL_DEBUG_KNOBS: &[&str] = &[
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_P2P_DIRECT_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_IB_GDR_LEVEL",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_IGNORE_CPU_AFFINITY",
    "NCCL_NET_DISABLE_INTRA",
];

/// Variables a disaggregated deployment is expected to set (after the skill's list).
pub const CRITICAL_VARS: &[&str] = &["UCX_TLS", "UCX_NET_DEVICES", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"];

const GID_VARS: &[&str] = &["NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX", "NVSHMEM_IB_GID_INDEX"];

fn shown(r: &RoleEnv, name: &str) -> Option<String> {
    r.var(name).map(|v| format!("{name}={}", display_value(v)))
}

pub(crate) fn role_checks(r: &RoleEnv, ctx: &Ctx, out: &mut Vec<Check>) {
    let scope = r.scope();
    resolve_check(r, &scope, out);
    backend_check(r, ctx, &scope, out);
    critical_check(r, ctx, &scope, out);
    super::tls::tls_checks(r, ctx, &scope, out);
    net_devices_check(r, &scope, out);
    rndv_check(r, &scope, out);
    nccl_ib_disable_check(r, &scope, out);
    debug_knobs_check(r, &scope, out);
    gid_check(r, &scope, out);
    efa_check(r, &scope, out);
}

/// A downward-API value (`fieldRef: status.podIP`, `spec.nodeName`, …) of a variable that is not
/// a transport setting (vLLM's docs set `VLLM_HOST_IP` this way): known for every pod, so
/// nothing to resolve or fix.
fn is_pod_fact(v: &crate::model::EnvVar) -> bool {
    matches!(v.value, EnvValue::Field { .. }) && !icb_core::fabric::is_pod_transport_env(&v.name)
}

/// What an ok `env.resolve` lists besides the layers: values known without being in the recipe
/// (downward-API facts, platform-derived variables) and credential Secrets.
fn known_elsewhere(r: &RoleEnv, credentials: &[&crate::model::EnvFrom]) -> String {
    let facts: Vec<String> = r
        .env
        .iter()
        .filter(|v| is_pod_fact(v))
        .map(|v| format!("{} {}", v.name, display_value(v)))
        .collect();
    let derived: Vec<&str> = r
        .env
        .iter()
        .filter(|v| matches!(v.value, EnvValue::Derived { .. }))
        .map(|v| v.name.as_str())
        .collect();
    let secrets: Vec<&str> = credentials.iter().map(|f| f.name.as_str()).collect();
    let mut out = String::new();
    for (list, label) in [
        (secrets, "credentials from Secret {} (not transport settings)"),
        (derived, "derived from the node at start by the platform: {}"),
        (
            facts.iter().map(String::as_str).collect(),
            "from the pod itself (downward API): {}",
        ),
    ] {
        if !list.is_empty() {
            out.push_str("; ");
            out.push_str(&label.replace("{}", &list.join(", ")));
        }
    }
    out
}

fn resolve_check(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let mut unresolved: Vec<String> = r
        .env
        .iter()
        .filter(|v| !matches!(v.value, EnvValue::Literal { .. } | EnvValue::Derived { .. }))
        .filter(|v| !is_pod_fact(v))
        .map(|v| format!("{} {}", v.name, display_value(v)))
        .collect();
    // A Secret named like a credential (`envFromSecret: hf-token`) carries the model-hub token,
    // not transport settings: listed, not warned about.
    let (credentials, other_from): (Vec<_>, Vec<_>) = r
        .env_from
        .iter()
        .partition(|f| f.kind == "secret" && crate::mask::is_secret_name(&f.name));
    unresolved.extend(other_from.iter().map(|f| format!("envFrom {} {}", f.kind, f.name)));
    let layers = if r.layers.is_empty() {
        "none".to_string()
    } else {
        r.layers.join(" < ")
    };
    if unresolved.is_empty() {
        out.push(mk(
            "env.resolve",
            Status::Ok,
            format!(
                "{} variable(s) resolved; layers (lowest first): {layers}{}",
                r.env.len(),
                known_elsewhere(r, &credentials)
            ),
            scope,
            None,
        ));
    } else {
        out.push(mk(
            "env.resolve",
            Status::Warn,
            format!("{} variable(s) resolved, unresolved at read time: {}", r.env.len(), unresolved.join(", ")),
            scope,
            Some("values from Secrets/ConfigMaps/envFrom are only known in the pod: confirm with `ic-bench probe node --pod`"),
        ));
    }
}

fn backend_check(r: &RoleEnv, ctx: &Ctx, scope: &str, out: &mut Vec<Check>) {
    let e = &r.engine;
    if !e.problems.is_empty() {
        out.push(mk(
            "env.backend",
            Status::Warn,
            e.problems.join("; "),
            scope,
            Some("quote the JSON so the shell passes it as one argument"),
        ));
        return;
    }
    let no_connector = e
        .kv_connector
        .as_deref()
        .is_some_and(|c| matches!(c.to_ascii_lowercase().as_str(), "none" | "null"));
    if no_connector && matches!(r.role, Role::Prefill | Role::Decode) {
        out.push(mk(
            "env.backend",
            Status::Warn,
            format!(
                "KV connector `{}` on a {} worker: no KV cache can be handed between prefill and decode",
                e.kv_connector.as_deref().unwrap_or_default(),
                r.role.as_str()
            ),
            scope,
            Some("select a KV connector (vLLM/Dynamo: NixlConnector / --connector nixl)"),
        ));
        return;
    }
    match engine::describe_backend(e) {
        Some(v) if v.caveat.is_some() => {
            out.push(mk("env.backend", Status::Warn, format!("{}: {}", v.text, v.caveat.unwrap_or_default()), scope, None))
        }
        Some(v) if v.known => out.push(mk("env.backend", Status::Ok, format!("KV transfer: {}", v.text), scope, None)),
        Some(v) => out.push(mk(
            "env.backend",
            Status::Warn,
            format!("KV transfer backend not recognised: {}", v.text),
            scope,
            Some("use NixlConnector with UCX (or LIBFABRIC on EFA), SGLang nixl/mooncake, TensorRT-LLM UCX/NIXL"),
        )),
        None if !matches!(r.role, Role::Prefill | Role::Decode) && !ctx.disagg => {}
        None if e.platform_default.is_some() => out.push(mk(
            "env.backend",
            Status::Ok,
            format!("KV transfer: {}", e.platform_default.as_deref().unwrap_or_default()),
            scope,
            None,
        )),
        None if e.dynamo && e.framework.as_deref() == Some("vllm") => out.push(mk(
            "env.backend",
            Status::Ok,
            "KV transfer: Dynamo vLLM default (NixlConnector over UCX)".to_string(),
            scope,
            None,
        )),
        None if e.framework.as_deref() == Some("sglang") && e.config_file.is_some() => out.push(mk(
            "env.backend",
            Status::Warn,
            format!(
                "SGLang reads its options from --config {} (not among the inputs): the transfer backend cannot be read",
                e.config_file.as_deref().unwrap_or_default()
            ),
            scope,
            Some("pass the ConfigMap holding that file, or set --disaggregation-transfer-backend on the command line"),
        )),
        None if e.framework.as_deref() == Some("sglang") => out.push(mk(
            "env.backend",
            Status::Ok,
            "KV transfer: SGLang's default backend (mooncake; --disaggregation-transfer-backend not given)".to_string(),
            scope,
            None,
        )),
        None => out.push(mk(
            "env.backend",
            Status::Warn,
            format!(
                "no KV transfer backend named in the engine args{}: the engine default applies",
                e.framework.as_deref().map(|f| format!(" ({f})")).unwrap_or_default()
            ),
            scope,
            Some("name it: vLLM --kv-transfer-config, SGLang --disaggregation-transfer-backend, TRT-LLM cache_transceiver_config.backend"),
        )),
    }
}

fn critical_check(r: &RoleEnv, ctx: &Ctx, scope: &str, out: &mut Vec<Check>) {
    if !ctx.needs_fabric(r) {
        return;
    }
    let efa = r.is_efa();
    let kv = super::backend::kv_path(r);
    // NCCL runs the engine's collectives across nodes, or carries KV itself; a worker whose KV
    // goes through NIXL on one node has no use for its variables.
    let nccl = kv.nccl || r.node_count.is_some_and(|n| n > 1);
    let missing: Vec<&str> = CRITICAL_VARS
        .iter()
        .copied()
        .filter(|v| !(efa && matches!(*v, "UCX_NET_DEVICES" | "NCCL_IB_HCA")))
        .filter(|v| kv.ucx || !v.starts_with("UCX_"))
        .filter(|v| nccl || !v.starts_with("NCCL_"))
        .filter(|v| r.var(v).is_none())
        .collect();
    if missing.is_empty() {
        out.push(mk(
            "env.critical_vars",
            Status::Ok,
            "disagg-critical transport variables are set".into(),
            scope,
            None,
        ));
    } else {
        out.push(mk(
            "env.critical_vars",
            Status::Warn,
            format!(
                "not set in the recipe: {} (may be baked into the image)",
                missing.join(", ")
            ),
            scope,
            Some("confirm in the running pod with `ic-bench probe node --pod`, or set them explicitly"),
        ));
    }
}

fn net_devices_check(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let Some(var) = r.var("UCX_NET_DEVICES") else { return };
    let Some(value) = var.literal() else { return };
    let problems: Vec<String> = fabric::net_devices::parse_ucx_net_devices(value)
        .map(|list| list.problems.iter().map(ToString::to_string).collect())
        .unwrap_or_default();
    if problems.is_empty() {
        out.push(mk(
            "env.ucx_net_devices.fmt",
            Status::Ok,
            format!("UCX_NET_DEVICES={value}"),
            scope,
            None,
        ));
    } else {
        out.push(mk(
            "env.ucx_net_devices.fmt",
            Status::Warn,
            format!("UCX_NET_DEVICES={value} is malformed: {}", problems.join("; ")),
            scope,
            Some("write a comma-separated dev:port list, e.g. mlx5_0:1,mlx5_1:1 (or `all`)"),
        ));
    }
}

/// KV not over UCX (LIBFABRIC, NCCL): UCX rendezvous does not decide the KV path. Says so and
/// returns true.
fn rndv_not_ucx(r: &RoleEnv, shown: &str, scope: &str, out: &mut Vec<Check>) -> bool {
    let kv = super::backend::kv_path(r);
    if kv.ucx {
        return false;
    }
    let via = if kv.libfabric {
        "NIXL's LIBFABRIC backend"
    } else {
        "NCCL"
    };
    out.push(mk(
        "env.rndv",
        Status::Ok,
        format!("{shown}: KV moves through {via}, so UCX rendezvous does not decide the KV path"),
        scope,
        None,
    ));
    true
}

fn rndv_check(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let scheme = r.literal("UCX_RNDV_SCHEME").map(|s| s.trim().to_ascii_lowercase());
    let thresh = r.literal("UCX_RNDV_THRESH").map(|s| s.trim().to_ascii_lowercase());
    let shown: Vec<String> = ["UCX_RNDV_SCHEME", "UCX_RNDV_THRESH"]
        .iter()
        .filter_map(|n| shown(r, n))
        .collect();
    let shown = if shown.is_empty() {
        "rendezvous settings unset".to_string()
    } else {
        shown.join(" ")
    };
    if rndv_not_ucx(r, &shown, scope, out) {
        return;
    }
    if r.is_efa() {
        let zcopy = scheme.as_deref() == Some("get_zcopy");
        let zero = thresh.as_deref() == Some("0");
        if zcopy || zero {
            out.push(mk(
                "env.rndv",
                Status::Fail,
                format!("{shown} on EFA: get_zcopy/threshold 0 crash with NIXL_ERR_BACKEND (\"remote invalid RD request\") on kernel >= 6.8"),
                scope,
                Some("on EFA use UCX_RNDV_SCHEME=auto and UCX_RNDV_THRESH=8192"),
            ));
            return;
        }
        out.push(mk("env.rndv", Status::Ok, format!("{shown}: safe on EFA"), scope, None));
        return;
    }
    let scheme_ok = scheme.as_deref().is_none_or(|s| {
        matches!(
            s,
            "auto" | "get_zcopy" | "put_zcopy" | "am" | "rkey_ptr" | "get_ppln" | "put_ppln"
        )
    });
    let thresh_ok = thresh.as_deref().is_none_or(|t| {
        matches!(t, "auto" | "inf" | "infinity")
            || crate::podspec::parse_quantity(t.trim_end_matches('b')).is_some()
            || icb_core::units::parse_size(t).is_ok()
    });
    if scheme_ok && thresh_ok {
        out.push(mk(
            "env.rndv",
            Status::Ok,
            format!("{shown}: fine off EFA (IB, RoCE, NVLink)"),
            scope,
            None,
        ));
    } else {
        out.push(mk(
            "env.rndv",
            Status::Warn,
            format!("{shown}: value not understood by UCX"),
            scope,
            Some("UCX_RNDV_SCHEME is auto|get_zcopy|put_zcopy|am; UCX_RNDV_THRESH a size, auto or inf"),
        ));
    }
}

fn nccl_ib_disable_check(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let Some(var) = r.var("NCCL_IB_DISABLE") else {
        out.push(mk(
            "env.nccl_ib_disable",
            Status::Ok,
            "NCCL_IB_DISABLE unset".into(),
            scope,
            None,
        ));
        return;
    };
    let value = var.literal().unwrap_or("");
    let rdma = r.uses_rdma() || matches!(r.fabric.as_deref(), Some("ib" | "roce"));
    if ucx::is_falsy(value) && var.literal().is_some() {
        out.push(mk(
            "env.nccl_ib_disable",
            Status::Ok,
            format!("NCCL_IB_DISABLE={value}"),
            scope,
            None,
        ));
    } else if ucx::is_truthy(value) && r.is_efa() {
        out.push(mk(
            "env.nccl_ib_disable",
            Status::Ok,
            format!("NCCL_IB_DISABLE={value} on EFA: NCCL uses the aws-ofi-nccl plugin, not its IB transport"),
            scope,
            None,
        ));
    } else if ucx::is_truthy(value) && rdma {
        out.push(mk(
            "env.nccl_ib_disable",
            Status::Fail,
            format!("NCCL_IB_DISABLE={value} while the pod has RDMA: NCCL falls back to NET/Socket"),
            scope,
            Some("remove NCCL_IB_DISABLE or set it to 0"),
        ));
    } else if ucx::is_truthy(value) {
        out.push(mk(
            "env.nccl_ib_disable",
            Status::Warn,
            format!("NCCL_IB_DISABLE={value}: NCCL uses sockets; right only if the cluster has no RDMA fabric"),
            scope,
            Some("remove it on IB/RoCE clusters"),
        ));
    } else {
        out.push(mk(
            "env.nccl_ib_disable",
            Status::Warn,
            format!("NCCL_IB_DISABLE={} is not 0 or 1", display_value(var)),
            scope,
            Some("use 0 (or leave it unset)"),
        ));
    }
}

fn debug_knobs_check(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let set: Vec<String> = NCCL_DEBUG_KNOBS.iter().filter_map(|n| shown(r, n)).collect();
    if set.is_empty() {
        out.push(mk(
            "env.nccl_debug_knobs",
            Status::Ok,
            "no debug-only NCCL knobs set".into(),
            scope,
            None,
        ));
    } else {
        out.push(mk(
            "env.nccl_debug_knobs",
            Status::Warn,
            format!(
                "debug-only NCCL knobs set: {} (they override NCCL's topology choices)",
                set.join(" ")
            ),
            scope,
            Some("remove them unless a measured problem needs them"),
        ));
    }
}

fn gid_check(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    let set: Vec<(&str, &str)> = GID_VARS
        .iter()
        .filter_map(|n| r.literal(n).map(|v| (*n, v.trim())))
        .collect();
    if set.is_empty() {
        out.push(mk(
            "env.gid_index",
            Status::Ok,
            "GID index unset (auto-selected)".into(),
            scope,
            None,
        ));
        return;
    }
    let shown: Vec<String> = set.iter().map(|(n, v)| format!("{n}={v}")).collect();
    let shown = shown.join(" ");
    let invalid: Vec<&str> = set
        .iter()
        .filter(|(n, v)| !(v.parse::<u32>().is_ok_and(|i| i < 256) || (*n == "NCCL_IB_GID_INDEX" && *v == "-1")))
        .map(|(n, _)| *n)
        .collect();
    if !invalid.is_empty() {
        out.push(mk(
            "env.gid_index",
            Status::Fail,
            format!("{shown}: {} not a valid GID index", invalid.join(", ")),
            scope,
            Some("use the index whose GID is RoCE v2 + IPv4-mapped on every HCA (`ic-bench detect-env`), or leave it unset"),
        ));
        return;
    }
    let mut values: Vec<&str> = set.iter().map(|(_, v)| *v).filter(|v| *v != "-1").collect();
    values.dedup();
    if r.fabric.as_deref() == Some("ib") {
        out.push(mk(
            "env.gid_index",
            Status::Warn,
            format!("{shown} on an InfiniBand fabric: GID indices only matter on RoCE"),
            scope,
            Some("remove it on IB"),
        ));
    } else if values.len() > 1 {
        out.push(mk(
            "env.gid_index",
            Status::Warn,
            format!("{shown}: NCCL, UCX and NVSHMEM are forced to different GID indices"),
            scope,
            Some("use one index for all three (`ic-bench detect-env`)"),
        ));
    } else {
        out.push(mk(
            "env.gid_index",
            Status::Ok,
            format!("{shown}: validate per HCA with `ic-bench probe node --recipe`"),
            scope,
            None,
        ));
    }
}

fn efa_check(r: &RoleEnv, scope: &str, out: &mut Vec<Check>) {
    if !r.is_efa() {
        return;
    }
    let mut missing = Vec::new();
    if !r
        .literal("FI_PROVIDER")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("efa"))
    {
        missing.push("FI_PROVIDER=efa".to_string());
    }
    if !super::backend::kv_path(r).libfabric {
        missing.push("the LIBFABRIC NIXL backend".to_string());
    }
    if missing.is_empty() {
        out.push(mk(
            "env.efa",
            Status::Ok,
            "EFA device, FI_PROVIDER=efa and LIBFABRIC backend agree".into(),
            scope,
            None,
        ));
    } else {
        out.push(mk(
            "env.efa",
            Status::Warn,
            format!("EFA requested but {} not selected", missing.join(" and ")),
            scope,
            Some("set FI_PROVIDER=efa and select LIBFABRIC (vLLM: \"backends\":[\"LIBFABRIC\"]; env DYN_KVBM_NIXL_BACKEND_LIBFABRIC=true)"),
        ));
    }
}
