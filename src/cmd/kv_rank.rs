//! `ic-bench kv-rank --plan JSON` (hidden): one TP rank of `pair --kv-shape`'s per-rank model,
//! started by the parent (`icb_kv_transfer::ranks`), which it reaches at the plan's coordinator
//! address. The plan names the engine: `icb_nixl_engine::kv_rank` or `icb_engine::rank::kv_rank`.

use icb_core::protocol::kv_rank::RankPlan;
use icb_flags::common::{EngineArgs, UcxArgs};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The rank's plan (`icb_core::protocol::kv_rank::RankPlan`, JSON)
    #[arg(long, value_name = "JSON")]
    pub plan: String,

    #[command(flatten)]
    pub ucx: UcxArgs,

    #[command(flatten)]
    pub engine: EngineArgs,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let plan: RankPlan =
        serde_json::from_str(&args.plan).map_err(|e| anyhow::anyhow!("bad --plan for kv-rank: {e}"))?;
    let ucx = icb_engine::UcxOptions {
        library_dir: args.ucx.ucx_lib.clone(),
        ..Default::default()
    }
    .with_profile(args.engine.ucx_profile);
    icb_sides::kv_rank(&plan, ucx, &args.engine.nixl_options()).map_err(anyhow::Error::msg)?;
    Ok(0)
}
