//! How the control side steers a phase running on the UCX thread (abort, stop, deadlines), and
//! what the initiator hands back when it ends.

use super::*;

/// Flags the control side uses to end a phase early, and the phase's deadline.
#[derive(Clone)]
pub struct PhaseCtl {
    abort: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    deadline: Instant,
    /// Loops that read the clock every operation (ping-pong, block lists) end the phase early,
    /// cleanly, once past this: a case's `max_time_s` holds even when the machine is so busy
    /// that a round takes far longer than planned.
    soft_deadline: Option<Instant>,
}

impl PhaseCtl {
    pub fn new(deadline: Instant) -> Self {
        PhaseCtl {
            abort: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            deadline,
            soft_deadline: None,
        }
    }
    /// The same, ending per-operation-timed loops early once past `soft` (see the field).
    pub fn with_soft_deadline(mut self, soft: Option<Instant>) -> Self {
        self.soft_deadline = soft;
        self
    }
    #[inline]
    pub(super) fn past_soft_deadline(&self, now: Instant) -> bool {
        self.soft_deadline.is_some_and(|d| now >= d)
    }
    /// The peer is gone or misbehaved: give up at the next check.
    pub fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }
    /// Whether the initiator said the target may stop progressing.
    #[inline]
    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    /// When the phase fails with [`RunError::Deadline`].
    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }
    /// The initiator finished a one-sided phase: the target may stop progressing.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
    #[inline]
    pub(super) fn check(&self) -> Result<(), RunError> {
        if self.abort.load(Ordering::Relaxed) {
            return Err(RunError::Aborted);
        }
        if Instant::now() >= self.deadline {
            return Err(RunError::Deadline);
        }
        Ok(())
    }
}

/// What the initiator measured in one phase.
pub struct PhaseOutcome {
    /// Time of the timed iterations (the probe operation excluded).
    pub elapsed_s: f64,
    /// The probe operation's protocol info string (warmup phase only).
    pub info: Option<String>,
    /// Round-trip times in ns (latency tests; per-list times for KV-shaped cases).
    pub rtt: Option<Histogram<u64>>,
    /// Operations timed: fewer than asked when the phase's soft deadline ended it early.
    pub iterations: u64,
    /// How long the probe operation (warmup phase only) took: the first estimate of the pace,
    /// before anything else is committed to a case that a degraded link could not finish.
    pub probe_s: Option<f64>,
}
