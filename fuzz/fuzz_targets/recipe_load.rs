//! Recipe loader fuzz target: parse, resolve and check arbitrary bytes; any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    icb_recipe::fuzz_load(data);
});
