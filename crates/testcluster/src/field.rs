//! Why the emulated API server refuses a field of what a client sent (HTTP 422 `Invalid`), by
//! kind: what Kubernetes itself refuses, or what only this emulation does not implement (so a
//! product change that starts using it fails loudly instead of being ignored). The text is
//! Kubernetes' own wording where it has one.

/// A refused field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// The API server refuses it too: `field` is its path (`metadata.labels`), `detail` the rule.
    #[error("{field}: {detail}")]
    Invalid { field: String, detail: String },
    /// A real API server takes it; the emulated one does not implement it.
    #[error("{0}")]
    Unsupported(String),
}

impl FieldError {
    pub fn invalid(field: impl Into<String>, detail: impl std::fmt::Display) -> FieldError {
        FieldError::Invalid {
            field: field.into(),
            detail: detail.to_string(),
        }
    }
}

/// What a label key or value, or a name part, breaks of Kubernetes' naming rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must be no more than 63 characters")]
    TooLong,
    #[error(
        "a valid name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
    )]
    Characters,
    #[error("prefix part must be a lowercase RFC 1123 subdomain")]
    Prefix,
}
