//! Recipe loading: YAML parse, resolve per role, the probe-env rules and transport_env.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    icb_recipe::fuzz_load(data);
});
