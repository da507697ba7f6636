//! The control channel as a stream of bytes from a hostile peer (either direction: both sides
//! read frames with `icb_control::wire::read_frame`). Properties: every message read passes
//! `validate`, re-encodes and decodes to the same value; no single allocation while reading
//! exceeds the frame limit (the length field is bounded before the body buffer is allocated).
#![no_main]

#[path = "common/mod.rs"]
mod common;

use icb_control::wire::{self, MAX_FRAME_BYTES, WireError};
use libfuzzer_sys::fuzz_target;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

#[global_allocator]
static ALLOC: common::Counting = common::Counting;

/// Reading from a byte slice never waits: one poll finishes the future.
fn ready<F: Future>(f: F) -> F::Output {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("read_frame on a byte slice returned Pending"),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut stream: &[u8] = data;
    // A stream holds at most data.len() / 12 frames: the loop ends.
    loop {
        common::Counting::reset();
        let read = ready(wire::read_frame(&mut stream));
        assert!(
            common::Counting::largest() <= MAX_FRAME_BYTES as usize,
            "one allocation of {} bytes while reading a frame",
            common::Counting::largest()
        );
        match read {
            Ok(msg) => {
                msg.validate()
                    .expect("read_frame returned a message that fails validate");
                let frame = wire::encode(&msg).expect("a received message re-encodes");
                let again = wire::decode_body(&frame[12..]).expect("our own encoding decodes");
                common::assert_same("control frame", &msg, &again);
                assert_eq!(msg.name(), again.name());
            }
            Err(WireError::Closed) => break,
            Err(WireError::Io(e)) => panic!("a byte slice gave an I/O error: {e}"),
            Err(e) => {
                // Every refusal is one line.
                assert!(
                    !e.to_string().chars().any(char::is_control),
                    "control character in the error: {e:?}"
                );
                break;
            }
        }
    }
});
