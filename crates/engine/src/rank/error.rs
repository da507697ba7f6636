//! What ends a KV rank early, by kind, for both engines' ranks: the coordinator's link (this
//! rank could not reach, hear or follow its coordinator), this host's setup (CPUs, the engine,
//! the buffer), or a repetition's transfers. The rank reports the one line to its coordinator
//! ([`RankUp::Failed`](icb_core::protocol::kv_rank::RankUp)) and exits with it; a caller that
//! decides (retry, blame the host or the link) matches on the kind, never on the line.

use icb_core::protocol::TOKEN_ENV;
use icb_core::protocol::kv_rank::{RankDown, RankId};
use std::time::Duration;

/// The coordinator's connection failed or the coordinator broke the protocol.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("bad coordinator address {address}: {source}")]
    BadAddress {
        address: String,
        source: std::net::AddrParseError,
    },
    #[error("cannot reach the coordinator at {address}: {source}")]
    Unreachable {
        address: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("coordinator connection: {0}")]
    Connection(std::io::Error),
    #[error("reading the coordinator: {0}")]
    Read(std::io::Error),
    #[error("bad line from the coordinator: {0}")]
    BadLine(serde_json::Error),
    #[error("the coordinator closed the connection")]
    Closed,
    /// The reader thread ended (after an error it already reported, or the process is ending).
    #[error("the coordinator's reader ended")]
    ReaderEnded,
    #[error("no word from the coordinator within {} s {during}", .waited.as_secs())]
    Silent { waited: Duration, during: String },
    #[error("the run's token ({TOKEN_ENV}) is not set: the coordinator admits only ranks that hold it")]
    NoToken,
    /// A message that has no place at this point of the protocol.
    #[error("the coordinator sent `{}` {instead}", message_name(.got))]
    Unexpected { got: RankDown, instead: &'static str },
    /// A field of a message that does not decode (a nonce, a peer's address).
    #[error("{what}: {reason}")]
    BadField { what: String, reason: String },
}

/// A coordinator message's name on the wire (its `type`), for a line that must stay short: a
/// `peers` message carries every peer's metadata.
fn message_name(m: &RankDown) -> &'static str {
    match m {
        RankDown::Challenge { .. } => "challenge",
        RankDown::Peers { .. } => "peers",
        RankDown::Go { .. } => "go",
        RankDown::Verify => "verify",
        RankDown::Finish => "finish",
    }
}

/// Why a KV rank stopped before its coordinator's `finish`.
#[derive(Debug, thiserror::Error)]
pub enum RankError {
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The rank cannot run on the CPUs its plan names (this host's cpuset).
    #[error("{rank}: {reason}")]
    Placement { rank: RankId, reason: String },
    /// The engine (UCX, NIXL) or the KV buffer failed on this host: set up, registered or
    /// progressed.
    #[error("{0}")]
    Engine(String),
    /// The plan's sizes do not fit this platform's address space.
    #[error("{0} does not fit this platform")]
    TooLarge(&'static str),
    /// A peer's endpoint, key or request could not be made (`peer` names it).
    #[error("{what} {peer}: {reason}")]
    Peer {
        what: &'static str,
        peer: RankId,
        reason: String,
    },
    /// A repetition's transfers failed.
    #[error("{during} {rep}: {reason}")]
    Transfer {
        during: &'static str,
        rep: u64,
        reason: String,
    },
    /// The blocks a decode rank received are not what its peers sent.
    #[error(transparent)]
    Verify(#[from] icb_memory::MemoryError),
    /// A repetition's transfers did not complete within the message deadline.
    #[error("repetition {rep} did not complete within {} s", .limit.as_secs())]
    Late { rep: u64, limit: Duration },
}

impl RankError {
    /// An engine's or the buffer's error, kept as its one line (the engines' error types differ;
    /// the kind is what a caller decides on).
    pub fn engine(e: impl std::fmt::Display) -> RankError {
        RankError::Engine(e.to_string())
    }

    /// Whether the coordinator (its link or its protocol) ended the rank, rather than this host
    /// or a transfer: a coordinator that went away already knows, and nothing is to be blamed on
    /// the rank's node.
    pub fn is_link(&self) -> bool {
        matches!(self, RankError::Link(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::protocol::kv_rank::RankSide;

    #[test]
    fn each_kind_reads_as_one_line_and_only_the_link_is_the_coordinators() {
        let rank = RankId {
            side: RankSide::Prefill,
            rank: 0,
        };
        let late = RankError::Late {
            rep: 3,
            limit: Duration::from_secs(30),
        };
        assert_eq!(late.to_string(), "repetition 3 did not complete within 30 s");
        assert!(!late.is_link());
        let silent = RankError::from(LinkError::Silent {
            waited: Duration::from_secs(5),
            during: "between repetitions".into(),
        });
        assert_eq!(
            silent.to_string(),
            "no word from the coordinator within 5 s between repetitions"
        );
        assert!(silent.is_link());
        let placed = RankError::Placement {
            rank,
            reason: "cannot run on CPUs 0-3".into(),
        };
        assert!(placed.to_string().starts_with(&rank.to_string()));
        assert!(!placed.is_link());
        let twice = RankError::from(LinkError::Unexpected {
            got: RankDown::Peers { peers: Vec::new() },
            instead: "a second time",
        });
        assert_eq!(twice.to_string(), "the coordinator sent `peers` a second time");
        assert!(twice.is_link());
        for e in [late, silent, placed, twice, RankError::TooLarge("the rank's buffer")] {
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }
}
