//! UCX statuses and misuse as one typed error.

use ucx_sys::ucs_status_t;

/// Everything that can go wrong while driving UCX. Messages are one line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// UCX could not be found, opened, or is too old.
    #[error(transparent)]
    Load(#[from] ucx_sys::LoadError),
    /// A UCX call returned an error status.
    #[error("UCX {op} failed: {text} (status {code})")]
    Status {
        op: &'static str,
        code: ucs_status_t,
        text: String,
    },
    /// A `ucp_config_modify` key/value was refused.
    #[error(
        "UCX refused configuration {key}={value}: {text}; check the name (without the UCX_ prefix) and value against `ucx_info -c`"
    )]
    Config { key: String, value: String, text: String },
    /// An operation did not finish before its deadline; it was cancelled.
    #[error("UCX {op} did not complete before its deadline and was cancelled; is the peer alive and progressing?")]
    Timeout { op: &'static str },
    /// The caller passed something UCX must not see.
    #[error("invalid {op}: {reason}")]
    Invalid { op: &'static str, reason: String },
}

impl Error {
    /// The raw UCX status, when this error came from UCX.
    pub fn status(&self) -> Option<ucs_status_t> {
        match self {
            Error::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    pub(crate) fn invalid(op: &'static str, reason: impl Into<String>) -> Self {
        Error::Invalid {
            op,
            reason: reason.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
