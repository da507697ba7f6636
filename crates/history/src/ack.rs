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
        Acks::parse(&text).map_err(bad)
    }

    pub fn parse(text: &str) -> Result<Acks, String> {
        // No source snippet: only its first line is kept (see icb_core's expectations file).
        let options = serde_saphyr::options! { with_snippet: false };
        let file: AckFile = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
            format!(
                "not an ack file ({}); expected acks: [{{pair, metric, reason, expires}}]",
                quote(first_line(&e.to_string()))
            )
        })?;
        file.acks
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                let metric = a.metric.parse().map_err(|e| format!("ack {}: {}", i + 1, quote(e)))?;
                let expires = a.expires.parse().map_err(|_| {
                    format!(
                        "ack {}: expires '{}' is not a date (YYYY-MM-DD)",
                        i + 1,
                        quote(&a.expires)
                    )
                })?;
                if a.reason.trim().is_empty() {
                    return Err(format!("ack {}: a reason is required", i + 1));
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
        assert_eq!(Acks::parse(no_reason).unwrap_err(), "ack 1: a reason is required");
        let bad_date = "acks:\n  - pair: [a, b]\n    metric: bandwidth\n    reason: x\n    expires: soon\n";
        assert!(Acks::parse(bad_date).unwrap_err().contains("is not a date"));
        let bad_metric = "acks:\n  - pair: [a, b]\n    metric: speed\n    reason: x\n    expires: 2026-12-31\n";
        assert!(Acks::parse(bad_metric).unwrap_err().contains("is not a metric"));
        let unknown =
            "acks:\n  - pair: [a, b]\n    metric: bandwidth\n    reason: x\n    expires: 2026-12-31\n    owner: me\n";
        assert!(Acks::parse(unknown).unwrap_err().starts_with("not an ack file"));
        assert!(Acks::parse("just text").unwrap_err().starts_with("not an ack file"));
        // What the file says is quoted escaped: the error stays one line.
        let forged =
            "acks:\n  - pair: [a, b]\n    metric: \"speed\\n\\u001b[2J\"\n    reason: x\n    expires: \"1\\r\\n\"\n";
        let e = Acks::parse(forged).unwrap_err();
        assert!(
            !e.chars().any(char::is_control) && e.contains(r"speed\n\u{1b}[2J"),
            "{e}"
        );
    }
}
