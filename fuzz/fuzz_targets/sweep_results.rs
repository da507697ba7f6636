//! The sweep results file that `sweep --resume` reads: parse, what resume computes from it (the
//! missing pairs, the run ids, the file's criteria merged with a command line). Property: what
//! a sweep writes back (`to_json`) reads again with the same plan and pairs.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use icb_sweep::SweepResults;
use icb_sweep::resume::{Given, merge};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let r = match SweepResults::from_text(Path::new("fuzz.json"), &text) {
        Ok(r) => r,
        Err(e) => {
            assert!(
                !e.to_string().chars().any(char::is_control),
                "control character in the error: {e:?}"
            );
            return;
        }
    };
    let missing = r.missing();
    assert!(missing.iter().map(Vec::len).sum::<usize>() <= r.planned());
    let _ = r.run_id(1, missing.len(), r.pairs.len());
    let _ = SweepResults::sweep_id_of(&r.run_id(2, 0, 0));
    if let Err(e) = merge(&Given::default(), "fuzz.json", r.criteria.as_ref()) {
        assert!(
            !e.to_string().chars().any(char::is_control),
            "control character in the error: {e:?}"
        );
    }
    let again =
        SweepResults::from_text(Path::new("fuzz.json"), &r.to_json()).expect("what a sweep writes, resume reads");
    common::assert_same("sweep results", &r, &again);
});
