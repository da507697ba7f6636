//! `Worker::stream`: a window of prepared tag operations with ucx_perftest's bookkeeping (the
//! callback frees each request). Every message completes with its length, the payload lands,
//! and a deadline or a failed check cancels what is pending, leaving nothing that could match a
//! later message.
#![allow(unsafe_code)] // TestBuf implements the unsafe Region trait (tests/common)

use crate::common;

use common::*;
use std::time::{Duration, Instant};
use ucx::{Error, ErrorMode, OpOptions, StreamLengths};

const TAG: u64 = 0x5157;

/// The check both sides' tests pass: the peer shares this thread, so progress it.
fn progress_peer(w: &ucx::Worker) -> impl FnMut() -> Result<(), Error> + '_ {
    move || {
        w.progress();
        Ok(())
    }
}

/// `n` sends of `size` bytes from `a`, received by a stream on `b` with `window` outstanding;
/// returns what the stream reported (and how often it reported a full first window) once every
/// send completed and the payload was checked.
fn receive_stream(p: &Pair, size: usize, n: u64, window: usize, seed: u8) -> (StreamLengths, u32) {
    let src = TestBuf::patterned(size, seed);
    let mut dst = TestBuf::new(size);
    let send =
        p.a.prepare_tag_send(&p.ab, &src, 0..size, TAG, OpOptions::STREAM)
            .unwrap();
    let sends: Vec<_> = (0..n).map(|_| p.a.post(&send).unwrap()).collect();
    let recv =
        p.b.prepare_tag_recv(&dst, 0..size, TAG, u64::MAX, OpOptions::STREAM)
            .unwrap();
    let mut filled = 0;
    let got =
        p.b.stream(&recv, n, window, deadline(), progress_peer(&p.a), || filled += 1)
            .unwrap();
    let ops: Vec<_> = sends.iter().map(|&s| (&p.a, s)).collect();
    drive(p, &ops);
    p.a.wait_all(deadline()).unwrap();
    drop((recv, send));
    assert_pattern(&mut dst, size, seed);
    (got, filled)
}

#[test]
fn a_stream_of_receives_completes_every_message_and_the_payload_lands() {
    let p = pair(None, ErrorMode::None);
    for (k, &size) in [8usize, 4096, 256 << 10].iter().enumerate() {
        let n = 48u64;
        let (got, filled) = receive_stream(&p, size, n, 8, 3 + k as u8);
        assert_eq!(
            got,
            StreamLengths {
                completed: n,
                min: size,
                max: size
            },
            "{size} B"
        );
        assert_eq!(filled, 1, "the first window is reported once");
    }
}

#[test]
fn a_stream_of_sends_is_received_whole() {
    let p = pair(None, ErrorMode::None);
    let (size, n, window) = (64 << 10, 40u64, 4usize);
    let src = TestBuf::patterned(size, 9);
    let mut dst = TestBuf::new(size);
    let recv =
        p.b.prepare_tag_recv(&dst, 0..size, TAG, u64::MAX, OpOptions::STREAM)
            .unwrap();
    let recvs: Vec<_> = (0..n).map(|_| p.b.post(&recv).unwrap()).collect();
    let send =
        p.a.prepare_tag_send(&p.ab, &src, 0..size, TAG, OpOptions::STREAM)
            .unwrap();
    let got =
        p.a.stream(&send, n, window, deadline(), progress_peer(&p.b), || {})
            .unwrap();
    assert_eq!(
        got,
        StreamLengths {
            completed: n,
            min: size,
            max: size
        }
    );
    let ops: Vec<_> = recvs.iter().map(|&r| (&p.b, r)).collect();
    drive(&p, &ops);
    for r in recvs {
        assert_eq!(p.b.wait(r, deadline()).unwrap().length, size);
    }
    drop((recv, send));
    assert_pattern(&mut dst, size, 9);
}

#[test]
fn a_stream_shorter_than_its_window_or_not_a_multiple_of_it_waits_for_every_operation() {
    let p = pair(None, ErrorMode::None);
    // Rendezvous-sized, so the last window's receives are still pending when the loop ends and
    // the tail must wait for exactly those.
    let size = 256 << 10;
    for (n, window) in [(5u64, 8usize), (13, 4), (1, 1), (7, 7), (9, 8)] {
        let (got, filled) = receive_stream(&p, size, n, window, 20 + n as u8);
        let whole = StreamLengths {
            completed: n,
            min: size,
            max: size,
        };
        assert_eq!(got, whole, "{n} operations, window {window}");
        assert_eq!(filled, 1, "the first window is reported once");
        assert_no_receive_left(&p);
    }
}

/// After a stream gave up, a message with its tag must reach a receive posted later: a
/// receive the stream left posted would swallow it.
fn assert_no_receive_left(p: &Pair) {
    let src = TestBuf::patterned(8, 7);
    let mut dst = TestBuf::new(8);
    let r = p.b.tag_recv(&dst, 0..8, TAG, u64::MAX, OpOptions::default()).unwrap();
    let s = p.a.tag_send(&p.ab, &src, 0..8, TAG, OpOptions::default()).unwrap();
    drive(p, &[(&p.a, s), (&p.b, r)]);
    assert_eq!(p.b.wait(r, deadline()).unwrap().length, 8);
    p.a.wait(s, deadline()).unwrap();
    assert_pattern(&mut dst, 8, 7);
}

