//! `gate --kv-shape [MODEL]`: the gate's pair step is the deployment's own KV transfer. The model,
//! the TP sizes and the block size come from the flags, else from the recipe's engine arguments
//! (the prefill role's model and TP, the decode role's TP, either's block size: the rule and its
//! test are `icb_gate::kv::KvGiven`). The transfer itself is `icb_gate::kv`.

use super::pair_kv::KvArgs;
use icb_gate::kv::{GateKv, KvGiven, RecipeEngines};

/// The flags, completed from the recipe where they say nothing (`icb_gate::kv::KvGiven`).
fn merged(flags: &KvArgs, roles: Option<&RecipeEngines>) -> Result<KvArgs, String> {
    let g = &flags.geometry;
    let given = KvGiven {
        model: flags.kv_shape.clone(),
        prefill_tp: g.prefill_tp.clone(),
        decode_tp: g.decode_tp.clone(),
        page_size: g.page_size.clone(),
    }
    .completed(roles)?;
    let mut merged = flags.clone();
    merged.kv_shape = given.model;
    merged.geometry.prefill_tp = given.prefill_tp;
    merged.geometry.decode_tp = given.decode_tp;
    merged.geometry.page_size = given.page_size;
    Ok(merged)
}

/// `--kv-shape` for the gate (`None` without it): the request is built once the gate's `probe
/// env` step has read the recipe's engine arguments.
pub fn gate_kv(flags: &KvArgs, engine: &super::common::EngineArgs) -> Option<GateKv> {
    if !flags.wanted() {
        return None;
    }
    let given = flags.clone();
    let resolve = move |roles: Option<&RecipeEngines>| -> Result<icb_kv::KvRequest, String> {
        let kv = merged(&given, roles)?;
        let parsed = kv
            .flags(Some(icb_pair::kv::MAX_RANK_BYTES))
            .map_err(|e| e.to_string())?;
        icb_kv::KvRequest::from_flags(&parsed).map_err(|e| e.to_string())
    };
    Some(GateKv {
        resolve: std::sync::Arc::new(resolve),
        op: flags.kv_op.unwrap_or_default(),
        max_kv_ms: flags.max_kv_ms,
        sweep_max: flags.kv_descriptor_sweep,
        engine: super::pair_kv::kv_engine(engine),
        tool: super::connect::tool_info(),
    })
}
