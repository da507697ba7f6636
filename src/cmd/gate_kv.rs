//! `gate --kv-shape [MODEL]`: the gate's pair step is the deployment's own KV transfer. The model,
//! the TP sizes and the block size come from the flags, else from the recipe's engine arguments
//! (the prefill role's model and TP, the decode role's TP, either's block size). The transfer
//! itself is `icb_gate::kv`.

use super::pair_kv::KvArgs;
use icb_gate::kv::{GateKv, RecipeEngines};
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

/// `--kv-shape` for the gate (`None` without it): the request is built once the gate's `probe
/// env` step has read the recipe's engine arguments.
pub fn gate_kv(flags: &KvArgs) -> Option<GateKv> {
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
    })
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
