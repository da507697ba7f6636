//! Push and pull in one run (issue 42): after the main run (`--kv-op`, READ by default), the same
//! request with the other operation on fresh ranks of the same engine, memory and sides (WRITE:
//! every prefill rank pushes its blocks; READ: every decode rank pulls them), bounded as the bulk
//! row is; and which of the two the recipe's KV connector uses, read from the recipe (`--recipe`):
//!
//! - vLLM's `NixlConnector` (the recipe's `--kv-transfer-config` `kv_connector`, or the one a
//!   platform injects) pulls: the decode worker reads the prefill worker's blocks with NIXL READ
//!   (vLLM's `vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`: the decode side's
//!   worker posts the reads once the prefill side's blocks are ready);
//! - SGLang's disaggregation (`--disaggregation-transfer-backend`, NIXL or Mooncake) pushes: the
//!   prefill worker writes into the blocks the decode worker allocated (SGLang's
//!   `python/sglang/srt/disaggregation/`, and Dynamo's SGLang KV-transfer explainer: "RDMA write
//!   KV to decode").
//!
//! Any other connector's direction is not known, and the output says so. Where no recipe is
//! given and the targets are worker pods (`pod/…`, `deployment/…` on Kubernetes), their specs
//! (the engine's command, arguments and env) are read the same way ([`worker_connector`]).

use super::control::KvRuns;
use super::{KvOp, KvPlan, kv_rows};
use icb_core::{KvDirections, KvOpRow, KvOutcome, KvRowCheck, KvRowTimes};
use icb_pair::{Interrupted, PairError, PairOutcome};
use tokio_util::sync::CancellationToken;

/// How-manieth run the other operation's is ([`KvRuns::run`]; the TCP control is 1, the bulk
/// row 2, the bursts 3): on Kubernetes its rank pods are `<run>-c4`.
pub const OTHER_OP_RUN: u32 = 4;

/// The operation a serving KV connector uses (`op`; absent: not known), and why ic-bench says so
/// (or why it cannot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvConnector {
    pub op: Option<KvOp>,
    pub said: String,
}

impl KvConnector {
    /// A connector whose operation is not known, and why.
    pub fn not_known(why: impl Into<String>) -> KvConnector {
        KvConnector {
            op: None,
            said: why.into(),
        }
    }
}

/// What the output says when nothing was read: no recipe, and no worker pod to read instead.
pub const NOTHING_READ: &str =
    "not known: no --recipe, and no worker pod to read it from (pass --recipe FILE, or pod/… or deployment/… targets)";

/// The rule the output states beside a connector whose operation is not known.
const RULE: &str = "ic-bench knows vLLM's NixlConnector (reads) and SGLang's disaggregation (writes)";

/// The connector of one engine role's arguments, when its direction is known.
pub fn connector_of(engine: &icb_recipe::EngineArgs) -> Option<KvConnector> {
    let nixl_connector = |c: &String| c.eq_ignore_ascii_case("NixlConnector");
    if let Some(c) = engine.kv_connector.as_ref().filter(|c| nixl_connector(c)) {
        return Some(KvConnector {
            op: Some(KvOp::Read),
            said: format!("vLLM kv_connector={c}: the decode worker reads the prefill worker's blocks with NIXL READ"),
        });
    }
    if let Some(c) = engine.platform_default.as_ref().filter(|c| nixl_connector(c)) {
        return Some(KvConnector {
            op: Some(KvOp::Read),
            said: format!("vLLM {c}, the platform's default: the decode worker reads the prefill worker's blocks"),
        });
    }
    engine.sglang_backend.as_ref().map(|b| KvConnector {
        op: Some(KvOp::Write),
        said: format!("SGLang disaggregation over {b}: the prefill worker writes into the decode worker's blocks"),
    })
}

/// The connector of one role of `source` (`--role`), or why it is not known.
pub fn role_connector(role: &icb_recipe::EngineRole, source: &str) -> KvConnector {
    let roles = std::slice::from_ref(role);
    connector_in(roles.iter(), source)
}

