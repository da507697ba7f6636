//! What the two sides of a pair (`ic-bench serve`, `ic-bench connect`) say to the process that
//! started them, and what that process tells the prefill side to do.
//!
//! A parent (a local launcher, a Kubernetes launcher, an in-place launcher, a test) never parses
//! free text: every line it reads from a side's stdout (or pod log) is one [`SideEvent`], parsed by
//! the one function [`parse_side_line`]. What the prefill side needs to run arrives as one typed
//! [`ChildPlan`] document (`connect --plan JSON`), so the child measures against exactly the
//! settings and expectation the parent decided, instead of a round trip through CLI flags.
//!
//! Lines that are not ours (UCX's own log, which it writes to stdout with a buffered stream and
//! may flush half a line just before ours) are skipped, not errors.

use crate::error_line::quote_outside;
use crate::model::{CaseResult, Expectation, PAIR_SCHEMA, PairReport, RunSettings};
use serde::{Deserialize, Serialize};

pub mod kv_rank;
mod writer;
pub use writer::SideWriter;

/// Schema of the `serve` lines (`listening`) and of the progress lines of `connect --plan`.
pub const SIDE_SCHEMA: &str = "ic-bench.serve/v1";
/// Schema of the document a parent hands to `connect --plan`.
pub const CHILD_PLAN_SCHEMA: &str = "ic-bench.plan/v1";

/// One line a side prints on stdout for its parent.
/// The environment variable `serve` and `connect` read their shared token from when no
/// `--token-file` is given (launchers hand each run's token to both sides through it).
pub const TOKEN_ENV: &str = "IC_BENCH_TOKEN";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum SideEvent {
    /// `serve` is bound: `address` is where it listens (an unspecified IP means "every address of
    /// this host"; the launcher knows which one the peer can reach).
    Listening(Listening),
    /// `connect --plan` finished one case (for progress; the report repeats it).
    Case(Box<CaseProgress>),
    /// `connect --plan` is done: the whole report (the same object as `-o json`).
    Report(Box<PairReport>),
    /// The side is about to exit with an error (exit 2): why, typed, so the parent can name
    /// the cause in its one line (and a caller such as `gate` can match on it) without reading
    /// the side's stderr or its text. A parent that does not know this event skips the line.
    Failed(SideFailure),
}

/// Why a side gave up, as the side itself knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideFailure {
    pub schema: String,
    pub cause: SideErrorKind,
    /// The side's own one-line error (what it prints after `ic-bench: error: `).
    pub message: String,
}

impl SideFailure {
    pub fn new(cause: SideErrorKind, message: impl Into<String>) -> Self {
        SideFailure {
            schema: SIDE_SCHEMA.into(),
            cause,
            message: message.into(),
        }
    }
}

/// The kinds of side failure a caller may want to act on; everything else is `Other`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SideErrorKind {
    /// No usable UCX: not found, not loadable, or too old.
    UcxNotFound,
    /// UCX loaded but `ucp_init` (or its worker) failed. `variable` names the setting that most
    /// likely caused it when one is set, e.g. `UCX_TLS=bogus` (name=value).
    UcxInit {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        variable: Option<String>,
    },
    /// `serve` cannot listen: the address (port) is taken.
    AddressInUse,
    /// The two sides' tokens do not match (or one side has none): `connect` was not admitted.
    Unauthorized,
    /// `serve` turned the client away: busy with another client, or connections came too fast.
    Busy,
    /// Any other error; the message says what.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listening {
    pub schema: String,
    pub address: String,
    /// The UCX version the server loaded.
    pub ucx: String,
}

impl Listening {
    pub fn new(address: impl Into<String>, ucx: impl Into<String>) -> Self {
        Listening {
            schema: SIDE_SCHEMA.into(),
            address: address.into(),
            ucx: ucx.into(),
        }
    }

    /// The announced address as a socket address.
    pub fn socket_addr(&self) -> Result<std::net::SocketAddr, ProtocolError> {
        self.address
            .parse()
            .map_err(|_| ProtocolError::BadAddress(quote_outside(&self.address)))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseProgress {
    pub schema: String,
    /// 1-based index of this case among `total`.
    pub index: usize,
    pub total: usize,
    pub case: CaseResult,
}

/// Why a line that claims to be ours cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error(
        "the side speaks {found}, this ic-bench reads {expected}: run the same ic-bench version on both sides (for pods: --image)"
    )]
    Version { found: String, expected: String },
    #[error(
        "the side printed a {what} line that does not parse ({detail}): run the same ic-bench version on both sides"
    )]
    Malformed { what: &'static str, detail: String },
    #[error("the decode side announced a bad listen address '{0}' (expected IP:PORT): ic-bench serve is broken")]
    BadAddress(String),
}

