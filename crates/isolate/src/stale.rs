//! Removing what crashed runs left behind. A run's names carry its owner's pid; when that process
//! is gone (killed with SIGKILL, power cut mid-test), nothing else will ever delete them.

use crate::error::{IsolateError, Result};
use crate::fabric::remove_namespaces;
use crate::names::{RunTag, validate_prefix};
use crate::procs::{netns_names, pid_alive, tagged_pids};

/// Namespaces and processes of runs: what [`cleanup_stale`] removed, or what [`leftovers_of`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// Network namespaces (`ip netns` names).
    pub namespaces: Vec<String>,
    /// Pids of pods and their descendants.
    pub processes: Vec<u32>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.processes.is_empty()
    }
}

/// What [`cleanup_stale`] would remove now, removing nothing (needs no root).
pub fn find_stale(prefix: &str) -> Result<Leftovers> {
    validate_prefix(prefix)?;
    let is_stale = |name: &str| RunTag::parse_owner(prefix, name).is_some_and(|owner| !pid_alive(owner));
    Ok(Leftovers {
        namespaces: netns_names().into_iter().filter(|n| is_stale(n)).collect(),
        processes: tagged_pids(is_stale).into_iter().map(|(pid, _)| pid).collect(),
    })
}

/// Deletes network namespaces named `{prefix}-{pid}-…` and kills pods tagged `{prefix}-{pid}-…`
/// whose owner `pid` is no longer alive. Live runs — parallel tests, another ic-bench — are never
/// touched. Owner pids are read in our PID namespace: call it from the host, not from inside a pod.
pub fn cleanup_stale(prefix: &str) -> Result<Leftovers> {
    let Leftovers { namespaces, processes } = find_stale(prefix)?;
    if namespaces.is_empty() && processes.is_empty() {
        return Ok(Leftovers::default());
    }
    if !crate::gate::is_root() {
        return Err(IsolateError::NotRoot {
            what: "removing the namespaces of dead runs",
        });
    }
    let is_stale = |name: &str| RunTag::parse_owner(prefix, name).is_some_and(|owner| !pid_alive(owner));
    remove_namespaces(&namespaces, &format!("stale {prefix} runs"), is_stale)?;
    Ok(Leftovers { namespaces, processes })
}

/// What is still there of the runs that process `owner` created under `prefix`, dead or alive:
/// namespaces named `{prefix}-{owner}-…` and live processes tagged so. Lets a test (or an
/// orchestrator after cleanup) check that nothing leaked.
pub fn leftovers_of(prefix: &str, owner: u32) -> Leftovers {
    let mine = |name: &str| RunTag::parse_owner(prefix, name) == Some(owner);
    Leftovers {
        namespaces: netns_names().into_iter().filter(|n| mine(n)).collect(),
        processes: tagged_pids(mine).into_iter().map(|(pid, _)| pid).collect(),
    }
}
