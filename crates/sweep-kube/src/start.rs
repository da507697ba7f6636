//! A new sweep's results file from its flags: the nodes ([`NodeChoice`], from the cluster, or for
//! `--dry-run --nodes A,B,C` as named), the schedule the flags choose, nothing measured yet.

use crate::plan::{NewSweep, NodeChoice, SelectError, new_results, select_nodes, sorted};
use icb_sweep::Criteria;
use icb_sweep::results::SweepResults;
use icb_sweep::schedule::{ChoiceError, Schedule, ScheduleError};
use std::time::Duration;

/// The flags that plan a new sweep.
#[derive(Debug, Clone)]
pub struct PlanFlags {
    pub choice: NodeChoice,
    /// `--schedule` (`None`: all-pairs, or bipartite with pools).
    pub schedule: Option<String>,
    pub matchings: usize,
    pub seed: u64,
    pub max_concurrent: usize,
    /// `--pair-timeout`: the time budget of one pair.
    pub pair_budget: Duration,
    pub tool_version: String,
}

/// Why no sweep can be planned (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Choice(#[from] ChoiceError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error(transparent)]
    Select(#[from] SelectError),
}

impl PlanFlags {
    /// The plan `--dry-run` can print without a cluster: of the nodes `--nodes` names (not
    /// checked against a cluster, which stderr says). `None`: the nodes come from the cluster.
    pub fn offline(&self, criteria: &Criteria) -> Result<Option<SweepResults>, PlanError> {
        let NodeChoice::Named(nodes) = &self.choice else {
            return Ok(None);
        };
        eprintln!("ic-bench: --dry-run: the --nodes were not checked against a cluster");
        Ok(Some(self.results(sorted(nodes.clone()), None, criteria.clone())?))
    }

    /// A new sweep of the nodes the flags select from the cluster.
    pub async fn plan(&self, cluster: &icb_kube::Cluster, criteria: Criteria) -> Result<SweepResults, PlanError> {
        let (nodes, pools) = select_nodes(cluster, &self.choice).await?;
        self.results(nodes, pools, criteria)
    }

    /// The results file of a new sweep: its plan, nothing measured yet.
    fn results(
        &self,
        nodes: Vec<String>,
        pools: Option<(Vec<String>, Vec<String>)>,
        criteria: Criteria,
    ) -> Result<SweepResults, PlanError> {
        let plan = NewSweep {
            schedule: Schedule::choose(self.schedule.as_deref(), pools, self.matchings, self.seed)?,
            max_concurrent: self.max_concurrent,
            pair_budget_s: self.pair_budget.as_secs_f64(),
            criteria,
            tool_version: self.tool_version.clone(),
        };
        Ok(new_results(plan, nodes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(choice: NodeChoice, schedule: Option<&str>) -> PlanFlags {
        PlanFlags {
            choice,
            schedule: schedule.map(str::to_string),
            matchings: 2,
            seed: 1,
            max_concurrent: 0,
            pair_budget: Duration::from_secs(90),
            tool_version: "9.9.9".into(),
        }
    }

    #[test]
    fn named_nodes_plan_offline_sorted_and_once_with_the_flags_budget() {
        let named = NodeChoice::Named(vec!["b".into(), "a".into(), "b".into()]);
        let r = flags(named, Some("ring"))
            .offline(&Criteria::default())
            .unwrap()
            .expect("a plan");
        assert_eq!(r.nodes, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(r.schedule, Schedule::Ring);
        assert_eq!(r.pair_budget_s, 90.0);
        assert_eq!(r.tool_version, "9.9.9");
        assert!(r.pairs.is_empty());
    }

    #[test]
    fn a_selector_or_pools_need_the_cluster_and_a_bad_schedule_is_refused() {
        assert!(
            flags(NodeChoice::Selector(None), None)
                .offline(&Criteria::default())
                .unwrap()
                .is_none()
        );
        let pools = NodeChoice::Pools {
            prefill: "p".into(),
            decode: "d".into(),
        };
        assert!(flags(pools, None).offline(&Criteria::default()).unwrap().is_none());
        let named = NodeChoice::Named(vec!["a".into(), "b".into()]);
        let e = flags(named, Some("bipartite"))
            .offline(&Criteria::default())
            .unwrap_err();
        assert!(matches!(e, PlanError::Choice(ChoiceError::BipartiteNeedsPools)), "{e}");
    }
}
