//! A sweep before its first pair: which nodes it qualifies ([`NodeChoice`], listed from the
//! cluster by [`select_nodes`]), its results file with nothing measured yet ([`new_results`]),
//! and what a resume does first ([`prepare`]: the earlier run's leftover pods removed, one more
//! attempt counted; `--label-nodes`' access checked before hours of pairs).

use icb_kube::KubeError;
use icb_sweep::results::SweepResults;
use icb_sweep::run::SweepEnd;
use icb_sweep::schedule::{Schedule, ScheduleError};

/// Which nodes a sweep qualifies, as the flags say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeChoice {
    /// `--prefill-pool`/`--decode-pool`: two label selectors, every node of both.
    Pools { prefill: String, decode: String },
    /// `--nodes A,B,C`: these, each a Ready, schedulable node.
    Named(Vec<String>),
    /// `-l SELECTOR`, or every Ready, schedulable node.
    Selector(Option<String>),
}

/// The nodes to qualify (sorted, each once) and, with pools, the two pools.
pub type Selected = (Vec<String>, Option<(Vec<String>, Vec<String>)>);

/// Why no sweep can be planned on these nodes (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("--nodes: node {0} is not a Ready, schedulable node of this cluster (kubectl get nodes)")]
    NotANode(String),
    #[error("no Ready, schedulable node matches: check -l SELECTOR (kubectl get nodes)")]
    NoneMatch,
}

impl NodeChoice {
    pub fn of_flags(pools: (Option<&str>, Option<&str>), nodes: &[String], selector: Option<&str>) -> NodeChoice {
        match pools {
            (Some(p), Some(d)) => NodeChoice::Pools {
                prefill: p.to_string(),
                decode: d.to_string(),
            },
            _ if !nodes.is_empty() => NodeChoice::Named(nodes.to_vec()),
            _ => NodeChoice::Selector(selector.map(str::to_string)),
        }
    }

    /// The choice from the nodes the cluster lists: `usable` lists the Ready, schedulable nodes
    /// for a selector (none: all of them).
    pub fn pick(&self, mut usable: impl FnMut(Option<&str>) -> Vec<String>) -> Result<Selected, SelectError> {
        match self {
            NodeChoice::Pools { prefill, decode } => {
                let (prefill, decode) = (usable(Some(prefill)), usable(Some(decode)));
                let all = sorted(prefill.iter().chain(&decode).cloned().collect());
                Ok((all, Some((prefill, decode))))
            }
            NodeChoice::Named(named) => {
                let known = usable(None);
                let nodes = sorted(named.clone());
                match nodes.iter().find(|n| !known.contains(n)) {
                    Some(missing) => Err(SelectError::NotANode(missing.clone())),
                    None => Ok((nodes, None)),
                }
            }
            NodeChoice::Selector(selector) => match usable(selector.as_deref()) {
                nodes if nodes.is_empty() => Err(SelectError::NoneMatch),
                nodes => Ok((nodes, None)),
            },
        }
    }
}

/// Sorted, each once.
pub fn sorted(mut nodes: Vec<String>) -> Vec<String> {
    nodes.sort();
    nodes.dedup();
    nodes
}

/// The nodes `choice` selects on `cluster` (each list one API call).
pub async fn select_nodes(cluster: &icb_kube::Cluster, choice: &NodeChoice) -> Result<Selected, SelectError> {
    let selectors: Vec<Option<String>> = match choice {
        NodeChoice::Pools { prefill, decode } => vec![Some(prefill.clone()), Some(decode.clone())],
        NodeChoice::Named(_) => vec![None],
        NodeChoice::Selector(s) => vec![s.clone()],
    };
    let mut listed = Vec::new();
    for s in &selectors {
        listed.push((s.clone(), icb_kube::nodes::usable_nodes(cluster, s.as_deref()).await?));
    }
    choice.pick(|s| {
        listed
            .iter()
            .find(|(sel, _)| sel.as_deref() == s)
            .map(|(_, nodes)| nodes.clone())
            .unwrap_or_default()
    })
}

