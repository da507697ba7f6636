//! One control message body (the JSON after the frame header), either direction: serde's
//! decoding then `Message::validate`. Properties: a decoded message re-encodes within the frame
//! limit and decodes to the same value; errors are one line.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use icb_control::wire::{self, MAX_FRAME_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match wire::decode_body(data) {
        Ok(msg) => {
            let frame = wire::encode(&msg).expect("a decoded message re-encodes");
            assert!(frame.len() - 12 <= MAX_FRAME_BYTES as usize);
            let header: [u8; 12] = frame[..12].try_into().unwrap();
            assert_eq!(wire::parse_header(&header).unwrap() as usize, frame.len() - 12);
            let again = wire::decode_body(&frame[12..]).expect("our own encoding decodes");
            common::assert_same("control message", &msg, &again);
            // What a case setup implies must be computable without panicking.
            if let icb_control::messages::Message::Setup(s) = &msg {
                let _ = (s.descriptors(), s.is_list(), s.layout().map(|l| l.span()));
            }
        }
        Err(e) => assert!(
            !e.to_string().chars().any(char::is_control),
            "control character in the error: {e:?}"
        ),
    }
});
