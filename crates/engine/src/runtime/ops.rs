//! The pieces of the timed loops: the ping-pong round, the window of outstanding operations,
//! completion polling that honours the phase's flags, and the acknowledgement messages.

use super::*;

/// The initiator's ping-pong (ucx_perftest's `run_pingpong`): `n` round trips, each timed from
/// the previous pong's arrival to this one's. The first is the probe when `probe` is set (its
/// protocol info string queried, its time not counted).
///
/// Only what must happen sits between a pong's arrival and the next ping's departure: the
/// operations are prepared once ([`ucx::PreparedTag`]) and posted through [`ucx::Lane`]s (no
/// slot per message), the next ping is posted as soon as the pong is seen (on the other of two
/// send lanes, as the previous send may not be collected yet; pings are sent from another buffer
/// than pongs land in), and the clock is read, the previous send and the receive finished and
/// the next receive posted while that ping is in flight.
#[allow(clippy::too_many_arguments)] // the loop's whole context, kept out of the timed path
#[inline(never)]
pub(super) fn ping_pong<B: ucx::Region + 'static, P: ucx::Region + 'static>(
    w: &Worker,
    ep: &Endpoint,
    b: &std::rc::Rc<B>,
    p: &std::rc::Rc<P>,
    size: usize,
    n: u64,
    probe: bool,
    mut hist: Option<Histogram<u64>>,
    ctl: &PhaseCtl,
) -> Result<PhaseOutcome, RunError> {
    let mut outcome = PhaseOutcome {
        elapsed_s: 0.0,
        info: None,
        rtt: None,
        iterations: 0,
        probe_s: None,
    };
    if n == 0 {
        outcome.rtt = hist;
        return Ok(outcome);
    }
    let ping = w.prepare_tag_send(ep, b, 0..size, TAG_PING, OpOptions::default())?;
    let pong = w.prepare_tag_recv(p, 0..size, TAG_PONG, TAG_MASK, OpOptions::default())?;
    // Two send lanes, alternated: the next ping leaves before the previous send is finished.
    let pings = [w.lane(&ping)?, w.lane(&ping)?];
    let pong_lane = w.lane(&pong)?;
    let deadline = ctl.deadline();
    // Send first, then post the receive (ucx_perftest's order): the post overlaps the ping's
    // flight instead of delaying it. The probe's send is made queryable (an ordinary operation).
    let mut probe_send = None;
    if probe {
        probe_send = Some(w.tag_send(ep, b, 0..size, TAG_PING, OpOptions::QUERYABLE)?);
    } else {
        pings[0].post()?;
    }
    pong_lane.post()?;
    if let Some(op) = probe_send {
        outcome.info = w.info_string(op).ok().flatten();
    }
    let mut cur = 0usize;
    let mut prev = Instant::now();
    for i in 0..n {
        poll_until(w, ctl, || pong_lane.is_done())?;
        // The next ping leaves at once; a phase past its soft deadline sends none.
        let last = i + 1 == n || ctl.past_soft_deadline(prev);
        if !last {
            pings[1 - cur].post()?;
        }
        let now = Instant::now();
        match probe_send.take() {
            Some(op) => wait_op(w, op, ctl).map(|_| ())?,
            None => pings[cur].finish(deadline, || ctl.check()).map(|_| ())?,
        }
        check_length("pong", pong_lane.finish(deadline, || ctl.check())?, size)?;
        if !last {
            cur = 1 - cur;
            pong_lane.post()?;
        }
        let rtt = now.duration_since(prev);
        prev = now;
        if probe && i == 0 {
            // The probe round trip is not part of the warmup pace, but it is the first estimate.
            outcome.probe_s = Some(rtt.as_secs_f64());
        } else {
            outcome.elapsed_s += rtt.as_secs_f64();
            outcome.iterations += 1;
            if let Some(h) = hist.as_mut() {
                h.saturating_record(rtt.as_nanos() as u64);
            }
        }
        if last {
            break;
        }
    }
    outcome.rtt = hist;
    Ok(outcome)
}

pub(super) fn ensure_ring(ring: &mut Vec<Option<Op>>, window: usize) {
    ring.iter_mut().for_each(|s| *s = None);
    if ring.len() < window {
        ring.resize(window, None);
    }
}

