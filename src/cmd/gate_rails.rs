//! `ic-bench gate --rails …`: the gate's pair step as a whole-node rails run on the two nodes,
//! every rank under the recipe's transport env and the recipe's own `UCX_NET_DEVICES` (or none
//! where the recipe sets none, as the workers would run), so a per-rank mapping that is not
//! affine to each node's rail map shows in the NICs' own counters: bytes through another rail's
//! NIC, a rail NIC that carried nothing. Wiring for `icb_pair::rails`.

use icb_gate::{PairEnd, StepError};
use icb_pair::rails::kube::{KubeRails, KubeRailsPlan};
use icb_pair::rails::{AloneRuns, RailSelection, RailsPlan, plan_rows, run_rails};
use icb_pair::{PairError, PairPlan, SideRole};
use icb_probe::TransportEnv;
use tokio::time::Instant;

/// The rails flags of a gate, read once.
#[derive(Debug, Clone)]
pub struct GateRails {
    pub selection: RailSelection,
    pub margin: f64,
    pub nodes: (String, String),
}

/// Reads `--rails` for a gate on two node targets.
pub fn read(rails: Option<&str>, margin: f64, prefill: &str, decode: &str) -> anyhow::Result<Option<GateRails>> {
    let Some(text) = rails else { return Ok(None) };
    let node = |t: &str| t.strip_prefix("node/").map(str::to_string);
    let (Some(p), Some(d)) = (node(prefill), node(decode)) else {
        anyhow::bail!("--rails gates whole nodes: give --prefill node/NAME --decode node/NAME");
    };
    if p == d {
        anyhow::bail!("--rails pairs two nodes (each side takes all of its node's devices): give two different nodes");
    }
    if text.trim().parse::<usize>().is_ok() {
        anyhow::bail!("--rails {text} emulates rail NICs (pair --local --isolation node); a gate takes --rails auto");
    }
    Ok(Some(GateRails {
        selection: text.parse()?,
        margin,
        nodes: (p, d),
    }))
}

fn setup(e: impl std::fmt::Display) -> StepError {
    StepError::Setup(e.to_string())
}

/// The recipe's transport variables for a side's ranks, and its `UCX_NET_DEVICES` apart.
fn recipe_env(env: Option<&TransportEnv>) -> (Vec<(String, String)>, String) {
    let Some(env) = env else {
        return (Vec::new(), String::new());
    };
    let devices = env.vars.get("UCX_NET_DEVICES").cloned().unwrap_or_default();
    let rest = env
        .vars
        .iter()
        .filter(|(k, _)| k.as_str() != "UCX_NET_DEVICES")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (rest, devices)
}

/// The gate's pair step as a rails run: the pods, both nodes' rail maps, every rail with the
/// recipe's device mapping, the judged report (or why not).
pub async fn pair(
    cluster: icb_kube::Cluster,
    rails: &GateRails,
    plan: PairPlan,
    image: String,
    envs: (Option<&TransportEnv>, Option<&TransportEnv>),
    deadline: Instant,
    cancel: &icb_pair::CancellationToken,
) -> Result<PairEnd, StepError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let mut pods = KubeRailsPlan::new(
        (&rails.nodes.0, &rails.nodes.1),
        icb_kube::podspec::new_run_id(),
        image,
        left,
        cluster.request_timeout(),
        &plan,
    );
    let (prefill_env, prefill_devices) = recipe_env(envs.0);
    let (decode_env, decode_devices) = recipe_env(envs.1);
    pods.side_env = (prefill_env, decode_env);
    let mut seam = KubeRails::new(cluster, pods);
    let result = tokio::select! {
        r = measure(&mut seam, rails, plan, (&prefill_devices, &decode_devices), cancel) => r,
        _ = cancel.cancelled() => Err(PairError::Interrupted(Default::default())),
        _ = tokio::time::sleep_until(deadline) => Err(PairError::Setup("the rails run did not finish within --budget".into())),
    };
    let removed = seam.cleanup().await;
    match (result, removed) {
        (Ok(outcome), Ok(_)) => Ok(PairEnd::Judged(Box::new(outcome.report))),
        (Err(PairError::Interrupted(i)), removed) => Ok(PairEnd::Interrupted {
            cleanup: removed.unwrap_or_else(|e| format!("cleaning up failed: {e}")),
            partial: i.partial,
        }),
        (Err(e), _) => Err(setup(e)),
        (Ok(_), Err(e)) => Err(setup(format!("the rails run finished, but cleaning up failed: {e}"))),
    }
}

async fn measure(
    seam: &mut KubeRails,
    rails: &GateRails,
    plan: PairPlan,
    devices: (&str, &str),
    cancel: &icb_pair::CancellationToken,
) -> Result<icb_pair::PairOutcome, PairError> {
    seam.start().await.map_err(PairError::Launch)?;
    let prefill = seam.node_info(SideRole::Prefill).await.map_err(PairError::Launch)?;
    let decode = seam.node_info(SideRole::Decode).await.map_err(PairError::Launch)?;
    let mut rows = plan_rows(
        &prefill,
        &decode,
        &rails.selection,
        None,
        icb_core::rails::RailPattern::Aligned,
    )
    .map_err(|e| PairError::Setup(e.to_string()))?;
    // Every rank is told what the recipe tells its workers: one value for all of a side's ranks,
    // or nothing (UCX chooses). The counters then show where each rail's bytes really went.
    for row in &mut rows {
        row.prefill.ucx_net_devices = devices.0.to_string();
        row.decode.ucx_net_devices = devices.1.to_string();
    }
    tracing::info!(
        "gate: {} rails between {} and {}",
        rows.len(),
        prefill.node,
        decode.node
    );
    let plan = RailsPlan {
        pair: plan,
        rows,
        pattern: icb_core::rails::RailPattern::Aligned,
        margin: rails.margin,
        alone: AloneRuns::Suspects,
    };
    run_rails(&plan, seam, cancel, &mut |_, _| {}).await
}
