//! `gate --kv-shape [MODEL]`: the gate's pair step is the deployment's own KV transfer. The model,
//! the TP sizes and the block size come from the flags, else from the recipe's engine arguments
//! (the prefill role's model and TP, the decode role's TP, either's block size: the rule and its
//! test are `icb_gate::kv::KvGiven`). The transfer itself is `icb_gate::kv`.

use icb_flags::kv::KvArgs;
use icb_gate::kv::{GateKv, KvGiven};

/// `--kv-shape` for the gate (`None` without it): the flags as given; the gate completes them
/// from the recipe's engine arguments once its `probe env` step has read them.
pub fn gate_kv(flags: &KvArgs, engine: &icb_flags::common::EngineArgs) -> Option<GateKv> {
    if !flags.wanted() {
        return None;
    }
    Some(GateKv {
        given: KvGiven {
            model: flags.kv_shape.clone(),
            shape: flags.geometry.text(),
        },
        op: flags.kv_op.unwrap_or_default(),
        max_kv_ms: flags.max_kv_ms,
        sweep_max: flags.kv_descriptor_sweep,
        engine: super::pair_kv::kv_engine(engine),
        tool: super::connect::tool_info(),
    })
}
