//! `gate --kv-shape [MODEL]`: the gate's pair step is the deployment's own KV transfer. The
//! binary parses the flags once into a [`GateKv`]; what they leave out (model, TP sizes, block
//! size) comes from the recipe's engine arguments, read by the gate's `probe env` step.

use crate::{PairEnd, StepError};
use icb_kube::pair::{BenchPodsPlan, SideTemplates};
use icb_pair::kube::KubeLauncher;
use icb_pair::kv::{KvOp, KvPlan, KvRow, KvSeam};
use icb_pair::{CancellationToken, LaunchError, PairError, PairPlan};
use icb_recipe::EngineArgs;

/// The recipe's prefill and decode engine arguments, where the gate read a recipe.
pub type RecipeEngines = (EngineArgs, EngineArgs);

/// Builds the request from the flags completed by the recipe (`None`: no recipe was read); an
/// `Err` is the one-line refusal.
pub type ResolveRequest =
    std::sync::Arc<dyn Fn(Option<&RecipeEngines>) -> Result<icb_kv::KvRequest, String> + Send + Sync>;

/// What the gate's KV flags gave for the shape (`None`, or an empty model: left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KvGiven {
    pub model: Option<String>,
    pub prefill_tp: Option<String>,
    pub decode_tp: Option<String>,
    pub page_size: Option<String>,
}

impl KvGiven {
    /// Completed from the recipe where the flags say nothing: the prefill role's model and TP,
    /// the decode role's TP, either's block size (a flag always wins). No model anywhere is one
    /// line naming the flag.
    pub fn completed(&self, roles: Option<&RecipeEngines>) -> Result<KvGiven, String> {
        let (prefill, decode) = match roles {
            Some((p, d)) => (Some(p), Some(d)),
            None => (None, None),
        };
        let mut kv = self.clone();
        if kv.model.as_deref().is_none_or(str::is_empty) {
            let model = prefill
                .and_then(|p| p.model.clone())
                .or_else(|| decode.and_then(|d| d.model.clone()));
            kv.model = Some(model.ok_or(
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
}

/// `--kv-shape` for the gate, parsed once by the binary.
#[derive(Clone)]
pub struct GateKv {
    pub resolve: ResolveRequest,
    pub op: KvOp,
    pub max_kv_ms: Option<f64>,
    /// `--kv-descriptor-sweep[=MAX]`.
    pub sweep_max: Option<u64>,
}

impl std::fmt::Debug for GateKv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateKv")
            .field("op", &self.op)
            .field("max_kv_ms", &self.max_kv_ms)
            .field("sweep_max", &self.sweep_max)
            .finish_non_exhaustive()
    }
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

/// Where the gate's pair step runs its KV transfer.
pub(crate) struct KvSite<'a> {
    pub cluster: icb_kube::Cluster,
    pub pods: &'a BenchPodsPlan,
    pub templates: &'a SideTemplates,
}

/// The gate's pair step as the KV transfer: one judged report whose verdict carries
/// `--max-kv-ms`.
pub(crate) async fn pair(
    kv: &GateKv,
    engines: Option<&RecipeEngines>,
    plan: PairPlan,
    site: KvSite<'_>,
    cancel: &CancellationToken,
) -> Result<PairEnd, StepError> {
    let request = (kv.resolve)(engines).map_err(StepError::Setup)?;
    let mut kv_plan = KvPlan::new(plan, request, kv.op);
    kv_plan.max_kv_ms = kv.max_kv_ms;
    if let Some(max) = kv.sweep_max {
        kv_plan.sweep = icb_pair::kv::sweep_counts(max, kv_plan.sweep_block, icb_pair::kv::MAX_RANK_BYTES);
    }
    let mut seam = GateSeam {
        cluster: site.cluster,
        pods: site.pods,
        templates: site.templates,
        op: kv.op,
    };
    let mut progress = |_: Option<&KvRow>, _: &icb_core::protocol::CaseProgress| {};
    match icb_pair::kv::run_kv(&kv_plan, &mut seam, cancel, &mut progress).await {
        Ok(o) => Ok(PairEnd::Judged(Box::new(o.report))),
        Err(PairError::Interrupted(i)) => Ok(PairEnd::Interrupted {
            cleanup: i.cleanup_text(),
            partial: i.partial,
        }),
        Err(e) => Err(StepError::Setup(e.to_string())),
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
        let kv = KvGiven {
            model: Some(String::new()),
            ..KvGiven::default()
        }
        .completed(Some(&roles))
        .unwrap();
        assert_eq!(kv.model.as_deref(), Some("meta-llama/Llama-3.1-70B-Instruct"));
        assert_eq!(
            (kv.prefill_tp.as_deref(), kv.decode_tp.as_deref()),
            (Some("8"), Some("4"))
        );
        assert_eq!(kv.page_size.as_deref(), Some("32"));
        // A flag wins over the recipe.
        let kv = KvGiven {
            model: Some("qwen3-32b".into()),
            decode_tp: Some("2".into()),
            ..KvGiven::default()
        }
        .completed(Some(&roles))
        .unwrap();
        assert_eq!(
            (kv.model.as_deref(), kv.decode_tp.as_deref()),
            (Some("qwen3-32b"), Some("2"))
        );
        // No model anywhere: one line naming the flag.
        let e = KvGiven::default().completed(None).unwrap_err();
        assert!(
            e.starts_with("--kv-shape without a MODEL reads it from the recipe"),
            "{e}"
        );
    }
}