/// Parses one stdout line of a side: `Ok(None)` for lines that are not ours (UCX log text, blank
/// lines), an error for a line that is ours but unusable (another version, malformed).
pub fn parse_side_line(line: &str) -> Result<Option<SideEvent>, ProtocolError> {
    // Our object may follow half a UCX log line, and the UCX text may itself contain '{': try
    // each '{' that starts a JSON object running to the end of the line.
    let Some(value) = line
        .match_indices('{')
        .find_map(|(at, _)| serde_json::from_str::<serde_json::Value>(line[at..].trim_end()).ok())
    else {
        return Ok(None);
    };
    let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or_default();
    let event = value.get("event").and_then(|e| e.as_str());
    let (what, expected) = match event {
        Some("listening") => ("listening", SIDE_SCHEMA),
        Some("case") => ("case", SIDE_SCHEMA),
        Some("report") => ("report", PAIR_SCHEMA),
        Some("failed") => ("failed", SIDE_SCHEMA),
        // A bare report, as `connect --json-line` prints it.
        None if schema.starts_with(family(PAIR_SCHEMA)) => ("report", PAIR_SCHEMA),
        _ => return Ok(None),
    };
    if !schema.starts_with(family(expected)) {
        return Ok(None);
    }
    if schema != expected {
        return Err(ProtocolError::Version {
            found: quote_outside(schema),
            expected: expected.to_string(),
        });
    }
    let malformed = |e: serde_json::Error| ProtocolError::Malformed {
        what,
        detail: quote_outside(&e.to_string()),
    };
    let parsed = match (what, event) {
        ("report", None) => SideEvent::Report(Box::new(serde_json::from_value(value).map_err(malformed)?)),
        _ => serde_json::from_value(value).map_err(malformed)?,
    };
    if let SideEvent::Listening(l) = &parsed {
        l.socket_addr()?;
    }
    Ok(Some(parsed))
}

/// `ic-bench.pair/` of `ic-bench.pair/v1`: lines of the same family but another version are
/// reported as a version mismatch; lines of other families are not ours.
fn family(schema: &str) -> &str {
    schema.rsplit_once('/').map_or(schema, |(f, _)| &schema[..=f.len()])
}

/// Everything the prefill side needs to run, decided once by the parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildPlan {
    pub schema: String,
    pub settings: RunSettings,
    /// Resolved for the placement the parent arranged; its `locality` is the placement's.
    pub expectation: Expectation,
    /// `placement.mode` of the report (e.g. `local (isolation=pod)`, `kubernetes`).
    pub placement_mode: String,
    /// UCX peer-failure error handling on the endpoints (as NIXL asks for).
    #[serde(default)]
    pub ucx_peer_errors: bool,
    /// `--ucx-profile` the prefill side runs with (`nixl`: NIXL's peer-failure mode and UCX
    /// defaults; its report then judges put/get only). Absent: UCX's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ucx_profile: Option<crate::model::UcxProfile>,
    /// How long the client may try to reach the server.
    pub connect_timeout_s: f64,
    /// UCX settings (names without `UCX_`) the prefill side applies over its environment: a
    /// negative control forces `TLS=tcp` (`--control tcp`). Absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ucx_config: Vec<(String, String)>,
}

impl ChildPlan {
    pub fn to_json(&self) -> String {
        // A plan holds only numbers, enums and short strings: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses `connect --plan`'s document, refusing another version.
    pub fn from_json(text: &str) -> Result<ChildPlan, ProtocolError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| ProtocolError::Malformed {
            what: "plan",
            detail: quote_outside(&e.to_string()),
        })?;
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or_default();
        if schema != CHILD_PLAN_SCHEMA {
            return Err(ProtocolError::Version {
                found: if schema.is_empty() {
                    "no schema".into()
                } else {
                    quote_outside(schema)
                },
                expected: CHILD_PLAN_SCHEMA.into(),
            });
        }
        serde_json::from_value(value).map_err(|e| ProtocolError::Malformed {
            what: "plan",
            detail: quote_outside(&e.to_string()),
        })
    }
}

/// One protocol line, as a side prints it (compact JSON, no newline).
pub fn side_line(event: &SideEvent) -> String {
    // Every event is plain data (no maps with non-string keys): serializing cannot fail.
    serde_json::to_string(event).unwrap_or_default()
}

#[cfg(test)]
mod tests;