/// Progresses until `op` completes (checking the abort flag and the deadline now and then),
/// then releases it; returns the completion's length.
#[inline]
pub(super) fn wait_op(w: &Worker, op: Op, ctl: &PhaseCtl) -> Result<usize, RunError> {
    poll_done(w, op, ctl)?;
    finish_op(w, op, ctl)
}

/// Progresses until `op` has completed, without releasing it.
#[inline]
pub(super) fn poll_done(w: &Worker, op: Op, ctl: &PhaseCtl) -> Result<(), RunError> {
    poll_until(w, ctl, || w.is_done(op))
}

/// Progresses until `done()` (checking the abort flag and the deadline now and then).
#[inline]
pub(super) fn poll_until(w: &Worker, ctl: &PhaseCtl, done: impl Fn() -> bool) -> Result<(), RunError> {
    let mut i = 0u32;
    while !done() {
        w.progress();
        i = i.wrapping_add(1);
        if i.is_multiple_of(CHECK_EVERY) {
            ctl.check()?;
        }
    }
    Ok(())
}

/// Like [`poll_until`], but also returns (`false`) when the control side set the stop flag.
#[inline]
pub(super) fn poll_until_or_stop(w: &Worker, ctl: &PhaseCtl, done: impl Fn() -> bool) -> Result<bool, RunError> {
    let mut i = 0u32;
    while !done() {
        w.progress();
        i = i.wrapping_add(1);
        if i.is_multiple_of(CHECK_EVERY) {
            ctl.check()?;
            if ctl.stopped() && !done() {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Releases a completed `op`; returns its length, or its error.
#[inline]
pub(super) fn finish_op(w: &Worker, op: Op, ctl: &PhaseCtl) -> Result<usize, RunError> {
    Ok(w.wait(op, ctl.deadline())?.length)
}

/// The windowed stream loop of ucx_perftest's `run_stream_uni`, written once for tag sends, tag
/// receives and RMA: `n` operations from `submit`, at most `ring.len()` outstanding, each one's
/// completion length handed to `completed`; `filled` runs once the first window is submitted (or
/// all `n`, if fewer). Returns when every operation has completed.
pub(super) fn run_window(
    w: &Worker,
    ring: &mut [Option<Op>],
    n: u64,
    ctl: &PhaseCtl,
    mut submit: impl FnMut() -> Result<Op, RunError>,
    mut filled: impl FnMut(),
    mut completed: impl FnMut(usize) -> Result<(), RunError>,
) -> Result<(), RunError> {
    let window = ring.len().max(1) as u64;
    let first = n.min(window);
    if first == 0 {
        filled();
    }
    for i in 0..n {
        let slot = (i % window) as usize;
        if let Some(op) = ring[slot].take() {
            completed(wait_op(w, op, ctl)?)?;
        }
        ring[slot] = Some(submit()?);
        if i + 1 == first {
            filled();
        }
    }
    // Oldest first, so completions are checked in submission order.
    for k in 0..first {
        let slot = ((n - first + k) % window) as usize;
        if let Some(op) = ring[slot].take() {
            completed(wait_op(w, op, ctl)?)?;
        }
    }
    Ok(())
}

/// Checks what a [`ucx::Worker::stream`] of `n` operations of `expected` bytes reported.
pub(super) fn check_stream(
    what: &'static str,
    got: ucx::StreamLengths,
    n: u64,
    expected: usize,
) -> Result<(), RunError> {
    if got.completed != n {
        return Err(RunError::Internal("a stream returned before every operation completed"));
    }
    if n > 0 {
        check_length(what, got.min, expected)?;
        check_length(what, got.max, expected)?;
    }
    Ok(())
}

#[inline]
pub(super) fn check_length(what: &'static str, got: usize, expected: usize) -> Result<(), RunError> {
    if got == expected {
        Ok(())
    } else {
        Err(RunError::Length { what, got, expected })
    }
}

pub(super) fn post_ack_recv(w: &Worker, ack: &Buf) -> Result<Op, RunError> {
    Ok(with_region!(ack, a => w.tag_recv(a, 0..8, TAG_ACK, TAG_MASK, OpOptions::default()))?)
}

pub(super) fn send_ack(w: &Worker, ep: &Endpoint, ack: &Buf, ctl: &PhaseCtl) -> Result<(), RunError> {
    let op = with_region!(ack, a => w.tag_send(ep, a, 0..8, TAG_ACK, OpOptions::default()))?;
    wait_op(w, op, ctl).map(|_| ())
}
