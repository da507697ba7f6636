//! `/proc/self/limits`, `/proc/self/status`, `/proc/driver/nvidia/version`, `osrelease`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    use icb_probe::parse::*;
    let _ = parse_memlock(&text);
    let _ = parse_cap_eff(&text);
    let _ = parse_nvidia_version(&text);
    let _ = parse_kernel_release(&text);
});
