//! `gate --rails …`: the gate's pair step as a whole-node rails run on the two nodes, every rank
//! under the recipe's transport env and the recipe's own `UCX_NET_DEVICES` (or none where the
//! recipe sets none, as the workers would run), so a per-rank mapping that is not affine to each
//! node's rail map shows in the NICs' own counters: bytes through another rail's NIC, a rail NIC
//! that carried nothing. Runs on `icb_pair::rails`.

use crate::{PairEnd, StepError};
use icb_core::rails::RailPattern;
use icb_pair::{CancellationToken, PairError, PairOutcome, PairPlan, SideRole};
use icb_probe::TransportEnv;
use icb_rails::kube::{KubeRails, KubeRailsPlan};
use icb_rails::{
    AloneRuns, RailFlagError, RailRow, RailSelection, RailSite, RailsPlan, plan_rows, read_selection, run_rails,
};
use tokio::time::Instant;

/// The rails flags of a gate, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct GateRails {
    pub selection: RailSelection,
    pub margin: f64,
    pub nodes: (String, String),
}

/// Why `--rails` cannot gate these targets (one line, exit 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RailsFlagError {
    #[error("--rails gates whole nodes: give --prefill node/NAME --decode node/NAME")]
    NotNodes,
    #[error("--rails pairs two nodes (each side takes all of its node's devices): give two different nodes")]
    SameNode,
    #[error(transparent)]
    Rails(#[from] RailFlagError),
}

impl GateRails {
    /// Reads `--rails` (and `--rail-margin`) for a gate on two targets: `None` without `--rails`.
    pub fn read(rails: Option<&str>, margin: f64, prefill: &str, decode: &str) -> Result<Option<Self>, RailsFlagError> {
        let Some(text) = rails else { return Ok(None) };
        let node = |t: &str| t.strip_prefix("node/").map(str::to_string);
        let (Some(p), Some(d)) = (node(prefill), node(decode)) else {
            return Err(RailsFlagError::NotNodes);
        };
        if p == d {
            return Err(RailsFlagError::SameNode);
        }
        let (_, selection) = read_selection(Some(text), None, RailSite::Gate)?;
        Ok(Some(GateRails {
            selection,
            margin,
            nodes: (p, d),
        }))
    }
}

fn setup(e: impl std::fmt::Display) -> StepError {
    StepError::Setup(e.to_string())
}

