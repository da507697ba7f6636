//! The child protocol: every stdout line of a side (local child, pod, in-place wrapper), through
//! `icb_core::protocol::parse_side_line`. Property: an event re-printed with `side_line` parses
//! back to the same event.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use icb_core::protocol::{parse_side_line, side_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        match parse_side_line(line) {
            Ok(Some(event)) => {
                let printed = side_line(&event);
                assert!(!printed.contains('\n'), "a protocol line with a newline");
                let again = parse_side_line(&printed)
                    .expect("our own line parses")
                    .expect("our own line is ours");
                common::assert_same("side line", &event, &again);
            }
            Ok(None) => {}
            Err(e) => assert!(
                !e.to_string().chars().any(char::is_control),
                "control character in the error: {e:?}"
            ),
        }
    }
});
