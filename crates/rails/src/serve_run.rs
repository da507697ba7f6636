//! The decode host of a bare-metal rails run (`serve --rails`) from its ranks' start to their
//! stop: typed options in ([`RailsAgent`]), one end out. The binary reads the flags, calls
//! [`run_rails_agent`] and says how it ended.

use super::agent::serve_agent;
use super::plan::NodeRailInfo;
use super::remote::{RailsHost, ServeRanks};
use icb_core::rails::RailEnd;
use icb_pair::launcher::LaunchError;
use icb_pair::local::LocalOptions;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long each serve rank may take to listen.
const RANK_STARTUP: Duration = Duration::from_secs(60);

/// What the agent serves: this host's rails, one serve rank per end, on `listen`.
pub struct RailsAgent {
    pub listen: SocketAddr,
    pub info: NodeRailInfo,
    pub ends: Vec<RailEnd>,
    pub ranks: LocalOptions,
}

/// How the agent ended (it runs until `cancel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentEnd {
    /// Cancelled while the ranks started: the ones started so far are stopped.
    CancelledAtStart,
    /// Cancelled while serving: what stopping the ranks did.
    Stopped(String),
}

/// Why the agent could not run (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum AgentRunError {
    #[error("--listen {listen}: cannot listen ({source}): pick another port")]
    Listen { listen: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Ranks(#[from] LaunchError),
    #[error("the ranks are unusable")]
    Poisoned,
}

/// Listens on the agent's address, starts one serve rank per end (each within a minute), says
/// where it listens through `listening` (the address, the number of ranks), serves
/// `connect --rails` until `cancel`, then stops every rank.
pub async fn run_rails_agent(
    agent: RailsAgent,
    cancel: &CancellationToken,
    listening: impl FnOnce(&str, usize),
) -> Result<AgentEnd, AgentRunError> {
    let listen = agent.listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| AgentRunError::Listen { listen, source })?;
    let started = tokio::select! {
        r = ServeRanks::start(&agent.ranks, &agent.ends, listen.ip(), RANK_STARTUP) => r?,
        _ = cancel.cancelled() => return Ok(AgentEnd::CancelledAtStart),
    };
    let host = Arc::new(RailsHost {
        info: agent.info,
        ranks: Mutex::new(started),
    });
    let address = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    listening(&address, agent.ends.len());
    serve_agent(listener, Arc::clone(&host), cancel.clone()).await;
    let mut ranks = std::mem::replace(
        &mut *host.ranks.lock().map_err(|_| AgentRunError::Poisoned)?,
        ServeRanks::empty(),
    );
    Ok(AgentEnd::Stopped(ranks.stop().await))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(listen: SocketAddr) -> RailsAgent {
        let empty = tempfile::tempdir().unwrap();
        RailsAgent {
            listen,
            info: super::super::info::node_info("host".into(), None, empty.path()),
            ends: Vec::new(),
            ranks: LocalOptions::new("ic-bench".into()),
        }
    }

    #[tokio::test]
    async fn a_taken_port_is_one_line_naming_listen() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listen = taken.local_addr().unwrap();
        let cancel = CancellationToken::new();
        let e = run_rails_agent(agent(listen), &cancel, |_, _| panic!("listened"))
            .await
            .unwrap_err();
        assert!(matches!(e, AgentRunError::Listen { .. }), "{e}");
        assert!(
            e.to_string().starts_with(&format!("--listen {listen}: cannot listen")),
            "{e}"
        );
    }

    #[tokio::test]
    async fn the_agent_says_where_it_listens_and_stops_at_cancel() {
        let cancel = CancellationToken::new();
        let mut said = None;
        let stop = cancel.clone();
        let run = run_rails_agent(agent("127.0.0.1:0".parse().unwrap()), &cancel, |address, ranks| {
            said = Some((address.to_string(), ranks));
            stop.cancel();
        });
        let end = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(end, AgentEnd::Stopped(_)), "{end:?}");
        let (address, ranks) = said.unwrap();
        assert!(
            address.starts_with("127.0.0.1:") && !address.ends_with(":0"),
            "{address}"
        );
        assert_eq!(ranks, 0);
    }
}