/// The recipe's transport variables for a side's ranks, and its `UCX_NET_DEVICES` apart (empty
/// where the recipe sets none, or without a recipe).
pub fn recipe_env(env: Option<&TransportEnv>) -> (Vec<(String, String)>, String) {
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

/// Every rank is told what the recipe tells its workers: one value for all of a side's ranks,
/// or nothing (UCX chooses). The counters then show where each rail's bytes really went.
pub fn with_recipe_devices(rows: &mut [RailRow], prefill: &str, decode: &str) {
    for row in rows {
        row.prefill.ucx_net_devices = prefill.to_string();
        row.decode.ucx_net_devices = decode.to_string();
    }
}

/// The rails run's pods: whole nodes, every rank with the gate's engine flags (`--engine`,
/// `--nixl-lib`, `--ucx-profile`: the settings the gate qualified) and its side's recipe env;
/// with the recipe's `UCX_NET_DEVICES` of each side apart, for the rows.
pub fn rails_pods(
    rails: &GateRails,
    options: &icb_kube::PodOptions,
    times: (std::time::Duration, std::time::Duration),
    plan: &PairPlan,
    envs: (Option<&TransportEnv>, Option<&TransportEnv>),
) -> (KubeRailsPlan, (String, String)) {
    let nodes = (rails.nodes.0.as_str(), rails.nodes.1.as_str());
    let mut pods = KubeRailsPlan::new(nodes, icb_kube::podspec::new_run_id(), options, times, plan);
    let (prefill_env, prefill_devices) = recipe_env(envs.0);
    let (decode_env, decode_devices) = recipe_env(envs.1);
    pods.side_env = (prefill_env, decode_env);
    (pods, (prefill_devices, decode_devices))
}

/// The gate's pair step as a rails run: the pods, both nodes' rail maps, every rail with the
/// recipe's device mapping, the judged report (or why not).
pub async fn pair(
    cluster: icb_kube::Cluster,
    rails: &GateRails,
    plan: PairPlan,
    options: &icb_kube::PodOptions,
    envs: (Option<&TransportEnv>, Option<&TransportEnv>),
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<PairEnd, StepError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let times = (left, cluster.request_timeout());
    let (pods, (prefill_devices, decode_devices)) = rails_pods(rails, options, times, &plan, envs);
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
    cancel: &CancellationToken,
) -> Result<PairOutcome, PairError> {
    seam.start().await.map_err(PairError::Launch)?;
    let prefill = seam.node_info(SideRole::Prefill).await.map_err(PairError::Launch)?;
    let decode = seam.node_info(SideRole::Decode).await.map_err(PairError::Launch)?;
    let mut rows = plan_rows(&prefill, &decode, &rails.selection, None, RailPattern::Aligned)
        .map_err(|e| PairError::Setup(e.to_string()))?;
    with_recipe_devices(&mut rows, devices.0, devices.1);
    tracing::info!(
        "gate: {} rails between {} and {}",
        rows.len(),
        prefill.node,
        decode.node
    );
    let plan = RailsPlan {
        pair: plan,
        rows,
        pattern: RailPattern::Aligned,
        margin: rails.margin,
        alone: AloneRuns::Suspects,
    };
    run_rails(&plan, seam, cancel, &mut |_, _| {}).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rails_gate_two_different_whole_nodes_with_a_rail_map() {
        let read = |rails, p, d| GateRails::read(rails, 0.2, p, d);
        assert_eq!(read(None, "pod/a", "pod/b"), Ok(None));
        let gate = read(Some("auto"), "node/a", "node/b").unwrap().unwrap();
        assert_eq!(gate.nodes, ("a".to_string(), "b".to_string()));
        assert_eq!(gate.selection, RailSelection::Auto);
        assert_eq!(gate.margin, 0.2);
        assert_eq!(read(Some("auto"), "pod/a", "node/b"), Err(RailsFlagError::NotNodes));
        assert_eq!(read(Some("auto"), "node/a", "node/a"), Err(RailsFlagError::SameNode));
        assert_eq!(
            read(Some("4"), "node/a", "node/b"),
            Err(RailsFlagError::Rails(RailFlagError::EmulatedInGate("4".into())))
        );
        assert!(matches!(
            read(Some("gpu0"), "node/a", "node/b"),
            Err(RailsFlagError::Rails(RailFlagError::Selection(_)))
        ));
        assert_eq!(
            RailsFlagError::SameNode.to_string(),
            "--rails pairs two nodes (each side takes all of its node's devices): give two different nodes"
        );
    }

    #[test]
    fn the_rails_ranks_run_the_engine_the_gate_qualified() {
        let rails = GateRails::read(Some("auto"), 0.2, "node/a", "node/b").unwrap().unwrap();
        let flags = vec!["--engine".to_string(), "nixl".to_string()];
        let options = icb_kube::PodOptions::new("img".into(), flags.clone());
        let plan = PairPlan::new(icb_core::RunSettings::full_curve(), Default::default());
        let mut env = TransportEnv::default();
        env.vars.insert("UCX_NET_DEVICES".into(), "mlx5_0:1".into());
        env.vars.insert("UCX_TLS".into(), "rc".into());
        let times = (std::time::Duration::from_secs(60), std::time::Duration::from_secs(10));
        let (pods, devices) = rails_pods(&rails, &options, times, &plan, (Some(&env), None));
        assert_eq!(pods.side_args, flags);
        assert_eq!((pods.prefill_node.as_str(), pods.decode_node.as_str()), ("a", "b"));
        assert_eq!(devices, ("mlx5_0:1".to_string(), String::new()));
        assert_eq!(pods.side_env.0, vec![("UCX_TLS".to_string(), "rc".to_string())]);
    }

    #[test]
    fn the_recipes_devices_are_split_from_its_other_transport_variables() {
        assert_eq!(recipe_env(None), (vec![], String::new()));
        let env = TransportEnv::new(
            "recipe prefill",
            [
                ("UCX_TLS".to_string(), "rc,cuda_copy".to_string()),
                ("UCX_NET_DEVICES".to_string(), "mlx5_0:1".to_string()),
            ],
        );
        let (rest, devices) = recipe_env(Some(&env));
        assert_eq!(devices, "mlx5_0:1");
        assert_eq!(rest, [("UCX_TLS".to_string(), "rc,cuda_copy".to_string())]);
        let none = TransportEnv::new("recipe decode", [("UCX_TLS".to_string(), "rc".to_string())]);
        assert_eq!(recipe_env(Some(&none)).1, "", "a recipe that sets none leaves it unset");
    }
}
