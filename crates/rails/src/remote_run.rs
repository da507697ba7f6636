//! The prefill host of a bare-metal rails run (`connect HOST:PORT --rails`) from the agent's
//! answer to the rows' end: typed options in ([`RemoteRailsRun`]), one end out. The binary
//! reads the flags, calls [`run_remote_rails`] and emits what it returns.

use super::remote::RemoteRails;
use super::{Choice, RailPlanError, RailProgress, run_rails_with_controls};
use icb_core::model::{ControlKind, Locality};
use icb_pair::PairPlan;
use icb_pair::launcher::LaunchError;
use icb_pair::local::LocalOptions;
use icb_pair::{PairError, PairOutcome};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// A run against the rails agent at `agent` (HOST:PORT, `serve --rails` on the decode host).
pub struct RemoteRailsRun<'a> {
    pub agent: &'a str,
    /// What this host's ranks run.
    pub ranks: LocalOptions,
    pub locality: Locality,
    /// This host's name (the prefill node in the report).
    pub prefill_node: String,
    /// A recorded rail-map tree to read instead of `/sys`.
    pub tree: Option<PathBuf>,
    /// The command's row choice, and the pair plan of every row.
    pub choice: Choice,
    pub pair: PairPlan,
}

/// How a remote rails run ended.
#[derive(Debug)]
pub enum RemoteEnd {
    /// Cancelled before the agent answered: nothing was started.
    NotStarted,
    /// The rows ran (or stopped): the outcome to emit.
    Ran(Box<Result<PairOutcome, PairError>>),
}

/// Why the rows could not be planned (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum RemoteRailsError {
    #[error(transparent)]
    Connect(#[from] LaunchError),
    #[error(transparent)]
    Plan(#[from] RailPlanError),
}

/// Asks the agent for the decode host's rails (until `cancel`), plans the rows with this host's
/// rails, runs them and then `controls`; this host's ranks are gone when it returns.
pub async fn run_remote_rails(
    run: RemoteRailsRun<'_>,
    controls: &[ControlKind],
    cancel: &CancellationToken,
    progress: &mut RailProgress<'_>,
) -> Result<RemoteEnd, RemoteRailsError> {
    let (mut seam, decode) = tokio::select! {
        r = RemoteRails::connect(run.agent, run.ranks, run.locality, run.prefill_node) => r?,
        _ = cancel.cancelled() => return Ok(RemoteEnd::NotStarted),
    };
    let prefill = seam.prefill_info(run.tree.as_deref());
    let plan = run.choice.plan(run.pair, &prefill, &decode)?;
    let result = run_rails_with_controls(controls, &plan, &mut seam, cancel, progress).await;
    drop(seam);
    Ok(RemoteEnd::Ran(Box::new(result)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AloneRuns, RailSelection};
    use icb_core::rails::RailPattern;

    fn run(agent: &str) -> RemoteRailsRun<'_> {
        RemoteRailsRun {
            agent,
            ranks: LocalOptions::new("ic-bench".into()),
            locality: Locality::DifferentHosts,
            prefill_node: "prefill".into(),
            tree: None,
            choice: Choice::new(
                RailSelection::Auto,
                None,
                RailPattern::Aligned,
                0.2,
                AloneRuns::Suspects,
            ),
            pair: PairPlan::new(icb_core::RunSettings::full_curve(), Default::default()),
        }
    }

    #[tokio::test]
    async fn an_agent_that_is_no_host_port_is_one_line_and_a_cancel_starts_nothing() {
        let cancel = CancellationToken::new();
        let mut progress = |_: &crate::RailRow, _: &icb_core::protocol::CaseProgress| {};
        let e = run_remote_rails(run("no-port"), &[], &cancel, &mut progress)
            .await
            .unwrap_err();
        assert!(matches!(e, RemoteRailsError::Connect(_)), "{e}");
        assert_eq!(e.to_string(), "no-port: not a reachable HOST:PORT");
        cancel.cancel();
        let end = run_remote_rails(run("192.0.2.1:9"), &[], &cancel, &mut progress).await;
        assert!(matches!(end, Ok(RemoteEnd::NotStarted)), "{end:?}");
    }
}
