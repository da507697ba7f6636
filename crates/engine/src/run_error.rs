//! What can go wrong on the UCX thread, typed so the control side can tell a dead peer, a
//! deadline, a UCX failure and a corrupted payload apart (and keep UCX's own error as the source).

use icb_memory::MemoryError;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The control side gave up on the phase (the peer closed the control connection).
    #[error("aborted: the peer closed the control connection")]
    Aborted,
    /// The phase's deadline passed with operations still outstanding.
    #[error("did not complete before the phase deadline: is the peer alive and progressing?")]
    Deadline,
    /// A UCX call failed; the UCX error is kept as it is.
    #[error(transparent)]
    Ucx(#[from] ucx::Error),
    /// The server's packed remote key could not be unpacked on this endpoint.
    #[error("the server's rkey: {0}")]
    Rkey(#[source] ucx::Error),
    /// Registering a buffer for RMA by the peer failed.
    #[error("cannot register the buffer with UCX: {0}")]
    Register(#[source] ucx::Error),
    /// A message of the wrong length arrived (a confused peer, or a truncated transfer).
    #[error("received a {got}-byte {what}, expected {expected}")]
    Length {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    /// A size the peer asked for does not fit this machine's address space.
    #[error("{0} bytes do not fit this machine's address space")]
    TooLarge(u64),
    /// Allocating or filling a buffer failed (host memory, or CUDA).
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The payload that arrived is not the one sent; `what` says which buffer.
    #[error("{what}payload corrupted: {source}")]
    Corrupted {
        what: &'static str,
        #[source]
        source: MemoryError,
    },
    /// A phase or finish arrived with no case prepared.
    #[error("no case prepared")]
    NoCase,
    /// An operation was asked for before the endpoint to the peer existed.
    #[error("no UCX endpoint to the peer")]
    NoEndpoint,
    /// What the peer reported about its own side (text from the control channel).
    #[error("{0}")]
    Remote(String),
    /// A broken invariant of this program.
    #[error("internal: {0}")]
    Internal(&'static str),
}

impl RunError {
    /// The same corruption, said of the echoed (tag_lat pong) buffer.
    pub fn echoed(self) -> RunError {
        match self {
            RunError::Corrupted { source, .. } => RunError::Corrupted {
                what: "echoed ",
                source,
            },
            other => other,
        }
    }

    /// True when the phase ended because of the peer or the clock rather than an error here.
    pub fn is_abort_or_deadline(&self) -> bool {
        matches!(self, RunError::Aborted | RunError::Deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn ucx_errors_stay_the_source() {
        let e = RunError::Rkey(ucx::Error::Timeout { op: "unpack" });
        assert!(e.to_string().starts_with("the server's rkey: UCX unpack"), "{e}");
        assert!(e.source().is_some_and(|s| s.is::<ucx::Error>()));
        let e: RunError = ucx::Error::Timeout { op: "put" }.into();
        assert!(matches!(e, RunError::Ucx(ucx::Error::Timeout { .. })));
        assert!(!e.is_abort_or_deadline() && RunError::Deadline.is_abort_or_deadline());
    }
}
