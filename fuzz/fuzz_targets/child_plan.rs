//! `connect --plan`'s document (`icb_core::protocol::ChildPlan`), written by the parent and read
//! by the prefill side. Property: to_json -> from_json gives the same plan.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use icb_core::protocol::ChildPlan;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match ChildPlan::from_json(&text) {
        Ok(plan) => {
            let again = ChildPlan::from_json(&plan.to_json()).expect("our own plan parses");
            common::assert_same("child plan", &plan, &again);
        }
        Err(e) => assert!(
            !e.to_string().chars().any(char::is_control),
            "control character in the error: {e:?}"
        ),
    }
});