/// The connector of the first engine role of `source` (decode's first: it runs the connector's
/// reads) whose direction is known, or why none is: the connectors it names, or that it names
/// none.
pub fn recipe_connector(roles: &icb_recipe::RecipeRoles, source: &str) -> KvConnector {
    let mut roles: Vec<&icb_recipe::EngineRole> = roles.roles().iter().collect();
    roles.sort_by_key(|r| r.env.role != icb_recipe::Role::Decode);
    connector_in(roles.into_iter(), source)
}

/// The first known connector of `roles`, said with its `source`; else why none is known.
fn connector_in<'a>(roles: impl Iterator<Item = &'a icb_recipe::EngineRole> + Clone, source: &str) -> KvConnector {
    if let Some(known) = roles.clone().find_map(|r| connector_of(&r.env.engine)) {
        return KvConnector {
            said: format!("{source}: {}", known.said),
            ..known
        };
    }
    let mut named: Vec<String> = Vec::new();
    for e in roles.map(|r| &r.env.engine) {
        let name = (e
            .kv_connector
            .as_ref()
            .or(e.platform_default.as_ref())
            .map(|c| format!("kv_connector {c}")))
        .or_else(|| {
            e.trt_backend
                .as_ref()
                .map(|b| format!("TensorRT-LLM's cache transceiver {b}"))
        });
        if let Some(n) = name.filter(|n| !named.contains(n)) {
            named.push(n);
        }
    }
    KvConnector::not_known(match named.is_empty() {
        true => format!("not known: no KV connector named in {source} ({RULE})"),
        false => format!(
            "not known: {source}: {} of unknown direction ({RULE})",
            named.join(", ")
        ),
    })
}

/// The connector of the serving workers ic-bench's pods are modelled on, each `(name, spec)`
/// read as a recipe is (its engine command, arguments and env), decode's first; none given:
/// [`NOTHING_READ`].
pub fn worker_connector<P: serde::Serialize>(workers: &[(String, &P)]) -> KvConnector {
    if workers.is_empty() {
        return KvConnector::not_known(NOTHING_READ);
    }
    let mut inputs = Vec::new();
    for (name, spec) in workers {
        match serde_json::to_string(spec) {
            Ok(content) => inputs.push(icb_recipe::Input::Text {
                name: name.clone(),
                content,
            }),
            Err(e) => return KvConnector::not_known(format!("not known: {name}'s spec could not be read: {e}")),
        }
    }
    let names: Vec<&str> = workers.iter().map(|(n, _)| n.as_str()).collect();
    let source = format!("the worker pods {} (no --recipe)", names.join(" and "));
    match icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default()) {
        Ok((_, roles)) => recipe_connector(&roles, &source),
        Err(e) => KvConnector::not_known(format!("not known: {source} could not be read as a recipe: {e}")),
    }
}

impl KvOp {
    /// The other operation.
    pub fn other(self) -> KvOp {
        match self {
            KvOp::Read => KvOp::Write,
            KvOp::Write => KvOp::Read,
        }
    }
}

/// The other operation's plan: the geometry's rows for it, bounded as the bulk row is.
pub fn other_op_plan(plan: &KvPlan) -> KvPlan {
    let mut other = plan.short_extra_run();
    other.op = plan.op.other();
    other.rows = kv_rows(plan.request.geometry(), other.op);
    other
}

/// After a complete main run of a plan that asks for it, the other operation on fresh ranks,
/// put into the report's `kv.directions` with the recipe's connector (a run that failed: its
/// figures not known and why). An interruption during it ends as [`PairError::Interrupted`]
/// carrying the main run's report.
pub async fn add_other_op<R: KvRuns>(
    plan: &KvPlan,
    runs: &mut R,
    outcome: &mut PairOutcome,
    cancel: &CancellationToken,
) -> Result<(), PairError> {
    if !plan.both_ops || outcome.report.partial.is_some() || outcome.report.kv.is_none() {
        return Ok(());
    }
    let op = plan.op.other();
    let other = match runs.run(&other_op_plan(plan), OTHER_OP_RUN, cancel, &mut |_| {}).await {
        Ok(o) => {
            if !o.cleanup.is_empty() {
                outcome.cleanup = format!("{}; {}: {}", outcome.cleanup, op.as_str(), o.cleanup);
            }
            match o.report.kv.as_deref() {
                Some(kv) => op_row(kv),
                None => not_measured(op, "its report has no KV section"),
            }
        }
        Err(PairError::Interrupted(i)) => return Err(PairError::Interrupted(Interrupted::after(outcome, i))),
        Err(e) => not_measured(op, &e.to_string()),
    };
    tracing::info!("{}: p50 {:?} ms", other.op, other.times.request_ms_p50);
    if let Some(kv) = outcome.report.kv.as_mut() {
        kv.directions = Some(KvDirections {
            other,
            connector_op: plan
                .connector
                .as_ref()
                .and_then(|c| c.op)
                .map(|op| op.as_str().to_string()),
            connector: Some(
                plan.connector
                    .as_ref()
                    .map_or(NOTHING_READ, |c| c.said.as_str())
                    .to_string(),
            ),
        });
    }
    Ok(())
}

