//! The fault knobs of a [`TestCluster`]: failing, slowing or killing what the emulated cluster
//! does, so that tests see the API errors, image-pull failures, crashes and broken exec streams a
//! real cluster gives. Each knob lands in the fault table (`crate::faults`) the server and the
//! node agents consult.

use std::time::Duration;

use crate::cluster::lock;
use crate::{Error, RequestMatch, Result, TestCluster, faults, process, selector};

impl TestCluster {
    /// The next `count` requests matching `matcher` get HTTP `code` with a Kubernetes Status body.
    pub fn fail_requests(&self, matcher: RequestMatch, code: u16, count: usize) {
        lock(&self.shared.faults).add_error(matcher, code, None, Some(count));
    }

    /// Like [`Self::fail_requests`], with a `Retry-After: seconds` header (for 429/503).
    pub fn fail_requests_retry_after(&self, matcher: RequestMatch, code: u16, count: usize, seconds: u32) {
        lock(&self.shared.faults).add_error(matcher, code, Some(seconds), Some(count));
    }

    /// Every matching request fails until [`Self::clear_faults`].
    pub fn fail_requests_always(&self, matcher: RequestMatch, code: u16) {
        lock(&self.shared.faults).add_error(matcher, code, None, None);
    }

    /// Every matching request fails with HTTP `code` with `probability` (0 to 1), drawn from an
    /// rng seeded with `seed`, until [`Self::clear_faults`]: errors on random requests.
    pub fn fail_requests_randomly(&self, matcher: RequestMatch, code: u16, probability: f64, seed: u64) -> Result<()> {
        if !(0.0..=1.0).contains(&probability) {
            return Err(Error::Config(format!(
                "probability {probability} is not between 0 and 1"
            )));
        }
        lock(&self.shared.faults).add_random_error(matcher, code, probability, seed);
        Ok(())
    }

    /// Matching requests wait `delay` before being handled (`count` = `None`: until cleared).
    pub fn add_latency(&self, matcher: RequestMatch, delay: Duration, count: Option<usize>) {
        lock(&self.shared.faults).add_latency(matcher, delay, count);
    }

    /// Pulling `image` (exact, or any tag of this repository) fails: ErrImagePull, then
    /// ImagePullBackOff, until [`Self::allow_image_pull`].
    pub fn fail_image_pull(&self, image: &str) {
        lock(&self.shared.faults).pull_failures.insert(image.to_string());
    }

    pub fn allow_image_pull(&self, image: &str) {
        lock(&self.shared.faults).pull_failures.remove(image);
    }

    /// Containers of pods matching `label_selector` that start from now on are killed `after` their
    /// start and report `exit_code` (`Duration::ZERO`: crash at once). `count` = `None`: every time.
    pub fn crash_containers(
        &self,
        label_selector: &str,
        after: Duration,
        exit_code: i32,
        count: Option<usize>,
    ) -> Result<()> {
        let selector = selector::LabelSelector::parse(label_selector).map_err(|e| Error::Config(e.to_string()))?;
        lock(&self.shared.faults).add_crash(faults::CrashRule {
            selector,
            name: None,
            after,
            exit_code,
            remaining: count,
        });
        Ok(())
    }

    /// Kills the running containers of a pod now (they report exit code 137), as an OOM kill or a
    /// node problem would.
    pub fn kill_pod_processes(&self, namespace: &str, name: &str) -> Result<()> {
        let handle = self
            .shared
            .handle(&(namespace.to_string(), name.to_string()))
            .ok_or_else(|| Error::Config(format!("pod {namespace}/{name} is not running")))?;
        for slot in lock(&handle.containers).values() {
            if let Some(pgid) = slot.pgid {
                process::signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
            }
        }
        Ok(())
    }

    /// The next exec session that sends stdin loses its connection after `after_bytes` bytes of
    /// it, as a dropped network would (the command sees end-of-input, the client a closed
    /// websocket without an exit status). Several calls queue several cuts.
    pub fn break_exec_stdin_after(&self, after_bytes: u64) {
        lock(&self.shared.faults).add_exec_stdin_cut(after_bytes);
    }

    /// Removes every fault knob.
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }
}
