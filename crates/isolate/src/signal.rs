//! Ctrl-C and friends. Pods lead their own process groups, so a terminal's SIGINT reaches only the
//! orchestrator; it must catch the signal, drop its guards (killing pods, deleting namespaces) and
//! exit, because the default action would kill it before any `Drop` runs.

use crate::error::{IsolateError, Result};
use tokio::signal::unix::{SignalKind, signal};

/// Which signal asked us to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Interrupt,
    Terminate,
    Hangup,
}

impl std::fmt::Display for StopSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Hangup => "SIGHUP",
        })
    }
}

/// Installs handlers for SIGINT, SIGTERM and SIGHUP now (so a signal that arrives before the
/// first poll is not lost) and returns a stream-like listener. Needs a tokio runtime.
pub struct StopSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub fn install() -> Result<Self> {
        let make = |kind: SignalKind| signal(kind).map_err(|e| IsolateError::io("cannot install a signal handler", e));
        Ok(StopSignals {
            int: make(SignalKind::interrupt())?,
            term: make(SignalKind::terminate())?,
            hup: make(SignalKind::hangup())?,
        })
    }

    /// Resolves at the next SIGINT, SIGTERM or SIGHUP.
    pub async fn recv(&mut self) -> StopSignal {
        tokio::select! {
            _ = self.int.recv() => StopSignal::Interrupt,
            _ = self.term.recv() => StopSignal::Terminate,
            _ = self.hup.recv() => StopSignal::Hangup,
        }
    }
}
