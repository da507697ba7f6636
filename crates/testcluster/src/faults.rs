//! Fault knobs: API errors and latency for matching requests, image pull failures, and container
//! crashes, so tests can show ic-bench turns each into a clear outcome.

use std::collections::BTreeSet;
use std::time::Duration;

use rand::{Rng as _, SeedableRng as _, rngs::StdRng};

use crate::selector::LabelSelector;
use crate::status::ApiError;

/// Which requests a fault applies to.
#[derive(Debug, Clone)]
pub struct RequestMatch {
    method: Option<String>,
    path: String,
    query_contains: Option<String>,
}

impl RequestMatch {
    /// `method` like `"POST"`; `path` a glob where `*` matches any run of characters
    /// (e.g. `/api/v1/namespaces/*/pods`, `*/log`).
    pub fn new(method: &str, path: &str) -> Self {
        RequestMatch {
            method: Some(method.to_ascii_uppercase()),
            path: path.to_string(),
            query_contains: None,
        }
    }

    /// Any method on `path`.
    pub fn path(path: &str) -> Self {
        RequestMatch {
            method: None,
            path: path.to_string(),
            query_contains: None,
        }
    }

    /// Only requests whose raw query contains `needle` (e.g. `"watch=true"`).
    pub fn query_contains(mut self, needle: &str) -> Self {
        self.query_contains = Some(needle.to_string());
        self
    }

    pub fn matches(&self, method: &str, path: &str, query: &str) -> bool {
        self.method.as_deref().is_none_or(|m| m.eq_ignore_ascii_case(method))
            && glob(&self.path, path)
            && self.query_contains.as_deref().is_none_or(|q| query.contains(q))
    }
}

/// `*` matches any (possibly empty) run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[derive(Debug, Clone)]
enum ApiFaultKind {
    Error {
        code: u16,
        retry_after: Option<u32>,
    },
    Latency(Duration),
    /// Each matching request fails with this probability (drawn from [`Faults`]' seeded rng).
    RandomError {
        code: u16,
        probability: f64,
    },
}

#[derive(Debug, Clone)]
struct ApiFault {
    matcher: RequestMatch,
    kind: ApiFaultKind,
    /// `None`: forever.
    remaining: Option<usize>,
}

/// A container crash rule: matching containers are killed `after` their start and report
/// `exit_code`.
#[derive(Debug, Clone)]
pub struct CrashRule {
    pub selector: LabelSelector,
    pub name: Option<String>,
    pub after: Duration,
    pub exit_code: i32,
    pub remaining: Option<usize>,
}

#[derive(Debug, Default)]
pub struct Faults {
    api: Vec<ApiFault>,
    pub pull_failures: BTreeSet<String>,
    crashes: Vec<CrashRule>,
    /// Exec sessions whose connection breaks after this many stdin bytes (one use each).
    exec_stdin_cuts: Vec<u64>,
    /// Draws for [`ApiFaultKind::RandomError`]: seeded, so one seed gives the same draws (which
    /// requests they hit still depends on the order requests arrive in).
    rng: Option<StdRng>,
}

/// What to do with one request.
#[derive(Debug, Default)]
pub struct Decision {
    pub delay: Duration,
    pub error: Option<ApiError>,
}

impl Faults {
    pub fn add_error(&mut self, matcher: RequestMatch, code: u16, retry_after: Option<u32>, count: Option<usize>) {
        self.api.push(ApiFault {
            matcher,
            kind: ApiFaultKind::Error { code, retry_after },
            remaining: count,
        });
    }

    pub fn add_latency(&mut self, matcher: RequestMatch, delay: Duration, count: Option<usize>) {
        self.api.push(ApiFault {
            matcher,
            kind: ApiFaultKind::Latency(delay),
            remaining: count,
        });
    }

    /// Every matching request fails with `probability`, until cleared.
    pub fn add_random_error(&mut self, matcher: RequestMatch, code: u16, probability: f64, seed: u64) {
        self.rng = Some(StdRng::seed_from_u64(seed));
        self.api.push(ApiFault {
            matcher,
            kind: ApiFaultKind::RandomError { code, probability },
            remaining: None,
        });
    }

    pub fn add_crash(&mut self, rule: CrashRule) {
        self.crashes.push(rule);
    }

    pub fn clear(&mut self) {
        *self = Faults::default();
    }

    pub fn add_exec_stdin_cut(&mut self, after_bytes: u64) {
        self.exec_stdin_cuts.push(after_bytes);
    }

    /// The next exec session with stdin takes the oldest pending cut, if any.
    pub fn take_exec_stdin_cut(&mut self) -> Option<u64> {
        (!self.exec_stdin_cuts.is_empty()).then(|| self.exec_stdin_cuts.remove(0))
    }

