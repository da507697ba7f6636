//! Removing what crashed runs left behind. A run's names carry its owner's pid; when that process
//! is gone (killed with SIGKILL, power cut mid-test), nothing else will ever delete them.

use crate::error::{IsolateError, Result};
use crate::fabric::remove_namespaces;
use crate::names::{RunTag, validate_prefix};
use crate::procs::{netns_names, pid_alive, tagged_pids};
use crate::rails::RAIL_TREES_SUFFIX;
use std::path::PathBuf;

/// Namespaces and processes of runs: what [`cleanup_stale`] removed, or what [`leftovers_of`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// Network namespaces (`ip netns` names).
    pub namespaces: Vec<String>,
    /// Pids of pods and their descendants.
    pub processes: Vec<u32>,
    /// Recorded rail-map trees of fabrics with rails (`{tmp}/{tag}-rails`).
    pub rail_trees: Vec<PathBuf>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.processes.is_empty() && self.rail_trees.is_empty()
    }

    /// What `gc --local` says it removed (or, with `dry_run`, would remove), one line each.
    pub fn report_lines(&self, dry_run: bool) -> Vec<String> {
        let verb = if dry_run { "would delete" } else { "deleted" };
        let mut lines: Vec<String> = self
            .namespaces
            .iter()
            .map(|ns| format!("{verb} network namespace {ns}"))
            .collect();
        if !self.processes.is_empty() {
            let verb = if dry_run { "would kill" } else { "killed" };
            lines.push(format!(
                "{verb} {} leftover processes: {:?}",
                self.processes.len(),
                self.processes
            ));
        }
        if self.is_empty() {
            lines.push("no leftovers of dead local runs".into());
        }
        lines
    }
}

/// The rail-map tree directories in the temp dir whose run tag (name before the suffix)
/// satisfies `pick`.
fn rail_trees(pick: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let tmp = std::env::temp_dir();
    let mut found: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.strip_suffix(RAIL_TREES_SUFFIX).is_some_and(&pick)
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// What [`cleanup_stale`] would remove now, removing nothing (needs no root).
pub fn find_stale(prefix: &str) -> Result<Leftovers> {
    validate_prefix(prefix)?;
    let is_stale = |name: &str| RunTag::parse_owner(prefix, name).is_some_and(|owner| !pid_alive(owner));
    Ok(Leftovers {
        namespaces: netns_names().into_iter().filter(|n| is_stale(n)).collect(),
        processes: tagged_pids(is_stale).into_iter().map(|(pid, _)| pid).collect(),
        rail_trees: rail_trees(is_stale),
    })
}

/// Deletes network namespaces named `{prefix}-{pid}-…` and kills pods tagged `{prefix}-{pid}-…`
/// whose owner `pid` is no longer alive. Live runs — parallel tests, another ic-bench — are never
/// touched. Owner pids are read in our PID namespace: call it from the host, not from inside a pod.
pub fn cleanup_stale(prefix: &str) -> Result<Leftovers> {
    let found = find_stale(prefix)?;
    if found.is_empty() {
        return Ok(Leftovers::default());
    }
    if !crate::gate::is_root() {
        return Err(IsolateError::NotRoot {
            what: "removing the namespaces of dead runs",
        });
    }
    let is_stale = |name: &str| RunTag::parse_owner(prefix, name).is_some_and(|owner| !pid_alive(owner));
    remove_namespaces(&found.namespaces, &format!("stale {prefix} runs"), is_stale)?;
    for dir in &found.rail_trees {
        if let Err(e) = std::fs::remove_dir_all(dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(IsolateError::io(format!("cannot remove {}", dir.display()), e));
        }
    }
    Ok(found)
}

/// What is still there of the runs that process `owner` created under `prefix`, dead or alive:
/// namespaces named `{prefix}-{owner}-…` and live processes tagged so. Lets a test (or an
/// orchestrator after cleanup) check that nothing leaked.
pub fn leftovers_of(prefix: &str, owner: u32) -> Leftovers {
    let mine = |name: &str| RunTag::parse_owner(prefix, name) == Some(owner);
    Leftovers {
        namespaces: netns_names().into_iter().filter(|n| mine(n)).collect(),
        processes: tagged_pids(mine).into_iter().map(|(pid, _)| pid).collect(),
        rail_trees: rail_trees(mine),
    }
}

#[cfg(test)]
mod report_tests {
    use super::*;

    #[test]
    fn gc_local_names_each_leftover_or_says_there_are_none() {
        let found = Leftovers {
            namespaces: vec!["icb-1-a".into()],
            processes: vec![7, 8],
            rail_trees: vec![],
        };
        assert_eq!(
            found.report_lines(true),
            [
                "would delete network namespace icb-1-a",
                "would kill 2 leftover processes: [7, 8]"
            ]
        );
        assert_eq!(found.report_lines(false)[1], "killed 2 leftover processes: [7, 8]");
        assert_eq!(
            Leftovers::default().report_lines(false),
            ["no leftovers of dead local runs"]
        );
    }
}
