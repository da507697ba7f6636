//! `lsmod` and `/proc/modules`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let m = icb_probe::parse::parse_modules(&text);
    let _ = icb_probe::parse::module_loaded(&m, "nvidia_peermem");
});
