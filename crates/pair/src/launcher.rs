//! The seam between the one pair pipeline ([`crate::run_pair`]) and the ways of starting its two
//! sides: local processes in namespaces ([`crate::local`]), Kubernetes pods ([`crate::kube`]),
//! and, in tests, a scripted fake.
//!
//! A launcher only starts, describes and removes things; it never reads the protocol or judges.

use icb_core::model::{Locality, PairReport, Placement};
use icb_core::protocol::{ChildPlan, Listening};
use std::time::Duration;

/// A launcher could not do what it was asked: what kind of failure (for callers to act on) and
/// one line naming what to fix (for people).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LaunchError {
    pub kind: LaunchFailure,
    pub message: String,
}

/// What kind of launch failure (`icb_core::launch`, where the sweep and the gate read it too).
pub use icb_core::launch::LaunchFailure;

impl LaunchError {
    /// A failure of no particular kind.
    pub fn new(msg: impl Into<String>) -> Self {
        Self::of(LaunchFailure::Other, msg)
    }

    pub fn of(kind: LaunchFailure, msg: impl Into<String>) -> Self {
        LaunchError {
            kind,
            message: msg.into(),
        }
    }
}

// The pipeline drives one launcher from one task and never spawns its futures, so the futures
// need no `Send` bound; implementations that spawn keep their own tasks `Send`.
#[allow(async_fn_in_trait)]
pub trait Launcher {
    type Side: Side;

    /// Where the two sides run relative to each other; known before anything starts, because it
    /// decides the expectation the prefill side is given.
    fn locality(&self) -> Locality;

    /// `placement.mode` of the report, e.g. `local (isolation=pod)` or `kubernetes`.
    fn mode(&self) -> String;

    /// Starts the decode side: `ic-bench serve`, listening on a free port, serving one client.
    async fn start_decode(&mut self) -> Result<Self::Side, LaunchError>;

    /// Starts the prefill side: `ic-bench connect --plan` against the address the decode side
    /// announced (the launcher turns an unspecified IP into one the prefill side can reach).
    async fn start_prefill(&mut self, server: &Listening, plan: &ChildPlan) -> Result<Self::Side, LaunchError>;

    /// Where the run happened, for the report (hosts, pods, addresses).
    fn placement(&self, server: &Listening, report: &PairReport) -> Placement;

    /// Removes everything this launcher created (processes, namespaces, pods). The pipeline calls
    /// it exactly once, on every path, after both sides were stopped; the text says what was
    /// removed.
    async fn cleanup(&mut self) -> Result<String, LaunchError>;

    /// Makes a launcher whose run ended (cleaned up) ready to run the same placement once more:
    /// a negative control crosses the path the main run crossed (`crate::controls`). Launchers
    /// that create everything in their `start_*` calls (pods) need nothing.
    fn rearm(&mut self) -> Result<(), LaunchError> {
        Ok(())
    }

    /// The variables the next sides start without, even where their environment (the recipe's
    /// env, a pod template, ours) sets them: a knobs-off control. Empty: as configured again.
    /// Launchers that cannot leave variables out (workers already running) refuse.
    fn set_removed_env(&mut self, vars: &[String]) -> Result<(), LaunchError> {
        if vars.is_empty() {
            return Ok(());
        }
        Err(LaunchError::new(
            "this launcher cannot start its sides without the recipe's variables",
        ))
    }
}

/// One started side.
#[allow(async_fn_in_trait)]
pub trait Side {
    /// Who this is, for messages: `the prefill side (ic-bench connect)`, `the decode side (pod …)`.
    fn name(&self) -> String;

    /// The next line the side printed on stdout (a pod: its log); `None` once its output ended.
    async fn next_line(&mut self) -> Option<String>;

    /// After the output ended: why the side failed (exit status and its last words), or `None`
    /// when it exited cleanly. Bounded in time.
    async fn exit_note(&mut self) -> Option<String>;

    /// The side's last words so far (the last error-looking line it wrote), for a timeout message.
    fn last_words(&self) -> String;

    /// After the side ended (its [`Side::exit_note`] read): why it could not do its part, when
    /// the launcher can tell from the platform's own fields (a pod the scheduler cannot place,
    /// an image it cannot pull, an exit code). `None`: nothing known beyond the exit note.
    fn failure(&self) -> Option<LaunchFailure> {
        None
    }

    /// The process this launcher started, as this host numbers it, when it is a local process
    /// (a KV rank's record names it: inside its own PID namespace every rank is pid 1).
    fn pid(&self) -> Option<u32> {
        None
    }

    /// Lets the side exit on its own within `grace`, then makes sure it is gone (or leaves that
    /// to [`Launcher::cleanup`], for pods). Called on every path; bounded in time.
    async fn stop(&mut self, grace: Duration);

    /// The run was interrupted: pass the interruption on (SIGTERM), so that the prefill side
    /// writes the report of the cases it measured so far. A side that cannot be signalled (a pod
    /// before its deletion) does nothing, and the run ends without a partial report.
    async fn interrupt(&mut self) {}
}

/// One line from a side's output: the last line that reads like an error, else the last line,
/// without the side's own `ic-bench: error: ` prefix, at most 400 characters.
pub fn summarize<'a>(lines: impl DoubleEndedIterator<Item = &'a str> + Clone) -> String {
    /// What util-linux `unshare` (2.38) prints when the program it forked (its PID namespace's
    /// init) was killed by SIGKILL: it fails to re-raise the signal on itself and exits 1.
    const UNSHARE_REKILL: &str = "unshare: sigprocmask unblock failed";
    let nonempty = lines.map(str::trim).filter(|l| !l.is_empty());
    if nonempty
        .clone()
        .next_back()
        .is_some_and(|l| l.starts_with(UNSHARE_REKILL))
    {
        return "killed by a signal inside its PID namespace".into();
    }
    let pick = nonempty
        .clone()
        .rev()
        .find(|l| l.to_ascii_lowercase().contains("error"))
        .or_else(|| nonempty.clone().next_back());
    match pick {
        Some(line) => {
            let mut line = line.strip_prefix("ic-bench: error: ").unwrap_or(line).to_string();
            if line.len() > 400 {
                let cut = (0..=400).rev().find(|i| line.is_char_boundary(*i)).unwrap_or(0);
                line.truncate(cut);
                line.push('…');
            }
            line
        }
        None => "(nothing on stderr; rerun with -v)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_prefer_errors_and_stay_one_line() {
        let lines = ["starting", "ic-bench: error: cannot load UCX", "bye", ""];
        assert_eq!(summarize(lines.iter().copied()), "cannot load UCX");
        assert_eq!(summarize(["a", "b"].iter().copied()), "b");
        let killed = ["unshare: sigprocmask unblock failed: Invalid argument"];
        assert_eq!(
            summarize(killed.iter().copied()),
            "killed by a signal inside its PID namespace"
        );
        assert_eq!(summarize([""].iter().copied()), "(nothing on stderr; rerun with -v)");
        let long = "é".repeat(500);
        let s = summarize([long.as_str()].iter().copied());
        assert!(s.len() <= 404 && s.ends_with('…'));
    }
}
