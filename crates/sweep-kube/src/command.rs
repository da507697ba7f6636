//! `sweep` from its parse step to its end ([`SweepCommand::run`]): the cluster connected (a
//! signal first: nothing started), the resumed file or a new plan, `--dry-run`'s plan, then the
//! flow ([`crate::flow::sweep`]) with its outputs opened only once a sweep runs. The binary keeps
//! the flags, the signal handler and what the end says.

use crate::flow::{self, FlowEnd, FlowError, FlowOptions};
use crate::start::{PlanError, PlanFlags};
use crate::{PairJob, RailsJob, Sweeper};
use icb_core::model::ControlKind;
use icb_kube::{ClusterOptions, KubeError, PodOptions};
use icb_pair::{CancellationToken, ExpectationInput};
use icb_report::{Exports, RunHistory};
use icb_sweep::Criteria;
use icb_sweep::results::SweepResults;
use std::time::Duration;

/// A sweep, decided by the command's parse step.
pub struct SweepCommand {
    pub cluster: ClusterOptions,
    /// `--resume FILE`'s results (`None`: a new sweep, planned from `plan`).
    pub file: Option<SweepResults>,
    /// The criteria a new plan is made with (a resumed sweep's are the file's).
    pub criteria: Criteria,
    pub plan: PlanFlags,
    /// `--dry-run`: the plan, and nothing run.
    pub dry_run: bool,
    /// What every pair runs with ([`PairJob`]; its budget is the plan's `pair_budget_s`).
    pub settings: icb_core::RunSettings,
    pub expectation: ExpectationInput,
    pub pods: PodOptions,
    pub rails: Option<RailsJob>,
    pub second_pass_controls: Vec<ControlKind>,
}

/// What a sweep's outputs are once it runs: the flow's options (the results file's default name
/// takes the plan's sweep id), the `--export-*` files, `--history`.
pub type Outputs = (FlowOptions, Exports, Option<RunHistory>);

/// How a sweep command ended.
#[derive(Debug)]
pub enum CommandEnd {
    /// A signal before the cluster answered or the plan was made: nothing was started.
    NotStarted,
    /// `--dry-run`: the plan (or the resumed file) to print.
    Planned(Box<SweepResults>),
    /// The flow's end: the exit code, or the line a signal ends with.
    Flowed(FlowEnd),
}

/// Why a sweep could not start or go on (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum SweepCommandError {
    #[error(transparent)]
    Cluster(KubeError),
    /// Planning without `--nodes` lists the nodes, which needs the cluster.
    #[error(
        "--dry-run with a selector or all nodes lists them from the cluster; give --nodes A,B,C to plan without one"
    )]
    DryRunCluster(#[source] KubeError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Flow(#[from] FlowError),
}

impl SweepCommand {
    /// Connects, plans (or takes the resumed file) and runs the sweep until `cancel`; `outputs`
    /// opens what it writes, once a sweep runs (never for `--dry-run`).
    pub async fn run<E>(
        self,
        cancel: &CancellationToken,
        outputs: impl FnOnce(&SweepResults) -> Result<Outputs, E>,
    ) -> Result<CommandEnd, E>
    where
        E: From<SweepCommandError>,
    {
        let connected = tokio::select! {
            c = icb_kube::connect(&self.cluster) => c,
            _ = cancel.cancelled() => return Ok(CommandEnd::NotStarted),
        };
        let cluster = connected.map_err(|e| match self.dry_run {
            true => SweepCommandError::DryRunCluster(e),
            false => SweepCommandError::Cluster(e),
        })?;
        let results = match self.file {
            Some(r) => r,
            None => tokio::select! {
                r = self.plan.plan(&cluster, self.criteria) => r.map_err(SweepCommandError::from)?,
                _ = cancel.cancelled() => return Ok(CommandEnd::NotStarted),
            },
        };
        if self.dry_run {
            return Ok(CommandEnd::Planned(Box::new(results)));
        }
        let job = PairJob {
            settings: self.settings,
            expectation: self.expectation,
            pods: self.pods,
            budget: Duration::from_secs_f64(results.pair_budget_s.max(1.0)),
            rails: self.rails,
            second_pass_controls: self.second_pass_controls,
        };
        let sweeper = Sweeper::new(cluster, job, cancel.clone());
        let (options, exports, history) = outputs(&results)?;
        let end = flow::sweep(&options, &sweeper, results, &exports, history).await;
        Ok(CommandEnd::Flowed(end.map_err(SweepCommandError::from)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_sweep::schedule::Schedule;

    fn command(kubeconfig: &str, dry_run: bool) -> SweepCommand {
        let criteria = icb_sweep::resume::Given::default().criteria();
        SweepCommand {
            cluster: ClusterOptions {
                kubeconfig: Some(kubeconfig.into()),
                ..Default::default()
            },
            file: Some(SweepResults::new("s1".into(), Schedule::Ring, vec![], 1.0, vec![])),
            criteria,
            plan: PlanFlags {
                choice: crate::plan::NodeChoice::of_flags((None, None), &[], None),
                schedule: None,
                matchings: 1,
                seed: 1,
                max_concurrent: 1,
                pair_budget: Duration::from_secs(1),
                tool_version: "0".into(),
            },
            dry_run,
            settings: icb_core::RunSettings::full_curve(),
            expectation: ExpectationInput::default(),
            pods: PodOptions::new("img:1".into(), vec![]),
            rails: None,
            second_pass_controls: vec![],
        }
    }

    fn never_opened(_: &SweepResults) -> Result<Outputs, SweepCommandError> {
        panic!("the outputs were opened without a sweep running")
    }

    /// A cluster that cannot be reached is its own error, said once; under `--dry-run` the line
    /// says why a plan needs the cluster and how to plan without one. The outputs stay unopened.
    #[test]
    fn an_unreachable_cluster_is_one_error_and_opens_no_output() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cancel = CancellationToken::new();
        for dry_run in [false, true] {
            let run = command("/nonexistent/kubeconfig", dry_run).run(&cancel, never_opened);
            let e = rt.block_on(run).unwrap_err();
            match dry_run {
                false => assert!(matches!(e, SweepCommandError::Cluster(_)), "{e:?}"),
                true => assert!(e.to_string().starts_with("--dry-run with a selector"), "{e}"),
            }
        }
    }

    /// A signal while a new plan waits for the cluster's nodes (a server that accepts and never
    /// speaks): nothing started, nothing opened.
    #[test]
    fn a_signal_while_a_new_plan_waits_starts_nothing() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let server = format!("https://{}", silent.local_addr().unwrap());
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
        );
        std::fs::write(&kubeconfig, config).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        rt.spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            stop.cancel();
        });
        let new_sweep = SweepCommand {
            file: None,
            ..command(kubeconfig.to_str().unwrap(), false)
        };
        let end = rt.block_on(new_sweep.run(&cancel, never_opened));
        assert!(matches!(end, Ok(CommandEnd::NotStarted)), "{end:?}");
    }
}