/// The other operation's row of its run's KV section.
pub fn op_row(kv: &KvOutcome) -> KvOpRow {
    KvOpRow {
        op: kv.op.clone(),
        times: KvRowTimes::of(kv),
        check: super::bulk::row_check(kv),
    }
}

/// A run of the other operation that measured nothing: why.
pub fn not_measured(op: KvOp, why: &str) -> KvOpRow {
    KvOpRow {
        op: op.as_str().into(),
        times: KvRowTimes::default(),
        check: KvRowCheck::failed(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> icb_recipe::EngineArgs {
        icb_recipe::EngineArgs::default()
    }

    /// vLLM's NixlConnector (named, or a platform's default) pulls; SGLang's disaggregation
    /// pushes; anything else is not known.
    #[test]
    fn each_connector_has_its_direction_or_none() {
        let mut vllm = engine();
        vllm.kv_connector = Some("NixlConnector".into());
        let c = connector_of(&vllm).unwrap();
        assert_eq!(c.op, Some(KvOp::Read));
        assert!(
            c.said
                .starts_with("vLLM kv_connector=NixlConnector: the decode worker reads"),
            "{c:?}"
        );
        let mut kserve = engine();
        kserve.platform_default = Some("NixlConnector".into());
        assert_eq!(connector_of(&kserve).and_then(|c| c.op), Some(KvOp::Read));
        let mut sglang = engine();
        sglang.sglang_backend = Some("mooncake".into());
        let c = connector_of(&sglang).unwrap();
        assert_eq!(c.op, Some(KvOp::Write));
        assert!(c.said.contains("over mooncake: the prefill worker writes"), "{c:?}");
        let mut lmcache = engine();
        lmcache.kv_connector = Some("LMCacheConnectorV1".into());
        assert_eq!(connector_of(&lmcache), None);
        assert_eq!(connector_of(&engine()), None);
    }

    /// The other operation's plan swaps who posts: READ's initiators are the decode ranks,
    /// WRITE's the prefill ranks; bounded, with no extra run of its own.
    #[test]
    fn the_other_plan_flips_the_operation_and_its_initiators() {
        let shape = icb_kv::KvShape {
            isl: 64,
            page_size: 16,
            kv_dtype: icb_kv::KvDtype::Bf16,
            prefill_tp: 2,
            decode_tp: 1,
            max_rank_bytes: None,
        };
        let request = icb_kv::KvRequest::new(icb_kv::builtin("llama-3.1-8b").unwrap(), shape).unwrap();
        let pair = icb_pair::PairPlan::new(icb_core::RunSettings::full_curve(), Default::default());
        let read = KvPlan::new(pair, request, KvOp::Read);
        let write = other_op_plan(&read);
        assert_eq!(write.op, KvOp::Write);
        assert_eq!(write.rows.len(), read.rows.len());
        for (w, r) in write.rows.iter().zip(&read.rows) {
            assert_eq!(
                (w.layout.initiator, w.layout.target),
                (r.layout.target, r.layout.initiator)
            );
        }
        assert!(!write.both_ops && !write.bulk && !write.bursts && write.sweep.is_empty());
        assert_eq!(write.pair.settings.warmup_iterations, 1);
        assert_eq!(other_op_plan(&write).op, KvOp::Read);
        let failed = not_measured(KvOp::Write, "kv-rank p1 exited early");
        assert_eq!((failed.op.as_str(), failed.check.verified), ("write", false));
        assert_eq!(failed.check.failure.as_deref(), Some("kv-rank p1 exited early"));
    }
}
