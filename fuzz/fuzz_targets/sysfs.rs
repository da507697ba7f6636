//! Single sysfs port files (state, phys_state, link_layer, rate, gids, gid types, counters).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    use icb_probe::parse::{GidType, LinkLayer, PhysState, PortState, sysfs};
    let _ = PortState::parse(&text);
    let _ = PhysState::parse(&text);
    let _ = LinkLayer::parse(&text);
    let _ = GidType::parse(&text);
    let _ = sysfs::parse_rate(&text);
    let _ = sysfs::parse_gid(&text).map(|g| sysfs::gid_ipv4(&g));
    let _ = sysfs::parse_counter(&text);
});
