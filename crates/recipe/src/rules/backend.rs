//! The one place that decides how a role's KV cache moves between pods, so that every rule
//! agrees: UCX settings matter only when UCX carries KV, NCCL settings only when NCCL does (or
//! the engine spans nodes, where NCCL runs the collectives).

use super::ucx::{is_falsy, is_truthy};
use crate::model::RoleEnv;

/// What carries the role's KV cache, and what decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KvPath {
    /// UCX carries KV (NIXL's UCX backend, the NIXL default, TRT-LLM UCX, …).
    pub ucx: bool,
    /// NIXL's LIBFABRIC backend carries KV (EFA).
    pub libfabric: bool,
    /// NCCL carries KV (vLLM P2pNcclConnector / PyNcclConnector, SGLang/TRT `nccl`).
    pub nccl: bool,
    pub decided_by: Decider,
}

/// Where the decision came from, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decider {
    /// `--kv-transfer-config` names NIXL backends, or the connector itself says.
    EngineArgs,
    /// A provider overlay's `kv_backend:` (Dynamo provider profiles).
    Overlay,
    /// Dynamo's `DYN_KVBM_NIXL_BACKEND_{UCX,LIBFABRIC}` variables.
    DynamoEnv,
    /// Nothing named: NIXL's default backend, UCX.
    Default,
}

impl KvPath {
    /// NIXL moves KV through LIBFABRIC only: UCX settings do not decide the KV path.
    pub fn libfabric_only(&self) -> bool {
        self.libfabric && !self.ucx
    }
}

fn names(list: &[String], want: &str) -> bool {
    list.iter().any(|b| b.trim().eq_ignore_ascii_case(want))
}

/// Decides the KV path of one role.
pub(crate) fn kv_path(r: &RoleEnv) -> KvPath {
    let e = &r.engine;
    let connector = e.kv_connector.as_deref().unwrap_or("").to_ascii_lowercase();
    let other = [e.sglang_backend.as_deref(), e.trt_backend.as_deref()];
    let nccl = connector.contains("nccl") || other.iter().flatten().any(|b| b.eq_ignore_ascii_case("nccl"));
    let path = |ucx, libfabric, decided_by| KvPath {
        ucx,
        libfabric,
        nccl,
        decided_by,
    };
    if !e.nixl_backends.is_empty() {
        return path(
            names(&e.nixl_backends, "ucx"),
            names(&e.nixl_backends, "libfabric"),
            Decider::EngineArgs,
        );
    }
    if nccl {
        return path(false, false, Decider::EngineArgs);
    }
    if let Some(b) = r.overlay_backend.as_deref() {
        let lf = b.eq_ignore_ascii_case("libfabric");
        return path(!lf, lf, Decider::Overlay);
    }
    let env = |n: &str| r.literal(n).map(str::trim);
    let lf_env = env("DYN_KVBM_NIXL_BACKEND_LIBFABRIC");
    let ucx_env = env("DYN_KVBM_NIXL_BACKEND_UCX");
    if lf_env.is_some() || ucx_env.is_some() {
        let lf = lf_env.is_some_and(is_truthy);
        // UCX stays on unless switched off, or LIBFABRIC replaces it with UCX left unset.
        let ucx = match ucx_env {
            Some(v) => !is_falsy(v),
            None => !lf,
        };
        return path(ucx, lf, Decider::DynamoEnv);
    }
    path(true, false, Decider::Default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EnvValue, EnvVar, Role};

    fn role(env: &[(&str, &str)]) -> RoleEnv {
        let mut r = RoleEnv::new(Role::Decode, "d", "w", "g", "s.yaml");
        for (k, v) in env {
            r.set_var(EnvVar {
                name: (*k).into(),
                value: EnvValue::Literal { value: (*v).into() },
                origin: "test".into(),
                from_secret: false,
            });
        }
        r
    }

    #[test]
    fn one_decision_from_args_overlay_env_or_default() {
        assert_eq!(kv_path(&role(&[])).decided_by, Decider::Default);
        assert!(kv_path(&role(&[])).ucx);
        let lf = kv_path(&role(&[("DYN_KVBM_NIXL_BACKEND_LIBFABRIC", "true")]));
        assert!(lf.libfabric_only() && lf.decided_by == Decider::DynamoEnv);
        let both = kv_path(&role(&[
            ("DYN_KVBM_NIXL_BACKEND_LIBFABRIC", "1"),
            ("DYN_KVBM_NIXL_BACKEND_UCX", "true"),
        ]));
        assert!(both.ucx && both.libfabric);
        let mut r = role(&[("DYN_KVBM_NIXL_BACKEND_LIBFABRIC", "true")]);
        r.engine.nixl_backends = vec!["UCX".into()];
        assert!(!kv_path(&r).libfabric, "engine args win over the env");
        r.engine.nixl_backends.clear();
        r.engine.kv_connector = Some("P2pNcclConnector".into());
        let n = kv_path(&r);
        assert!(n.nccl && !n.ucx);
        let mut o = role(&[]);
        o.overlay_backend = Some("LIBFABRIC".into());
        assert!(kv_path(&o).libfabric_only());
    }
}
