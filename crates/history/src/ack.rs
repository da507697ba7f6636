//! `--ack FILE`: known regressions, reported as `acknowledged` and never failing a run, until
//! they expire.
//!
//! ```yaml
//! acks:
//!   - pair: [node-a, node-b]     # either order
//!     metric: bandwidth          # or latency
//!     reason: "NIC swap scheduled, INC-1234"
//!     expires: 2026-12-31        # the last day it applies (UTC)
//! ```

use crate::HistoryError;
use icb_core::model::{CaseKey, Metric};
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct AckFile {
    acks: Vec<AckEntry>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct AckEntry {
    pair: [String; 2],
    metric: String,
    reason: String,
    expires: String,
}

/// One acknowledged regression.
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    pub pair: [String; 2],
    pub metric: Metric,
    pub reason: String,
    /// The last day (UTC) it applies.
    pub expires: jiff::civil::Date,
}

/// What the ack file says, quoted in one error line (escaped, bounded: it is outside input).
fn quote(text: impl std::fmt::Display) -> String {
    icb_core::error_line::quote_outside(&text.to_string())
}

/// What is wrong with an ack file, one line; what it quotes from the file is escaped and bounded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    #[error("not an ack file ({0}); expected acks: [{{pair, metric, reason, expires}}]")]
    NotAckFile(String),
    #[error("ack {ack}: {quoted}")]
    Metric { ack: usize, quoted: String },
    #[error("ack {ack}: expires '{quoted}' is not a date (YYYY-MM-DD)")]
    Date { ack: usize, quoted: String },
    #[error("ack {ack}: a reason is required")]
    NoReason { ack: usize },
}

/// The acks of a file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Acks(pub Vec<Ack>);

impl Acks {
    /// Reads and checks an ack file; any problem is [`HistoryError::Ack`].
    pub fn load(path: &Path) -> Result<Acks, HistoryError> {
        let bad = |why: String| HistoryError::Ack {
            path: path.to_path_buf(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        Acks::parse(&text).map_err(|e| bad(e.to_string()))
    }

    pub fn parse(text: &str) -> Result<Acks, AckError> {
        // No source snippet: only its first line is kept (see icb_core's expectations file).
        let options = serde_saphyr::options! { with_snippet: false };
        let file: AckFile = serde_saphyr::from_str_with_options(text, options)
            .map_err(|e| AckError::NotAckFile(quote(first_line(&e.to_string()))))?;
        file.acks
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                let ack = i + 1;
                let metric = a
                    .metric
                    .parse()
                    .map_err(|e: String| AckError::Metric { ack, quoted: quote(e) })?;
                let expires = a.expires.parse().map_err(|_| AckError::Date {
                    ack,
                    quoted: quote(&a.expires),
                })?;
                if a.reason.trim().is_empty() {
                    return Err(AckError::NoReason { ack });
                }
                Ok(Ack {
                    pair: a.pair,
                    metric,
                    reason: a.reason,
                    expires,
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Acks)
    }

    /// The ack covering `metric` of `case`'s node pair on `today`, if any.
    pub fn find(&self, case: &CaseKey, metric: Metric, today: jiff::civil::Date) -> Option<&Ack> {
        self.0.iter().find(|a| {
            let [x, y] = &a.pair;
            let same = (x == &case.prefill && y == &case.decode) || (y == &case.prefill && x == &case.decode);
            same && a.metric == metric && today <= a.expires
        })
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(a: &str, b: &str) -> CaseKey {
        CaseKey {
            prefill: a.into(),
            decode: b.into(),
            rail: None,
            test: "put_bw".into(),
            memory: "host-host".into(),
            size: 1 << 20,
            blocks: None,
            direction: None,
            engine: "ucx".into(),
        }
    }

    #[test]
    fn an_ack_covers_its_pair_either_way_until_it_expires() {
        let acks = Acks::parse(
            "acks:\n  - pair: [a, b]\n    metric: bandwidth\n    reason: NIC swap\n    expires: 2026-12-31\n",
        )
        .unwrap();
        let day = |s: &str| s.parse::<jiff::civil::Date>().unwrap();
        assert!(
            acks.find(&key("b", "a"), Metric::BandwidthBps, day("2026-12-31"))
                .is_some()
        );
        assert!(
            acks.find(&key("a", "b"), Metric::LatencyP50Us, day("2026-12-01"))
                .is_none()
        );
        assert!(
            acks.find(&key("a", "c"), Metric::BandwidthBps, day("2026-12-01"))
                .is_none()
        );
        assert!(
            acks.find(&key("a", "b"), Metric::BandwidthBps, day("2027-01-01"))
                .is_none()
        );
    }

    #[test]
    fn malformed_ack_files_say_what_is_wrong() {
        let no_reason = "acks:\n  - pair: [a, b]\n    metric: bandwidth\n    reason: ' '\n    expires: 2026-12-31\n";
        assert_eq!(Acks::parse(no_reason), Err(AckError::NoReason { ack: 1 }));
        assert_eq!(
            Acks::parse(no_reason).unwrap_err().to_string(),
            "ack 1: a reason is required"
        );
        let bad_date = "acks:\n  - pair: [a, b]\n    metric: bandwidth\n    reason: x\n    expires: soon\n";
        let e = Acks::parse(bad_date).unwrap_err();
        assert!(
            matches!(e, AckError::Date { ack: 1, .. }) && e.to_string().contains("is not a date"),
            "{e}"
        );
        let bad_metric = "acks:\n  - pair: [a, b]\n    metric: speed\n    reason: x\n    expires: 2026-12-31\n";
        let e = Acks::parse(bad_metric).unwrap_err();
        assert!(
            matches!(e, AckError::Metric { ack: 1, .. }) && e.to_string().contains("is not a metric"),
            "{e}"
        );
        let unknown =
            "acks:\n  - pair: [a, b]\n    metric: bandwidth\n    reason: x\n    expires: 2026-12-31\n    owner: me\n";
        assert!(matches!(Acks::parse(unknown), Err(AckError::NotAckFile(_))));
        assert!(
            Acks::parse("just text")
                .unwrap_err()
                .to_string()
                .starts_with("not an ack file")
        );
        // What the file says is quoted escaped: the error stays one line.
        let forged =
            "acks:\n  - pair: [a, b]\n    metric: \"speed\\n\\u001b[2J\"\n    reason: x\n    expires: \"1\\r\\n\"\n";
        let e = Acks::parse(forged).unwrap_err().to_string();
        assert!(
            !e.chars().any(char::is_control) && e.contains(r"speed\n\u{1b}[2J"),
            "{e}"
        );
    }
}
