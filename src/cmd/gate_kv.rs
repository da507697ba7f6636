//! `gate --kv-shape [MODEL]`: the gate's pair step is the deployment's own KV transfer. The model,
//! the TP sizes and the block size come from the flags, else from the recipe's engine arguments
//! (the prefill role's model and TP, the decode role's TP, either's block size).

use super::pair_kv::KvArgs;
use icb_gate::{PairEnd, StepError};
use icb_kube::pair::{BenchPodsPlan, SideTemplates};
use icb_pair::kube::KubeLauncher;
use icb_pair::kv::{KvOp, KvPlan, KvRow, KvSeam};
use icb_pair::{LaunchError, PairError, PairPlan};
use icb_recipe::EngineArgs;

/// The flags, completed from the recipe where they say nothing; a missing model is one line.
pub fn merged(flags: &KvArgs, roles: Option<&(EngineArgs, EngineArgs)>) -> Result<KvArgs, String> {
    let mut kv = flags.clone();
    let (prefill, decode) = match roles {
        Some((p, d)) => (Some(p), Some(d)),
        None => (None, None),
    };
    if kv.kv_shape.as_deref().is_none_or(str::is_empty) {
        let model = prefill
            .and_then(|p| p.model.clone())
            .or_else(|| decode.and_then(|d| d.model.clone()));
        kv.kv_shape = Some(model.ok_or(
            "--kv-shape without a MODEL reads it from the recipe, which names none: give --kv-shape MODEL (e.g. llama-3.1-70b)",
        )?);
    }
    let tp = |e: Option<&EngineArgs>| e.and_then(|e| e.tensor_parallel).map(|t| t.to_string());
    kv.prefill_tp = kv.prefill_tp.or_else(|| tp(prefill));
    kv.decode_tp = kv.decode_tp.or_else(|| tp(decode));
    let page = |e: Option<&EngineArgs>| e.and_then(|e| e.page_size).map(|p| p.to_string());
    kv.page_size = kv.page_size.or_else(|| page(prefill)).or_else(|| page(decode));
    Ok(kv)
}

/// Each read's bench pods, modelled on the recipe's templates like the gate's own pair; for READ
/// the initiator (client pod) runs on the decode node.
struct GateSeam<'a> {
    cluster: icb_kube::Cluster,
    pods: &'a BenchPodsPlan,
    templates: &'a SideTemplates,
    op: KvOp,
}

impl KvSeam for GateSeam<'_> {
    type L = KubeLauncher;

    async fn launcher(&mut self, row: Option<&KvRow>) -> Result<KubeLauncher, LaunchError> {
        let mut pods = self.pods.clone();
        pods.run_id = match row {
            Some(r) => format!("{}-k{}", pods.run_id, r.index),
            None => format!("{}-ks", pods.run_id),
        };
        let mut templates = self.templates.clone();
        if self.op == KvOp::Read {
            std::mem::swap(&mut pods.prefill, &mut pods.decode);
            templates = templates.swapped();
        }
        KubeLauncher::prepare_with_templates(self.cluster.clone(), pods, &templates)
            .await
            .map_err(|e| LaunchError::new(e.to_string()))
    }
}

/// The gate's pair step as the KV transfer: one judged report whose verdict carries
/// `--max-kv-ms`.
pub async fn pair(
    kv: &KvArgs,
    plan: PairPlan,
    cluster: icb_kube::Cluster,
    pods: &BenchPodsPlan,
    templates: &SideTemplates,
    cancel: &icb_pair::CancellationToken,
) -> Result<PairEnd, StepError> {
    let setup = |e: String| StepError::Setup(e);
    let flags = kv
        .flags(Some(icb_pair::kv::MAX_RANK_BYTES))
        .map_err(|e| setup(e.to_string()))?;
    let request = icb_kv::KvRequest::from_flags(&flags).map_err(|e| setup(e.to_string()))?;
    let op = kv.kv_op.unwrap_or_default();
    let mut kv_plan = KvPlan::new(plan, request, op);
    kv_plan.max_kv_ms = kv.max_kv_ms;
    if let Some(max) = kv.kv_descriptor_sweep {
        kv_plan.sweep = icb_pair::kv::sweep_counts(max, kv_plan.sweep_block, icb_pair::kv::MAX_RANK_BYTES);
    }
    let mut seam = GateSeam {
        cluster,
        pods,
        templates,
        op,
    };
    let mut progress = |_: Option<&KvRow>, _: &icb_core::protocol::CaseProgress| {};
    match icb_pair::kv::run_kv(&kv_plan, &mut seam, cancel, &mut progress).await {
        Ok(o) => Ok(PairEnd::Judged(Box::new(o.report))),
        Err(PairError::Interrupted(i)) => Ok(PairEnd::Interrupted {
            cleanup: i.cleanup_text(),
            partial: i.partial,
        }),
        Err(e) => Err(setup(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recipe_fills_what_the_flags_leave_out() {
        let prefill = EngineArgs {
            model: Some("meta-llama/Llama-3.1-70B-Instruct".into()),
            tensor_parallel: Some(8),
            page_size: Some(32),
            ..EngineArgs::default()
        };
        let decode = EngineArgs {
            tensor_parallel: Some(4),
            ..EngineArgs::default()
        };
        let roles = (prefill, decode);
        let flags = KvArgs {
            kv_shape: Some(String::new()),
            ..KvArgs::default()
        };
        let kv = merged(&flags, Some(&roles)).unwrap();
        assert_eq!(kv.kv_shape.as_deref(), Some("meta-llama/Llama-3.1-70B-Instruct"));
        assert_eq!(
            (kv.prefill_tp.as_deref(), kv.decode_tp.as_deref()),
            (Some("8"), Some("4"))
        );
        assert_eq!(kv.page_size.as_deref(), Some("32"));
        // A flag wins over the recipe.
        let flags = KvArgs {
            kv_shape: Some("qwen3-32b".into()),
            decode_tp: Some("2".into()),
            ..KvArgs::default()
        };
        let kv = merged(&flags, Some(&roles)).unwrap();
        assert_eq!(
            (kv.kv_shape.as_deref(), kv.decode_tp.as_deref()),
            (Some("qwen3-32b"), Some("2"))
        );
        // No model anywhere: one line naming the flag.
        let e = merged(
            &KvArgs {
                kv_shape: Some(String::new()),
                ..KvArgs::default()
            },
            None,
        )
        .unwrap_err();
        assert!(
            e.starts_with("--kv-shape without a MODEL reads it from the recipe"),
            "{e}"
        );
    }
}
