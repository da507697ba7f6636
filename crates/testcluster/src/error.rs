//! Why the emulated cluster could not do what a test asked.

/// Errors from starting or driving the emulated cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("emulated cluster config: {0}")]
    Config(String),
    #[error("emulated cluster namespaces: {0} (namespace isolation needs root; use Isolation::Host otherwise)")]
    Namespace(String),
    #[error("emulated cluster I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("emulated cluster kube client: {0}")]
    Kube(String),
    #[error("emulated cluster: {0}")]
    Other(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
