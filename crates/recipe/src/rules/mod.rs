//! The probe rules (ids from `probe-rules.md`'s "Recommended probe checks"), applied per role
//! and per deployment group. Values are checked, not presence: a wrong value fails, a missing
//! variable only warns (it may be baked into the image).

pub(crate) mod alloc;
mod backend;
mod dra;
mod env;
mod group;
mod pod;
mod rails;
mod tls;
mod transport;
pub mod ucx;

use crate::model::{Role, RoleEnv};
use crate::resolve::Resolution;
use icb_core::checks::Check;
use icb_core::model::Status;
use std::collections::HashMap;

pub(crate) fn mk(id: &str, status: Status, detail: String, scope: &str, hint: Option<&str>) -> Check {
    Check {
        id: id.to_string(),
        status,
        detail,
        scope: Some(scope.to_string()),
        hint: hint.map(str::to_string),
    }
}

/// Facts about the deployment a role belongs to.
pub(crate) struct Ctx {
    /// The group has prefill and/or decode roles.
    pub disagg: bool,
    /// Every prefill/decode pod names cuda_ipc, has no RDMA, shares the host IPC namespace and
    /// sees all GPUs: the seed-002 same-node NVLink setup.
    pub cuda_ipc_colocated: bool,
}

impl Ctx {
    /// RDMA matters: disaggregated serving, or one engine spanning nodes.
    pub fn needs_fabric(&self, r: &RoleEnv) -> bool {
        self.disagg || r.node_count.is_some_and(|n| n > 1)
    }
}

/// Runs every rule. Every detail, hint and scope is masked before it leaves.
pub fn check(res: &Resolution) -> Vec<Check> {
    let mut checks = Vec::new();
    let engines: Vec<&RoleEnv> = res.roles.iter().filter(|r| r.role.is_engine()).collect();
    if engines.is_empty() {
        let mut seen: Vec<String> = res
            .roles
            .iter()
            .map(|r| format!("{} {}", r.role.as_str(), r.component))
            .chain(res.ignored.iter().cloned())
            .take(11)
            .collect();
        if seen.len() > 10 {
            let total = res.roles.len() + res.ignored.len();
            seen.truncate(10);
            seen.push(format!("… {} more", total - 10));
        }
        checks.push(mk(
            "env.resolve",
            Status::Fail,
            format!(
                "no prefill/decode/worker found in {} (saw: {})",
                if res.sources.is_empty() { "the input".to_string() } else { res.sources.join(", ") },
                if seen.is_empty() { "nothing".to_string() } else { seen.join("; ") }
            ),
            &res.sources.join("+"),
            Some("pass the DynamoGraphDeployment, Deployment/StatefulSet/Job/Pod or LeaderWorkerSet that runs the engine"),
        ));
    }
    if !res.notes.is_empty() {
        checks.push(mk(
            "env.resolve",
            Status::Warn,
            format!(
                "layers not applied: {}{}",
                res.notes.iter().take(5).cloned().collect::<Vec<_>>().join("; "),
                if res.notes.len() > 5 {
                    format!("; … {} more", res.notes.len() - 5)
                } else {
                    String::new()
                }
            ),
            &res.sources.join("+"),
            Some("inline the patches or pass the patched files as inputs"),
        ));
    }
    // Groups in first-seen order, built in one pass (inputs may hold very many workloads).
    let mut order: Vec<&str> = Vec::new();
    let mut groups: HashMap<&str, Vec<&RoleEnv>> = HashMap::new();
    for r in &engines {
        let members = groups.entry(r.group.as_str()).or_default();
        if members.is_empty() {
            order.push(&r.group);
        }
        members.push(r);
    }
    for g in order {
        let members = groups.remove(g).unwrap_or_default();
        let pd: Vec<&&RoleEnv> = members
            .iter()
            .filter(|r| matches!(r.role, Role::Prefill | Role::Decode))
            .collect();
        let ctx = Ctx {
            disagg: !pd.is_empty(),
            cuda_ipc_colocated: !pd.is_empty() && pd.iter().all(|r| group::cuda_ipc_shared(r)),
        };
        for r in &members {
            env::role_checks(r, &ctx, &mut checks);
            pod::role_checks(r, &ctx, &mut checks);
            dra::role_checks(r, res, &mut checks);
            transport::role_checks(r, &ctx, &mut checks);
        }
        group::group_checks(g, &members, &mut checks);
    }
    for c in &mut checks {
        c.detail = res.mask(&c.detail);
        c.hint = c.hint.as_deref().map(|h| res.mask(h));
        c.scope = c.scope.as_deref().map(|s| res.mask(s));
    }
    checks
}
