//! The one retry policy for API calls, watches and log follows: exponential backoff from 50 ms,
//! doubling to at most 1 s, with jitter, never giving up by count (every caller is bounded by its
//! own deadline instead). Built on `backon`, the crate kube-rs itself uses for retries.

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use std::time::Duration;

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
    fn delays_grow_to_the_cap_and_never_end() {
        let mut d = api_backoff();
        let first = d.next_delay();
        assert!(first >= MIN_DELAY && first <= 2 * MIN_DELAY, "{first:?}");
        let later: Vec<Duration> = (0..20).map(|_| d.next_delay()).collect();
        assert!(later.iter().all(|x| *x <= 2 * MAX_DELAY), "{later:?}");
        assert!(later[10..].iter().all(|x| *x >= MAX_DELAY), "{later:?}");
    }
}