#[test]
fn a_stream_past_its_deadline_is_a_timeout_and_cancels_its_receives() {
    let p = pair(None, ErrorMode::None);
    let buf = TestBuf::new(64);
    let recv =
        p.b.prepare_tag_recv(&buf, 0..64, TAG, u64::MAX, OpOptions::STREAM)
            .unwrap();
    let t0 = Instant::now();
    let end = t0 + Duration::from_millis(100);
    let err =
        p.b.stream(&recv, 10, 4, end, || Ok::<(), Error>(()), || {})
            .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "the deadline was not honoured");
    assert_no_receive_left(&p);
}

#[derive(Debug, PartialEq)]
enum Stop {
    Asked,
    Ucx,
}

impl From<Error> for Stop {
    fn from(_: Error) -> Self {
        Stop::Ucx
    }
}

#[test]
fn an_error_from_the_check_ends_the_stream_with_that_error() {
    let p = pair(None, ErrorMode::None);
    let buf = TestBuf::new(64);
    let recv =
        p.b.prepare_tag_recv(&buf, 0..64, TAG, u64::MAX, OpOptions::STREAM)
            .unwrap();
    let err =
        p.b.stream(&recv, 10, 4, deadline(), || Err(Stop::Asked), || {})
            .unwrap_err();
    assert_eq!(err, Stop::Asked);
    assert_no_receive_left(&p);
}

#[test]
fn a_stream_on_another_worker_is_refused() {
    let p = pair(None, ErrorMode::None);
    let buf = TestBuf::new(8);
    let recv =
        p.a.prepare_tag_recv(&buf, 0..8, TAG, u64::MAX, OpOptions::STREAM)
            .unwrap();
    let err =
        p.b.stream(&recv, 1, 1, deadline(), || Ok::<(), Error>(()), || {})
            .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
}

#[test]
fn a_panic_in_the_check_cancels_the_stream_too() {
    let p = pair(None, ErrorMode::None);
    let buf = TestBuf::new(64);
    let recv =
        p.b.prepare_tag_recv(&buf, 0..64, TAG, u64::MAX, OpOptions::STREAM)
            .unwrap();
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let check = || -> Result<(), Error> { panic!("the caller's check failed") };
        p.b.stream(&recv, 10, 4, deadline(), check, || {})
    }));
    assert!(unwound.is_err(), "the panic propagates");
    assert_no_receive_left(&p);
}

#[test]
fn lanes_ping_pong_with_verified_lengths_and_refuse_a_second_post_in_flight() {
    let p = pair(None, ErrorMode::None);
    let size = 64;
    let src = TestBuf::patterned(size, 5);
    let mut dst = TestBuf::new(size);
    let send =
        p.a.prepare_tag_send(&p.ab, &src, 0..size, TAG, OpOptions::default())
            .unwrap();
    let recv =
        p.b.prepare_tag_recv(&dst, 0..size, TAG, u64::MAX, OpOptions::default())
            .unwrap();
    let (tx, rx) = (p.a.lane(&send).unwrap(), p.b.lane(&recv).unwrap());
    for _ in 0..20 {
        rx.post().unwrap();
        assert!(!rx.is_done(), "nothing was sent yet");
        let err = rx.post().unwrap_err();
        assert!(matches!(err, Error::Invalid { .. }), "{err}");
        tx.post().unwrap();
        assert_eq!(rx.finish(deadline(), progress_peer(&p.a)).unwrap(), size);
        tx.finish(deadline(), progress_peer(&p.b)).unwrap();
    }
    drop((tx, rx));
    drop((send, recv));
    assert_pattern(&mut dst, size, 5);
    // A lane on another worker's operation is refused.
    let buf = TestBuf::new(8);
    let other =
        p.a.prepare_tag_recv(&buf, 0..8, TAG, u64::MAX, OpOptions::default())
            .unwrap();
    assert!(matches!(p.b.lane(&other).unwrap_err(), Error::Invalid { .. }));
}

#[test]
fn a_lane_past_its_deadline_or_dropped_in_flight_leaves_no_receive_behind() {
    let p = pair(None, ErrorMode::None);
    let buf = TestBuf::new(64);
    let recv =
        p.b.prepare_tag_recv(&buf, 0..64, TAG, u64::MAX, OpOptions::default())
            .unwrap();
    let lane = p.b.lane(&recv).unwrap();
    lane.post().unwrap();
    let end = Instant::now() + Duration::from_millis(100);
    let err = lane.finish(end, || Ok::<(), Error>(())).unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(lane.is_done(), "the timed-out receive was cancelled");
    lane.post().unwrap();
    drop(lane);
    assert_no_receive_left(&p);
}
