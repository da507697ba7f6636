//! `history import FILE…` (pair, gate and sweep JSON told apart by `schema`) into an in-memory
//! history database, and the ack file (YAML) `history` reads. Property: a run that parses is
//! recorded (or refused with a typed error), never a panic; an ack file that parses has a reason
//! for every ack.
#![no_main]

use icb_history::import::run_from_text;
use icb_history::{Acks, History};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match run_from_text(Path::new("fuzz.json"), &text) {
        Ok(run) => {
            let mut h = History::in_memory().expect("an in-memory database opens");
            if let Err(e) = h.record(&run, Some("fuzz.json")) {
                assert!(
                    !e.to_string().chars().any(char::is_control),
                    "control character in the error: {e:?}"
                );
            }
        }
        Err(e) => assert!(
            !e.to_string().chars().any(char::is_control),
            "control character in the error: {e:?}"
        ),
    }
    if let Err(e) = Acks::parse(&text) {
        assert!(
            !e.to_string().chars().any(char::is_control),
            "control character in the error: {e:?}"
        );
    }
});