    /// Consumes one use of every matching API fault: latencies add up, the first error wins.
    pub fn decide(&mut self, method: &str, path: &str, query: &str) -> Decision {
        let mut decision = Decision::default();
        for fault in &mut self.api {
            if fault.remaining == Some(0) || !fault.matcher.matches(method, path, query) {
                continue;
            }
            match &fault.kind {
                ApiFaultKind::Latency(d) => decision.delay += *d,
                ApiFaultKind::Error { code, retry_after } => {
                    if decision.error.is_some() {
                        continue;
                    }
                    let mut error = ApiError::for_code(*code);
                    error.retry_after = *retry_after;
                    decision.error = Some(error);
                }
                ApiFaultKind::RandomError { code, probability } => {
                    let hit = self.rng.as_mut().is_some_and(|r| r.random_bool(*probability));
                    if decision.error.is_none() && hit {
                        decision.error = Some(ApiError::for_code(*code));
                    }
                }
            }
            if let Some(n) = &mut fault.remaining {
                *n -= 1;
            }
        }
        self.api.retain(|f| f.remaining != Some(0));
        decision
    }

    /// Whether pulling `image` fails (exact name, or its repository without tag).
    pub fn pull_fails(&self, image: &str) -> bool {
        self.pull_failures.contains(image)
            || self.pull_failures.iter().any(|f| {
                image
                    .strip_prefix(f.as_str())
                    .is_some_and(|t| t.starts_with([':', '@']))
            })
    }

    /// The crash to apply to a container of a pod with these labels and name, consuming one use.
    pub fn crash_for(
        &mut self,
        labels: Option<&std::collections::BTreeMap<String, String>>,
        pod_name: &str,
    ) -> Option<(Duration, i32)> {
        let rule = self.crashes.iter_mut().find(|r| {
            r.remaining != Some(0) && r.selector.matches(labels) && r.name.as_deref().is_none_or(|n| n == pod_name)
        })?;
        if let Some(n) = &mut rule.remaining {
            *n -= 1;
        }
        Some((rule.after, rule.exit_code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("/api/v1/namespaces/*/pods", "/api/v1/namespaces/default/pods"));
        assert!(!glob("/api/v1/namespaces/*/pods", "/api/v1/namespaces/default/pods/a"));
        assert!(glob("*/log", "/api/v1/namespaces/d/pods/a/log"));
        assert!(glob("*", ""));
        assert!(glob("/a*b*c", "/a-b-c"));
        assert!(!glob("/a*b*c", "/a-c"));
    }

    #[test]
    fn counted_errors_run_out() {
        let mut f = Faults::default();
        f.add_error(
            RequestMatch::new("POST", "/api/v1/namespaces/*/pods"),
            500,
            None,
            Some(2),
        );
        f.add_latency(RequestMatch::path("*"), Duration::from_millis(5), None);
        assert_eq!(
            f.decide("GET", "/api/v1/namespaces/d/pods", "").error.map(|e| e.code),
            None
        );
        for _ in 0..2 {
            let d = f.decide("POST", "/api/v1/namespaces/d/pods", "");
            assert_eq!(d.error.map(|e| e.code), Some(500));
            assert_eq!(d.delay, Duration::from_millis(5));
        }
        assert!(f.decide("POST", "/api/v1/namespaces/d/pods", "").error.is_none());
    }

    #[test]
    fn random_errors_follow_the_seed_and_the_probability() {
        let draws = |seed: u64| {
            let mut f = Faults::default();
            f.add_random_error(RequestMatch::path("/api/*"), 500, 0.25, seed);
            (0..400)
                .map(|_| f.decide("GET", "/api/v1/pods", "").error.map(|e| e.code))
                .collect::<Vec<_>>()
        };
        let a = draws(7);
        assert_eq!(a, draws(7), "same seed, same draws");
        assert_ne!(a, draws(8));
        let hits = a.iter().filter(|c| **c == Some(500)).count();
        assert!((60..=140).contains(&hits), "about a quarter of 400: {hits}");
        let mut f = Faults::default();
        f.add_random_error(RequestMatch::path("/api/*"), 500, 1.0, 1);
        assert!(
            f.decide("GET", "/version", "").error.is_none(),
            "only matching requests"
        );
    }

    #[test]
    fn pull_failure_matches_tags() {
        let mut f = Faults::default();
        f.pull_failures.insert("ghcr.io/x/bench".into());
        assert!(f.pull_fails("ghcr.io/x/bench:1.0"));
        assert!(f.pull_fails("ghcr.io/x/bench"));
        assert!(!f.pull_fails("ghcr.io/x/bench2"));
    }
}