/// Why a sweep could not be prepared (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Labels(#[from] icb_kube::node_labels::LabelError),
    #[error(transparent)]
    Conditions(#[from] icb_kube::node_conditions::ConditionError),
    #[error(transparent)]
    Matrix(#[from] icb_kube::fabric_matrix::MatrixError),
}

/// What a sweep writes into the cluster at the end (`--label-nodes`, `--node-conditions`,
/// `--matrix-configmap`): their access is checked before any pair.
#[derive(Debug, Clone, Default)]
pub struct NodeWrites {
    pub labels: bool,
    pub conditions: bool,
    /// The ConfigMap of the node-pair matrix, in the bench namespace.
    pub matrix_config_map: Option<String>,
}

/// What a new sweep's results file states before anything runs.
#[derive(Debug, Clone)]
pub struct NewSweep {
    pub schedule: Schedule,
    pub max_concurrent: usize,
    pub pair_budget_s: f64,
    pub criteria: icb_sweep::Criteria,
    pub tool_version: String,
}

/// The results file of a new sweep of `nodes`: its id, its rounds, nothing measured yet.
pub fn new_results(plan: NewSweep, nodes: Vec<String>) -> Result<SweepResults, ScheduleError> {
    let rounds = plan.schedule.rounds(&nodes, plan.max_concurrent)?;
    let now = jiff::Timestamp::now().to_string();
    let mut r = SweepResults::new(
        format!("sw{}", &icb_kube::podspec::new_run_id()[..6]),
        plan.schedule,
        nodes,
        plan.pair_budget_s,
        rounds,
    );
    r.tool_version = plan.tool_version;
    r.started_at = now.clone();
    r.updated_at = now;
    r.criteria = Some(plan.criteria);
    Ok(r)
}

/// Before any pair: a resume removes the earlier run's leftover pods (`removed` is told how many,
/// as soon as they are gone) and counts one more attempt; `--label-nodes` and `--node-conditions`
/// check their access. A
/// cluster-level API failure stops the sweep (`SweepEnd::ClusterDown`) with the file resumable.
pub async fn prepare(
    cluster: &icb_kube::Cluster,
    results: &mut SweepResults,
    (resume, writes): (bool, NodeWrites),
    removed: impl FnOnce(usize, &str),
) -> Result<SweepEnd, PrepareError> {
    if resume {
        results.resume_attempt();
        match icb_kube::gc::clean_sweep_leftovers(cluster, &results.sweep_id).await {
            Ok(0) => {}
            Ok(n) => removed(n, &results.sweep_id),
            Err(e) if e.cluster_level() => return Ok(SweepEnd::ClusterDown(e.to_string())),
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(first) = results.nodes.first() {
        // Before hours of pairs, not after: may this account patch nodes (their status) at all?
        if writes.labels {
            icb_kube::node_labels::check_access(cluster, first).await?;
        }
        if writes.conditions {
            icb_kube::node_conditions::check_access(cluster, first).await?;
        }
    }
    if let Some(name) = &writes.matrix_config_map {
        icb_kube::fabric_matrix::check_access(cluster, name).await?;
    }
    Ok(SweepEnd::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// A cluster of node-1…node-4; `gpu=a` selects 1 and 2, `gpu=b` 2 and 3.
    fn usable(selector: Option<&str>) -> Vec<String> {
        match selector {
            None => names(&["node-1", "node-2", "node-3", "node-4"]),
            Some("gpu=a") => names(&["node-1", "node-2"]),
            Some("gpu=b") => names(&["node-2", "node-3"]),
            Some(_) => vec![],
        }
    }

    #[test]
    fn pools_sweep_both_pools_once_each() {
        let choice = NodeChoice::of_flags((Some("gpu=a"), Some("gpu=b")), &names(&["node-4"]), None);
        let (nodes, pools) = choice.pick(usable).unwrap();
        assert_eq!(nodes, names(&["node-1", "node-2", "node-3"]));
        assert_eq!(
            pools,
            Some((names(&["node-1", "node-2"]), names(&["node-2", "node-3"])))
        );
    }

    #[test]
    fn named_nodes_are_sorted_once_and_each_must_be_usable() {
        let choice = NodeChoice::of_flags((None, None), &names(&["node-3", "node-1", "node-3"]), Some("x"));
        assert_eq!(choice.pick(usable).unwrap(), (names(&["node-1", "node-3"]), None));
        let missing = NodeChoice::Named(names(&["node-1", "node-9"]));
        let err = missing.pick(usable).unwrap_err();
        assert!(matches!(&err, SelectError::NotANode(n) if n == "node-9"));
        assert_eq!(
            err.to_string(),
            "--nodes: node node-9 is not a Ready, schedulable node of this cluster (kubectl get nodes)"
        );
    }

    #[test]
    fn a_selector_that_matches_nothing_is_refused() {
        let all = NodeChoice::of_flags((Some("gpu=a"), None), &[], None);
        assert_eq!(all, NodeChoice::Selector(None));
        assert_eq!(all.pick(usable).unwrap().0.len(), 4);
        let none = NodeChoice::Selector(Some("gpu=z".into()));
        assert!(matches!(none.pick(usable), Err(SelectError::NoneMatch)));
    }

    #[test]
    fn a_new_sweep_has_its_rounds_and_criteria_and_nothing_measured() {
        let criteria = icb_sweep::Criteria::default();
        let plan = NewSweep {
            schedule: Schedule::AllPairs,
            max_concurrent: 8,
            pair_budget_s: 120.0,
            criteria: criteria.clone(),
            tool_version: "9.9.9".into(),
        };
        let r = new_results(plan, names(&["node-1", "node-2", "node-3", "node-4"])).unwrap();
        assert!(r.sweep_id.starts_with("sw") && r.sweep_id.len() == 8, "{}", r.sweep_id);
        assert_eq!(r.planned(), 6);
        assert!(r.pairs.is_empty());
        assert_eq!((r.pair_budget_s, r.tool_version.as_str()), (120.0, "9.9.9"));
        assert_eq!(r.criteria, Some(criteria));
        assert_eq!(r.started_at, r.updated_at);
    }
}
