//! The one retry policy for API calls, watches and log follows: exponential backoff from 50 ms,
//! doubling to at most 1 s, with jitter, never giving up by count (every caller is bounded by its
//! own deadline instead). Built on `backon`, the crate kube-rs itself uses for retries. Which
//! errors a long-lived watch or log follow retries is [`Outage`]'s: the same rule as one API
//! call's (`Cluster::call`), so an API server restart is ridden out everywhere alike.

use crate::access::UNREACHABLE_RETRY_WINDOW;
use crate::error::KubeError;
use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use std::time::{Duration, Instant};

/// Whether a watch or a log follow tries again after an error: transient errors (5xx, 429, a
/// connection lost mid-stream) always, within the caller's own deadline; a server that cannot be
/// reached at all (refused: an API server restarting) for [`UNREACHABLE_RETRY_WINDOW`] from the
/// first of an unbroken run of such errors, then the error stands (a server that stays down is
/// reported, not waited on to the end of the pod's budget); anything else never.
#[derive(Debug, Default)]
pub struct Outage {
    unreachable_since: Option<Instant>,
}

impl Outage {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn retry(&mut self, err: &KubeError) -> bool {
        self.retry_at(err, Instant::now())
    }

    fn retry_at(&mut self, err: &KubeError, now: Instant) -> bool {
        if err.is_unreachable() {
            let since = *self.unreachable_since.get_or_insert(now);
            return now.duration_since(since) < UNREACHABLE_RETRY_WINDOW;
        }
        err.is_transient()
    }

    /// The server answered: a later refusal starts a new window.
    pub fn reset(&mut self) {
        self.unreachable_since = None;
    }
}

/// The delays between attempts: 50 ms, 100 ms, … 1 s, 1 s, …
pub struct Delays(ExponentialBackoff);

impl Delays {
    /// The next delay (never ends: the caller's deadline ends the retries).
    pub fn next_delay(&mut self) -> Duration {
        self.0.next().unwrap_or(MAX_DELAY)
    }
}

const MIN_DELAY: Duration = Duration::from_millis(50);
const MAX_DELAY: Duration = Duration::from_secs(1);

/// A fresh sequence of delays; start a new one after a success.
pub fn api_backoff() -> Delays {
    Delays(
        ExponentialBuilder::default()
            .with_min_delay(MIN_DELAY)
            .with_max_delay(MAX_DELAY)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_ridden_out_for_the_window_and_a_reset_starts_a_new_one() {
        let refused = KubeError::Unreachable {
            server: "http://127.0.0.1:1".into(),
            reason: "connection refused".into(),
        };
        let t0 = Instant::now();
        let mut outage = Outage::new();
        assert!(outage.retry_at(&refused, t0));
        let almost = t0 + UNREACHABLE_RETRY_WINDOW - Duration::from_millis(10);
        assert!(outage.retry_at(&refused, almost), "still within the window");
        let after = t0 + UNREACHABLE_RETRY_WINDOW + Duration::from_millis(10);
        assert!(!outage.retry_at(&refused, after), "the window is over");
        outage.reset();
        assert!(
            outage.retry_at(&refused, after),
            "a new window after the server answered"
        );
        let transport = KubeError::Transport {
            what: "watch".into(),
            detail: "connection reset".into(),
        };
        let much_later = after + UNREACHABLE_RETRY_WINDOW * 2;
        assert!(
            outage.retry_at(&transport, much_later),
            "transient errors are the deadline's to bound"
        );
        assert!(!outage.retry_at(&KubeError::Pod("gone".into()), much_later));
    }

    #[test]
    fn delays_grow_to_the_cap_and_never_end() {
        let mut d = api_backoff();
        let first = d.next_delay();
        assert!(first >= MIN_DELAY && first <= 2 * MIN_DELAY, "{first:?}");
        let later: Vec<Duration> = (0..20).map(|_| d.next_delay()).collect();
        assert!(later.iter().all(|x| *x <= 2 * MAX_DELAY), "{later:?}");
        assert!(later[10..].iter().all(|x| *x >= MAX_DELAY), "{later:?}");
    }
}
