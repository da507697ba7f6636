//! `ic-bench connect --within DURATION HOST:PORT`: the preflight before a serving engine starts
//! (issue 41 item 3; docs/kubernetes.md wires it as an init container against an `ic-bench serve`
//! sidecar of the other role). The whole run, from the first connection attempt to the verdict,
//! is bounded: the server is waited for within a share of the budget, the cases are fitted into
//! most of the rest, and a watchdog cuts the run at the deadline. A run cut short is not known
//! (exit 2, saying how much was measured), never a pass; a finished run exits as `connect` does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The share of `--within` the server may take to answer (a sidecar still starting).
const CONNECT_SHARE: f64 = 0.3;
/// The share the cases' measured time may use (the rest: UCX start-up, wire-up, the report).
const MEASURE_SHARE: f64 = 0.5;
/// Below this per-case time a measurement means nothing.
const MIN_CASE_S: f64 = 0.02;
/// Between two connection attempts to a server that refused.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// An armed preflight: the token the run honours and whether the deadline cut it.
pub struct Preflight {
    pub within: Duration,
    started: Instant,
    token: CancellationToken,
    cut: Arc<AtomicBool>,
}

impl Preflight {
    /// Starts the watchdog: at `within` it cancels a child of `signals` (so a signal still
    /// cancels the run, and is told apart from the deadline by its own token).
    pub fn arm(within: Duration, signals: &CancellationToken) -> Preflight {
        let token = signals.child_token();
        let cut = Arc::new(AtomicBool::new(false));
        let (watched, flag) = (token.clone(), Arc::clone(&cut));
        // A plain thread: `connect` runs the engine synchronously, outside any runtime. It ends
        // with the process (a finished run exits long before it wakes).
        std::thread::spawn(move || {
            std::thread::sleep(within);
            flag.store(true, Ordering::SeqCst);
            watched.cancel();
        });
        Preflight {
            within,
            started: Instant::now(),
            token,
            cut,
        }
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// The deadline cut the run (not a signal).
    pub fn cut(&self, signals: &CancellationToken) -> bool {
        self.cut.load(Ordering::SeqCst) && !signals.is_cancelled()
    }

    /// How long the server may take to answer: a share of the budget, never more than asked.
    pub fn connect_timeout(&self, asked: Duration) -> Duration {
        asked.min(self.within.mul_f64(CONNECT_SHARE))
    }

    /// Runs `attempt` (given what is left of the connect share) again while the server cannot be
    /// reached (refused: a sidecar still starting; a Service without endpoints yet), until that
    /// share of the budget is spent; any other outcome is returned as it is.
    pub fn retry_refused<T>(
        &self,
        asked: Duration,
        mut attempt: impl FnMut(Duration) -> Result<T, crate::EngineError>,
    ) -> Result<T, crate::EngineError> {
        let until = self.started + self.connect_timeout(asked);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match attempt(left.max(RETRY_PAUSE)) {
                Err(crate::EngineError::Connect { .. })
                    if Instant::now() + RETRY_PAUSE < until && !self.token.is_cancelled() =>
                {
                    std::thread::sleep(RETRY_PAUSE);
                }
                other => return other,
            }
        }
    }

    /// `--within 10s` as the user wrote it.
    pub fn budget(&self) -> String {
        humantime::format_duration(self.within).to_string()
    }
}

/// Fits the cases into the budget: each case's measured time at most its share of
/// [`MEASURE_SHARE`] of `within`. The note says what changed; the error names the flags.
pub fn fit(settings: &mut icb_core::model::RunSettings, within: Duration) -> Result<Option<String>, String> {
    let cases = settings.case_list().len().max(1);
    let per_case = within.as_secs_f64() * MEASURE_SHARE / cases as f64;
    let budget = humantime::format_duration(within);
    if per_case < MIN_CASE_S {
        return Err(format!(
            "{cases} cases do not fit in --within {budget}: give fewer --tests/--sizes/--memory or a longer --within"
        ));
    }
    if settings.max_time_s <= per_case {
        return Ok(None);
    }
    settings.max_time_s = per_case;
    settings.min_time_s = settings.min_time_s.min(per_case);
    Ok(Some(format!(
        "preflight: {cases} cases fitted into --within {budget}: at most {per_case:.2}s of measuring each"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cases_are_fitted_into_half_the_budget_and_too_many_are_refused_naming_the_flags() {
        let mut s = icb_core::model::RunSettings::verdict_profile();
        s.max_time_s = 5.0;
        let cases = s.case_list().len();
        let note = fit(&mut s, Duration::from_secs(10)).unwrap().expect("a note");
        assert!((s.max_time_s - 5.0 / cases as f64).abs() < 1e-9, "{}", s.max_time_s);
        assert!(s.min_time_s <= s.max_time_s);
        assert!(note.contains("--within 10s"), "{note}");
        let err = fit(&mut s, Duration::from_millis(10)).unwrap_err();
        assert!(err.contains("--within") && err.contains("--tests"), "{err}");
    }

    #[test]
    fn the_deadline_cancels_the_run_and_is_told_apart_from_a_signal() {
        let signals = CancellationToken::new();
        let p = Preflight::arm(Duration::from_millis(20), &signals);
        assert!(!p.cut(&signals));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !p.token().is_cancelled() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(p.token().is_cancelled() && p.cut(&signals));
        assert!(!signals.is_cancelled(), "the deadline does not cancel the signal token");
        signals.cancel();
        assert!(!p.cut(&signals), "a signal is a signal, not the deadline");
        assert_eq!(p.connect_timeout(Duration::from_secs(10)), Duration::from_millis(6));
    }

    #[test]
    fn a_refused_connection_is_asked_again_within_the_connect_share_and_other_errors_are_not() {
        let signals = CancellationToken::new();
        let p = Preflight::arm(Duration::from_secs(3), &signals);
        let refused = || crate::EngineError::Connect {
            addr: "10.0.0.5:18515".into(),
            detail: "Connection refused".into(),
        };
        let mut tries = 0;
        let ok = p.retry_refused(Duration::from_secs(10), |_| {
            tries += 1;
            if tries < 3 { Err(refused()) } else { Ok(tries) }
        });
        assert_eq!(ok.unwrap(), 3, "answered on the third try");
        let started = Instant::now();
        let mut tries = 0;
        let never = p.retry_refused(Duration::from_secs(10), |left| {
            tries += 1;
            assert!(left <= Duration::from_millis(900), "{left:?}");
            Err::<(), _>(refused())
        });
        assert!(matches!(never, Err(crate::EngineError::Connect { .. })));
        assert!(
            tries > 1 && started.elapsed() < Duration::from_secs(2),
            "{tries} tries, {:?}",
            started.elapsed()
        );
        let mut tries = 0;
        let other = p.retry_refused(Duration::from_secs(10), |_| {
            tries += 1;
            Err::<(), _>(crate::EngineError::Peer("bad token".into()))
        });
        assert!(matches!(other, Err(crate::EngineError::Peer(_))) && tries == 1);
    }
}
