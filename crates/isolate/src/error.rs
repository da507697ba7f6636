//! One error type for the crate; every message says what to change.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    /// Namespaces, veths and `ip netns` need CAP_SYS_ADMIN / CAP_NET_ADMIN.
    #[error("--isolation {mode} needs root (namespaces): run as root or use --isolation none")]
    NeedsRoot { mode: String },

    #[error("{what} need root: run as root")]
    NotRoot { what: &'static str },

    #[error("cannot run `{tool}`: {source}; install {package} (it provides `{tool}`)")]
    ToolMissing {
        tool: &'static str,
        package: &'static str,
        #[source]
        source: io::Error,
    },

    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },

    #[error("bad {what} '{name}': use 1-{max} characters from a-z, 0-9{extra}")]
    BadName {
        what: &'static str,
        name: String,
        max: usize,
        extra: &'static str,
    },

    #[error("a fabric needs between 1 and {max} nodes with distinct names; got {got:?}")]
    BadNodeSet { got: Vec<String>, max: usize },

    #[error("no node '{name}' in this fabric (nodes: {known})")]
    UnknownNode { name: String, known: String },

    #[error("bad isolation '{0}': use none, pod, host-ipc or node")]
    BadIsolation(String),

    /// Only `--isolation node` has a link between the sides to slow down.
    #[error("a link rate needs --isolation node (two emulated nodes), not --isolation {0}")]
    NoLink(String),

    #[error("no rail {rail} on node '{node}': {valid}")]
    UnknownRail { node: String, rail: usize, valid: String },

    #[error("a node has at most {max} emulated rails; got {got}")]
    TooManyRails { got: usize, max: usize },

    /// Only two emulated nodes have rails between them.
    #[error("rails need --isolation node (two emulated nodes), not --isolation {0}")]
    RailsNeedNode(String),

    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },

    #[error("processes still alive in {what} after {waited_ms} ms: pids {pids:?}; kill them and retry")]
    Survivors {
        what: String,
        pids: Vec<u32>,
        waited_ms: u64,
    },
}

impl IsolateError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        IsolateError::Io {
            context: context.into(),
            source,
        }
    }
}

pub type Result<T, E = IsolateError> = std::result::Result<T, E>;
